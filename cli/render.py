"""What the terminal player sees: grids, the rule set and its house rules, refusals, game ends.

Everything here is pure (rules, boards and fleets in, :mod:`rich` renderables or strings out), so
that the terminal shells (:mod:`seabattle.cli.tui`) and the command line share one wording. The
glyphs are ASCII so that the grids read the same on a plain terminal as on a colour one; colour
only adds to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import Fleet, Placement
from seabattle.protocol.game import Board, EndReason, Game
from seabattle.protocol.grid import Cell, column_label
from seabattle.protocol.rules import PRESETS, RuleSet, SunkReport
from seabattle.protocol.verdict import Result

__all__ = [
    "GAME_LEGEND",
    "LEGEND",
    "Spectator",
    "board_glyph",
    "describe_rules",
    "explain_end",
    "explain_refusal",
    "grid_lines",
    "house_badge",
    "house_rules",
    "placement_glyph",
    "render_end",
    "render_grids",
    "render_placement",
    "rules_panel",
    "seat_names",
    "ship_letter",
    "ship_list",
]

Glyph = tuple[str, str]  # (character, rich style)

_WATER: Glyph = ("~", "dim cyan")
_SHIP: Glyph = ("O", "green")
_MARK: dict[Result | None, Glyph] = {
    Result.MISS: (".", "blue"),
    Result.HIT: ("X", "bold red"),
    Result.SUNK: ("#", "red"),
    None: ("?", "yellow"),  # fired within a salvo whose answer was a total only
}
_CROSSED: Glyph = ("-", "dim")
_START: Glyph = ("+", "yellow")  # the game screen: where the next ship may start

#: One line that says what every glyph means (``show``'s grids, where a ship is an ``O``).
LEGEND = "~ water  O ship  X hit  # sunk  . miss  - crossed out (no ship can be there)  ? unknown"

#: The letters a player's ships are drawn with, in fleet order: each ship its own, so that ships
#: that touch can be told apart. ``O`` and ``X`` are left out: they read as a ship and a hit.
_SHIP_LETTERS = "ABCDEFGHIJKLMNPQRSTUVWYZ"
#: Alternate shades for ships afloat and ships sunk, by fleet order: a second cue beside the letter.
_AFLOAT_STYLES = ("green", "bold bright_green")
_SUNK_STYLES = ("red", "bold magenta")

#: :data:`LEGEND` for the game's grids (line mode and screen), where each ship has its letter.
GAME_LEGEND = (
    "~ water  A B C.. ships (a letter each; a b c.. once sunk)  X hit  # sunk  . miss  "
    "- crossed out (no ship can be there)  ? unknown"
)


def ship_letter(k: int) -> str:
    """The letter ship ``k`` (its index in the fleet) is drawn with on the game's grids."""
    return _SHIP_LETTERS[k % len(_SHIP_LETTERS)]


def _afloat_glyph(k: int) -> Glyph:
    return ship_letter(k), _AFLOAT_STYLES[k % 2]


def _sunk_glyph(k: int) -> Glyph:
    # Lower case: a sunk ship reads as sunk without colour too (a monochrome terminal, a log).
    return ship_letter(k).lower(), _SUNK_STYLES[k % 2]


def grid_lines(
    rules: RuleSet,
    glyph: Callable[[int], Glyph],
    title: str | Text,
    overlay: Callable[[int], str | None] | None = None,
) -> list[Text]:
    """One grid as lines: ``title``, the column labels, then each row's glyphs.

    ``overlay`` adds a style to some cells (the game screen's cursor and chosen cells), so that
    the glyph underneath still reads.
    """
    header = "    " + " ".join(column_label(c) for c in range(rules.cols))
    head = title if isinstance(title, Text) else Text(title, style="bold")
    lines = [head, Text(header)]
    for r in range(rules.rows):
        line = Text(f"{r + 1:>3} ")
        # One span per run of cells that look alike, the blank after a cell in its style: a
        # terminal is sent one style change per run rather than two per cell.
        run, run_style = "", ""
        for c in range(rules.cols):
            i = r * rules.cols + c
            ch, style = glyph(i)
            extra = overlay(i) if overlay is not None else None
            if extra:
                line.append(run, style=run_style)
                line.append(ch, style=f"{style} {extra}")
                run, run_style = " ", style
            elif style == run_style:
                run += ch + " "
            else:
                line.append(run, style=run_style)
                run, run_style = ch + " ", style
        line.append(run, style=run_style)
        lines.append(line)
    return lines


