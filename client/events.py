"""The typed events a :class:`~seabattle.client.match.MatchHandle` yields, in match order.

Every event but one is the pure seat's (:mod:`seabattle.protocol.seat_events`), re-exported here:
the seat decides them, the handle passes them on. :class:`Reconnecting` is the connection's.
"""

from __future__ import annotations

from dataclasses import dataclass

from seabattle.protocol.seat_events import (
    FleetShown,
    GameEnded,
    GameStarted,
    IncomingShot,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    Refused,
    Resumed,
    ShotResult,
    YourTurn,
)

__all__ = [
    "FleetShown",
    "GameEnded",
    "GameStarted",
    "IncomingShot",
    "Info",
    "LieDetected",
    "MatchEnded",
    "MatchEvent",
    "Reconnecting",
    "Refused",
    "Resumed",
    "Said",
    "ShotResult",
    "YourTurn",
]


@dataclass(frozen=True, slots=True)
class Reconnecting(MatchEvent):
    """The connection dropped; attempt ``attempt`` to get back in comes after ``delay`` seconds,
    at ``addr`` (``host:port``). The seat is kept by the server for its grace period."""

    attempt: int
    delay: float
    addr: str
    reason: str


@dataclass(frozen=True, slots=True)
class Said(MatchEvent):
    """A line of the match's chat (spec 6.9.4), ours included, in the order the server took
    them: said by ``seat``'s team member ``member`` (0 without team play); ``mine`` when we
    said it. ``line`` holds no control character, but any other code point may be in it."""

    seat: int
    member: int
    line: str
    mine: bool
