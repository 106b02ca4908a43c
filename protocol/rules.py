"""Rule sets: one immutable value holds every option the seeds name.

A :class:`RuleSet` is validated when it is built: a rule set that cannot work (a fleet that cannot
fit, crossed-out cells with touching ships, a salvo bigger than the grid, ...) raises
:class:`BadRules` with a precise reason. Named presets reproduce the four seed texts exactly
(``spec/protocol.md`` section "Rule sets"); every option can also be set on its own with
:meth:`RuleSet.replace` or :func:`rules_from_dict`.

The rule set travels on the wire and into records as a canonical map (:meth:`RuleSet.to_dict`), and
its SHA-256 digest (:meth:`RuleSet.digest`) is bound into every commitment.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .canonical import canonical_pack
from .errors import ErrorCode, ProtocolError

#: Longest rule-set ``name``, in characters (spec 7.4); ship names are at most 32 (7.1).
MAX_RULES_NAME = 64

__all__ = [
    "MAX_RULES_NAME",
    "PRESETS",
    "BadRules",
    "Clocks",
    "FirstPlayer",
    "MatchFormat",
    "MatchKind",
    "RepeatShot",
    "RuleSet",
    "SalvoReport",
    "ShipSpec",
    "ShotMode",
    "SunkReport",
    "descends_from",
    "preset",
    "rules_from_dict",
]


class BadRules(ProtocolError):
    """A rule set that cannot work, with the reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(ErrorCode.BAD_RULES, detail)


class ShotMode(StrEnum):
    """How many cells a turn calls."""

    SINGLE = "single"  #: one cell per shot (all four seeds)
    SALVO_AFLOAT = "salvo-afloat"  #: 002 salvo: one shot per own ship still afloat
    SALVO_FIXED = "salvo-fixed"  #: 002 fixed salvo: ``salvo_size`` shots, whatever is afloat


class SalvoReport(StrEnum):
    """What the defender tells about a salvo (002: "decide beforehand")."""

    PER_CELL = "per-cell"  #: a verdict for every called cell
    TOTAL = "total"  #: only the number of hits; checked at the reveal


class SunkReport(StrEnum):
    """What a sinking reveals."""

    NAMED = "named"  #: "sunk" with the ship's name (002, 003)
    SHOWN = "shown"  #: "sunk" and the ship shown whole (000, 004)
    SILENT = "silent"  #: only "hit"; only the fleet's destruction is announced (002 variant)


class RepeatShot(StrEnum):
    """What a shot at a cell already fired at does."""

    REFUSED = "refused"  #: refused, the shot is kept (000, 003, 004; 002 friendly)
    WASTED = "wasted"  #: the turn is lost (002 strict)


class FirstPlayer(StrEnum):
    """Who fires first in games after the first (the first game is always by lot)."""

    LOT = "lot"  #: a fresh lot every game
    LOSER = "loser"  #: the loser of the last game (000)
    ALTERNATE = "alternate"  #: the starters alternate (002)


class MatchKind(StrEnum):
    """How a series of games is scored (002 "Optional Match Scoring", 000 "A match")."""

    BEST_OF = "best-of"  #: first to a majority of ``games`` wins (games=1 is a single game)
    VICTORY_POINTS = "victory-points"  #: a point a win, ``games`` games, most points wins
    SURVIVAL = "survival"  #: the winner scores its unhit ship cells; ``games`` games
    FLEET = "fleet"  #: a point per opposing ship cell hit, plus ``sunk_bonus`` per ship sunk


@dataclass(frozen=True, slots=True)
class ShipSpec:
    """One ship of a fleet: its name and length."""

    name: str
    length: int


@dataclass(frozen=True, slots=True)
class MatchFormat:
    """How many games and how they are scored."""

    kind: MatchKind = MatchKind.BEST_OF
    games: int = 1
    sunk_bonus: int = 0

    @property
    def wins_needed(self) -> int:
        """For best-of: the number of wins that decides the match."""
        return self.games // 2 + 1