#: The old private name, which ``show`` still imports.
_grid = grid_lines


def board_glyph(board: Board, own: list[int] | None) -> Callable[[int], Glyph]:
    """What each cell of ``board`` shows: shots and their results, crossed-out cells, and the
    ships of ``own`` (an occupancy list: ours, or a revealed fleet) under them.

    A ship whose cells are known is drawn with its letter (:func:`ship_letter`): green afloat,
    red and in lower case once sunk, so that ships that touch read as two. A sunk cell whose
    ship is not known (the rules did not show it) is a ``#``."""
    # A sunk ship is drawn whole where its cells are known: shown by the rules, or ours/revealed.
    cols = board.rules.cols
    ship_at = {c.index(cols): k for k, cells in board.sunk.items() if cells for c in cells}
    sunk = set(ship_at)
    if own is not None:
        ship_at.update((i, o - 1) for i, o in enumerate(own) if o)
        sunk.update(i for i, o in enumerate(own) if o and o - 1 in board.sunk)

    def glyph(i: int) -> Glyph:
        if i in board.fired:
            if i not in sunk:
                return _MARK[board.fired[i]]
            k = ship_at.get(i)
            return _MARK[Result.SUNK] if k is None else _sunk_glyph(k)
        if i in board.crossed:
            return _CROSSED
        if own is not None and own[i]:
            return _afloat_glyph(own[i] - 1)
        return _WATER

    return glyph


def _side_by_side(left: list[Text], right: list[Text], width: int | None) -> Text:
    """Two grids beside each other, or one above the other when ``width`` is too narrow."""
    lw = max(len(t.plain) for t in left)
    out = Text()
    if width is not None and lw + 3 + max(len(t.plain) for t in right) > width:
        for line in [*left, Text(""), *right]:
            out.append_text(line)
            out.append("\n")
        return out
    for a, b in zip(left, right, strict=True):
        out.append_text(a)
        out.append(" " * (lw - len(a.plain) + 3))
        out.append_text(b)
        out.append("\n")
    return out


def render_grids(
    game: Game,
    seat: int,
    fleet: Fleet | None,
    their_fleet: Fleet | None = None,
    width: int | None = None,
) -> Text:
    """Our grid (our fleet and the shots at it) beside the target grid (our shots at theirs).

    ``their_fleet`` (known once revealed) is drawn under our shots on the target grid.
    """
    rules = game.rules
    own = fleet.occupancy(rules) if fleet is not None else None
    theirs = their_fleet.occupancy(rules) if their_fleet is not None else None
    left = grid_lines(rules, board_glyph(game.boards[seat], own), "your fleet")
    target = "their fleet" if their_fleet is not None else "target"
    right = grid_lines(rules, board_glyph(game.boards[1 - seat], theirs), target)
    return _side_by_side(left, right, width)


def render_placement(
    rules: RuleSet, placed: Mapping[int, Placement], next_ship: int | None
) -> Text:
    """The grid being placed on, and the ship list: where each ship lies, and which is next."""
    grid = grid_lines(rules, placement_glyph(rules, placed), "your fleet")
    ships = ship_list(rules, placed, next_ship)
    while len(ships) < len(grid):
        ships.append(Text(""))
    while len(grid) < len(ships):
        grid.append(Text(""))
    return _side_by_side(grid, ships, None)


def placement_glyph(
    rules: RuleSet,
    placed: Mapping[int, Placement],
    starts: AbstractSet[int] = frozenset(),
    preview: Mapping[int, bool] | None = None,
) -> Callable[[int], Glyph]:
    """The grid being placed on: the ships down, ``starts`` (cells the next ship may start on,
    004's marks) and ``preview`` (the next ship where the cursor is: cell to whether it fits)."""
    occ = [0] * rules.cells
    for k, p in placed.items():
        for c in p.cells(rules.fleet[k].length):
            if c.on(rules.rows, rules.cols):
                occ[c.index(rules.cols)] = k + 1

    def glyph(i: int) -> Glyph:
        if preview is not None and i in preview:
            return ("o", "bold green") if preview[i] else ("o", "bold red")
        if occ[i]:
            return _afloat_glyph(occ[i] - 1)
        return _START if i in starts else _WATER

    return glyph


