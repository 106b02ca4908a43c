"""The typed events a :class:`~.seat.Seat` gives its player, in match order.

Events are frozen: they report what the seat saw and checked, and the player (a script, a bot, a
screen) reacts to them. The client's match handle yields them as they come, with one event of its
own (``Reconnecting``, a connection's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import messages as m
from .errors import ErrorCode
from .fleet import Fleet
from .game import Game
from .grid import Cell
from .verdict import Result, Verdict

__all__ = [
    "FleetShown",
    "GameEnded",
    "GameStarted",
    "IncomingShot",
    "Info",
    "LieDetected",
    "MatchEnded",
    "MatchEvent",
    "Refused",
    "Resumed",
    "ShotResult",
    "YourTurn",
]


@dataclass(frozen=True, slots=True)
class MatchEvent:
    """Base of every event a seat gives its player."""


@dataclass(frozen=True, slots=True)
class GameStarted(MatchEvent):
    """Game ``game`` of the match begins; place a fleet for it (``first`` may not be known yet)."""

    game: int
    first: int | None


@dataclass(frozen=True, slots=True)
class YourTurn(MatchEvent):
    """It is our move: call ``count`` cells (or the radar, when ``radar`` is still available)."""

    game: int
    count: int
    radar: bool


@dataclass(frozen=True, slots=True)
class ShotResult(MatchEvent):
    """The checked verdict on our shot ``n`` (``crossed``: cells the rules now cross out)."""

    game: int
    n: int
    cells: tuple[Cell, ...]
    radar: bool
    verdict: Verdict
    crossed: tuple[Cell, ...] = ()

    @property
    def results(self) -> list[Result]:
        """Per-cell results (empty for salvo totals and radar)."""
        return [r.result for r in self.verdict.results]

    @property
    def hit(self) -> bool:
        """Whether the shot found a ship: a cell hit or sunk, or a salvo total above zero."""
        v = self.verdict
        return any(r.result is not Result.MISS for r in v.results) or bool(v.total)

    @property
    def sunk(self) -> tuple[int, ...]:
        """The ships the shot sank, by number in the rules' fleet (as far as the rules show)."""
        v = self.verdict
        return tuple(r.sunk.ship for r in v.results if r.sunk is not None) + tuple(
            s.ship for s in v.sunk
        )


@dataclass(frozen=True, slots=True)
class IncomingShot(MatchEvent):
    """The opponent's shot ``n`` at us and its verdict (ours in blind mode, the referee's else)."""

    game: int
    n: int
    cells: tuple[Cell, ...]
    radar: bool
    verdict: Verdict | None


@dataclass(frozen=True, slots=True)
class Refused(MatchEvent):
    """The server refused one of our moves: registry ``code`` and its message; we keep the move."""

    code: int
    msg: str

    @property
    def slug(self) -> str:
        """The error's lower-case name, e.g. ``already_fired``."""
        try:
            return str(ErrorCode(self.code).slug)
        except ValueError:
            return str(self.code)


@dataclass(frozen=True, slots=True)
class LieDetected(MatchEvent):
    """``seat`` lied or cheated (``None``: the server's relay itself was inconsistent).

    ``source`` is ``"mirror"`` when our own game mirror caught it from the proofs it received, and
    ``"referee"`` when the referee ended the game for it without relaying the false verdict (the
    signed record then holds the proof: ``seabattle verify`` replays it).
    """

    game: int
    seat: int | None
    detail: str
    source: str = "mirror"


@dataclass(frozen=True, slots=True)
class GameEnded(MatchEvent):
    """Game ``game`` ended: ``outcome`` is ``{winner, reason, detail}``; ``won``: did we win.

    ``mirror`` is the game as our mirror saw it (both grids and any reveals; ``None`` when the
    mirror stopped after a lie) and ``fleet`` is the fleet we placed. They travel with the event
    because the handle moves on to the next game while the script is still reading this one.
    """

    game: int
    outcome: dict[str, Any]
    won: bool | None
    mirror: Game | None = field(default=None, compare=False, repr=False)
    fleet: Fleet | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class FleetShown(MatchEvent):
    """``seat``'s ``fleet`` in game ``game``, shown after that game ended before its reveal (a
    resignation, a clock: a courtesy reveal, spec 7.3 decision 20), checked against the seat's
    commitment, the rules and every verdict it gave. It comes after the game's
    :class:`GameEnded` (in blind mode, maybe after the next game began, or after
    :class:`MatchEnded`) and beside the ``revealed`` itself (:class:`Info`). Nothing the record
    holds: the record has no such reveal, and the outcome stands."""

    game: int
    seat: int
    fleet: Fleet


@dataclass(frozen=True, slots=True)
class MatchEnded(MatchEvent):
    """The match ended: the result, rating changes, and the record head we co-signed."""

    result: dict[str, Any]
    ratings: dict[str, Any] | None
    head: bytes
    won: bool | None


@dataclass(frozen=True, slots=True)
class Info(MatchEvent):
    """Any other match message (clock, opponent presence, snapshot, reveals), as received."""

    message: m.Message


@dataclass(frozen=True, slots=True)
class Resumed(MatchEvent):
    """We are back in the match (a new connection, the seat given back): ``view`` is the
    server's snapshot (spec 6.6). Whatever happened while we were away is in it, not in events:
    a script that keeps its own picture of the game rebuilds it from here. ``checked`` is
    ``False`` when the mirror could not follow the game across the gap (its proofs are then
    checked on the whole record, at the end, before co-signing)."""

    game: int | None
    view: dict[str, Any] = field(compare=False)
    checked: bool = True