@dataclass(frozen=True, slots=True)
class Clocks:
    """Clocks in whole seconds; ``None`` means no clock.

    ``shot`` expiry loses the shot and passes the turn (002 "Timed Turns"; the project's decision
    for 004, whose text is silent). ``max_expiries`` consecutive expiries by one player forfeit the
    game, so that an absent player cannot stall a match forever.
    """

    setup: int | None = None
    shot: int | None = None
    max_expiries: int = 3
    reveal: int = 60
    grace: int = 60


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Every rule of a game and a match. Immutable; validated on construction."""

    name: str = "custom"
    rows: int = 10
    cols: int = 10
    fleet: tuple[ShipSpec, ...] = ()
    touching: bool = True
    ordered_placement: bool = False
    shots: ShotMode = ShotMode.SINGLE
    salvo_size: int = 5
    salvo_report: SalvoReport = SalvoReport.PER_CELL
    hit_again: bool = False
    hit_again_shown: bool = False
    sunk: SunkReport = SunkReport.NAMED
    repeat: RepeatShot = RepeatShot.REFUSED
    crossed_out: bool = False
    radar: bool = False
    radar_size: int = 2
    team_size: int = 1
    first_player: FirstPlayer = FirstPlayer.ALTERNATE
    match: MatchFormat = field(default_factory=MatchFormat)
    clocks: Clocks = field(default_factory=Clocks)

    def __post_init__(self) -> None:
        # Accept the wire spelling of enum options (``shots="salvo-fixed"``) and refuse typos here.
        for name, enum in _ENUMS.items():
            value = getattr(self, name)
            if not isinstance(value, enum):
                try:
                    object.__setattr__(self, name, enum(value))
                except ValueError:
                    allowed = ", ".join(e.value for e in enum)
                    raise BadRules(f"{name}={value!r}: expected one of {allowed}") from None
        self._validate()

    # -- validation ------------------------------------------------------------------------------

    def _validate(self) -> None:
        # The name is the one free text of a rule set, and every start, list answer, snapshot
        # and record echoes it: bounded like a player's name (spec 7.4).
        if not isinstance(self.name, str) or not 1 <= len(self.name) <= MAX_RULES_NAME:
            raise BadRules(f"the rule set's name must be 1..{MAX_RULES_NAME} characters")
        if not 2 <= self.rows <= 26 or not 2 <= self.cols <= 26:
            raise BadRules(f"grid {self.rows}x{self.cols}: rows and columns must be 2..26")
        if not self.fleet:
            raise BadRules("the fleet is empty")
        if len(self.fleet) > 32:
            raise BadRules(f"{len(self.fleet)} ships: at most 32")
        names = [s.name for s in self.fleet]
        for s in self.fleet:
            if not s.name or len(s.name) > 32:
                raise BadRules("every ship needs a name of 1..32 characters")
            if names.count(s.name) > 1:
                raise BadRules(f"ship name {s.name!r} is used twice")
            if s.length < 1 or s.length > max(self.rows, self.cols):
                raise BadRules(
                    f"{s.name} of length {s.length} cannot fit a {self.rows}x{self.cols} grid"
                )
        if self.crossed_out and self.touching:
            raise BadRules("crossed-out cells need a no-touching fleet (touching=False)")
        if self.shots is ShotMode.SALVO_FIXED and not 1 <= self.salvo_size <= self.cells:
            raise BadRules(f"salvo of {self.salvo_size} on a grid of {self.cells} cells")
        if self.shots is not ShotMode.SINGLE and self.hit_again:
            raise BadRules("hit_again applies to single shots, not to salvos")
        if self.salvo_report is SalvoReport.TOTAL and self.shots is ShotMode.SINGLE:
            raise BadRules("salvo_report=total needs a salvo shot mode")
        if self.shots is ShotMode.SALVO_AFLOAT and self.sunk is SunkReport.SILENT:
            raise BadRules("a salvo of one shot per ship afloat needs sinkings announced")
        if self.hit_again_shown and not self.hit_again:
            raise BadRules("hit_again_shown (003's badge) needs hit_again")
        if self.radar and not 1 <= self.radar_size <= min(self.rows, self.cols):
            raise BadRules(f"radar area {self.radar_size}x{self.radar_size} does not fit the grid")
        if not 1 <= self.team_size <= 8:
            raise BadRules("team_size must be 1..8")
        m = self.match
        if m.games < 1 or m.games > 99:
            raise BadRules("a match has 1..99 games")
        if m.kind is MatchKind.BEST_OF and m.games % 2 == 0:
            raise BadRules(f"best of {m.games}: best-of needs an odd number of games")
        if m.sunk_bonus < 0 or (m.sunk_bonus and m.kind is not MatchKind.FLEET):
            raise BadRules("sunk_bonus applies to fleet scoring only, and is >= 0")
        c = self.clocks
        for label, v in (("setup", c.setup), ("shot", c.shot)):
            if v is not None and not 1 <= v <= 86400:
                raise BadRules(f"{label} clock of {v} s: must be 1..86400")
        if c.max_expiries < 1 or c.reveal < 1 or c.grace < 0:
            raise BadRules("max_expiries and reveal must be >= 1, grace >= 0")
        if not self._fleet_fits():
            raise BadRules(
                f"the fleet {[s.length for s in self.fleet]} cannot be placed on a "
                f"{self.rows}x{self.cols} grid"
                + ("" if self.touching else " without touching")
                + " (no placement found within the search bound)"
            )

    def _fleet_fits(self) -> bool:
        # Cheap necessary bound first; then the constructive proof: a placement must exist.
        area = sum(s.length for s in self.fleet)
        if not self.touching:
            area = sum((s.length + 1) * 2 for s in self.fleet)
            if area > (self.rows + 1) * (self.cols + 1):
                return False
        elif area > self.cells:
            return False
        from .fleet import can_place  # local import: fleet imports rules

        # The search costs milliseconds and every rule set built from the wire (lobby, records)
        # runs it; whether a fleet fits depends on nothing but these values.
        key = (self.rows, self.cols, self.touching, tuple(sorted(s.length for s in self.fleet)))
        fits = _FITS.get(key)
        if fits is None:
            if len(_FITS) >= 1024:
                _FITS.clear()
            fits = _FITS[key] = can_place(self)
        return fits

    # -- derived values --------------------------------------------------------------------------

    @property
    def cells(self) -> int:
        """Number of cells on the grid."""
        return self.rows * self.cols

    @property
    def fleet_cells(self) -> int:
        """Number of ship cells in a fleet (17 classic, 20 russian, 18 six-ship)."""
        return sum(s.length for s in self.fleet)

    @property
    def lineage(self) -> str | None:
        """The preset this rule set descends from, by its name (spec 7.3 decision 19): ``P`` for
        a name that is ``P`` or begins ``P+`` (``sea-battle+custom``), else ``None``."""
        return descends_from(self.name)

    @property
    def reveals_cross(self) -> bool:
        """Whether a custody referee sends each player the other seat's reveal at the end of a
        game (spec 7.3 decision 19): always, except under 004's "nothing else crosses between
        you" (a rule set descending from ``sea-battle``). In blind mode both reveals always
        cross: they are the proof each player checks."""
        return self.lineage not in _PRIVATE_AT_END

    def keeps_turn(self, hit: bool) -> bool:
        """Whether a single shot that ``hit`` (a ship cell) gives its shooter the next shot too
        (8.4); a radar scan and a salvo always pass the turn."""
        return self.hit_again and hit

    @property
    def is_salvo(self) -> bool:
        """Whether a turn calls several cells at once."""
        return self.shots is not ShotMode.SINGLE

    def replace(self, **changes: Any) -> RuleSet:
        """A copy with some options changed (validated again); the name becomes ``custom``."""
        custom = self.name == "custom" or self.name.endswith("+custom")
        keep = MAX_RULES_NAME - len("+custom")  # a long name loses its end, never the mark
        changes.setdefault("name", self.name if custom else f"{self.name[:keep]}+custom")
        return dataclasses.replace(self, **_coupled(self, changes))

    # -- wire form -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The canonical map form used on the wire and in records."""
        return {
            "name": self.name,
            "rows": self.rows,
            "cols": self.cols,
            "fleet": [[s.name, s.length] for s in self.fleet],
            "touching": self.touching,
            "ordered_placement": self.ordered_placement,
            "shots": self.shots.value,
            "salvo_size": self.salvo_size,
            "salvo_report": self.salvo_report.value,
            "hit_again": self.hit_again,
            "hit_again_shown": self.hit_again_shown,
            "sunk": self.sunk.value,
            "repeat": self.repeat.value,
            "crossed_out": self.crossed_out,
            "radar": self.radar,
            "radar_size": self.radar_size,
            "team_size": self.team_size,
            "first_player": self.first_player.value,
            "match": {
                "kind": self.match.kind.value,
                "games": self.match.games,
                "sunk_bonus": self.match.sunk_bonus,
            },
            "clocks": {
                "setup": self.clocks.setup,
                "shot": self.clocks.shot,
                "max_expiries": self.clocks.max_expiries,
                "reveal": self.clocks.reveal,
                "grace": self.clocks.grace,
            },
        }

    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding of :meth:`to_dict`; bound into every commitment."""
        return hashlib.sha256(b"seabattle/v1/rules\x00" + canonical_pack(self.to_dict())).digest()


_FITS: dict[tuple[int, int, bool, tuple[int, ...]], bool] = {}

#: Presets whose seed shows a badge whenever its house rule applies (003: "In the game a badge
#: next to the turn indicator shows that the house rule applies"): over them ``hit_again`` and
#: ``hit_again_shown`` are one switch (spec 7.3 decision 18).
_BADGED = frozenset({"six-ship"})
#: Presets whose seed lets nothing cross between the players but what their shots found (004:
#: "Nothing else crosses between you"): a custody referee sends no player the other's reveal
#: (spec 7.3 decision 19).
_PRIVATE_AT_END = frozenset({"sea-battle"})


def descends_from(name: str) -> str | None:
    """The preset a rule set named ``name`` descends from: ``P`` when ``name`` is ``P`` or begins
    ``P+`` (the mark :meth:`RuleSet.replace` and :func:`rules_from_dict` add), else ``None``."""
    head = name.split("+", 1)[0]
    return head if head in PRESETS else None


def _coupled(base: RuleSet, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` over ``base`` with the preset's coupling: over a rule set descending from a
    badged preset (003's ``six-ship``), setting ``hit_again`` and not ``hit_again_shown`` sets
    the badge alike, so that switching the house rule on shows it and switching it off removes
    it (spec 7.3 decision 18). A ``hit_again_shown`` given is kept as given."""
    if (
        "hit_again" in changes
        and "hit_again_shown" not in changes
        and base.lineage in _BADGED
        and isinstance(changes["hit_again"], bool)  # a wrong type is refused as it stands
    ):
        return {**changes, "hit_again_shown": changes["hit_again"]}
    return changes