def ship_list(rules: RuleSet, placed: Mapping[int, Placement], next_ship: int | None) -> list[Text]:
    """The fleet as lines: where each placed ship lies, and which one is asked for next."""
    ships = [Text("ships", style="bold"), Text("")]
    for k, spec in enumerate(rules.fleet):
        at = placed.get(k)
        line = Text(ship_letter(k) + " ", style=_AFLOAT_STYLES[k % 2])
        line.append(f"{spec.name} ({spec.length})".ljust(20))
        if at is not None:
            way = "" if spec.length == 1 else " down" if at.vertical else " across"
            line.append(f"{at.cells(1)[0].label()}{way}", style="green")
        elif k == next_ship:
            line.append("<- next", style="bold yellow")
        else:
            line.append("-", style="dim")
        ships.append(line)
    return ships


# ================================================================================================
# Names
# ================================================================================================

#: The longest display name shown beside a board (a longer one is cut, ending in ``…``).
_NAME_WIDTH = 20


def _entry(table: Any, seat: int, player: str | None) -> Any:
    """What ``table`` (a list by seat, or a map by seat or player id) holds for ``seat``."""
    if isinstance(table, list | tuple):
        return table[seat] if seat < len(table) else None
    if isinstance(table, Mapping):
        for key in (seat, str(seat), player):
            if key is not None and key in table:
                return table[key]
    return None


def _rating(value: Any) -> int | None:
    if isinstance(value, Mapping):
        value = next((value[k] for k in ("rating", "new", "r") if k in value), None)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(value)
    return None


def seat_names(players: Any = (), names: Any = None, ratings: Any = None) -> list[str]:
    """Both seats as people know them: the display name, with the rating when known
    (``alice (1523)``), or else the start of the player's id, or else ``seat N``.

    Lenient about the form, since it comes off the wire: ``names`` is a list by seat or a map (by
    seat or player id) of a name or a ``{name, rating}`` map; ``ratings`` the same, of a number
    or a ``{rating}`` / ``{old, new}`` map."""
    out = []
    ids = [str(p) for p in players] if isinstance(players, list | tuple) else []
    for seat in (0, 1):
        player = ids[seat] if seat < len(ids) and ids[seat] else None
        entry = _entry(names, seat, player)
        name: Any = entry
        rating = _rating(_entry(ratings, seat, player))
        if isinstance(entry, Mapping):
            name = next((entry[k] for k in ("name", "display", "display_name") if k in entry), None)
            rating = _rating(entry) if rating is None else rating
        label = " ".join(str(name).split()) if isinstance(name, str) else ""
        if len(label) > _NAME_WIDTH:
            label = label[: _NAME_WIDTH - 1] + "…"
        label = label or (player[:8] if player else f"seat {seat}")
        out.append(label if rating is None else f"{label} ({rating})")
    if out[0] == out[1]:  # two players who kept the default name: told apart by seat
        out = [f"{out[s]} (seat {s})" for s in (0, 1)]
    return out


# ================================================================================================
# Rules
# ================================================================================================


def describe_rules(r: RuleSet) -> list[tuple[str, str]]:
    """Every option of ``r`` as (what, value) lines for people."""
    fleet = ", ".join(f"{s.name} ({s.length})" for s in r.fleet)
    shots = r.shots.value
    if r.is_salvo:
        size = f"{r.salvo_size} cells" if shots == "salvo-fixed" else "one per ship afloat"
        shots += f" ({size}, reported {r.salvo_report.value})"
    ck = r.clocks
    clocks = ", ".join(
        f"{k} {v}s" for k, v in (("setup", ck.setup), ("shot", ck.shot)) if v is not None
    )
    return [
        ("grid", f"{r.rows} x {r.cols}"),
        ("fleet", f"{fleet}  = {r.fleet_cells} cells"),
        ("ships may touch", "yes" if r.touching else "no (corners included)"),
        ("placed in order", "yes" if r.ordered_placement else "no"),
        ("shots per turn", shots),
        ("a hit shoots again", "yes" if r.hit_again else "no"),
        ("a sinking is", r.sunk.value),
        ("repeated call", r.repeat.value),
        ("crossed-out cells", "yes" if r.crossed_out else "no"),
        ("radar", f"once, {r.radar_size}x{r.radar_size}" if r.radar else "no"),
        ("team size", str(r.team_size)),
        ("first player", r.first_player.value),
        ("match", f"{r.match.kind.value}, {r.match.games} game(s)"),
        ("clocks", clocks or "none"),
    ]


