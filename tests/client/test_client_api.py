"""The scripting API against the real server (``seabattle.server.app.serve``) over TCP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import quick_pair, start_server
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import (
    ConnectionClosed,
    GameEnded,
    GameStarted,
    LieDetected,
    MatchEnded,
    MatchHandle,
    Refused,
    RequestFailed,
    ShotResult,
    Wire,
    YourTurn,
    connect,
)
from seabattle.protocol import messages as m
from seabattle.protocol.codec import encode_frame
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from seabattle.protocol.record import verify_record
from seabattle.protocol.session import LEAN, MAX_C2S_FRAME, MAX_S2C_FRAME, Role, State
from seabattle.protocol.verdict import CellResult, Result, Shot, Verdict

pytest.importorskip("seabattle.server.app")


async def both(
    a: MatchHandle, b: MatchHandle, sa: str = "density", sb: str = "hunt"
) -> tuple[BotResult, BotResult]:
    out: list[Any] = [None, None]

    async def one(i: int, h: MatchHandle, s: str) -> None:
        out[i] = await play_match(h, make_strategy(s))

    async with trio.open_nursery() as n:
        n.start_soon(one, 0, a, sa)
        n.start_soon(one, 1, b, sb)
    return out[0], out[1]


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_two_bots_play_and_the_record_verifies(server: tuple[str, int], mode: str) -> None:
    host, port = server
    async with connect(host, port, name="a") as a, connect(host, port, name="b") as b:
        ha, hb = await quick_pair(a, b, {"preset": "russian"}, mode)
        assert ha.id == hb.id
        ra, rb = await both(ha, hb)
        assert {ha.seat, hb.seat} == {0, 1}
        assert ra.won is not rb.won and ra.result == rb.result
        assert not ra.lies and not rb.lies
        assert ha.head == hb.head is not None
        signed = await a.get_record(ha.id)
        report = verify_record(signed)
        assert report.ok, report.reason
        ladder = await b.ladder()
        assert {row["player"] for row in ladder} >= {a.player, b.player}


async def test_a_bot_placing_evasive_fleets_plays_a_verified_match(server: tuple[str, int]) -> None:
    # evasive plays simulated games for most of a second before each placement (in a thread,
    # unlike uniform): the fleet it commits is one the referee takes, and the record verifies.
    host, port = server
    async with connect(host, port, name="a") as a, connect(host, port, name="b") as b:
        ha, hb = await quick_pair(a, b, {"preset": "classic-8x8"}, "blind")
        results: list[BotResult] = []

        async def one(h: MatchHandle, placement: str) -> None:
            results.append(await play_match(h, make_strategy("density"), placement=placement))

        async with trio.open_nursery() as n:
            n.start_soon(one, ha, "evasive")
            n.start_soon(one, hb, "uniform")
        assert [r.won for r in results].count(True) == 1
        assert not any(r.lies for r in results)
        report = verify_record(await a.get_record(ha.id))
        assert report.ok, report.reason


@pytest.mark.parametrize("mode", ["blind", "custody"])
@pytest.mark.parametrize("lean", [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize(
    "rules",
    [{"preset": "russian"}, {"preset": "classic", "radar": True}],
    ids=["hit-again", "radar"],
)
async def test_lean_and_plain_sessions_play_one_match(
    server: tuple[str, int], mode: str, lean: tuple[bool, bool], rules: dict[str, Any]
) -> None:
    # Whether a session agreed `lean` (no copies of its own moves, spec 5.7) changes what it is
    # sent, never the game: either kind follows whose turn it is, checks every verdict with its
    # own copy of the game, and co-signs the same verified record. (Both lean: the test above.)
    host, port = server
    async with (
        connect(host, port, name="a", lean=lean[0]) as a,
        connect(host, port, name="b", lean=lean[1]) as b,
    ):
        assert [LEAN in c.wire.caps for c in (a, b)] == list(lean)
        ha, hb = await quick_pair(a, b, rules, mode)
        ra, rb = await both(ha, hb, "best", "density")
        assert ra.won is not rb.won and not ra.lies and not rb.lies
        assert not ha.disputed and not hb.disputed
        report = verify_record(await a.get_record(ha.id))
        assert report.ok, report.reason
        assert [g.outcome and g.outcome["reason"] for g in report.games] == ["fleet_sunk"]


async def test_create_and_join_by_invite_and_list(server: tuple[str, int]) -> None:
    host, port = server
    async with connect(host, port) as a, connect(host, port) as b:
        ha, invite = await a.create({"preset": "classic-8x8"}, "blind", public=True)
        listed = await b.list()
        assert any(row["match"] == ha.id for row in listed)
        assert invite
        hb = await b.join(invite)
        assert hb.id == ha.id
        await both(ha, hb)
        with pytest.raises(RequestFailed) as e:
            await a.join(bytes(16))
        assert e.value.code in (ErrorCode.NO_SUCH_MATCH, ErrorCode.MATCH_FULL)


def false_miss(shot: Shot, v: Verdict) -> Verdict:
    """A liar: every hit is answered as a miss, keeping the true opening."""
    return Verdict(
        v.n,
        tuple(
            CellResult(Result.MISS, r.opening) if r.result is not Result.MISS else r
            for r in v.results
        ),
    )


async def test_a_scripted_liar_is_caught_and_loses(server: tuple[str, int]) -> None:
    host, port = server
    async with connect(host, port, name="honest") as a, connect(host, port, name="liar") as b:
        ha, hb = await quick_pair(a, b, {"preset": "classic"}, "blind")
        hb.tamper = false_miss
        ra, rb = await both(ha, hb)
        assert ra.won is True and rb.won is False
        # The honest client caught it with its own mirror, not on the server's word.
        assert any(lie.seat == hb.seat for lie in ra.lies)
        signed = await a.get_record(ha.id)
        report = verify_record(signed)
        assert report.ok
        assert report.games[0].outcome is not None
        assert report.games[0].outcome["reason"] == "false_proof"
        assert report.games[0].outcome["winner"] == ha.seat


async def test_events_by_hand(server: tuple[str, int]) -> None:
    """The README's loop: place, then react to events; a refused shot keeps the turn."""
    host, port = server
    async with connect(host, port) as a, connect(host, port) as b:
        ha, hb = await quick_pair(a, b, {"preset": "classic-8x8"}, "blind")
        seen: list[type] = []

        async def by_hand() -> None:
            await ha.place()
            cells = iter(f"{c}{r}" for r in range(1, 9) for c in "ABCDEFGH")
            refused_once = False
            async for ev in ha.events():
                seen.append(type(ev))
                if isinstance(ev, YourTurn):
                    if not refused_once:
                        await ha.fire("Z99")  # off the board: refused, the turn is kept
                        refused_once = True
                    else:
                        await ha.fire(next(cells))
                elif isinstance(ev, Refused):
                    assert ev.code == ErrorCode.OFF_BOARD
                    await ha.fire(next(cells))

        async with trio.open_nursery() as n:
            n.start_soon(by_hand)
            n.start_soon(play_match, hb, make_strategy("random"))
        for t in (GameStarted, YourTurn, Refused, ShotResult, GameEnded, MatchEnded):
            assert t in seen, t
        assert LieDetected not in seen


