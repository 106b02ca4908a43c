"""Shots, verdicts and the truth about them.

A :class:`Shot` is what the attacker calls; a :class:`Verdict` is the defender's answer, with the
proofs the rules allow (see :mod:`.commit`). :func:`true_answer` computes the honest verdict from a
fleet: the defender's client uses it to answer, a custody referee answers for a player with it,
and the reveal check finds every lie with it. One function, so the three never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .commit import SALT_BYTES, CellOpening, Committed, ShipOpening, new_opening, slot_setters
from .errors import ErrorCode, RemoteProtocolError
from .grid import Cell
from .rules import RuleSet, SalvoReport, SunkReport

__all__ = [
    "CellResult",
    "Defender",
    "Result",
    "Shot",
    "SunkClaim",
    "Verdict",
    "radar_cells",
    "true_answer",
]


class Result(StrEnum):
    """What one called cell found."""

    MISS = "miss"
    HIT = "hit"
    SUNK = "sunk"

    def __repr__(self) -> str:
        # A printed verdict or event says ``'hit'``, not ``<Result.HIT: 'hit'>``.
        return repr(self.value)


_RESULTS = {r.value: r for r in Result}
_CLAIM_KEYS = frozenset({"k", "open"})
_RESULT_KEYS = frozenset({"r", "open", "sunk"})
_VERDICT_KEYS = frozenset({"n", "results", "total", "sunk", "found"})
VERDICT_KEYS = _VERDICT_KEYS
"""The keys of a verdict's map (:meth:`Verdict.from_dict`)."""
_OPENING_KEYS = frozenset({"i", "occ", "salt"})


@dataclass(frozen=True, slots=True)
class Shot:
    """Shot ``n`` of a game: ``seat`` calls ``cells`` (or scans the radar area at ``cells[0]``)."""

    n: int
    seat: int
    cells: tuple[Cell, ...]
    radar: bool = False


@dataclass(frozen=True, slots=True)
class SunkClaim:
    """A sinking: which ship (when the rules name or show it) and its opening (when shown)."""

    ship: int
    opening: ShipOpening | None = None

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        return {"k": self.ship, "open": self.opening.to_dict() if self.opening else None}

    @classmethod
    def from_dict(cls, d: Any) -> SunkClaim:
        """Parse the wire form."""
        if not isinstance(d, dict) or d.keys() != _CLAIM_KEYS:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "a sunk claim is {k, open}")
        k = d["k"]
        if isinstance(k, bool) or not isinstance(k, int):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "sunk claim: k is an integer")
        return cls(k, None if d["open"] is None else ShipOpening.from_dict(d["open"]))