def _base_preset(r: RuleSet) -> RuleSet | None:
    base = r.name.removesuffix("+custom")
    return PRESETS.get(base) if base != r.name or r.name in PRESETS else None


def house_rules(r: RuleSet) -> list[str]:
    """The options where ``r`` departs from the preset it is named after, as ``what: value``.

    A rule set built as ``{"preset": "classic", "radar": true}`` is called ``classic+custom``; its
    house rules are what the players agreed on top of classic, and both must see them.
    """
    base = _base_preset(r)
    if base is None or base == r:
        return []
    mine, theirs = dict(describe_rules(r)), dict(describe_rules(base))
    return [f"{k}: {v}" for k, v in mine.items() if theirs.get(k) != v]


def rules_panel(r: RuleSet, *, peer: bool = False) -> RenderableType:
    """The rule set as a table, the house rules under it, and 003's badge when the rules ask."""
    base = _base_preset(r)
    title = f"Rules: {base.name} with house rules" if base and base != r else f"Rules: {r.name}"
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("option", style="bold")
    table.add_column("value")
    for k, v in describe_rules(r):
        if k == "clocks" and peer and v != "none":
            v += " (not enforced in peer play: there is no referee)"
        table.add_row(k, v)
    parts: list[RenderableType] = [table]
    extra = house_rules(r)
    if extra:
        parts.append(Text("house rules: " + "; ".join(extra), style="yellow"))
    badge = house_badge(r)
    if badge is not None:
        parts.append(badge)
    return Group(*parts)


def house_badge(r: RuleSet) -> Text | None:
    """003's badge: "a hit shoots again", shown to both players while they play, whenever the
    rules say so (a house rule where the preset says otherwise, as on 003's six-ship)."""
    if not r.hit_again:
        return None
    base = _base_preset(r)
    house = r.hit_again_shown or base is None or not base.hit_again
    label = " HOUSE RULE: a hit shoots again " if house else " a hit shoots again "
    return Text(label, style="bold black on yellow")


# ================================================================================================
# Refusals and game ends
# ================================================================================================

_REFUSALS: dict[int, str] = {
    ErrorCode.NOT_YOUR_TURN: "it is not your turn",
    ErrorCode.OFF_BOARD: "that is not a cell of this board",
    ErrorCode.ALREADY_FIRED: "you have fired at that cell already; call another",
    ErrorCode.CROSSED_OUT: "that cell is crossed out: no ship can be there",
    ErrorCode.WRONG_SALVO_SIZE: "this turn calls another number of cells",
    ErrorCode.DUPLICATE_IN_SALVO: "a salvo names each cell once",
    ErrorCode.RADAR_USED: "the radar is used once per game, and it is used",
    ErrorCode.RADAR_NOT_ALLOWED: "these rules have no radar",
    ErrorCode.NOT_CALLER: "another member of your team calls this turn",
    ErrorCode.ILLEGAL_FLEET: "the fleet breaks the rules; place it again",
    ErrorCode.WRONG_PHASE: "that is not possible at this point of the game",
    ErrorCode.ALREADY_COMMITTED: "your fleet is placed already",
    ErrorCode.GAME_OVER: "the game is over",
}


def explain_refusal(code: int, detail: str) -> str:
    """One line for people: why a move was refused, then the referee's own words."""
    why = _REFUSALS.get(code)
    if why is None:
        try:
            why = ErrorCode(code).slug.replace("_", " ")
        except ValueError:
            why = f"error {code}"
    return f"refused: {why}" + (f" ({detail})" if detail else "")


