"""Refusals reach the match they concern; what a rate limit drops is sent again.

A scripted server on an in-memory stream runs two matches for one client, so that the test decides
exactly which refusals are sent and when.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.client.api import (
    Client,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    MatchHandle,
    Refused,
    Wire,
    connect,
    public_key,
)
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.rules import PRESETS
from seabattle.protocol.session import MAX_C2S_FRAME, MAX_S2C_FRAME

RULES = PRESETS["classic-8x8"].to_dict()
M1, M2 = b"\x01" * 16, b"\x02" * 16

Script = Callable[[Wire, MatchHandle, MatchHandle], Awaitable[None]]


async def handshake(wire: Wire) -> None:
    await wire.expect(m.Hello)
    server = public_key(Ed25519PrivateKey.generate())
    await wire.send(m.Welcome(2, (), server, os.urandom(32), True))
    auth = await wire.expect(m.Auth)
    assert isinstance(auth, m.Auth)
    await wire.send(m.Authed(auth.key.hex(), b"resume"))


async def start(wire: Wire, mid: bytes, mode: str) -> None:
    await wire.send(m.Start(mid, 0, RULES, mode, ("a" * 64, "b" * 64)))
    await wire.send(m.GameStart(mid, 1, 0))


async def events_of(h: MatchHandle) -> list[MatchEvent]:
    return [ev async for ev in h.events()]


async def end(wire: Wire, mid: bytes) -> None:
    await wire.send(m.MatchOver(mid, {"winner": 0}, None, bytes(32), b""))


async def run(script: Script) -> tuple[list[MatchEvent], list[MatchEvent]]:
    """Connect over memory streams; ``script(server, h1, h2)`` drives both matches."""
    client_end, server_end = trio.testing.memory_stream_pair()
    server = Wire(server_end)
    got: list[list[MatchEvent]] = [[], []]
    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            n.start_soon(handshake, server)
            async with connect("memory", 0, stream=client_end) as client:
                await start(server, M1, "custody")
                await start(server, M2, "custody")
                h1, h2 = await wait_handles(client)

                async def collect(i: int, h: MatchHandle) -> None:
                    got[i] = await events_of(h)

                async with trio.open_nursery() as c:
                    c.start_soon(collect, 0, h1)
                    c.start_soon(collect, 1, h2)
                    await script(server, h1, h2)
                    await end(server, M1)
                    await end(server, M2)
    return got[0], got[1]


async def wait_handles(client: Client) -> tuple[MatchHandle, MatchHandle]:
    while M1 not in client.matches or M2 not in client.matches:
        await trio.sleep(0)
    h1, h2 = client.matches[M1], client.matches[M2]
    await h1.wait_started()
    await h2.wait_started()
    return h1, h2


def refusals(events: list[MatchEvent]) -> list[Refused]:
    return [ev for ev in events if isinstance(ev, Refused)]


async def test_a_refused_move_goes_to_the_match_that_moved() -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await h2.fire("A1")
        await h1.fire("B2")
        fires: dict[bytes, m.Fire] = {}
        while len(fires) < 2:
            msg = await server.expect(m.Fire)
            assert isinstance(msg, m.Fire)
            fires[msg.match] = msg
        # The seqs of two matches must differ, or a refusal could not name one of them.
        assert fires[M1].seq != fires[M2].seq
        await server.send(m.Error(ErrorCode.NOT_YOUR_TURN, "not your turn", fires[M1].seq))

    e1, e2 = await run(script)
    assert [r.slug for r in refusals(e1)] == ["not_your_turn"]
    assert refusals(e2) == []
    assert isinstance(e1[-1], MatchEnded) and isinstance(e2[-1], MatchEnded)


async def test_a_refused_placement_goes_to_the_match_still_placing() -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await h1.place()
        await server.expect(m.Place)
        await server.send(m.Committed(M1, 1, 0, bytes(32)))
        await h2.place()
        await server.expect(m.Place)
        # FLOW step 5: an illegal custody fleet is refused with ref nil, and the match waits.
        await server.send(m.Error(ErrorCode.ILLEGAL_FLEET, "Carrier overlaps Cruiser", None))

    e1, e2 = await run(script)
    assert refusals(e1) == []
    assert [r.msg for r in refusals(e2)] == ["Carrier overlaps Cruiser"]
    assert any(isinstance(ev, Info) and isinstance(ev.message, m.Committed) for ev in e1)


async def test_an_error_no_match_can_be_told_from_reaches_every_running_match() -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await server.send(m.Error(ErrorCode.INTERNAL_ERROR, "the match was aborted", None))

    e1, e2 = await run(script)
    assert len(refusals(e1)) == len(refusals(e2)) == 1


async def test_a_late_answer_to_a_forgotten_request_reaches_no_match() -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await server.send(m.Error(ErrorCode.NO_SUCH_MATCH, "no such match", 999))

    e1, e2 = await run(script)
    assert refusals(e1) == refusals(e2) == []


# ================================================================================================
# Rate limits (spec 2.5): a dropped message "may be sent again later", and the client does
# ================================================================================================


async def test_a_move_dropped_for_rate_goes_again_with_the_same_seq(autojump_clock: Any) -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await h1.fire("C3")
        first = await server.expect(m.Fire)
        assert isinstance(first, m.Fire)
        await server.send(m.Error(ErrorCode.RATE_LIMITED, "slow down", first.seq))
        again = await server.expect(m.Fire)
        # The same seq: had the first been applied after all, the referee would ignore this one.
        assert again == first

    e1, e2 = await run(script)
    assert refusals(e1) == refusals(e2) == []


async def test_a_placement_dropped_for_rate_goes_again_until_acknowledged(
    autojump_clock: Any,
) -> None:
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await h2.place()
        first = await server.expect(m.Place)
        await server.send(m.Error(ErrorCode.RATE_LIMITED, "slow down", None))
        assert await server.expect(m.Place) == first
        await server.send(m.Committed(M2, 1, 0, bytes(32)))
        # Acknowledged: a later rate refusal without a ref does not send it a third time.
        await server.send(m.Error(ErrorCode.RATE_LIMITED, "slow down", None))
        await server.send(m.Ping(7))
        pong = await server.recv()
        assert isinstance(pong, m.Pong)
        with trio.move_on_after(3):  # virtual time: beyond the longest pause before a resend
            extra = await server.recv()
            raise AssertionError(f"sent again after the acknowledgement: {extra}")

    e1, e2 = await run(script)
    assert refusals(e1) == refusals(e2) == []


async def test_a_request_dropped_for_rate_is_asked_again_and_a_large_answer_arrives(
    autojump_clock: Any,
) -> None:
    client_end, server_end = trio.testing.memory_stream_pair()
    # The server's side of the limits: it may send far larger frames than a client.
    server = Wire(server_end, max_recv=MAX_C2S_FRAME, max_send=MAX_S2C_FRAME)
    big = [{"match": bytes(16), "note": b"x" * 100_000}]  # more than a client may send at once

    async def serve() -> None:
        await handshake(server)
        first = await server.expect(m.ListMatches)
        assert isinstance(first, m.ListMatches)
        await server.send(m.Error(ErrorCode.RATE_LIMITED, "slow down", first.id))
        second = await server.expect(m.ListMatches)
        assert isinstance(second, m.ListMatches)
        await server.send(m.Ok(second.id, {"matches": big}))

    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            n.start_soon(serve)
            async with connect("memory", 0, stream=client_end) as client:
                assert await client.list() == big


async def test_a_relayed_commitment_of_the_wrong_shape_is_a_lie_not_a_crash() -> None:
    # A hostile server relays a commitment whose leaves are not bytes: the client must say the
    # relay lied (before hashing anything), and play on.
    async def script(server: Wire, h1: MatchHandle, h2: MatchHandle) -> None:
        await h1.place()
        await server.expect(m.Place)
        bad = {"cells": [1] * 64, "ships": [2] * 5}
        await server.send(m.Firing(M1, 1, 0, (bad, bad)))

    e1, _ = await run(script)
    lies = [ev for ev in e1 if isinstance(ev, LieDetected)]
    assert lies and lies[0].seat is None and "bad commitment" in lies[0].detail
    assert isinstance(e1[-1], MatchEnded)
