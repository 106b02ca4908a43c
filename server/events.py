"""Game events of the core turned into the messages players and spectators receive
(``spec/protocol.md`` 5.6, steps 5-11). Every message here is public: spectators get the same
ones.
"""

from __future__ import annotations

import functools

from seabattle.protocol import messages as m
from seabattle.protocol.game import Event, Game
from seabattle.protocol.grid import Cell

__all__ = ["event_message"]

# Labels of called cells: a grid has few cells, and every shot and verdict names its own.
_label = functools.lru_cache(maxsize=4096)(Cell.label)


def event_message(g: Game, mid: bytes, ev: Event) -> m.Message | None:
    """The message that announces ``ev`` of game ``g`` in match ``mid`` (``None``: unknown kind)."""
    n = g.number
    if ev.kind == "committed":
        assert ev.seat is not None and ev.data is not None
        return m.Committed(mid, n, ev.seat, ev.data["root"])
    if ev.kind == "firing":
        assert ev.seat is not None
        # Both commitments go to both sides, so each client checks the openings it is shown.
        coms = tuple(c.to_dict() for c in g.commitments if c is not None)
        return m.Firing(mid, n, ev.seat, coms)
    if ev.kind == "shot":
        assert ev.shot is not None
        sh = ev.shot
        return m.ShotCalled(mid, n, sh.n, sh.seat, tuple(map(_label, sh.cells)), sh.radar)
    if ev.kind == "verdict":
        assert ev.shot is not None and ev.verdict is not None
        sh = ev.shot
        labels = tuple(map(_label, sh.cells))
        return m.VerdictMsg(mid, n, sh.n, sh.seat, labels, sh.radar, ev.verdict.to_dict(), ev.seat)
    if ev.kind == "shot_lost":
        assert ev.seat is not None and ev.data is not None
        return m.ShotLost(mid, n, ev.seat, ev.data["why"], ev.data["next"])
    if ev.kind == "reveal":
        assert ev.outcome is not None and ev.outcome.winner is not None
        return m.RevealNow(mid, n, ev.outcome.winner)
    if ev.kind == "revealed":
        assert ev.seat is not None and ev.data is not None
        rv = g.reveals[ev.seat]
        return m.Revealed(mid, n, ev.seat, rv.to_dict() if rv else {}, ev.data["fault"])
    if ev.kind == "over":
        assert ev.outcome is not None
        return m.GameOver(mid, n, ev.outcome.to_dict())
    return None