_ENDS: dict[str, str] = {
    EndReason.FLEET_SUNK: "{loser} fleet was sunk",
    EndReason.SETUP_TIMEOUT: "{loser_s} did not place a fleet in time",
    EndReason.NOBODY_PLACED: "neither fleet was placed in time",
    EndReason.SHOT_TIMEOUTS: "{loser_s} let too many shot clocks run out in a row",
    EndReason.NO_ANSWER: "{loser_s} did not answer a shot in time",
    EndReason.RESIGNED: "{loser_s} resigned",
    EndReason.ABANDONED: "{loser_s} left and did not come back in time",
    EndReason.FALSE_PROOF: "{loser} answer did not match the fleet committed to (a lie, proved)",
    EndReason.FALSE_VERDICT: "{loser} reveal shows an answer to have been false",
    EndReason.ILLEGAL_FLEET: "{loser} fleet breaks the rules",
    EndReason.BAD_REVEAL: "{loser} revealed fleet is not the one committed to",
    EndReason.NO_REVEAL: "{loser_s} did not reveal the fleet",
    EndReason.BOTH_AT_FAULT: "both sides were at fault",
}


def explain_end(outcome: Mapping[str, Any], seat: int | None) -> str:
    """``"you won: your opponent's fleet was sunk"`` and the like, from an outcome map.

    ``seat`` is ours (``None`` for a spectator, who is told seat numbers instead).
    """
    winner = outcome.get("winner")
    reason = str(outcome.get("reason", ""))
    if winner is None:
        head = "a draw"
        loser: int | None = None
    else:
        loser = 1 - int(winner)
        head = f"seat {winner} won" if seat is None else "you won" if winner == seat else "you lost"
    if loser is None:
        who, whose = "nobody", "nobody's"
    elif seat is None:
        who, whose = f"seat {loser}", f"seat {loser}'s"
    elif loser == seat:
        who, whose = "you", "your"
    else:
        who, whose = "your opponent", "your opponent's"
    text = _ENDS.get(reason, reason.replace("_", " ") or "the game ended")
    return f"{head}: " + text.format(loser=whose, loser_s=who)


def render_end(
    number: int,
    game: Game | None,
    seat: int,
    outcome: Mapping[str, Any],
    fleet: Fleet | None,
    their_fleet: Fleet | None,
    width: int | None = None,
) -> RenderableType:
    """The end of a game: who won and why, then both fleets with every shot on them."""
    head = Text(f"game {number} over: ", style="bold")
    head.append(explain_end(outcome, seat))
    detail = outcome.get("detail")
    parts: list[RenderableType] = [head]
    if detail:
        parts.append(Text(f"  ({detail})", style="dim"))
    parts.append(Text(f"  reason: {outcome.get('reason')}", style="dim"))
    if game is not None:
        parts.append(render_grids(game, seat, fleet, their_fleet, width))
        if their_fleet is None:
            parts.append(Text("their fleet was not revealed in this game", style="dim"))
        parts.append(Text(GAME_LEGEND, style="dim"))
    return Group(*parts)


# ================================================================================================
# Spectators (seabattle watch)
# ================================================================================================

#: How many of the latest events the board view of ``watch`` lists under the boards.
_RECENT = 5


def _board_from_view(rules: RuleSet, d: Any) -> Board:
    """A :class:`Board` as a snapshot's public view has it (spec 6.6): the shots before we came."""
    board = Board(rules)
    if not isinstance(d, Mapping):
        return board
    cols = rules.cols
    for i, result in d.get("fired", ()):
        board.fired[int(i)] = Result(result) if result is not None else None
    for k, cells in d.get("sunk", ()):
        shown = tuple(Cell(*divmod(int(i), cols)) for i in cells) if cells else None
        board.sunk[int(k)] = shown
    crossed = d.get("crossed")
    if crossed:
        board.cross(int(i) for i in crossed)
    board.hits = int(d.get("hits", 0))
    return board


