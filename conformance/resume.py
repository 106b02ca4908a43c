"""Cases of ``spec/protocol.md`` 4.7, resume: a bad token, and a seat coming back to a running
game.

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

import os

from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode

from .game import _check_view
from .probe import describe
from .results import CaseFailed, Trace
from .suite import Suite, case, expect_game_over


@case(
    "4.7-bad-resume-token",
    "4.7 Resume",
    "An unknown resume token",
    "The server MUST refuse a token that is unknown, expired or issued to another key with "
    "`BAD_RESUME_TOKEN` (the handshake returns to state `auth`",
    "error{BAD_RESUME_TOKEN}; then auth with resume nil -> authed",
)
async def _bad_token(s: Suite, t: Trace) -> None:
    other = await s.player(t, "B")
    p = await s.connect(t, "A")
    await p.hello()
    await p.send(p.auth_message(os.urandom(32)))
    await p.expect_error(ErrorCode.BAD_RESUME_TOKEN, None)
    await p.send(p.auth_message(other.token))  # a real token, but another key's
    await p.expect_error(ErrorCode.BAD_RESUME_TOKEN, None)
    await p.send(p.auth_message(None))
    await p.expect(m.Authed)


@case(
    "4.7-resume",
    "4.7 Resume",
    "Resume with a token gets a snapshot",
    "for every running match in which the player holds a seat, the server sends `start` followed "
    "by `snapshot{match, seat, view}`, then the live events from that point. [...] The opponent "
    "is sent `opponent{present: true, grace: 0}`.",
    "opponent{present: false} on the drop; after auth{resume}: authed, start, snapshot{seat}; "
    "opponent{present: true}; the resumed session plays the seat",
)
async def _resume(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    old = tb.seats[0]
    other = tb.seats[1]
    await old.aclose()
    st = await other.expect(m.OpponentStatus, noise=(m.Clock, m.Ping, m.Pong))
    assert isinstance(st, m.OpponentStatus)
    if (st.match, st.seat, st.present) != (tb.match, 0, False):
        raise CaseFailed(f"expected opponent{{seat 0, present false}}, got {describe(st)}")
    p = await s.connect(t, "A'")
    p.key, p.pub = old.key, old.pub
    p.seat, old.seat = old.seat, None  # the seat goes on, on the new connection
    p.seated().epoch += 1
    a = await p.login(resume=old.token)
    if a.player != old.player:
        raise CaseFailed("the resumed session is another player")
    start = await p.expect(m.Start)
    assert isinstance(start, m.Start)
    if start.match != tb.match or start.seat != 0:
        raise CaseFailed(f"start after resume: {describe(start)}")
    snap = await p.expect(m.Snapshot)
    assert isinstance(snap, m.Snapshot)
    if snap.match != tb.match or snap.seat != 0:
        raise CaseFailed(f"snapshot names match {snap.match.hex()} seat {snap.seat}")
    v = snap.view
    _check_view(v, t, spectator=False)
    if v.get("phase") != "firing" or v.get("committed") != [True, True]:
        raise CaseFailed(f"snapshot phase {v.get('phase')!r}, committed {v.get('committed')}")
    if v.get("turn") != tb.first:
        raise CaseFailed(f"snapshot turn {v.get('turn')}, firing.first {tb.first}")
    if v.get("roots") != [tb.committed[0].root, tb.committed[1].root]:
        raise CaseFailed("snapshot roots are not the committed roots")
    st = await other.expect(m.OpponentStatus, noise=(m.Clock, m.Ping, m.Pong))
    assert isinstance(st, m.OpponentStatus)
    if not st.present:
        raise CaseFailed("the opponent was not told the seat came back")
    tb.seats[0] = p
    await p.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")
