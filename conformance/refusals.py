"""Cases on game inputs the referee refuses or catches: the receiver rules of game inputs
(``spec/protocol.md`` 5.4), a forged opening (10.7), and custody play (6.1).

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

import os
from dataclasses import replace

from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.verdict import Shot, Verdict

from .results import CaseFailed, NotImplementedCase, Trace
from .suite import Suite, case, expect_game_over, fire_and_answer


@case(
    "5.4-refusals",
    "5.4 Receiver rules: game inputs",
    "Refused shots change nothing",
    "the referee MUST refuse: a label that is not a cell of the grid `OFF_BOARD`; not the "
    "sender's turn `NOT_YOUR_TURN`; [...] a cell fired at already `ALREADY_FIRED` [...] An input "
    "that is refused changes nothing.",
    "error{NOT_YOUR_TURN|OFF_BOARD|ALREADY_FIRED, ref: seq}; no shot in between; the next shot "
    "gets the next n",
)
async def _refusals(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    other = 1 - mover
    pm, po = tb.seats[mover], tb.seats[other]
    seq = po.next_id()
    await po.send(m.Fire(tb.match, 1, ("A1",), 0, seq))
    await po.expect_error(ErrorCode.NOT_YOUR_TURN, seq)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, ("Z99",), 0, seq))
    await pm.expect_error(ErrorCode.OFF_BOARD, seq)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, ("G1",), 0, seq))  # column G on a 6-column grid
    await pm.expect_error(ErrorCode.OFF_BOARD, seq)
    t.expect("the opponent saw no shot: the refused inputs changed nothing")
    await po.quiet()
    a = tb.water(other)[0]
    await fire_and_answer(tb, mover, a, 1)
    b = tb.water(mover)[0]
    await fire_and_answer(tb, other, b, 2)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, (a.label().lower(),), 0, seq))
    await pm.expect_error(ErrorCode.ALREADY_FIRED, seq)
    await po.quiet()
    c = tb.water(other)[1]
    await fire_and_answer(tb, mover, c, 3)
    await po.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, mover, "resigned")


@case(
    "5.4-seq-idempotent",
    "5.4 Receiver rules: game inputs",
    "A resent shot applies once",
    "A `fire` or `radar` whose `seq` equals the `seq` of an input from the same seat already "
    "applied in this game MUST be ignored: no error, no state change.",
    "no error and no second shot for the resent fire",
)
async def _seq(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    pm = tb.seats[mover]
    cell = tb.water(1 - mover)[0]
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, (cell.label(),), 0, seq))
    await pm.send(m.Fire(tb.match, 1, (cell.label(),), 0, seq))
    for q in tb.seats:
        await q.expect(m.ShotCalled)
    t.expect("nothing but the one shot before the pong")
    await pm.quiet()
    await tb.seats[1 - mover].quiet()
    await pm.send(m.Resign(tb.match, 1))


@case(
    "5.4-routing",
    "5.4 Receiver rules: game inputs",
    "Inputs to the wrong match, game or trust mode",
    "The referee MUST refuse, in this order: an unknown match with `NO_SUCH_MATCH`; a sender whose "
    "session holds no seat in it with `NOT_ALLOWED`; [...] a `game` that is not the current game's "
    "number (an earlier, finished game included) with `WRONG_PHASE`; an input that the match's "
    "trust mode does not use [...] with `UNEXPECTED_MESSAGE`",
    "NO_SUCH_MATCH, NOT_ALLOWED, WRONG_PHASE, UNEXPECTED_MESSAGE (commit and coin in custody), "
    "BAD_MESSAGE (a 31-byte secret)",
)
async def _routing(s: Suite, t: Trace) -> None:
    tb = await s.table(t, "custody")
    p0 = tb.seats[0]
    stranger = await s.player(t, "X")
    seq = stranger.next_id()
    await stranger.send(m.Fire(os.urandom(16), 1, ("A1",), 0, seq))
    await stranger.expect_error(ErrorCode.NO_SUCH_MATCH, seq)
    seq = stranger.next_id()
    await stranger.send(m.Fire(tb.match, 1, ("A1",), 0, seq))
    await stranger.expect_error(ErrorCode.NOT_ALLOWED, seq)
    # Seat 0's own placement, altered on its way: for another game, as a commit (a blind-mode
    # input), with a secret a byte short.
    seat = p0.seated()
    assert seat.rules is not None
    made = seat.place(random_fleet(seat.rules, s.rng), os.urandom(32)).sends
    place, c = made[0], seat.committed
    assert isinstance(place, m.Place) and c is not None
    await p0.send(replace(place, game=2))
    await p0.expect_error(ErrorCode.WRONG_PHASE, None)
    await p0.send(m.Commit(tb.match, 1, c.commitment.to_dict(), place.sig))
    await p0.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p0.send(m.Coin(tb.match, 1, os.urandom(32), None))
    await p0.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p0.send(replace(place, secret=place.secret[:31]))
    await p0.expect_error(ErrorCode.BAD_MESSAGE, None)
    t.expect("nothing changed: the other seat saw no committed")
    await tb.seats[1].quiet()
    await p0.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")


@case(
    "10.7-false-proof",
    "10.7 What is proved when",
    "A forged opening loses the game",
    "if any check fails, the game ends at once, `false_proof`, the shooter wins (no `error` is "
    "sent: the outcome is in `game_over`)",
    "game_over{winner: shooter, reason: false_proof} to both, then match_over",
)
async def _false_proof(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    liar = 1 - mover
    boat = tb.committed[liar].fleet.ship_cells(tb.rules)[0][0]  # a cell of the 2-cell boat
    tb.seats[liar].seated().tamper = _claim_water
    pm = tb.seats[mover]
    await pm.play(pm.seated().fire(boat, pm.next_id()))
    for q in tb.seats:
        await q.expect(m.ShotCalled)
    await tb.seats[liar].answer()
    await expect_game_over(tb.seats, mover, "false_proof")
    for q in tb.seats:
        await q.expect(m.MatchOver)


def _claim_water(shot: Shot, v: Verdict) -> Verdict:
    """The liar's answer: "miss", with an opening that claims the cell is empty, so that the
    leaf cannot match."""
    d = v.to_dict()
    first = d["results"][0]
    d["results"] = [dict(first, r="miss", sunk=None, open=dict(first["open"], occ=False))]
    return Verdict.from_dict(d)


@case(
    "6.1-custody",
    "6.1 Matches",
    "A custody game",
    "`custody`: players hand fleet and secret to the referee (`place`), which answers and reveals "
    "for them with the same commitments, openings and reveal as in blind mode.",
    "ILLEGAL_FLEET (ref nil) for an overlapping fleet; then verdicts with valid openings, revealed "
    "x2, game_over fleet_sunk",
)
async def _custody(s: Suite, t: Trace) -> None:
    tb = await s.table(t, "custody")
    if tb.mode != "custody":
        raise NotImplementedCase("custody mode")
    p0 = tb.seats[0]
    await p0.send(m.Place(tb.match, 1, ([0, 0, False], [0, 0, False]), os.urandom(32), bytes(64)))
    await p0.expect_error(ErrorCode.ILLEGAL_FLEET, None)
    await s.commit_both(tb, t)
    targets = [tb.ship_cells(1), tb.ship_cells(0)]
    mover, n = tb.first, 0
    while True:
        n += 1
        v = await fire_and_answer(tb, mover, targets[mover].pop(0), n)
        if v.next is None:
            break
        mover = v.next
    for q in tb.seats:
        await q.expect(m.RevealNow)
        for _ in range(2):
            rv = await q.expect(m.Revealed)
            assert isinstance(rv, m.Revealed)
            if rv.reveal != tb.committed[rv.seat].reveal().to_dict() or rv.fault is not None:
                raise CaseFailed(f"{q.name}: the referee's reveal of seat {rv.seat} is not ours")
    await expect_game_over(tb.seats, mover, "fleet_sunk")
