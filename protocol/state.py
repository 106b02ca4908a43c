"""The vocabulary of a game: phases, clocks, end reasons, outcomes, events, boards, transitions.

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
from .verdict import Result, Shot, Verdict

__all__ = [
    "TRANSITIONS",
    "Board",
    "Deadline",
    "EndReason",
    "Event",
    "Outcome",
    "Phase",
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


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened, for the shell to tell the players (and to log).

    ``kind`` is one of: ``committed``, ``firing`` (firing begins; ``seat`` moves first),
    ``shot`` (``shot`` called; the defender owes a verdict), ``verdict`` (``shot`` answered by
    ``verdict``; ``seat`` moves next), ``shot_lost`` (``seat``'s shot was lost: clock or repeat;
    ``data["next"]`` moves next), ``reveal`` (the fleet was sunk; both must reveal), ``revealed``
    (``seat`` revealed), ``over`` (``outcome``).
    """

    kind: str
    seat: int | None = None
    shot: Shot | None = None
    verdict: Verdict | None = None
    outcome: Outcome | None = None
    data: dict[str, Any] | None = None


#: Which inputs each phase accepts. Everything else is refused with WRONG_PHASE.
TRANSITIONS: dict[Phase, frozenset[str]] = {
    Phase.SETUP: frozenset({"commit", "set_first", "expire", "resign", "abandon"}),
    Phase.FIRING: frozenset({"fire", "radar", "expire", "resign", "abandon"}),
    Phase.ANSWER: frozenset({"answer", "expire", "resign", "abandon"}),
    Phase.REVEAL: frozenset({"reveal", "expire"}),
    Phase.OVER: frozenset(),
}


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

    @property
    def misses(self) -> int:
        """Number of cells fired at that did not hit, as reported."""
        return len(self.fired) - self.hits

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
