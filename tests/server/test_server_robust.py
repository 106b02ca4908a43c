"""The server against long records, floats, signals and hostile input: frame limits per direction,
co-signatures kept beside the immutable record, a graceful SIGINT, integer ratings, garbage moves
and costly rule sets that never reach the match task or stall the server.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import (
    SMALL,
    TC,
    Bot,
    FakePeer,
    connect,
    interrupt,
    pair,
    play_both,
    raw,
    server_process,
    start_server,
)
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import preset
from seabattle.server.config import Limits
from seabattle.server.lobby import Lobby
from seabattle.server.store import Store


@pytest.fixture
def no_server_errors(caplog: pytest.LogCaptureFixture) -> Any:
    """Fail if the server logs an error: a message it could not send, a handler that crashed."""
    caplog.set_level(logging.WARNING, logger="seabattle.server")
    yield
    bad = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("seabattle.server") and r.levelno >= logging.ERROR
    ]
    assert bad == []


def _is_int(v: Any) -> bool:
    return type(v) is int


# -- long records: 16 MiB frames from the server --------------------------------------------------


async def test_best_of_three_classic_record_is_fetched_over_tcp_and_verifies(
    tmp_path: Path, nursery: trio.Nursery, no_server_errors: None
) -> None:
    # Bots answer at machine speed: three classic games overrun the default message rate.
    addr, _ = await start_server(nursery, tmp_path, limits=Limits(rate=1e4, burst=10_000))
    rules = {"preset": "classic", "match": {"kind": "best-of", "games": 3}}
    a, b, mid = await pair(addr, nursery, rules, "blind")
    ba, bb = Bot(a, "blind", 21), Bot(b, "blind", 22)
    with trio.fail_after(60):
        await play_both(ba, bb)
    assert ba.result is not None and ba.errors == bb.errors == []
    head = ba.result.head
    for c in (a, b):
        await c.send(m.CoSign(mid, head, c.key.sign(head)))
        await c.send(m.CoSign(mid, head, c.key.sign(head)))  # again: harmless
    ok = await a.request(m.GetRecord(3, mid))
    assert isinstance(ok, m.Ok), ok
    # Past the old 64 KiB frame: the answer only fits in a server->client frame.
    assert len(ok.data["record"]) > 65536
    signed = load_record(ok.data["record"])
    report = verify_record(signed)
    assert report.ok, report.reason
    assert len(report.games) == len(ba.outcomes) >= 2
    assert [s["role"] for s in signed["sigs"]] == ["referee", "seat0", "seat1"]
    assert ba.errors == bb.errors == []


async def test_a_peer_that_hoards_records_is_dropped(tmp_path: Path, nursery: trio.Nursery) -> None:
    # Counting frames alone would let a peer park send_queue records in memory. The server
    # writes straight to the socket while the kernel takes the bytes, so the backlog it keeps
    # itself starts once the socket buffers are full: ask until they are.
    limits = Limits(send_queue_bytes=4096, rate=1e6, burst=1_000_000)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    await play_both(Bot(a, "custody"), Bot(b, "custody"))
    a.scope.cancel()  # a stops reading
    for i in range(20_000):
        try:
            await a.send(m.GetRecord(i, mid))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            break
    with trio.fail_after(5):
        while True:  # the server closes: reads end or the connection resets
            try:
                if not await a.stream.receive_some(1 << 16):
                    break
            except trio.BrokenResourceError:
                break
    # Everyone else is still served.
    assert isinstance(await b.request(m.Ladder(1)), m.Ok)


# -- no floats on the wire ------------------------------------------------------------------------


async def test_ratings_travel_as_integers(
    tmp_path: Path, nursery: trio.Nursery, no_server_errors: None
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, _ = await pair(addr, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 1), Bot(b, "custody", 2)
    await play_both(ba, bb)
    assert ba.result is not None and ba.result.ratings is not None
    for player in (a.player, b.player):
        change = ba.result.ratings[player]
        assert _is_int(change["old"]) and _is_int(change["new"]) and change["old"] == 1500
    assert ba.result.ratings[a.player]["new"] != 1500
    rows = (await a.request(m.Ladder(1))).data["rows"]
    assert len(rows) == 2
    for r in rows:
        for k in ("rating", "rd", "games", "wins", "losses", "draws"):
            assert _is_int(r[k]), (k, r[k])


# -- signals --------------------------------------------------------------------------------------


def test_sigint_right_after_the_address_shuts_down_gracefully(tmp_path: Path) -> None:
    code = "import sys; from seabattle.cli.main import main; sys.argv[0] = 'seabattle'; main()"
    args = ["serve", "--port", "0", "--db", str(tmp_path / "db"), "--key", str(tmp_path / "k")]
    with server_process(code, *args) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, line
        start = time.monotonic()
        rc, _, err = interrupt(proc)  # at once: the handler must already be in place
    assert rc == 0, err
    assert "KeyboardInterrupt" not in err and "Traceback" not in err
    assert "shutting down" in err and time.monotonic() - start < 15


# -- hostile moves --------------------------------------------------------------------------------


async def test_garbage_moves_are_refused_and_the_match_plays_on(
    tmp_path: Path, nursery: trio.Nursery, no_server_errors: None
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 31), Bot(b, "blind", 32)
    ba.place = bb.place = False

    async def refused(c: TC, msg: m.Message) -> int:
        await c.send(msg)
        err = await c.expect(m.Error, skip=(m.Clock, m.Committed, m.GameStart, m.Start))
        assert err.code != ErrorCode.INTERNAL_ERROR, err
        return int(err.code)

    # Before anything is committed: cosign before the end, garbage commitments and fleets.
    await ba.play(until=lambda msg: isinstance(msg, m.GameStart))
    await bb.play(until=lambda msg: isinstance(msg, m.GameStart))
    assert await refused(a, m.CoSign(mid, b"h", b"s")) == ErrorCode.WRONG_PHASE
    for junk in ({}, {"cells": 1, "ships": []}, {"cells": [None], "ships": [{}]}):
        await refused(a, m.Commit(mid, 1, junk, bytes(64)))
    for fleet in ((1, "x", None), ([0, 0, "no"],), ([[], {}],), ([99, 99, True],) * 70):
        await refused(a, m.Place(mid, 1, fleet, bytes(32), bytes(64)))
    verdicts: list[dict[str, Any]] = [
        {},
        {"n": "1", "results": [], "sunk": None},
        {"n": 1, "results": [{"r": 7, "open": [], "sunk": {}}], "claims": "x"},
    ]
    for v in verdicts:
        await refused(a, m.Answer(mid, 1, v))
    await refused(a, m.RevealMsg(mid, 1, {"fleet": "x", "secret": 5}))
    await refused(a, m.Fire(mid, 1, ("A1",) * 4000, 7, 1))

    # The match is none the worse: both commit and play it out.
    assert ba.committed is not None and bb.committed is not None
    await a.send(m.Commit(mid, 1, ba.committed.commitment.to_dict(), ba.committed.seat_sig(a.key)))
    await b.send(m.Commit(mid, 1, bb.committed.commitment.to_dict(), bb.committed.seat_sig(b.key)))
    ba.errors.clear()

    async def answer_with_junk_first(msg: m.Message) -> None:
        if isinstance(msg, m.Answer):
            await ba.c.send(m.Answer(mid, 1, {"n": msg.verdict["n"], "results": "junk"}))
        await Bot.send(ba, msg)

    ba.send = answer_with_junk_first  # type: ignore[method-assign]
    with trio.fail_after(20):
        await play_both(ba, bb)
    assert ba.result is not None and bb.result is not None
    assert {e.code for e in ba.errors} <= {int(ErrorCode.BAD_MESSAGE), int(ErrorCode.BAD_PROOF)}
    assert bb.errors == []
    # Garbage co-signatures after the end: refused, the record keeps only good signatures (the
    # referee's, and the ones both seats sent at match_over).
    head = ba.result.head
    assert await refused(a, m.CoSign(mid, head, b"x" * 64)) == ErrorCode.BAD_SIGNATURE
    assert await refused(a, m.CoSign(mid, head, b"")) == ErrorCode.BAD_SIGNATURE
    assert await refused(a, m.CoSign(mid, b"\x00" * 40, b"x")) == ErrorCode.BAD_SIGNATURE
    ok = await a.request(m.GetRecord(9, mid))
    signed = load_record(ok.data["record"])
    assert [s["role"] for s in signed["sigs"]] == ["referee", "seat0", "seat1"]
    assert verify_record(signed).ok


async def test_costly_rule_sets_are_refused_without_stalling_the_server(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    # The pings below come as fast as the server answers them: no message rate limit for them.
    limits = Limits(rules_timeout=1.0, rate=1e6, burst=1_000_000)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a = await connect(addr, nursery)
    other = await connect(addr, nursery)

    # Eleven 4-long ships on 7x7, touching allowed: the core's fleet-fit search reaches its work
    # bound within milliseconds and refuses with its own message.
    bounded = {"preset": "classic", "rows": 7, "cols": 7, "touching": True}
    bounded["fleet"] = [[f"s{i}", 4] for i in range(11)]
    r = await a.request(m.Create(1, bounded, "blind", True))
    assert isinstance(r, m.Error) and r.code == ErrorCode.BAD_RULES, r
    assert r.msg.endswith("(no placement found within the search bound)"), r.msg

    # Ships of every length 1..24, apart, on 26x26 do fit, but the search's tables of positions
    # (built before its work bound counts) take over a second, several under the deadline's trace
    # function: the rules_timeout deadline stops the check.
    wide = {"preset": "classic", "rows": 26, "cols": 26, "touching": False}
    wide["fleet"] = [[f"w{n}", n] for n in range(1, 25)]
    answered = trio.Event()
    pongs: list[float] = []

    async def ping_until_answered() -> None:
        while not answered.is_set():
            t = trio.current_time()
            await other.send(m.Ping(len(pongs)))
            assert (await other.expect(m.Pong)).n == len(pongs)
            pongs.append(trio.current_time() - t)

    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            n.start_soon(ping_until_answered)
            r = await a.request(m.Create(2, wide, "blind", True))
            answered.set()
    assert isinstance(r, m.Error) and r.code == ErrorCode.BAD_RULES, r
    assert r.msg == "the fleet cannot be shown to fit within 1 s; use a smaller fleet", r.msg
    # The event loop kept answering while the 1 s check ran in its thread.
    assert len(pongs) > 1 and max(pongs) < 0.5, pongs
    # Ordinary rules still work at once.
    assert isinstance(await other.request(m.Create(3, SMALL, "blind", True)), m.Ok)


async def test_lobby_requests_naming_rules_are_rate_limited_and_bounded(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    limits = Limits(create_rate=0.001, create_burst=3, open_per_peer=2)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a = await connect(addr, nursery)
    codes = []
    for i in range(5):
        r = await a.request(m.Create(i, {"preset": "classic"}, "custody", True))
        codes.append(None if isinstance(r, m.Ok) else r.code)
    limited = ErrorCode.RATE_LIMITED
    assert codes == [None, None, ErrorCode.NOT_ALLOWED, limited, limited]

    # One place in the quick queue per connection: a new ask replaces the old one.
    b = await connect(addr, nursery)
    await b.send(m.Quick(1, {"preset": "classic"}, "custody"))
    await b.send(m.Quick(2, {"preset": "russian"}, "custody"))
    old = await b.expect(m.Error)
    assert old.ref == 1
    c = await connect(addr, nursery)
    await c.send(m.Quick(7, {"preset": "classic"}, "custody"))  # b no longer waits for this
    await c.send(m.Quick(8, {"preset": "russian"}, "custody"))
    assert (await c.expect(m.Error)).ref == 7
    ok_c, ok_b = await c.expect(m.Ok), await b.expect(m.Ok)
    assert (ok_c.ref, ok_b.ref) == (8, 2) and ok_c.data == ok_b.data


async def test_a_player_gone_before_the_start_is_absent_and_abandons(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async with Store.open(":memory:") as store:
        key = Ed25519PrivateKey.generate()
        lobby = Lobby(store, key, nursery, Limits())
        here, gone = FakePeer("a" * 64), FakePeer("b" * 64, connected=False)
        for p in (here, gone):
            await store.upsert_player(p.player, p.name, 0)
        mid = bytes(range(16))
        await store.create_match(
            mid.hex(), b"r", "custody", here.player, gone.player, 0, status="playing"
        )
        lobby._start(mid, preset("classic"), "custody", True, [here, gone])
        ref = lobby.running[mid]
        assert ref.seats[1].peer is None
        start = trio.current_time()
        # No fail_after here: virtual time jumps to any deadline while the store works in a thread.
        while not (over := [x for x in here.got if isinstance(x, m.GameOver)]):
            await trio.sleep(1)
        assert trio.current_time() - start <= 61
        assert over[0].outcome["reason"] == "abandoned" and over[0].outcome["winner"] == 0
        await ref.done.wait()
        assert gone.got == []


async def test_a_silent_spectator_never_slows_the_players(
    tmp_path: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    limits = Limits(send_queue=32, rate=1e4, burst=10_000)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a, b, mid = await pair(addr, nursery, {"preset": "classic"}, "blind")
    spy = await connect(addr, nursery, name="spy")
    # A tiny receive window: the spectator's bytes back up into the server quickly.
    sock: Any = spy.stream
    sock.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    assert isinstance(await spy.request(m.Watch(1, mid)), m.Ok)
    spy.scope.cancel()  # it stops reading
    ba, bb = Bot(a, "blind", 41), Bot(b, "blind", 42)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.result is not None and ba.errors == bb.errors == []
    dropped = [r for r in caplog.records if "dropping" in r.getMessage()]
    assert all(spy.player[:12] in r.getMessage() for r in dropped)


async def test_a_match_no_longer_in_memory_can_still_be_cosigned(
    tmp_path: Path, nursery: trio.Nursery, no_server_errors: None
) -> None:
    # finished_kept=0: the referee is forgotten at once, as after a restart; the store remains.
    addr, _ = await start_server(nursery, tmp_path, limits=Limits(finished_kept=0))
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 5), Bot(b, "custody", 6)
    await play_both(ba, bb)
    assert ba.result is not None
    head = ba.result.head
    spy = await connect(addr, nursery)

    async def code(c: TC, msg: m.CoSign) -> int | None:
        await c.send(msg)
        await c.send(m.Ping(77))  # a co-signature is answered only when refused
        got = await c.recv()
        if isinstance(got, m.Pong):
            return None
        await c.expect(m.Pong)
        return int(got.code)

    assert await code(spy, m.CoSign(mid, head, spy.key.sign(head))) == ErrorCode.NO_SUCH_MATCH
    assert await code(a, m.CoSign(mid, head, b.key.sign(head))) == ErrorCode.BAD_SIGNATURE
    assert await code(a, m.CoSign(mid, head, a.key.sign(head))) is None
    assert await code(a, m.CoSign(mid, head, a.key.sign(head))) is None  # idempotent
    assert await code(b, m.CoSign(mid, head, b.key.sign(head))) is None
    ok = await spy.request(m.GetRecord(1, mid))
    signed = load_record(ok.data["record"])
    assert verify_record(signed).ok
    assert [s["role"] for s in signed["sigs"]] == ["referee", "seat0", "seat1"]


async def test_connections_past_max_clients_are_told_busy(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    addr, _ = await start_server(nursery, tmp_path, limits=Limits(max_clients=1))
    first = await connect(addr, nursery)
    late = await raw(addr, nursery)
    assert (await late.expect(m.Bye)).reason == "busy"
    assert isinstance(await first.request(m.Ladder(1)), m.Ok)
