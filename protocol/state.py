"""The vocabulary of a game: phases, clocks, end reasons, outcomes, boards, the transition table.

Kept apart from :mod:`.game` so that the state machine's module holds only its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .grid import Cell
from .rules import RuleSet
from .verdict import Result, SunkClaim, Verdict

__all__ = [
    "TRANSITIONS",
    "Board",
    "Deadline",
    "EndReason",
    "Outcome",
    "Phase",
    "accepted",
]


class Phase(StrEnum):
    """Where a game stands."""

    SETUP = "setup"  #: fleets are being committed
    FIRING = "firing"  #: the side to move may call a shot
    ANSWER = "answer"  #: a shot was called; the defender owes its verdict
    REVEAL = "reveal"  #: the last ship sank; both fleets must be revealed
    OVER = "over"


class Deadline(StrEnum):
    """The clocks a shell may run for a game."""

    SETUP = "setup"
    SHOT = "shot"
    ANSWER = "answer"
    REVEAL = "reveal"


class EndReason(StrEnum):
    """Why a game ended; part of every outcome, seen by both players and the record."""

    FLEET_SUNK = "fleet_sunk"
    SETUP_TIMEOUT = "setup_timeout"  #: one side did not place in time: it forfeits (004)
    NOBODY_PLACED = "nobody_placed"  #: neither placed in time: a recorded draw (004)
    SHOT_TIMEOUTS = "shot_timeouts"  #: too many shot clocks ran out in a row
    NO_ANSWER = "no_answer"  #: the defender owed a verdict and did not give it in time
    RESIGNED = "resigned"
    ABANDONED = "abandoned"  #: disconnected beyond the grace period
    FALSE_PROOF = "false_proof"  #: an opening did not match the commitment or the verdict
    FALSE_VERDICT = "false_verdict"  #: the reveal showed a verdict to be false
    ILLEGAL_FLEET = "illegal_fleet"
    BAD_REVEAL = "bad_reveal"  #: the revealed fleet is not the committed one
    NO_REVEAL = "no_reveal"
    BOTH_AT_FAULT = "both_at_fault"  #: both sides lied or failed to reveal: a draw


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a game ended: the winner (``None`` for a draw), why, and the detail of any fault."""

    winner: int | None
    reason: EndReason
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        return {"winner": self.winner, "reason": self.reason.value, "detail": self.detail}


# -- the transition table -------------------------------------------------------------------------
# Input names are the ``in`` of transcript entries (:class:`.inputs.Input`); they are spelled out
# here, not imported, so that this vocabulary module stays below the inputs that use it.

#: Every edge of the game's state machine: (phase, input) -> the phases that input may lead to,
#: each with when it does. An input the table lacks in a phase is refused (``WRONG_PHASE``, or
#: ``GAME_OVER`` once over); an input that would lead anywhere else is a bug in the core, refused
#: by :meth:`.game.Game.feed` before its effects can be seen. The spec's state diagram is
#: generated from this table.
TRANSITIONS: dict[tuple[Phase, str], tuple[tuple[Phase, str], ...]] = {
    (Phase.SETUP, "commit"): (
        (Phase.SETUP, "a fleet is committed; the other fleet or the first player is missing"),
        (Phase.FIRING, "both fleets committed and the first player known"),
    ),
    (Phase.SETUP, "set_first"): (
        (Phase.SETUP, "the first player is known; a fleet is missing"),
        (Phase.FIRING, "both fleets were committed already"),
    ),
    (Phase.SETUP, "expire"): ((Phase.OVER, "setup clock: `setup_timeout` or `nobody_placed`"),),
    (Phase.SETUP, "resign"): ((Phase.OVER, "`resigned`"),),
    (Phase.SETUP, "abandon"): ((Phase.OVER, "`abandoned`"),),
    (Phase.FIRING, "fire"): (
        (Phase.ANSWER, "the shot is accepted; the defender owes a verdict"),
        (Phase.FIRING, "a repeated single shot under `repeat=wasted`: the turn passes"),
    ),
    (Phase.FIRING, "radar"): ((Phase.ANSWER, "the scan is accepted"),),
    (Phase.FIRING, "expire"): (
        (Phase.FIRING, "shot clock: the shot is lost, the turn passes"),
        (Phase.OVER, "`max_expiries` in a row: `shot_timeouts`"),
    ),
    (Phase.FIRING, "resign"): ((Phase.OVER, "`resigned`"),),
    (Phase.FIRING, "abandon"): ((Phase.OVER, "`abandoned`"),),
    (Phase.ANSWER, "answer"): (
        (Phase.FIRING, "the verdict is proved; the next mover fires"),
        (Phase.REVEAL, "the last ship cell was hit"),
        (
            Phase.OVER,
            "an opening is false, or the verdicts leave too few open cells (`false_proof`)",
        ),
    ),
    (Phase.ANSWER, "expire"): ((Phase.OVER, "answer clock: `no_answer`"),),
    (Phase.ANSWER, "resign"): ((Phase.OVER, "`resigned`"),),
    (Phase.ANSWER, "abandon"): ((Phase.OVER, "`abandoned`"),),
    (Phase.REVEAL, "reveal"): (
        (Phase.REVEAL, "one fleet revealed, the other still owed"),
        (Phase.OVER, "both revealed: the provisional winner, or a fault decides"),
    ),
    (Phase.REVEAL, "expire"): ((Phase.OVER, "reveal clock: a missing reveal is `no_reveal`"),),
}