async def test_the_mirror_itself_catches_a_false_salvo_total(server: tuple[str, int]) -> None:
    """A salvo total cannot be proved on the spot; the client's own mirror still catches it."""
    host, port = server
    lied: list[int] = []

    def short_total(shot: Shot, v: Verdict) -> Verdict:
        if v.total is not None and v.total > len(v.sunk) and not lied:
            lied.append(shot.n)
            return Verdict(v.n, total=v.total - 1, sunk=v.sunk)
        return v

    rules = {"preset": "classic", "shots": "salvo-fixed", "salvo_report": "total"}
    async with connect(host, port) as a, connect(host, port) as b:
        ha, hb = await quick_pair(a, b, rules, "blind")
        hb.tamper = short_total
        ra, rb = await both(ha, hb)
        assert lied
        assert ra.won is True and rb.won is False
        assert any(x.seat == hb.seat and x.source == "mirror" for x in ra.lies), ra.lies


async def test_a_spectator_sees_the_snapshot_then_public_events(server: tuple[str, int]) -> None:
    from seabattle.protocol import messages as m

    host, port = server
    async with connect(host, port) as a, connect(host, port) as b, connect(host, port) as c:
        ha, hb = await quick_pair(a, b, {"preset": "classic-8x8"}, "blind")
        seen: list[m.Message] = []
        async with c.watch(ha.id) as feed:
            await both(ha, hb)
            async for msg in feed:
                seen.append(msg)
                if isinstance(msg, m.GameOver):
                    break
        assert isinstance(seen[0], m.Snapshot) and seen[0].seat is None
        assert any(isinstance(x, m.VerdictMsg) for x in seen)
        # Spectators never see a fleet before the reveal: no commit secrets, no answers.
        assert not any(isinstance(x, m.Answer | m.Commit) for x in seen)