class Spectator:
    """What a spectator knows of a match (``seabattle watch``), from its snapshot on.

    :meth:`feed` takes the snapshot, then each public event, and returns the event as one line
    of text (the plain mode); :meth:`view` draws what is known as both boards, with the names,
    whose turn it is, the clock, the ships afloat and the latest events. Pure: the shell passes
    the time (``now``, in seconds on any one clock) with each call.
    """

    def __init__(self) -> None:
        self.match = b""
        self.rules: RuleSet | None = None
        self.mode = "?"
        self.players: list[str] = []
        self.names = seat_names()
        self.game = 0
        self.phase = "?"
        self.turn: int | None = None
        self.shots = 0
        self.boards = [Board(PRESETS["classic"]), Board(PRESETS["classic"])]
        self.fleets: list[Fleet | None] = [None, None]
        self.wins = [0, 0]
        #: The clock running: its kind, the seat it runs for (``None``: both), when it ends.
        self.clock: tuple[str, int | None, float] | None = None
        self.outcome: Mapping[str, Any] | None = None
        self.result: Mapping[str, Any] | None = None
        #: The match is over (``match_over``, or a snapshot of a finished match).
        self.finished = False
        self.recent: list[str] = []

    def who(self, seat: Any) -> str:
        """A seat as people know it."""
        return self.names[seat] if seat in (0, 1) else "nobody"

    # -- events ----------------------------------------------------------------------------------

    def feed(self, msg: m.Message, now: float) -> str:
        """Take ``msg`` in; what it says, as one line."""
        line = self._line(msg, now)
        if not isinstance(msg, m.Snapshot):
            self.recent = [*self.recent, line][-_RECENT:]
        return line

    def _line(self, msg: m.Message, now: float) -> str:
        g = f"game {getattr(msg, 'game', '?')}: "
        if isinstance(msg, m.Snapshot):
            return self._snapshot(msg, now)
        if isinstance(msg, m.GameStart):
            self._new_game(msg.game)
            first = "" if msg.first is None else f", {self.who(msg.first)} fires first"
            return f"{g}begins{first}"
        if isinstance(msg, m.Committed):
            return f"{g}{self.who(msg.seat)} placed a fleet"
        if isinstance(msg, m.Firing):
            self.phase, self.turn, self.clock = "firing", msg.first, None
            return f"{g}both fleets are placed, {self.who(msg.first)} fires first"
        if isinstance(msg, m.Clock):
            self.clock = (msg.kind, msg.seat, now + msg.seconds)
            who = "" if msg.seat is None else f" for {self.who(msg.seat)}"
            return f"{g}{msg.kind} clock, {msg.seconds} s{who}"
        if isinstance(msg, m.ShotCalled):
            what = "radar at" if msg.radar else "fires at"
            self.clock = None  # the mover's clock stopped; the answer clock is not announced
            self.phase = "answer"
            return f"{g}shot {msg.n}: {self.who(msg.seat)} {what} {' '.join(msg.cells)}"
        if isinstance(msg, m.VerdictMsg):
            said = self._verdict(msg)
            self.turn, self.shots = msg.next, max(self.shots, msg.n)
            if msg.next is not None:
                self.phase = "firing"
            nxt = "firing is over" if msg.next is None else f"{self.who(msg.next)} next"
            return f"{g}shot {msg.n}: {said}; {nxt}"
        if isinstance(msg, m.ShotLost):
            self.turn, self.clock = msg.next, None
            lost = f"{self.who(msg.seat)} lost a shot ({msg.why})"
            return f"{g}{lost}; {self.who(msg.next)} next"
        if isinstance(msg, m.RevealNow):
            self.phase, self.turn, self.clock = "reveal", None, None
            return f"{g}{self.who(msg.winner)} sank the last ship: both fleets are revealed"
        if isinstance(msg, m.Revealed):
            return g + self._revealed(msg)
        if isinstance(msg, m.GameOver):
            self.phase, self.turn, self.clock, self.outcome = "over", None, None, msg.outcome
            w = msg.outcome.get("winner")
            if w in (0, 1):
                self.wins[w] += 1
            return f"{g}over: {self._ending(msg.outcome)}"
        if isinstance(msg, m.MatchOver):
            self.result, self.finished, self.clock = msg.result, True, None
            return self._match_over(msg)
        return f"{msg.TAG}"

    def _new_game(self, number: int) -> None:
        self.game, self.phase, self.turn, self.shots = number, "setup", None, 0
        self.clock, self.outcome, self.fleets = None, None, [None, None]
        if self.rules is not None:
            self.boards = [Board(self.rules), Board(self.rules)]

    def _snapshot(self, msg: m.Snapshot, now: float) -> str:
        from seabattle.protocol.rules import BadRules, rules_from_dict

        v = msg.view
        self.match = msg.match
        players = v.get("players")
        self.players = [str(p) for p in players] if isinstance(players, list) else []
        self.names = seat_names(self.players, v.get("names"), v.get("ratings"))
        try:
            rules = v.get("rules")
            self.rules = rules_from_dict(rules) if isinstance(rules, dict) else None
        except BadRules:
            self.rules = None
        self.mode = str(v.get("mode", "?"))
        self.game, self.phase = int(v.get("game", 0) or 0), str(v.get("phase", "?"))
        turn = v.get("turn")
        self.turn = turn if turn in (0, 1) else None
        self.shots = int(v.get("shots", 0) or 0)
        wins = v.get("wins")
        if isinstance(wins, list) and len(wins) == 2:
            self.wins = [int(w) for w in wins]
        self.outcome = v.get("outcome") if isinstance(v.get("outcome"), dict) else None
        self.finished = v.get("over") is True
        boards: Any = v.get("boards") or []
        if self.rules is not None:
            try:
                self.boards = [_board_from_view(self.rules, boards[s]) for s in (0, 1)]
            except (TypeError, ValueError, IndexError, KeyError):
                self.boards = [Board(self.rules), Board(self.rules)]
        clock = v.get("clock")
        if isinstance(clock, dict) and isinstance(clock.get("left"), int):
            kind = str(clock.get("kind", "?"))
            # The view does not say whose: a shot clock runs for the side to move, an answer
            # clock for the other; the setup and reveal clocks for both.
            seat = self.turn if kind == "shot" else None
            if kind == "answer" and self.turn is not None:
                seat = 1 - self.turn
            self.clock = (kind, seat, now + clock["left"])
        name = self.rules.name if self.rules is not None else "unknown rules"
        parts = [f"watching match {msg.match.hex()}: {name}, {self.mode} mode"]
        if "game" in v:
            parts.append(f"game {v['game']} ({v.get('phase')})")
        scores = v.get("scores")
        if isinstance(scores, list) and len(scores) == 2:
            parts.append(f"score {scores[0]}-{scores[1]}")
        parts.append(f"{self.names[0]} against {self.names[1]}")
        if self.shots:
            parts.append(f"{self.shots} shot(s) so far")
        return ", ".join(parts)

    def _verdict(self, msg: m.VerdictMsg) -> str:
        from seabattle.protocol.errors import ProtocolError
        from seabattle.protocol.grid import parse_cell
        from seabattle.protocol.verdict import Verdict

        from .tui import describe_verdict

        said = f"{self.who(msg.seat)} at {' '.join(msg.cells)}"
        rules = self.rules
        if rules is None:
            return said
        try:
            cells = tuple(parse_cell(c, rules.rows, rules.cols) for c in msg.cells)
            v = Verdict.from_dict(msg.verdict)
            target = self.boards[1 - msg.seat] if msg.seat in (0, 1) else None
            if target is not None:
                if msg.radar:
                    target.radar_used = True
                else:
                    target.record(cells, v)
            return f"{self.who(msg.seat)}: " + describe_verdict(rules, cells, msg.radar, v)
        except (ProtocolError, ValueError, KeyError, TypeError):
            return said  # a verdict this client cannot read is still an event

    def _revealed(self, msg: m.Revealed) -> str:
        from seabattle.protocol.commit import Reveal
        from seabattle.protocol.errors import ProtocolError

        if msg.fault:
            return f"{self.who(msg.seat)} revealed a fleet: {msg.fault}"
        if msg.seat in (0, 1) and self.rules is not None:
            try:
                fleet = Reveal.from_dict(msg.reveal).fleet
                fleet.validate(self.rules)
                self.fleets[msg.seat] = fleet
            except (ProtocolError, ValueError, KeyError, TypeError):
                pass  # not drawn; the line still says it came
        return f"{self.who(msg.seat)} revealed a fleet, checked"

    def _ending(self, outcome: Mapping[str, Any]) -> str:
        w = outcome.get("winner")
        reason = str(outcome.get("reason", "")).replace("_", " ")
        head = "a draw" if w not in (0, 1) else f"{self.who(w)} won"
        return f"{head} ({reason})" if reason else head

    def _match_over(self, msg: m.MatchOver) -> str:
        r = msg.result
        w = r.get("winner")
        line = "match over: " + ("a draw" if w not in (0, 1) else f"{self.who(w)} won")
        scores = r.get("scores")
        if isinstance(scores, list) and len(scores) == 2:
            line += f" {scores[0]}-{scores[1]}"
        return line + f" (record: seabattle record fetch {msg.match.hex()})"

    # -- drawing ---------------------------------------------------------------------------------

    def view(self, now: float, width: int | None = None) -> RenderableType:
        """Both boards as they stand, headed by the match, with the latest events under them."""
        rules = self.rules
        if rules is None:
            return Text("waiting for the match's snapshot...", style="dim")
        head = Text(f"match {self.match.hex()[:12]}", style="bold")
        head.append(f"  {rules.name} · {self.mode} · game {self.game}")
        head.append(f" · games won {self.wins[0]}-{self.wins[1]}")
        if self.shots:
            head.append(f" · shot {self.shots}")
        sides = [self._side(s, now) for s in (0, 1)]
        tall = max(len(x) for x in sides)
        for x in sides:
            x += [Text("")] * (tall - len(x))
        parts: list[RenderableType] = [head, _side_by_side(sides[0], sides[1], width)]
        parts.append(self._status())
        if self.recent:
            parts.append(Text("\n".join(self.recent), style="dim"))
        return Group(*parts)

    def _side(self, seat: int, now: float) -> list[Text]:
        rules = self.rules
        assert rules is not None
        fleet = self.fleets[seat]
        occ = fleet.occupancy(rules) if fleet is not None else None
        title = Text(self.names[seat], style="bold")
        # The turn stays with the side that called while the other owes its answer.
        if self.turn == seat and self.phase in ("firing", "answer") and not self.finished:
            title.append("  ")
            title.append(" TO MOVE ", style="bold black on green")
        lines = grid_lines(rules, board_glyph(self.boards[seat], occ), title)
        lines.append(self._clock(seat, now))
        board = self.boards[seat]
        n = len(rules.fleet)
        if fleet is not None:
            afloat = Text(f"ships afloat: {n - len(board.sunk)} of {n} (fleet revealed)")
        elif rules.sunk is SunkReport.SILENT:
            afloat = Text(f"ships afloat: ? of {n} (sinkings are not told)", style="dim")
        else:
            afloat = Text(f"ships afloat: {n - len(board.sunk)} of {n}")
        lines.append(afloat)
        return lines

    def _clock(self, seat: int, now: float) -> Text:
        c = self.clock
        if c is None or c[1] not in (None, seat) or self.finished:
            return Text("no clock running", style="dim")
        left = max(0, math.ceil(c[2] - now))
        return Text(f"{c[0]} clock {left} s", style="bold red" if left <= 10 else "bold")

    def _status(self) -> Text:
        if self.finished:
            r = self.result or {}
            w = r.get("winner") if self.result else (self.outcome or {}).get("winner")
            head = "a draw" if w not in (0, 1) else f"{self.who(w)} won"
            return Text(f" MATCH OVER: {head} ", style="bold white on magenta")
        if self.phase == "over" and self.outcome is not None:
            return Text(f" GAME OVER: {self._ending(self.outcome)} ", style="bold white on magenta")
        if self.phase == "setup":
            return Text(" placing the fleets ", style="bold")
        if self.phase == "reveal":
            return Text(" revealing the fleets ", style="bold")
        if self.turn in (0, 1):
            return Text(f" LIVE: {self.who(self.turn)} to move ", style="bold black on green")
        return Text(f" LIVE: {self.phase} ", style="bold")
