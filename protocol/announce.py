"""What each game event is on the wire: the message every player and spectator receives
(``spec/protocol.md`` 5.6), and which seat waits for it.

Kept apart from the referee that sends them: this is the one place where a
:data:`~.inputs.GameEvent` becomes a :class:`~.messages.Message`, dispatched with ``match`` and
:func:`typing.assert_never`, so that a new event is a type error here until it has its message.
"""

from __future__ import annotations

import functools
from typing import assert_never

from . import messages as m
from .game import Game
from .grid import Cell
from .inputs import (
    Committed,
    FiringBegan,
    GameEvent,
    GameOver,
    RevealDue,
    Revealed,
    ShotCalled,
    ShotLost,
    VerdictGiven,
)

__all__ = ["announce"]


def announce(g: Game, match_id: bytes, ev: GameEvent) -> tuple[m.Message, int | None]:
    """The public message that tells of ``ev`` in game ``g``, and the seat that waits for it
    (a called shot's defender owes the verdict; a verdict answers its shooter), if any."""
    n = g.number
    match ev:
        case ShotCalled(shot=sh):
            labels = _labels(sh.cells)
            member = _member(g)
            return m.ShotCalled(match_id, n, sh.n, sh.seat, member, labels, sh.radar), 1 - sh.seat
        case VerdictGiven(shot=sh, verdict=v, next=nxt):
            labels = _labels(sh.cells)
            member = _member(g)
            msg = m.VerdictMsg(
                match_id, n, sh.n, sh.seat, member, labels, sh.radar, v.to_dict(), nxt
            )
            return msg, sh.seat
        case Committed(seat=seat, root=root):
            return m.Committed(match_id, n, seat, root), None
        case FiringBegan(first=first):
            # Both commitments go to both sides, so each client checks the openings it is shown.
            coms = tuple(c.to_dict() for c in g.commitments if c is not None)
            return m.Firing(match_id, n, first, coms), None
        case ShotLost(seat=seat, why=why, next=nxt):
            # A wasted repeat is the fire just entered; a clock loss calls nothing (spec 5.6).
            last = g.transcript[-1] if g.transcript else {}
            cells = tuple(last["cells"]) if why == "repeat" and last.get("in") == "fire" else ()
            return m.ShotLost(match_id, n, seat, why, cells, nxt), None
        case RevealDue(provisional=o):
            assert o.winner is not None
            return m.RevealNow(match_id, n, o.winner), None
        case Revealed(seat=seat, reveal=rv, fault=fault):
            return m.Revealed(match_id, n, seat, rv.to_dict(), fault), None
        case GameOver(outcome=o):
            return m.GameOver(match_id, n, o.to_dict()), None
        case _:
            assert_never(ev)


def _member(g: Game) -> int:
    """The team member who called the shot being told of: its ``fire`` or ``radar`` entry is the
    last of the transcript (a called shot) or the one before its answer (a verdict)."""
    if g.rules.team_size == 1:
        return 0  # the only member (a game accepts no other): no entry to decode on every shot
    t = g.transcript
    # One entry at a time: the one before a shot's fire is a commit at the first shot, costly.
    for i in range(len(t) - 1, max(len(t) - 3, -1), -1):
        e = t[i]
        if e["in"] == "fire" or e["in"] == "radar":
            return int(e["member"])
    return 0


def _labels(cells: tuple[Cell, ...]) -> tuple[str, ...]:
    if len(cells) == 1:
        return (_label(cells[0]),)
    return tuple(map(_label, cells))


# A grid has few cells, and every shot names its own.
_label = functools.lru_cache(maxsize=4096)(Cell.label)