def accepted(phase: Phase) -> frozenset[str]:
    """The inputs ``phase`` accepts (those with an edge out of it)."""
    return frozenset(i for p, i in TRANSITIONS if p is phase)


_MISS = Result.MISS

#: The crossed-out cells of a board that has none (most boards: only some rules cross out).
_NONE_CROSSED: frozenset[int] = frozenset()


class Board:
    """The public state of one seat's grid: what its opponent's shots have found."""

    # A server holds two per live game: no instance dict.
    __slots__ = ("crossed", "fired", "hits", "radar_used", "rules", "sunk")

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.fired: dict[int, Result | None] = {}  # None: fired within a salvo reported as a total
        self.hits = 0  # proven (per-cell) or claimed (totals) hits
        self.sunk: dict[int, tuple[Cell, ...] | None] = {}  # ship -> cells when shown
        #: Cells known to be water without being fired at (:meth:`cross`); a set once there is one.
        self.crossed: AbstractSet[int] = _NONE_CROSSED
        self.radar_used = False

    def cross(self, cells: Iterable[int]) -> None:
        """Cross out the cell indices ``cells`` (fired cells are left out by the caller)."""
        crossed = self.crossed
        if isinstance(crossed, set):
            crossed.update(cells)
        else:
            self.crossed = set(cells)

    def record(self, cells: tuple[Cell, ...], v: Verdict) -> bool:
        """Record verdict ``v`` on the shot at ``cells`` (proved as far as the rules allow, and
        of the right shape); whether anything was hit. Crosses out what the rules cross out."""
        r = self.rules
        cols = r.cols
        fired = self.fired
        results = v.results
        if (
            len(results) == 1
            and len(cells) == 1
            and v.total is None
            and not v.sunk
            and not r.crossed_out
            and not self.crossed
        ):
            # A single shot that sinks nothing, under rules that cross nothing out: nearly every
            # verdict. What the general way below does for it, without its lists and loops.
            res = results[0]
            if res.sunk is None:
                c, result = cells[0], res.result
                fired[c.row * cols + c.col] = result
                if result is _MISS:
                    return False
                self.hits += 1
                return True
        sinkings: list[tuple[Cell | None, SunkClaim]] = []
        if v.total is not None:
            for c in cells:
                fired[c.index(cols)] = None
            self.hits += v.total
            any_hit = v.total > 0
        else:
            # check_shape() made sure: one result per called cell, in call order.
            any_hit = False
            if len(results) != len(cells):
                raise ValueError("one result per called cell")  # zip(..., strict=True)'s check
            # By index rather than zip(..., strict=True), whose keyword doubles its cost.
            for k, c in enumerate(cells):
                res = results[k]
                result = res.result
                fired[c.row * cols + c.col] = result  # c.index(cols), inline: every shot
                if result is not _MISS:
                    self.hits += 1
                    any_hit = True
                    if r.crossed_out:
                        self.cross(x.index(cols) for x in c.corners(r.rows, cols))
                if res.sunk:
                    sinkings.append((c, res.sunk))
        if v.sunk:
            sinkings += [(None, claim) for claim in v.sunk]
        for at, claim in sinkings:
            ship = r.fleet[claim.ship]
            shown = claim.opening.placement.cells(ship.length) if claim.opening else None
            self.sunk[claim.ship] = shown
            if r.crossed_out:
                # An unshown ship is found from the cell that sank it; a salvo reported as a total
                # does not say which cell that was, so nothing round it can be known to be water.
                around = shown or (self._component(at) if at is not None else [])
                for x in around:
                    self.cross(n.index(cols) for n in x.neighbours(r.rows, cols))
        crossed = self.crossed
        if crossed and isinstance(crossed, set):
            crossed.difference_update(fired)
        return any_hit

    def _component(self, start: Cell) -> list[Cell]:
        # No-touch fleets: the hits 8-connected to the sinking cell are exactly that ship.
        r = self.rules
        seen = {start}
        todo = [start]
        while todo:
            c = todo.pop()
            for n in c.neighbours(r.rows, r.cols):
                if n not in seen and self.fired.get(n.index(r.cols)) in (Result.HIT, Result.SUNK):
                    seen.add(n)
                    todo.append(n)
        return sorted(seen)

    def afloat(self) -> int:
        """Ships not yet reported sunk."""
        return len(self.rules.fleet) - len(self.sunk)

    def to_dict(self) -> dict[str, Any]:
        """The public view: fired cells with results, sunk ships, crossed-out cells."""
        cols = self.rules.cols
        return {
            "fired": [[i, r.value if r else None] for i, r in sorted(self.fired.items())],
            "sunk": [
                [k, [c.index(cols) for c in cells] if cells else None]
                for k, cells in sorted(self.sunk.items())
            ],
            "crossed": sorted(self.crossed),
            "hits": self.hits,
        }
