"""The handshake timeout a script gets from the client library (issue 36): ``connect`` and peer
``join`` give up on an address that takes the connection and never answers, with
:class:`HandshakeTimeout` saying so; ``join`` tells a server from a hosting peer. Real TCP
(a socket bound to port 0 that listens and never reads), virtual time."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.client.peer import BotPlayer, NotAHost, PeerCheated, PeerResult, host, join
from seabattle.client.wire import HANDSHAKE_TIMEOUT, HandshakeTimeout, Wire
from seabattle.protocol import messages as m
from seabattle.protocol.rules import PRESETS
from seabattle.protocol.session import Role


@pytest.fixture
async def silent() -> AsyncIterator[tuple[str, int]]:
    """A listening socket nobody reads: the kernel completes the TCP handshake, no more."""
    s = trio.socket.socket()
    await s.bind(("127.0.0.1", 0))
    s.listen()
    host, port = s.getsockname()[:2]
    yield host, port
    s.close()


async def test_connect_gives_up_after_the_default_handshake_timeout(
    silent: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    host, port = silent
    start = trio.current_time()
    with pytest.raises(HandshakeTimeout) as raised:
        async with api.connect(host, port):
            pass  # pragma: no cover
    assert trio.current_time() - start == pytest.approx(HANDSHAKE_TIMEOUT, abs=0.5)
    e = raised.value
    assert str(e) == (
        f"{host}:{port} accepted the connection but did not answer the handshake within 10 s"
    )
    assert e.connected and e.address == f"{host}:{port}" and e.seconds == 10
    # What scripts caught before the class existed still catches it.
    assert isinstance(e, TimeoutError) and api.HandshakeTimeout is HandshakeTimeout


async def test_connect_takes_a_shorter_timeout(
    silent: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(HandshakeTimeout, match=r"within 2\.5 s"):
        async with api.connect(*silent, handshake_timeout=2.5):
            pass  # pragma: no cover
    assert trio.current_time() - start == pytest.approx(2.5, abs=0.5)


async def test_a_stream_that_never_opens_is_not_said_to_have_been_accepted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A peer join whose connecting never completes (a dropped SYN): the time runs out before
    # any stream exists.
    async def never(host: str, port: int) -> trio.abc.Stream:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    with pytest.raises(HandshakeTimeout) as raised:
        await join(BotPlayer(make_strategy("random")), "10.0.0.1", 7000, connect=never)
    assert not raised.value.connected
    assert str(raised.value) == "10.0.0.1:7000 did not accept the connection within 10 s"


async def test_join_gives_up_on_a_host_that_never_answers(
    silent: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    with pytest.raises(HandshakeTimeout, match="accepted the connection but did not answer"):
        await join(BotPlayer(make_strategy("random")), *silent, handshake_timeout=3)
    assert trio.current_time() - start == pytest.approx(3, abs=0.5)


async def test_join_tells_a_server_from_a_hosting_peer() -> None:
    mine, theirs = trio.testing.memory_stream_pair()
    server = Wire(theirs, role=Role.SERVER)

    async def a_server() -> None:  # what a refereed server answers: no capability peer
        await server.expect(m.Hello)
        await server.send(m.Welcome(2, ("lean",), b"k" * 32, b"c" * 32, True))

    async def connect(address: str, port: int) -> trio.abc.Stream:
        return mine

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a_server)
            with pytest.raises(NotAHost, match="a server answered, not a hosting peer") as e:
                await join(BotPlayer(make_strategy("random")), "memory", 0, connect=connect)
    assert isinstance(e.value, PeerCheated)  # what it was caught as before


async def test_a_host_closes_a_connection_that_says_nothing_and_waits_for_the_joiner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A port scanner, or anything that connects and never speaks, does not hold the host: after
    # the handshake timeout it is closed, and the real joiner that comes next plays.
    rules = PRESETS["classic-8x8"]
    async with trio.open_nursery() as nursery:

        async def hosting(task_status: trio.TaskStatus[tuple[str, int]]) -> PeerResult:
            player = BotPlayer(make_strategy("density"), random.Random(3))
            return await host(player, rules=rules, port=0, task_status=task_status)

        results: list[PeerResult] = []

        async def run_host(task_status: trio.TaskStatus[tuple[str, int]]) -> None:
            results.append(await hosting(task_status))

        addr = await nursery.start(run_host)
        scanner = await trio.open_tcp_stream(*addr)
        start = trio.current_time()
        assert await scanner.receive_some() == b""  # closed by the host, saying nothing
        assert trio.current_time() - start == pytest.approx(HANDSHAKE_TIMEOUT, abs=0.5)
        await scanner.aclose()
        joined = await join(BotPlayer(make_strategy("hunt"), random.Random(4)), *addr)
    assert joined.report.ok and results[0].report.ok
    assert results[0].signed == joined.signed