_ENUMS: dict[str, type[StrEnum]] = {
    "shots": ShotMode,
    "salvo_report": SalvoReport,
    "sunk": SunkReport,
    "repeat": RepeatShot,
    "first_player": FirstPlayer,
}
_BOOLS = ("touching", "ordered_placement", "hit_again", "hit_again_shown", "crossed_out", "radar")
_INTS = ("rows", "cols", "salvo_size", "radar_size", "team_size")


def _want(d: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    v = d[key]
    # bool is an int subclass in Python; the protocol keeps them apart.
    if isinstance(v, bool) and kind is int:
        raise BadRules(f"{where}{key} must be an integer, not a boolean")
    if not isinstance(v, kind):
        raise BadRules(f"{where}{key} has the wrong type ({type(v).__name__})")
    return v


def rules_from_dict(d: Any, base: RuleSet | None = None) -> RuleSet:
    """Build a rule set from its map form; keys absent from ``d`` come from ``base``.

    ``base`` defaults to a preset named by ``d["preset"]`` if given, else to ``classic``. Unknown
    keys are refused, so that a typo never silently plays other rules. Over ``six-ship``,
    ``hit_again`` given alone sets ``hit_again_shown`` alike (spec 7.3 decision 18).
    """
    if not isinstance(d, dict):
        raise BadRules("rules must be a map")
    d = dict(d)
    if "preset" in d:
        pname = d.pop("preset")
        if not isinstance(pname, str):
            raise BadRules("preset must be a string")
        base = preset(pname)
    base = base or preset("classic")
    kw: dict[str, Any] = {}
    for key in list(d):
        if key == "name":
            kw["name"] = _want(d, key, str, "")
        elif key in _INTS:
            kw[key] = _want(d, key, int, "")
        elif key in _BOOLS:
            kw[key] = _want(d, key, bool, "")
        elif key in _ENUMS:
            v = _want(d, key, str, "")
            try:
                kw[key] = _ENUMS[key](v)
            except ValueError:
                allowed = ", ".join(e.value for e in _ENUMS[key])
                raise BadRules(f"{key}={v!r}: expected one of {allowed}") from None
        elif key == "fleet":
            ships = d[key]
            if not isinstance(ships, list | tuple):
                raise BadRules("fleet must be a list of [name, length]")
            specs = []
            for s in ships:
                if (
                    not isinstance(s, list | tuple)
                    or len(s) != 2
                    or not isinstance(s[0], str)
                    or isinstance(s[1], bool)
                    or not isinstance(s[1], int)
                ):
                    raise BadRules("every ship is [name, length]")
                specs.append(ShipSpec(s[0], s[1]))
            kw["fleet"] = tuple(specs)
        elif key == "match":
            m = d[key]
            if not isinstance(m, dict) or set(m) - {"kind", "games", "sunk_bonus"}:
                raise BadRules("match is a map of kind, games, sunk_bonus")
            cur = base.match
            try:
                kind = MatchKind(_want(m, "kind", str, "match.")) if "kind" in m else cur.kind
            except ValueError:
                raise BadRules(f"match.kind={m['kind']!r} is unknown") from None
            kw["match"] = MatchFormat(
                kind=kind,
                games=_want(m, "games", int, "match.") if "games" in m else cur.games,
                sunk_bonus=(
                    _want(m, "sunk_bonus", int, "match.") if "sunk_bonus" in m else cur.sunk_bonus
                ),
            )
        elif key == "clocks":
            c = d[key]
            fields = {"setup", "shot", "max_expiries", "reveal", "grace"}
            if not isinstance(c, dict) or set(c) - fields:
                raise BadRules(f"clocks is a map of {', '.join(sorted(fields))}")
            cur_c = base.clocks
            ck: dict[str, Any] = {}
            for f in fields:
                if f in c:
                    if c[f] is None and f in ("setup", "shot"):
                        ck[f] = None
                    else:
                        ck[f] = _want(c, f, int, "clocks.")
                else:
                    ck[f] = getattr(cur_c, f)
            kw["clocks"] = Clocks(**ck)
        else:
            raise BadRules(f"unknown rule option {key!r}")
    if "name" not in kw:
        kw["name"] = base.name if not d else f"{base.name}+custom"
    return dataclasses.replace(base, **_coupled(base, kw))


_CLASSIC_FLEET = (
    ShipSpec("Carrier", 5),
    ShipSpec("Battleship", 4),
    ShipSpec("Cruiser", 3),
    ShipSpec("Submarine", 3),
    ShipSpec("Destroyer", 2),
)

PRESETS: dict[str, RuleSet] = {
    # 002, the standard game: ships may touch, a hit passes the turn, sunk is named, starters
    # alternate within a match; a repeated call is re-chosen (friendly play).
    "classic": RuleSet(
        name="classic",
        fleet=_CLASSIC_FLEET,
        first_player=FirstPlayer.ALTERNATE,
        sunk=SunkReport.NAMED,
    ),
    # 000: ten ships 4,3,3,2,2,2,1,1,1,1, no touching (corners too), a hit or a sinking shoots
    # again, crossed-out corners and borders, sunk ships shown whole, first game by lot then the
    # loser.
    "russian": RuleSet(
        name="russian",
        fleet=(
            ShipSpec("Battleship", 4),
            ShipSpec("Cruiser-1", 3),
            ShipSpec("Cruiser-2", 3),
            ShipSpec("Destroyer-1", 2),
            ShipSpec("Destroyer-2", 2),
            ShipSpec("Destroyer-3", 2),
            ShipSpec("Boat-1", 1),
            ShipSpec("Boat-2", 1),
            ShipSpec("Boat-3", 1),
            ShipSpec("Boat-4", 1),
        ),
        touching=False,
        hit_again=True,
        crossed_out=True,
        sunk=SunkReport.SHOWN,
        first_player=FirstPlayer.LOSER,
    ),
    # 003: six ships (18 cells: the seed's "17" is its own slip, the ship table wins), no touching,
    # one shot per turn, sunk named by type. The "shoot again" house rule is an option shown to
    # both.
    "six-ship": RuleSet(
        name="six-ship",
        fleet=(*_CLASSIC_FLEET, ShipSpec("Patrol Boat", 1)),
        touching=False,
        sunk=SunkReport.NAMED,
    ),
    # 004: 5,4,3,3,2 placed in that order, may touch, hit or miss only, a sunk ship shown whole,
    # the turn always passes, 2-minute setup clock and 30-second shot clock.
    "sea-battle": RuleSet(
        name="sea-battle",
        fleet=(
            ShipSpec("Ship-5", 5),
            ShipSpec("Ship-4", 4),
            ShipSpec("Ship-3a", 3),
            ShipSpec("Ship-3b", 3),
            ShipSpec("Ship-2", 2),
        ),
        ordered_placement=True,
        sunk=SunkReport.SHOWN,
        clocks=Clocks(setup=120, shot=30),
    ),
}

# The 002 beginner game, kept as a preset because the seed names it.
PRESETS["classic-8x8"] = RuleSet(
    name="classic-8x8",
    rows=8,
    cols=8,
    fleet=(
        ShipSpec("Battleship", 4),
        ShipSpec("Cruiser", 3),
        ShipSpec("Submarine", 3),
        ShipSpec("Destroyer", 2),
    ),
)


def preset(name: str) -> RuleSet:
    """A named preset (``classic``, ``russian``, ``six-ship``, ``sea-battle``, ``classic-8x8``)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise BadRules(f"no preset {name!r}; presets: {', '.join(PRESETS)}") from None
