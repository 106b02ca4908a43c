"""The server under bad input: every refusal has its error code, the session (and the match) go on
unchanged, framing errors close, floods are rate limited; plus the lobby's refusals, timeouts and
graceful shutdown.
"""

from __future__ import annotations

import secrets
import ssl
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
    Closed,
    connect,
    handshake,
    pair,
    play_both,
    raw,
    self_signed,
    start_server,
)
from seabattle.protocol import messages as m
from seabattle.protocol.codec import encode_frame
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import rules_from_dict
from seabattle.protocol.session import State, auth_payload
from seabattle.server.config import Limits
from seabattle.server.lobby import Lobby
from seabattle.server.session import Client, Identity
from seabattle.server.store import Store


def frame(msg: m.Message) -> bytes:
    return encode_frame(m.encode(msg))


async def error(c: TC) -> m.Error:
    msg = await c.expect(m.Error)
    assert isinstance(msg, m.Error)
    return msg


async def test_bad_frames_and_handshake_errors(tmp_path: Path, nursery: trio.Nursery) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    c = await raw(addr, nursery)
    await c.send_raw(b"\x00\x00\x00\x01\xc1")  # a well-framed body that is not msgpack
    assert (await error(c)).code == ErrorCode.MALFORMED_MSGPACK
    await c.send_raw(frame(m.ListMatches(1)))
    assert (await error(c)).code == ErrorCode.HANDSHAKE_REQUIRED
    await c.send_raw(encode_frame({"t": "nonsense"}))
    assert (await error(c)).code == ErrorCode.UNKNOWN_TAG
    # The session survived all three: the handshake still works, and a bad signature may be retried.
    c.conn.state = State.HELLO
    await c.send(m.Hello((2,), "t", ()))
    w = await c.expect(m.Welcome)
    await c.send(m.Auth(c.pub, bytes(64), "x", None))
    assert (await error(c)).code == ErrorCode.AUTH_FAILED
    c.conn.state = State.AUTH
    await c.send(m.Auth(c.pub, c.key.sign(auth_payload(w.challenge, w.server, c.pub)), "x", None))
    await c.expect(m.Authed)
    await c.send(m.Auth(c.pub, bytes(64), "x", None))
    assert (await error(c)).code == ErrorCode.UNEXPECTED_MESSAGE
    # A frame header announcing more than the limit breaks framing: error, then the server closes.
    await c.send_raw(b"\x7f\xff\xff\xff")
    assert (await error(c)).code == ErrorCode.FRAME_TOO_LARGE
    with trio.fail_after(5):
        while True:
            try:
                await c.recv()
            except Closed:
                break