async def test_a_best_of_three_places_a_fleet_for_every_game(server: tuple[str, int]) -> None:
    host, port = server
    rules = {"preset": "russian", "match": {"kind": "best-of", "games": 3, "sunk_bonus": 0}}
    async with connect(host, port) as a, connect(host, port) as b:
        ha, hb = await quick_pair(a, b, rules, "blind")
        ra, _ = await both(ha, hb)
        assert ra.result["games"] >= 2 and max(ra.result["wins"]) == 2
        report = verify_record(await b.get_record(hb.id))
        assert report.ok and len(report.games) == ra.result["games"]


async def test_an_unknown_key_is_refused_when_guests_are_not_allowed(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path, guests=False)
        with pytest.raises(RequestFailed) as e:
            async with connect(*addr):
                pass
        assert e.value.code == ErrorCode.AUTH_FAILED
        nursery.cancel_scope.cancel()


# -- the wire: the client's trio shell over the sans-IO session -----------------------------------


async def test_a_connected_client_speaks_through_a_ready_client_session(
    server: tuple[str, int],
) -> None:
    async with connect(*server) as c:
        assert c.wire.role is Role.CLIENT and c.wire.conn.state is State.READY
        assert (c.wire.max_send, c.wire.max_recv) == (MAX_C2S_FRAME, MAX_S2C_FRAME)


async def test_the_wire_checks_the_handshake_order_and_sends_the_same_bytes() -> None:
    mine, theirs = trio.testing.memory_stream_pair()
    wire = Wire(mine, role=Role.CLIENT)
    with pytest.raises(LocalProtocolError) as e:
        await wire.send(m.ListMatches(1))  # before the handshake: never leaves
    assert e.value.code is ErrorCode.HANDSHAKE_REQUIRED
    hello = m.Hello((2,), "test", ())
    await wire.send(hello)
    assert await theirs.receive_some() == encode_frame(m.encode(hello), max_frame=MAX_C2S_FRAME)
    # What a client is never sent is refused, and the stream goes on to the welcome.
    welcome = m.Welcome(2, (), b"k" * 32, b"c" * 32, True)
    await theirs.send_all(m.frame(m.Commit(b"m" * 16, 1, {}, bytes(64))) + m.frame(welcome))
    refused = await wire.recv()
    assert isinstance(refused, RemoteProtocolError)
    assert refused.code is ErrorCode.UNEXPECTED_MESSAGE
    assert await wire.recv() == welcome
    assert wire.conn.state is State.AUTH
    await theirs.aclose()
    assert await wire.recv() is None and wire.closed
    with pytest.raises(ConnectionClosed):
        await wire.send(m.Ping(1))


async def test_a_wire_without_a_role_takes_it_from_its_first_use() -> None:
    a, b = trio.testing.memory_stream_pair()
    client, server = Wire(a), Wire(b)
    async with trio.open_nursery() as n:
        n.start_soon(server.expect, m.Hello)  # waits first: the server
        await trio.testing.wait_all_tasks_blocked()
        await client.send(m.Hello((2,), "test", ()))  # sends first: the client
    assert (client.role, server.role) == (Role.CLIENT, Role.SERVER)
    assert (server.max_recv, server.max_send) == (MAX_C2S_FRAME, MAX_S2C_FRAME)
    with pytest.raises(ValueError):
        client.set_role(Role.SERVER)
