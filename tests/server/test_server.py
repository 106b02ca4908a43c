"""The server end to end over real TCP: full matches in both trust modes, every preset, cheats,
clocks, absence and resumption, and the signed record left behind.

Players are driven by :class:`helpers.Bot`, an honest client built on the core's seat machine
(``Seat``); each test then bends one thing (a lie, a missing reveal, a dropped connection).
"""

from __future__ import annotations

import pytest
import trio
from helpers import SMALL, Bot, connect, pair, play_both
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import PRESETS

# -- whole matches -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_full_classic_match_and_its_record(
    server: tuple[str, int], nursery: trio.Nursery, mode: str
) -> None:
    a, b, mid = await pair(server, nursery, {"preset": "classic"}, mode)
    ba, bb = Bot(a, mode, 1), Bot(b, mode, 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == []
    assert ba.result is not None and bb.result is not None
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "fleet_sunk"
    assert ba.result.result["over"] and ba.result.result["winner"] == outcome["winner"]
    assert set(ba.result.ratings or {}) == {a.player, b.player}
    assert ba.result.head == bb.result.head and len(ba.result.head) == 32

    # Both co-sign; the stored record then verifies and carries three signatures.
    for c in (a, b):
        await c.send(m.CoSign(mid, ba.result.head, c.key.sign(ba.result.head)))
    ok = await a.request(m.GetRecord(7, mid))
    assert isinstance(ok, m.Ok) and ok.ref == 7, ok
    signed = load_record(ok.data["record"])
    report = verify_record(signed)
    assert report.ok, report.reason
    assert sorted(s["role"] for s in signed["sigs"]) == ["referee", "seat0", "seat1"]

    ladder = await b.request(m.Ladder(8))
    assert {r["player"] for r in ladder.data["rows"]} == {a.player, b.player}


@pytest.mark.parametrize("name", sorted(PRESETS))
async def test_every_preset_plays_to_the_end_in_custody(
    server: tuple[str, int], nursery: trio.Nursery, name: str
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": name}, "custody")
    ba, bb = Bot(a, "custody", 3), Bot(b, "custody", 4)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == []
    assert ba.result is not None and ba.result.result["over"]
    assert all(o["reason"] == "fleet_sunk" for o in ba.outcomes)


async def test_quick_match_pairs_two_players(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a = await connect(server, nursery)
    b = await connect(server, nursery)
    await a.send(m.Quick(5, SMALL, "custody"))
    await b.send(m.Quick(6, SMALL, "custody"))
    oka, okb = await a.expect(m.Ok), await b.expect(m.Ok)
    assert (oka.ref, okb.ref) == (5, 6) and oka.data["match"] == okb.data["match"]
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None


# -- cheats ---------------------------------------------------------------------------------------


async def test_a_forged_opening_loses_false_proof(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 5), Bot(b, "blind", 6)
    bb.lie = True
    with trio.fail_after(10):
        await play_both(ba, bb)
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "false_proof"
    assert outcome["winner"] == ba.seat


async def test_illegal_fleet_is_refused_then_placed_again(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, mid = await pair(server, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 7), Bot(b, "custody", 8)
    ba.place = False
    await ba.play(until=lambda msg: isinstance(msg, m.GameStart))
    overlapping = ([0, 0, False], [0, 1, False])  # the raft lies on the boat
    await a.send(m.Place(mid, 1, overlapping, bytes(32), bytes(64)))
    err = await a.expect(m.Error)
    assert err.code == ErrorCode.ILLEGAL_FLEET and err.ref is None
    assert ba.committed is not None
    fleet, secret = tuple(ba.committed.fleet.to_list()), ba.committed.secret
    await a.send(m.Place(mid, 1, fleet, secret, ba.committed.seat_sig(a.key)))
    committed = await a.expect(m.Committed)
    assert committed.seat == ba.seat
    await ba.on(committed)  # the bot's seat learns the order the commitments came in
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None and ba.errors == []


# -- clocks ---------------------------------------------------------------------------------------


async def test_missing_reveal_loses_no_reveal(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 9), Bot(b, "blind", 10)
    bb.reveal = False
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "no_reveal" and outcome["winner"] == ba.seat


@pytest.mark.parametrize("placers", [1, 0])
async def test_setup_clock_004(
    server: tuple[str, int],
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    placers: int,
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": "sea-battle"}, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    bb.place = False
    ba.place = placers == 1
    start = trio.current_time()
    await ba.play(until=lambda msg: isinstance(msg, m.GameOver))
    # Virtual time also jumps while the store works in a thread, hence the slack.
    assert 120 <= trio.current_time() - start < 125
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    if placers:
        assert outcome == {
            "winner": ba.seat,
            "reason": "setup_timeout",
            "detail": outcome["detail"],
        }
    else:
        assert outcome["winner"] is None and outcome["reason"] == "nobody_placed"
        assert ba.result is not None and ba.result.result["winner"] is None


# -- absence and resumption -----------------------------------------------------------------------


async def test_absence_beyond_grace_abandons(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    await bb.play(until=lambda msg: isinstance(msg, m.GameStart))
    await b.close()
    status = await ba.play(until=lambda msg: isinstance(msg, m.OpponentStatus))
    assert (status.present, status.grace) == (False, 60)
    start = trio.current_time()
    await ba.play(until=lambda msg: isinstance(msg, m.GameOver))
    assert 60 <= trio.current_time() - start < 62
    await ba.play()
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "abandoned" and outcome["winner"] == ba.seat


async def test_resume_with_token_gets_a_snapshot_and_finishes(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, mid = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 11), Bot(b, "blind", 12)

    async def a_until_firing() -> None:
        await ba.play(until=lambda msg: isinstance(msg, m.Firing))

    async with trio.open_nursery() as n:
        n.start_soon(a_until_firing)
        await bb.play(until=lambda msg: isinstance(msg, m.Firing))
    # b drops before anyone fires, then comes back with its key and token.
    await b.close()
    b2 = await connect(server, nursery, key=b.key, name="bob", resume=b.token)
    start = await b2.expect(m.Start)
    snap = await b2.expect(m.Snapshot)
    assert (start.match, start.seat, snap.seat) == (mid, bb.seat, bb.seat)
    assert snap.view["phase"] in ("firing", "answer") and len(snap.view["commitments"]) == 2
    bb.c = b2
    with trio.fail_after(10):
        await bb.resume(snap.view)
        await play_both(ba, bb)
    assert ba.result is not None and bb.result is not None
    assert ba.outcomes[0]["reason"] == "fleet_sunk"


async def test_best_of_three_plays_every_game_and_records_them(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    rules = {**SMALL, "match": {"kind": "best-of", "games": 3}, "first_player": "loser"}
    a, b, mid = await pair(server, nursery, rules, "blind")
    ba, bb = Bot(a, "blind", 13), Bot(b, "blind", 14)
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None and 2 <= len(ba.outcomes) <= 3
    assert max(ba.result.result["wins"]) == 2
    ok = await a.request(m.GetRecord(1, mid))
    report = verify_record(load_record(ok.data["record"]))
    assert report.ok, report.reason
    assert len(report.games) == len(ba.outcomes)


async def test_shot_clock_passes_the_turn_then_forfeits(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": "sea-battle"}, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    ba.auto_fire = bb.auto_fire = False
    async with trio.open_nursery() as n:
        n.start_soon(bb.play, lambda msg: isinstance(msg, m.Firing))
        firing = await ba.play(lambda msg: isinstance(msg, m.Firing))
    start = trio.current_time()
    lost = []
    while True:
        msg = await a.recv()
        if isinstance(msg, m.ShotLost):
            lost.append((msg.seat, msg.why, msg.next))
        if isinstance(msg, m.GameOver):
            break
    # 30 s a turn; the first player's third expiry in a row forfeits (rules.clocks.max_expiries).
    assert 150 <= trio.current_time() - start < 151
    f = firing.first
    assert lost == [(f, "clock", 1 - f), (1 - f, "clock", f)] * 2
    assert msg.outcome["reason"] == "shot_timeouts" and msg.outcome["winner"] == 1 - f


async def test_unanswered_shot_loses_no_answer(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 15), Bot(b, "blind", 16)

    def no_answer(msg: m.Message) -> m.Message | None:
        return None if isinstance(msg, m.Answer) else msg

    ba.bend = bb.bend = no_answer
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    # The first shot is never answered: its caller wins.
    assert outcome["reason"] == "no_answer" and outcome["detail"].endswith("shot 1")