async def test_refused_moves_leave_the_match_unchanged(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 1), Bot(b, "custody", 2)
    ba.auto_fire = bb.auto_fire = False
    async with trio.open_nursery() as n:
        n.start_soon(ba.play, lambda msg: isinstance(msg, m.Firing))
        firing = await bb.play(lambda msg: isinstance(msg, m.Firing))
    mover, idle = (ba, bb) if firing.first == ba.seat else (bb, ba)
    spy = await connect(addr, nursery, name="spy")
    ok = await spy.request(m.Watch(1, mid))
    assert isinstance(ok, m.Ok)
    before = (await spy.expect(m.Snapshot)).view
    # A spectator gets no start: the view carries the rule set and the players (6.6 SHOULD).
    assert before["rules"] == rules_from_dict(SMALL).to_dict()
    by_seat = {ba.seat: a.player, bb.seat: b.player}
    assert before["players"] == [by_seat[0], by_seat[1]] and "" not in by_seat.values()

    async def refused(c: TC, msg: m.Message) -> int:
        await c.send(msg)
        err = await error(c)
        assert err.ref == getattr(msg, "seq", getattr(msg, "id", None))
        return err.code

    def fire(cells: tuple[str, ...], seq: int, match: bytes = mid, game: int = 1) -> m.Fire:
        return m.Fire(match, game, cells, 0, seq)

    assert await refused(idle.c, fire(("A1",), 101)) == ErrorCode.NOT_YOUR_TURN
    assert await refused(mover.c, fire(("Z9",), 102)) == ErrorCode.OFF_BOARD
    assert await refused(mover.c, fire(("A1", "A2"), 103)) == ErrorCode.WRONG_SALVO_SIZE
    assert await refused(mover.c, fire(("A1",), 104, game=2)) == ErrorCode.WRONG_PHASE
    assert await refused(mover.c, fire(("A1",), 105, secrets.token_bytes(16))) == (
        ErrorCode.NO_SUCH_MATCH
    )
    assert await refused(spy, fire(("A1",), 106)) == ErrorCode.NOT_ALLOWED
    assert await refused(mover.c, m.Radar(mid, 1, "A1", 0, 107)) == ErrorCode.RADAR_NOT_ALLOWED
    assert await refused(mover.c, m.Commit(mid, 1, {}, bytes(64))) == ErrorCode.UNEXPECTED_MESSAGE
    # Another match the mover does not play in: acting for it is not allowed.
    _, _, other = await pair(addr, nursery, SMALL, "custody")
    assert await refused(mover.c, fire(("A1",), 108, other)) == ErrorCode.NOT_ALLOWED

    ok = await spy.request(m.Watch(2, mid))
    after = (await spy.expect(m.Snapshot)).view
    assert after == before

    # One good shot, then its resend (same seq) applies once; a repeat of the cell is refused.
    await mover.c.send(fire(("A1",), 200))
    await mover.c.send(fire(("A1",), 200))
    v = await spy.expect(m.VerdictMsg, skip=(m.Clock, m.ShotCalled))
    assert v.n == 1
    ok = await spy.request(m.Watch(3, mid))
    view = (await spy.expect(m.Snapshot)).view
    assert view["shots"] == 1
    if view["turn"] == mover.seat:  # a hit under shoot-again rules: still the mover's turn
        assert await refused(mover.c, fire(("A1",), 201)) == ErrorCode.ALREADY_FIRED
    assert mover.errors == idle.errors == []


async def test_flood_is_rate_limited(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path, limits=Limits(rate=1.0, burst=5))
    c = await connect(addr, nursery)
    # Requests (they carry an id): what is over the limit is refused and dropped (2.5).
    await c.send_raw(b"".join(frame(m.Ladder(i)) for i in range(20)))
    got: list[Any] = [await c.recv() for _ in range(20)]
    oks = [x for x in got if isinstance(x, m.Ok)]
    limited = [x for x in got if isinstance(x, m.Error) and x.code == ErrorCode.RATE_LIMITED]
    assert len(oks) <= 5 and len(limited) >= 15 and len(oks) + len(limited) == 20
    # The connection is still usable once the bucket refills.
    await trio.sleep(1.1)
    await c.send(m.Ping(99))
    assert (await c.expect(m.Pong)).n == 99