@dataclass(frozen=True, slots=True)
class CellResult:
    """The verdict on one called cell: its result, its opening, and a sunk claim for ``SUNK``."""

    result: Result
    opening: CellOpening
    sunk: SunkClaim | None = None

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        sunk = self.sunk
        return {
            "r": self.result.value,
            "open": self.opening.to_dict(),
            "sunk": sunk.to_dict() if sunk else None,
        }

    @classmethod
    def from_dict(cls, d: Any) -> CellResult:
        """Parse the wire form."""
        if not isinstance(d, dict) or d.keys() != _RESULT_KEYS:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "a cell result is {r, open, sunk}")
        r = d["r"]
        # A plain string is looked up directly; anything else goes through Result() (slow).
        result = _RESULTS.get(r) if type(r) is str else None
        if result is None:
            try:
                result = Result(r)
            except ValueError:
                raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"result {r!r}") from None
        sunk = d["sunk"]
        opening = CellOpening.from_dict(d["open"])
        claim = None if sunk is None else SunkClaim.from_dict(sunk)
        if cls is CellResult:
            return new_result(result, opening, claim)
        return cls(result, opening, claim)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The defender's answer to shot ``n``.

    * per-cell salvos and single shots: ``results`` (one per called cell, in call order);
    * salvos reported as a total: ``total`` and the ``sunk`` claims of ships this salvo sank;
    * radar: ``found``.
    """

    n: int
    results: tuple[CellResult, ...] = ()
    total: int | None = None
    sunk: tuple[SunkClaim, ...] = field(default=())
    found: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        # Built on every shot, twice by a custody referee: no comprehension for empty parts.
        results, sunk = self.results, self.sunk
        return {
            "n": self.n,
            "results": [r.to_dict() for r in results] if results else [],
            "total": self.total,
            "sunk": [s.to_dict() for s in sunk] if sunk else [],
            "found": self.found,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Verdict:
        """Parse the wire form; structure only (the game checks it against the shot)."""
        if not isinstance(d, dict) or d.keys() != _VERDICT_KEYS:
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"a verdict is {sorted(_VERDICT_KEYS)}"
            )
        n, total, found = d["n"], d["total"], d["found"]
        # Exact types first (what every decoder gives), then the general tests.
        if type(n) is not int and (isinstance(n, bool) or not isinstance(n, int)):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "verdict n is an integer")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int)):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "verdict total is an integer")
        if found is not None and not isinstance(found, bool):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "verdict found is a boolean")
        results, sunk = d["results"], d["sunk"]
        if not isinstance(results, list) or not isinstance(sunk, list):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "results and sunk are lists")
        if cls is Verdict and not sunk:
            plain = plain_results(results)
            if plain is not None:
                return new_verdict(n, plain, total, (), found)
        parsed = tuple(map(CellResult.from_dict, results))
        claims = tuple(map(SunkClaim.from_dict, sunk)) if sunk else ()
        if cls is Verdict:
            return new_verdict(n, parsed, total, claims, found)
        return cls(n, parsed, total, claims, found)


def plain_results(results: list[Any]) -> tuple[CellResult, ...] | None:
    """``tuple(map(CellResult.from_dict, results))`` for results in the form every decoder gives
    (exact types, no ship shown), in one frame; ``None`` for any other form, which the general
    parse then judges (and refuses with its own error)."""
    out = []
    for res in results:
        if type(res) is not dict or res.keys() != _RESULT_KEYS:
            return None
        r, o, claim = res["r"], res["open"], res["sunk"]
        result = _RESULTS.get(r) if type(r) is str else None
        if result is None or type(o) is not dict or o.keys() != _OPENING_KEYS:
            return None
        i, occ, salt = o["i"], o["occ"], o["salt"]
        if type(i) is not int or type(occ) is not bool or type(salt) is not bytes:
            return None
        if len(salt) != SALT_BYTES:
            return None
        if claim is None:
            sunk = None
        elif (
            type(claim) is dict
            and claim.keys() == _CLAIM_KEYS
            and type(claim["k"]) is int
            and claim["open"] is None
        ):
            sunk = SunkClaim(claim["k"])
        else:
            return None
        out.append(new_result(result, new_opening(i, occ, salt), sunk))
    return tuple(out)


_new = object.__new__
_SHOT_SETTERS = slot_setters(Shot, "n", "seat", "cells", "radar")
_RESULT_SETTERS = slot_setters(CellResult, "result", "opening", "sunk")
_VERDICT_SETTERS = slot_setters(Verdict, "n", "results", "total", "sunk", "found")


def new_shot(n: int, seat: int, cells: tuple[Cell, ...], radar: bool = False) -> Shot:
    """``Shot(n, seat, cells, radar)``, built fast (:func:`.commit.slot_setters`)."""
    s: Shot = _new(Shot)
    set_n, set_seat, set_cells, set_radar = _SHOT_SETTERS
    set_n(s, n)
    set_seat(s, seat)
    set_cells(s, cells)
    set_radar(s, radar)
    return s


def new_result(result: Result, opening: CellOpening, sunk: SunkClaim | None) -> CellResult:
    """``CellResult(result, opening, sunk)``, built fast."""
    r: CellResult = _new(CellResult)
    set_result, set_opening, set_sunk = _RESULT_SETTERS
    set_result(r, result)
    set_opening(r, opening)
    set_sunk(r, sunk)
    return r


def new_verdict(
    n: int,
    results: tuple[CellResult, ...],
    total: int | None,
    sunk: tuple[SunkClaim, ...],
    found: bool | None,
) -> Verdict:
    """``Verdict(n, results, total, sunk, found)``, built fast."""
    v: Verdict = _new(Verdict)
    set_n, set_results, set_total, set_sunk, set_found = _VERDICT_SETTERS
    set_n(v, n)
    set_results(v, results)
    set_total(v, total)
    set_sunk(v, sunk)
    set_found(v, found)
    return v


def radar_cells(rules: RuleSet, top_left: Cell) -> tuple[Cell, ...]:
    """The cells of the radar area whose top-left corner is ``top_left`` (it must fit the grid)."""
    s = rules.radar_size
    return tuple(Cell(top_left.row + dr, top_left.col + dc) for dr in range(s) for dc in range(s))


@dataclass(frozen=True, slots=True)
class TrueCell:
    """The honest result for one cell: its result and, for ``SUNK``, the ship index."""

    result: Result
    ship: int | None


# The results that carry no ship index: one object each, shared (TrueCell is frozen).
_MISS_CELL = TrueCell(Result.MISS, None)
_HIT_CELL = TrueCell(Result.HIT, None)
_SILENT = SunkReport.SILENT
_SUNK = Result.SUNK


def true_answer(
    rules: RuleSet, occupancy: Sequence[int], hit_before: set[int], shot: Shot
) -> tuple[list[TrueCell], bool | None]:
    """The honest per-cell results of ``shot`` against a fleet, and the radar answer.

    ``occupancy[i]`` is ship index + 1 (0 for water); ``hit_before`` holds the cell indices of that
    fleet already hit. In a salvo that sinks a ship, the cell called *last* among that ship's cells
    is the sinking one; the others are hits (spec: "Salvos"). Silent sinking reports ``HIT`` only.
    """
    if shot.radar:
        found = any(occupancy[c.index(rules.cols)] for c in radar_cells(rules, shot.cells[0]))
        return [], found
    cols = rules.cols
    cells = shot.cells
    if len(cells) == 1:
        c = cells[0]
        if not occupancy[c.row * cols + c.col]:
            return [_MISS_CELL], None  # a single shot in the water: most shots of a game
    named = rules.sunk is not _SILENT
    hits: set[int] | None = None  # hit_before and this shot's hits, copied at the first hit
    out = []
    for c in cells:
        i = c.row * cols + c.col  # c.index(cols), inline: every shot of a game, at each reveal
        o = occupancy[i]
        if not o:
            out.append(_MISS_CELL)
            continue
        if hits is None:
            hits = set(hit_before)
        hits.add(i)
        # Sunk when every cell of the ship is hit, counted over the few hits rather than the whole
        # grid: the reveal check calls this for every shot of a game.
        if named and occupancy.count(o) == [occupancy[x] for x in hits].count(o):
            out.append(TrueCell(_SUNK, o - 1))
        else:
            out.append(_HIT_CELL)
    if len(out) > 1:
        # A ship whose cells were all called in this salvo sinks once: on its last called cell.
        seen: set[int] = set()
        for j in range(len(out) - 1, -1, -1):
            t = out[j]
            if t.result is _SUNK and t.ship is not None:
                if t.ship in seen:
                    out[j] = _HIT_CELL
                seen.add(t.ship)
    return out, None


class Defender:
    """A player's own fleet under fire: answers shots honestly, with the proofs the rules allow."""

    __slots__ = ("_cells", "committed", "hit", "rules")

    def __init__(self, committed: Committed) -> None:
        self.committed = committed
        self.rules = committed.rules
        self.hit: set[int] = set()
        self._cells = self.rules.fleet_cells  # a sum over the fleet: read after every shot

    def answer(self, shot: Shot) -> Verdict:
        """The honest verdict on ``shot``, with openings; records the hits."""
        rules = self.rules
        truth, found = true_answer(rules, self.committed.occupancy, self.hit, shot)
        if shot.radar:
            return Verdict(shot.n, found=found)
        for c in shot.cells:
            i = c.index(rules.cols)
            if self.committed.occupancy[i]:
                self.hit.add(i)
        claims = [
            self._claim(t.ship) for t in truth if t.result is Result.SUNK and t.ship is not None
        ]
        if rules.is_salvo and rules.salvo_report is SalvoReport.TOTAL:
            total = sum(t.result is not Result.MISS for t in truth)
            return Verdict(shot.n, total=total, sunk=tuple(claims))
        results = []
        claim_iter = iter(claims)
        for c, t in zip(shot.cells, truth, strict=True):
            opening = self.committed.open_cell(c.index(rules.cols))
            results.append(
                new_result(t.result, opening, next(claim_iter) if t.result is _SUNK else None)
            )
        return new_verdict(shot.n, tuple(results), None, (), None)

    def _claim(self, ship: int) -> SunkClaim:
        if self.rules.sunk is SunkReport.SHOWN:
            return SunkClaim(ship, self.committed.open_ship(ship))
        return SunkClaim(ship)

    def turn_after(self, shot: Shot) -> int | None:
        """Who moves once the referee has applied this defender's honest verdict on ``shot``
        (given by :meth:`answer`; 8.4): ``None`` if it sank the whole fleet (the reveal follows),
        the shooter if its hit keeps the turn, else this defender. What a client sent no copy of
        its own verdict (the capability ``lean``) learns whose turn it is from."""
        if self.destroyed:
            return None
        if shot.radar:
            return 1 - shot.seat
        rules, occupancy = self.rules, self.committed.occupancy
        hit = any(occupancy[c.index(rules.cols)] for c in shot.cells)
        return shot.seat if rules.keeps_turn(hit) else 1 - shot.seat

    @property
    def destroyed(self) -> bool:
        """Whether every ship cell has been hit."""
        return len(self.hit) == self._cells
