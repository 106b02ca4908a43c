"""Cases on the seeds' presets and the decisions of spec 7.3, and on how a game ends in setup
(8.9): 003's badge, 004's reveal in custody mode, a resignation before the fleets are down,
and the fleets shown after a resignation in firing (7.3 decision 20).

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from typing import Any

from seabattle.protocol import messages as m
from seabattle.protocol.commit import Reveal
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import rules_from_dict

from .probe import NOISE, RULES, Table, _short
from .results import CaseFailed, Trace
from .suite import Suite, case, fire_and_answer
from .teams import _member

#: 004's preset on a small board (its name is ``sea-battle+custom``: it descends from it, 7.3
#: decision 19), so that a whole game takes a few shots.
SEA_BATTLE = {"preset": "sea-battle", "rows": 6, "cols": 6, "fleet": [["Boat", 2], ["Raft", 1]]}


async def _seated(s: Suite, t: Trace, rules: dict[str, Any], mode: str) -> Table:
    """Two players in a new match of ``rules`` (a partial form), up to ``game``."""
    a = await s.player(t, "A")
    b = await s.player(t, "B")
    mid = (await a.ok(lambda i: m.Create(i, rules, mode, False))).get("match")
    if not isinstance(mid, bytes):
        raise CaseFailed(f"create answered no match id: {_short(mid)}")
    await b.ok(lambda i: m.Join(i, mid, None))
    for p in (a, b):
        p.sit(mid)
    starts = {}
    for p in (a, b):
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        starts[p.name] = st
    seats = [a, b] if starts["A"].seat == 0 else [b, a]
    built = rules_from_dict(starts["A"].rules)
    tb = Table(mid, built, mode, seats, [starts[p.name] for p in seats])
    for p in seats:
        g = await p.expect(m.GameStart)
        assert isinstance(g, m.GameStart)
        tb.first = g.first if g.first is not None else 0
    return tb


@case(
    "7.3-badge",
    "7.3 Decisions on the seeds' ambiguities",
    "003's badge switches on with its house rule",
    "a referee that builds a partial form (7.4) whose `preset` is `six-ship`, and that sets "
    "`hit_again` but not `hit_again_shown`, MUST set `hit_again_shown` to the value of "
    "`hit_again`",
    'create{rules: {"preset": "six-ship", "hit_again": true}}: start.rules has hit_again and '
    "hit_again_shown both true",
)
async def _badge(s: Suite, t: Trace) -> None:
    tb = await _seated(s, t, {"preset": "six-ship", "hit_again": True}, "blind")
    for p, st in zip(tb.seats, tb.starts, strict=True):
        got = {k: st.rules.get(k) for k in ("hit_again", "hit_again_shown")}
        if got != {"hit_again": True, "hit_again_shown": True}:
            raise CaseFailed(f"{p.name}: start.rules holds {got}: the house rule shows no badge")
    t.notes.append(f"start.rules.name {tb.starts[0].rules.get('name')!r}, badge on")


@case(
    "7.3-custody-reveal",
    "7.3 Decisions on the seeds' ambiguities",
    "004 in custody: no player is sent the other's fleet",
    'under a rule set that descends from `sea-battle` (004: "A square you have not fired at is a '
    "square you know nothing about\"), a referee in custody mode MUST send each seat's "
    "`revealed` to that seat's own player (every member, in team play) and to spectators, and "
    "MUST NOT send it to the other seat",
    "a custody sea-battle game to its end: reveal_now, then each player's own revealed only, "
    "game_over fleet_sunk",
)
async def _custody_reveal(s: Suite, t: Trace) -> None:
    tb = await _seated(s, t, SEA_BATTLE, "custody")
    await s.commit_both(tb, t)
    winner = tb.first
    # The first mover sinks the other fleet; the other calls water.
    targets = [[*tb.ship_cells(1)], [*tb.ship_cells(0)]]
    targets[1 - winner] = tb.water(winner)
    mover, n = winner, 0
    while True:
        n += 1
        v = await fire_and_answer(tb, mover, targets[mover].pop(0), n)
        if v.next is None:
            break
        mover = v.next
    if mover != winner:
        raise CaseFailed(f"seat {mover} ended firing; seat {winner} had every hit")
    for seat, p in enumerate(tb.seats):
        await p.expect(m.RevealNow)
        shown = []
        while True:
            msg = await p.expect(m.Revealed, m.GameOver)
            if isinstance(msg, m.GameOver):
                break
            assert isinstance(msg, m.Revealed)
            shown.append(msg.seat)
        if shown != [seat]:
            who = "the winner" if seat == winner else "the loser"
            raise CaseFailed(f"{p.name} ({who}, seat {seat}) was sent revealed of seats {shown}")
        if (msg.outcome.get("winner"), msg.outcome.get("reason")) != (winner, "fleet_sunk"):
            raise CaseFailed(f"{p.name}: game_over {_short(msg.outcome)}")
    t.notes.append("each player was sent its own seat's reveal alone")


@case(
    "8.9-setup-end",
    "8.9 The end of a game",
    "A game that ends in setup shows its end and nothing more",
    "ends at once: the referee sends `game_over{outcome}` and nothing more for that game. There is "
    "no `reveal_now` and no `revealed`, and no reveal is owed [...] its `roots` hold each "
    "committed root and `nil` for a seat that had not committed",
    "seat 0 commits, seat 1 resigns: committed, game_over{winner: 0, reason: resigned}, no "
    "reveal_now or revealed; match_over's record holds roots [root, nil], ends with the resign "
    "and verifies",
)
async def _setup_end(s: Suite, t: Trace) -> None:
    tb = await _seated(s, t, RULES, "blind")
    a, b = tb.seats
    await a.place(s.rng)
    await b.send(m.Resign(tb.match, 1))
    root: bytes | None = None
    for p in (a, b):
        while True:
            msg = await p.expect(m.Committed, m.GameOver)  # anything else fails the case
            if isinstance(msg, m.Committed):
                root = msg.root
                continue
            assert isinstance(msg, m.GameOver)
            break
        if (msg.outcome.get("winner"), msg.outcome.get("reason")) != (0, "resigned"):
            raise CaseFailed(f"{p.name}: game_over {_short(msg.outcome)}")
    records = []
    for p in (a, b):
        mo = await p.expect(m.MatchOver)
        assert isinstance(mo, m.MatchOver)
        records.append(mo.record)
    rec = load_record(records[0])
    game = rec["games"][0]
    if game["roots"] != [root, None]:
        raise CaseFailed(f"the record's roots are {_short(game['roots'])}, not [root, nil]")
    if game["transcript"][-1] != {"in": "resign", "seat": 1}:
        raise CaseFailed(f"the record's game ends with {_short(game['transcript'][-1])}")
    if any(e.get("in") == "reveal" for e in game["transcript"]):
        raise CaseFailed("the record holds a reveal of a game that ended in setup")
    report = verify_record({"record": rec, "sigs": []})
    problems = [p for p in report.problems if not p.startswith("missing_signature")]
    if problems:
        raise CaseFailed(f"the record does not verify: {problems[0]}")
    t.notes.append("game_over resigned, no reveal; the record verifies")


@case(
    "7.3-courtesy-reveal",
    "7.3 Decisions on the seeds' ambiguities",
    "After a resignation in firing, each blind seat's fleet is shown to the other",
    "In **blind mode** each seat MAY send its ordinary `reveal{match, game, reveal}` (10.8) for "
    "that game after its `game_over`; the referee checks it (5.4) and relays it as `revealed` to "
    "both players and spectators. [...] Malformed, or failing steps 1 to 4 of 10.8 (it does not "
    "open the seat's commitment, or its fleet breaks the rules): `BAD_REVEAL`.",
    "both commit, seat 1 - first resigns: game_over resigned; a reveal with a wrong secret "
    "BAD_REVEAL; each seat's true reveal: revealed of both seats (fault nil) to both, then "
    "match_over, whose record holds no reveal and verifies",
)
async def _courtesy_reveal(s: Suite, t: Trace) -> None:
    tb = await _seated(s, t, RULES, "blind")
    await s.commit_both(tb, t)
    quitter = 1 - tb.first
    await tb.seats[quitter].send(m.Resign(tb.match, 1))
    for p in tb.seats:
        msg = await p.expect(m.GameOver)
        assert isinstance(msg, m.GameOver)
        if (msg.outcome.get("winner"), msg.outcome.get("reason")) != (tb.first, "resigned"):
            raise CaseFailed(f"{p.name}: game_over {_short(msg.outcome)}")
    a = tb.seats[0]
    forged = Reveal(tb.committed[0].fleet, bytes(32)).to_dict()  # not the secret committed to
    await a.send(m.RevealMsg(tb.match, 1, forged))
    await a.expect_error(ErrorCode.BAD_REVEAL)
    for p in tb.seats:
        await p.give(m.RevealMsg)  # the honest seat's courtesy reveal, owed since game_over
    for p in tb.seats:
        seen = set()
        for _ in range(2):
            rv = await p.expect(m.Revealed)
            assert isinstance(rv, m.Revealed)
            if rv.fault is not None or rv.reveal != tb.committed[rv.seat].reveal().to_dict():
                raise CaseFailed(f"{p.name}: revealed of seat {rv.seat} is not what it sent")
            seen.add(rv.seat)
        if seen != {0, 1}:
            raise CaseFailed(f"{p.name}: revealed of seats {sorted(seen)}, not both")
    mo = await a.expect(m.MatchOver)
    assert isinstance(mo, m.MatchOver)
    rec = load_record(mo.record)
    if any(e.get("in") == "reveal" for e in rec["games"][0]["transcript"]):
        raise CaseFailed("the record holds a courtesy reveal: the transcript closed at game_over")
    report = verify_record({"record": rec, "sigs": []})
    problems = [p for p in report.problems if not p.startswith("missing_signature")]
    if problems:
        raise CaseFailed(f"the record does not verify: {problems[0]}")
    t.notes.append("both fleets shown after the resignation; the record holds no reveal")


#: Two teams of two where a hit shoots again, on a small board, refereed in custody.
TEAM_HIT_AGAIN = {**RULES, "team_size": 2, "hit_again": True, "name": "conformance-turns"}


@case(
    "6.8-turn-again",
    "6.8 Team play",
    "A hit that shoots again is announced by a turn too",
    "Each time a shot is to be called, the referee sends every player and spectator `turn{match, "
    "game, seat, member}`, after the message that caused it: after `firing`, after every "
    "`verdict` with a `next`, after every `shot_lost`, and so also when the mover and its caller "
    "stay the same (a hit under `hit_again`)",
    "teams of two, hit_again: the first caller hits; every member gets the verdict (next: the "
    "same seat), then turn naming the same seat and member",
)
async def _turn_again(s: Suite, t: Trace) -> None:
    a, b, c, d = [await _member(s, t, n) for n in "ABCD"]
    created = await a.ok(lambda i: m.Create(i, TEAM_HIT_AGAIN, "custody", False))
    mid, codes = created.get("match"), created.get("teams")
    if not isinstance(mid, bytes) or not isinstance(codes, list) or len(codes) != 2:
        raise CaseFailed(f"create of team rules answered {_short(created)}")
    for p, code in ((b, codes[0]), (c, codes[1]), (d, codes[1])):
        await p.send(m.Join(p.next_id(), None, code))
    for p in (a, b, c, d):
        p.sit(mid)
    first = await a.expect(m.Start)
    assert isinstance(first, m.Start)
    c, d = (c, d) if first.players[1] == c.player else (d, c)
    for p in (b, c, d):
        await p.expect(m.Ok)  # each join is answered when the match is full (6.8)
        await p.expect(m.Start)
    for p in (a, b, c, d):
        await p.expect(m.GameStart, noise=(*NOISE, m.Team))
    for p in (a, c):
        await p.place(s.rng)  # the captains place (custody)
    everyone = (a, b, c, d)
    turn = None
    for p in everyone:
        turn = await p.expect(m.Turn, noise=(*NOISE, m.Committed, m.Firing))
    assert isinstance(turn, m.Turn)
    shooter = (a, c)[turn.seat]
    target = (c, a)[turn.seat].seated().committed
    assert target is not None and target.rules is not None
    ship = target.fleet.ship_cells(target.rules)[0][0]
    await shooter.play(shooter.seated().fire(ship, shooter.next_id()))
    for p in everyone:
        v = await p.expect(m.VerdictMsg, noise=(*NOISE, m.ShotCalled))
        assert isinstance(v, m.VerdictMsg)
        if v.next != turn.seat:
            raise CaseFailed(f"{p.name}: verdict.next {v.next} after a hit under hit_again")
        again = await p.expect(m.Turn)
        assert isinstance(again, m.Turn)
        if (again.seat, again.member) != (turn.seat, turn.member):
            raise CaseFailed(f"{p.name}: turn names {again.seat}/{again.member} after the hit")
    t.notes.append("a hit under hit_again: verdict, then turn naming the same caller")