async def test_handshake_deadline(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    c = await raw(addr, nursery)
    start = trio.current_time()
    assert (await error(c)).code == ErrorCode.TIMEOUT
    assert 10 <= trio.current_time() - start < 11


async def test_lobby_refusals(tmp_path: Path, nursery: trio.Nursery) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a = await connect(addr, nursery)
    b = await connect(addr, nursery)

    async def code(c: TC, msg: m.Message) -> int | None:
        r = await c.request(msg)
        assert r.ref == msg.id  # type: ignore[attr-defined]
        return r.code if isinstance(r, m.Error) else None

    assert await code(a, m.Create(1, {"preset": "nope"}, "blind", True)) == ErrorCode.BAD_RULES
    assert await code(a, m.Create(2, {"rows": True}, "blind", True)) == ErrorCode.BAD_RULES
    assert await code(a, m.Create(3, SMALL, "trusting", True)) == ErrorCode.BAD_RULES
    assert await code(b, m.Join(4, secrets.token_bytes(16), None)) == ErrorCode.NO_SUCH_MATCH
    assert await code(b, m.Join(5, None, "NOPE")) == ErrorCode.BAD_INVITE
    assert await code(b, m.GetRecord(6, secrets.token_bytes(16))) == ErrorCode.NO_SUCH_RECORD
    pub = await a.request(m.Create(7, SMALL, "blind", True))
    priv = await a.request(m.Create(8, SMALL, "custody", False))
    listed = await b.request(m.ListMatches(9))
    assert [x["match"] for x in listed.data["matches"]] == [pub.data["match"]]
    assert await code(a, m.Join(10, pub.data["match"], None)) == ErrorCode.NOT_ALLOWED
    assert await code(b, m.Leave(11, pub.data["match"])) == ErrorCode.NOT_ALLOWED
    assert await code(a, m.Leave(12, pub.data["match"])) is None
    assert (await b.request(m.ListMatches(13))).data["matches"] == []
    # The private match is joined by its invitation.
    assert await code(b, m.Join(14, None, priv.data["invite"].lower())) is None
    assert await code(a, m.Join(15, priv.data["match"], None)) == ErrorCode.MATCH_FULL
    # join names exactly one of match and invitation: neither, or both, is BAD_MESSAGE (5.3).
    assert await code(b, m.Join(16, None, None)) == ErrorCode.BAD_MESSAGE
    open3 = await b.request(m.Create(17, SMALL, "blind", True))
    assert isinstance(open3, m.Ok), open3
    both = m.Join(18, open3.data["match"], open3.data["invite"])
    assert await code(a, both) == ErrorCode.BAD_MESSAGE
    listed = await a.request(m.ListMatches(19))
    assert open3.data["match"] in [x["match"] for x in listed.data["matches"]]


async def test_rematch_cosign_errors_and_leave(tmp_path: Path, nursery: trio.Nursery) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 3), Bot(b, "custody", 4)
    await play_both(ba, bb)
    assert ba.result is not None
    await a.send(m.CoSign(mid, bytes(32), a.key.sign(bytes(32))))
    assert (await error(a)).code == ErrorCode.BAD_SIGNATURE
    await a.send(m.CoSign(mid, ba.result.head, b.key.sign(ba.result.head)))
    assert (await error(a)).code == ErrorCode.BAD_SIGNATURE
    await a.send(m.Rematch(1, mid))
    # A repeat from the same seat is refused, citing the pending request, which stays pending.
    await a.send(m.Rematch(5, mid))
    again = await error(a)
    assert (again.code, again.ref) == (ErrorCode.NOT_ALLOWED, 5) and "request 1" in again.msg
    await b.send(m.Rematch(2, mid))
    oka, okb = await a.expect(m.Ok), await b.expect(m.Ok)
    assert (oka.ref, okb.ref) == (1, 2)
    assert oka.data["match"] == okb.data["match"] != mid
    # Seats swap in the rematch; then a leaves it, forfeiting.
    sa = await a.expect(m.Start)
    assert sa.seat == 1 - ba.seat
    ba2, bb2 = Bot(a, "custody"), Bot(b, "custody")
    await ba2.on(sa)
    await ba2.play(lambda msg: isinstance(msg, m.GameStart))
    left = await a.request(m.Leave(3, oka.data["match"]))
    assert isinstance(left, m.Ok)
    await play_both(ba2, bb2)
    assert bb2.outcomes[0]["reason"] == "resigned" and bb2.outcomes[0]["winner"] == bb2.seat


async def test_closed_to_strangers_without_guests(tmp_path: Path, nursery: trio.Nursery) -> None:
    addr, _ = await start_server(nursery, tmp_path, guests=False)
    c = await raw(addr, nursery)
    await c.send(m.Hello((2,), "t", ()))
    w = await c.expect(m.Welcome)
    assert w.guests is False
    await c.send(m.Auth(c.pub, c.key.sign(auth_payload(w.challenge, w.server, c.pub)), "x", None))
    assert (await error(c)).code == ErrorCode.AUTH_FAILED


