"""Cases on lean sessions (``spec/protocol.md`` 5.7): no copy of a session's own moves.

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from seabattle.protocol import messages as m
from seabattle.protocol.session import LEAN

from .probe import Table
from .results import CaseFailed, NotImplementedCase, Trace
from .suite import Suite, case, expect_game_over, expect_shot, expect_verdict


async def _lean_table(s: Suite, t: Trace, mode: str) -> Table:
    tb = await s.table(t, mode, caps=(LEAN,))
    for p in tb.seats:
        assert p.welcome is not None
        if LEAN not in p.welcome.caps:
            raise NotImplementedCase("the server does not agree the capability lean (optional)")
    await s.commit_both(tb, t)
    return tb


@case(
    "5.7-lean-blind",
    "5.7 Lean sessions",
    "No copies of a lean session's own moves (blind)",
    "In a lean session the referee MUST NOT send: [...] the `shot` that a `fire` or `radar` of "
    "this session was numbered as [...] the `verdict` on an `answer` of this session",
    "both sessions lean: the shooter gets the verdict and no shot; the defender gets the shot and "
    "no verdict, and may fire at once after its answer",
)
async def _lean_blind(s: Suite, t: Trace) -> None:
    tb = await _lean_table(s, t, "blind")
    mover, other = tb.first, 1 - tb.first
    pm, po = tb.seats[mover], tb.seats[other]
    a = tb.water(other)[0]
    await pm.play(pm.seated().fire(a, pm.next_id()))
    t.expect("the defender gets shot n=1; the shooter no copy of it")
    await expect_shot(po, 1, mover, a)
    # A miss passes the turn (classic): the defender's lean seat knows it moves next (it applied
    # its own answer as it gave it), and its player fires at once after the answer.
    b = tb.water(mover)[0]
    verdict = await po.answer()
    await po.play(po.seated().fire(b, po.next_id()))
    t.expect("the shooter gets verdict n=1 (next: the defender), then shot n=2")
    v = await expect_verdict(pm, tb, 1, mover, a, verdict)
    if v.next != other:
        raise CaseFailed(f"{pm.name}: verdict n=1 names next={v.next}, not the defender")
    await expect_shot(pm, 2, other, b)
    await pm.answer()
    t.expect("the second shooter gets verdict n=2 and no copy of verdict n=1 or of shot n=2")
    await expect_verdict(po, tb, 2, other, b)
    await pm.quiet()
    await po.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, mover, "resigned")


@case(
    "5.7-lean-custody",
    "5.7 Lean sessions",
    "No shot to a lean session in custody mode",
    "In a lean session the referee MUST NOT send: [...] in custody mode, any `shot`: the "
    "referee answers at once, so the `verdict` follows the `shot` in the same flight and "
    "repeats it",
    "both sessions lean: each gets the verdict on shot n=1 and no shot",
)
async def _lean_custody(s: Suite, t: Trace) -> None:
    tb = await _lean_table(s, t, "custody")
    mover, other = tb.first, 1 - tb.first
    pm = tb.seats[mover]
    a = tb.water(other)[0]
    await pm.play(pm.seated().fire(a, pm.next_id()))
    t.expect("both seats get verdict n=1 and no shot")
    for q in tb.seats:
        await expect_verdict(q, tb, 1, mover, a)
    for q in tb.seats:
        await q.quiet()
    await tb.seats[other].send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, mover, "resigned")
