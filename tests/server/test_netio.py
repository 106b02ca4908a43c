"""Direct socket I/O (common/netio.py): bytes arrive in order, a busy socket cannot starve the
other tasks, a full socket takes part of a write, and a reset is reported as trio reports it."""

from __future__ import annotations

import socket
import sys
import threading

import pytest
import trio
import trio.testing
from seabattle.common.netio import DirectSocket, direct


async def _pair() -> tuple[trio.SocketStream, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(a)), b


async def test_bytes_arrive_in_order_and_eof_is_empty() -> None:
    stream, far = await _pair()
    sock = direct(stream)
    assert sock is not None
    got = b""
    far.sendall(b"hello ")
    got += bytes(await sock.receive())
    far.sendall(b"world")
    far.close()
    while chunk := bytes(await sock.receive()):
        got += chunk
    assert got == b"hello world"
    await stream.aclose()


async def test_a_socket_that_always_has_data_lets_other_tasks_run() -> None:
    stream, far = await _pair()
    sock = direct(stream)
    assert sock is not None
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as n:
        n.start_soon(ticker)
        await trio.lowlevel.checkpoint()
        before = ticks
        for _ in range(50):
            far.sendall(b"x" * 10)  # always something waiting: reads never block
            assert bytes(await sock.receive())
        assert ticks - before >= 20  # the ticker ran all along
        n.cancel_scope.cancel()
    far.close()
    await stream.aclose()


async def test_a_full_socket_takes_part_of_a_write_and_a_reset_is_broken() -> None:
    stream, far = await _pair()
    sock = direct(stream)
    assert sock is not None
    big = b"y" * (4 << 20)
    sent = sock.try_send(big)
    assert 0 < sent < len(big)  # the kernel took what fit; nothing waited
    assert sock.try_send(big[sent:]) == 0
    far.close()
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(3):
            sock.try_send(b"z" * 65536)
    await stream.aclose()


def test_only_plain_sockets_are_read_directly() -> None:
    left, _right = trio.testing.memory_stream_pair()
    assert direct(left) is None
    assert isinstance(DirectSocket(0), DirectSocket)


def test_two_trio_runs_in_two_threads_each_read_their_own_bytes() -> None:
    # Reads land in a buffer shared by every connection of a trio run: two runs in one process
    # (each in its thread) must not share it. Frequent thread switches make a shared one show.
    results: dict[bytes, bytes] = {}

    def run(tag: bytes) -> None:
        async def main() -> None:
            stream, far = await _pair()
            sock = direct(stream)
            assert sock is not None
            got = bytearray()
            for _ in range(3000):
                far.sendall(tag * 200)
                want = len(got) + 200
                while len(got) < want:
                    got += bytes(await sock.receive())
            results[tag] = bytes(got)
            far.close()
            await stream.aclose()

        trio.run(main)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=(t,)) for t in (b"a", b"b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert results[b"a"] == b"a" * 600_000
    assert results[b"b"] == b"b" * 600_000