async def test_graceful_shutdown_without_a_journal_lets_matches_finish(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Matches that live in memory only get shutdown_grace to finish (a journaled server stops
    # at once and takes them up again when it restarts: tests/server/test_restart.py).
    addr, shutdown = await start_server(nursery, tmp_path, limits=Limits(journal=False))
    idle = await connect(addr, nursery)
    a, b, _ = await pair(addr, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    async with trio.open_nursery() as n:
        n.start_soon(ba.play, lambda msg: isinstance(msg, m.Firing))
        await bb.play(lambda msg: isinstance(msg, m.Firing))
    shutdown.set()
    assert (await idle.expect(m.Bye)).reason == "shutdown"
    # Players get a grace period; new lobby requests are refused meanwhile.
    r = await a.request(m.Create(1, SMALL, "custody", True))
    assert r.code == ErrorCode.SHUTTING_DOWN
    assert (await a.expect(m.Bye, skip=(m.Clock, m.ShotCalled, m.VerdictMsg))).reason == "shutdown"
    with pytest.raises(OSError):
        await trio.open_tcp_stream(*addr)


async def test_idle_peer_is_dropped_and_bad_resume_token_refused(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    c = await raw(addr, nursery)
    c.answer_pings = False
    await c.send(m.Hello((2,), "t", ()))
    w = await c.expect(m.Welcome)
    sig = c.key.sign(auth_payload(w.challenge, w.server, c.pub))
    await c.send(m.Auth(c.pub, sig, "x", b"not a token"))
    assert (await error(c)).code == ErrorCode.BAD_RESUME_TOKEN
    c.conn.state = State.AUTH
    await c.send(m.Auth(c.pub, sig, "x", None))
    await c.expect(m.Authed)
    start = trio.current_time()
    timeout = await c.expect(m.Error, skip=(m.Ping,))  # the pings go unanswered
    assert timeout.code == ErrorCode.TIMEOUT
    assert 60 <= trio.current_time() - start < 61


async def test_a_peer_that_cannot_keep_up_is_dropped(nursery: trio.Nursery) -> None:
    # A lockstep stream never buffers: nobody reads the far end, so every send stays queued.
    near, _far = trio.testing.lockstep_stream_pair()
    limits = Limits(send_queue=4)
    async with Store.open(":memory:") as store:
        key = Ed25519PrivateKey.generate()
        lobby = Lobby(store, key, nursery, limits)
        ident = Identity(
            key, key.public_key().public_bytes_raw(), store, lobby, limits, True, {}, {}
        )
        client = Client(ident, near, "slow")
        done = trio.Event()

        async def run() -> None:
            await client.run()
            done.set()

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        for i in range(10):
            client.send(m.Ping(i))  # never blocks the sender
        with trio.fail_after(5):
            await done.wait()


async def test_tls(tmp_path: Path, nursery: trio.Nursery) -> None:
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    addr, _ = await start_server(nursery, tmp_path, tls=server_ctx)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    stream = await trio.open_ssl_over_tcp_stream(
        "localhost", addr[1], ssl_context=client_ctx, https_compatible=False
    )
    c = TC(stream, Ed25519PrivateKey.generate(), nursery)
    assert (await handshake(c, "x")).player == c.pub.hex()


async def test_a_whole_match_over_tls(tmp_path: Path, nursery: trio.Nursery) -> None:
    # Over TLS every frame goes through the connection's writer task (no direct socket writes):
    # whole matches must play the same, records included.
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    addr, _ = await start_server(nursery, tmp_path, tls=server_ctx)
    client_ctx = ssl.create_default_context(cafile=str(cert))

    async def tls_connect(name: str) -> TC:
        stream = await trio.open_ssl_over_tcp_stream(
            "localhost", addr[1], ssl_context=client_ctx, https_compatible=False
        )
        c = TC(stream, Ed25519PrivateKey.generate(), nursery)
        await handshake(c, name)
        return c

    for mode in ("blind", "custody"):
        a, b = await tls_connect("alice"), await tls_connect("bob")
        ok = await a.request(m.Create(1, SMALL, mode, True))
        assert isinstance(ok, m.Ok), ok
        assert isinstance(await b.request(m.Join(1, None, ok.data["invite"])), m.Ok)
        ba, bb = Bot(a, mode, 1), Bot(b, mode, 2)
        with trio.fail_after(30):
            await play_both(ba, bb)
        assert ba.result is not None and bb.result is not None
        assert ba.result.result == bb.result.result
        rec = await a.request(m.GetRecord(2, ok.data["match"]))
        assert isinstance(rec, m.Ok) and verify_record(load_record(rec.data["record"])).ok


async def test_cancelled_server_still_says_goodbye(tmp_path: Path, nursery: trio.Nursery) -> None:
    async with trio.open_nursery() as inner:
        addr, _ = await start_server(inner, tmp_path)
        c = await connect(addr, nursery)
        inner.cancel_scope.cancel()
    assert (await c.expect(m.Bye)).reason == "shutdown"
