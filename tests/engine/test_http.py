"""HTTP engines (engine/http.py) against a web service in the test: the same JSON bodies as the
line protocol, each failure a fault with its reason, and a whole match through the bridge."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import h11
import pytest
import trio
from seabattle.engine.base import EngineFault
from seabattle.engine.builtin import BuiltinEngine
from seabattle.engine.http import HttpEngine
from seabattle.engine.side import Side
from seabattle.protocol.record import verify_record
from seabattle.protocol.rules import preset
from seabattle.protocol.seat_events import YourTurn
from test_bridge import server_match

RUSSIAN = preset("russian")
#: How the service answers one request: (status, body); ``None`` never answers; :data:`CLOSE`
#: closes the connection without answering; :class:`Late` answers after a while.
Answer = Callable[[str, dict[str, Any]], "Reply"]


@dataclass(frozen=True)
class Late:
    """An answer sent ``seconds`` after the request."""

    seconds: float
    answer: tuple[int, bytes]


CLOSE: Literal["close"] = "close"
Reply = tuple[int, bytes] | Late | Literal["close"] | None
#: How the service treats its connections: ``keep`` them alive (HTTP/1.1's default); answer
#: ``Connection: close`` and close; answer ``http/1.0``, the body ending where the connection
#: closes; answer ``one`` request a connection, then close it while idle; ``race``: answer one,
#: then read the next request and close without answering (an idle timeout that fired as the
#: next request came); ``twice``: send each answer twice, the copy nobody asked for.
Mode = Literal["keep", "close", "http/1.0", "one", "race", "twice"]


def first_open(path: str, req: dict[str, Any]) -> Reply:
    """A stateless engine: a random fleet, and the first cell of the grid not fired at."""
    if path == "/engine/hello":
        return 200, b'{"type":"hello","name":"first-open","author":"tests","rules":["russian"]}'
    if path == "/engine/placement":
        return 200, b'{"type":"fleet","ships":"random"}'
    if path == "/engine/move":
        cells = [
            f"{chr(65 + c)}{r + 1}"
            for r, row in enumerate(req["grid"])
            for c, mark in enumerate(row)
            if mark == "."
        ]
        return 200, json.dumps({"type": "fire", "cells": cells[: req["count"]]}).encode()
    return 404, b""


@dataclass
class Service:
    """An HTTP engine on 127.0.0.1, port 0: its URL, the requests it got (path, method, body,
    and the number of the connection it came on), the connections it accepted and those open."""

    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    open: int = 0
    _closed: trio.Event = field(default_factory=trio.Event)

    def paths(self) -> list[str]:
        return [s["path"].removeprefix("/engine/") for s in self.seen]

    async def all_closed(self) -> None:
        """Wait until the service saw every connection close."""
        while self.open:
            await self._closed.wait()

    def closed(self) -> None:
        self.open -= 1
        self._closed.set()
        self._closed = trio.Event()


async def read_request(
    stream: trio.SocketStream, conn: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    """The next request on ``conn`` and its body; ``None`` when the client closed instead."""
    request: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, body
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def service(answer: Answer, nursery: trio.Nursery, mode: Mode = "keep") -> Service:
    """Serve ``answer`` in ``mode`` (see :data:`Mode`)."""
    svc = Service()

    async def handle(stream: trio.SocketStream) -> None:
        svc.connections += 1
        svc.open += 1
        number = svc.connections
        conn = h11.Connection(h11.SERVER)
        try:
            for served in itertools.count():
                got = await read_request(stream, conn)
                if got is None:
                    return
                request, body = got
                path = request.target.decode()
                req = json.loads(body)
                svc.seen.append(
                    {"path": path, "method": request.method.decode(), "body": req, "conn": number}
                )
                if mode == "race" and served == 1:
                    return
                out = answer(path, req)
                if out is None:
                    await trio.sleep_forever()
                if out == CLOSE:
                    return
                if isinstance(out, Late):
                    await trio.sleep(out.seconds)
                    out = out.answer
                assert isinstance(out, tuple)
                status, data = out
                if mode == "http/1.0":
                    head = f"HTTP/1.0 {status} Whatever\r\nContent-Type: application/json\r\n\r\n"
                    await stream.send_all(head.encode() + data)
                    return
                headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
                if mode == "close":
                    headers.append(("Connection", "close"))
                response = conn.send(h11.Response(status_code=status, headers=headers))
                response += conn.send(h11.Data(data=data)) + conn.send(h11.EndOfMessage())
                await stream.send_all(response * 2 if mode == "twice" else response)
                if conn.our_state is not h11.DONE or mode in ("one", "twice"):
                    return
                conn.start_next_cycle()
        except trio.BrokenResourceError:
            return  # the client closed first: a late answer has nobody to read it
        finally:
            svc.closed()
            await stream.aclose()

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    svc.url = f"http://127.0.0.1:{port}/engine"
    return svc


@asynccontextmanager
async def http_engine(url: str, **kw: Any) -> AsyncIterator[HttpEngine]:
    """An :class:`HttpEngine` that is closed afterwards, as the shells close theirs."""
    engine = HttpEngine(url, **kw)
    try:
        yield engine
    finally:
        await engine.close()


def turn(side: Side) -> Side:
    side.feed(YourTurn(side.game, 1, False))
    return side


async def play(engine: HttpEngine, moves: int) -> list[str]:
    """Start ``engine``, place, and ask it ``moves`` times for the first move of a game: the
    cells it called."""
    await engine.start()
    await engine.new_game(RUSSIAN, 0, 1)
    assert await engine.place(RUSSIAN) is None
    side = Side(RUSSIAN, 0, 1)
    called = []
    for _ in range(moves):
        move = await engine.move(turn(side))
        called += [c.label() for c in move.cells]
    return called


async def test_hello_placement_and_move_are_posted_as_json(nursery: trio.Nursery) -> None:
    svc = await service(first_open, nursery)
    async with http_engine(svc.url, move_time=2) as engine:
        hello = await engine.start()
        assert (hello.name, hello.rules, engine.name) == ("first-open", ("russian",), "first-open")
        await engine.new_game(RUSSIAN, 1, 2)
        assert await engine.place(RUSSIAN) is None
        move = await engine.move(turn(Side(RUSSIAN, 1, 2)))
    assert [c.label() for c in move.cells] == ["A1"]
    seen = svc.seen
    assert [(s["method"], s["path"]) for s in seen] == [
        ("POST", "/engine/hello"),
        ("POST", "/engine/placement"),
        ("POST", "/engine/move"),
    ]
    assert seen[0]["body"] == {"type": "engine", "protocol": 1}
    assert seen[1]["body"]["type"] == "place" and seen[1]["body"]["game"] == 2
    assert seen[2]["body"]["rules"] == RUSSIAN.to_dict() and seen[2]["body"]["seat"] == 1


async def test_requests_reuse_one_connection_until_the_engine_is_closed(
    nursery: trio.Nursery,
) -> None:
    svc = await service(first_open, nursery)
    async with http_engine(svc.url) as engine:
        assert await play(engine, 5) == ["A1"] * 5
        assert (svc.connections, svc.open) == (1, 1)
    with trio.fail_after(5):
        await svc.all_closed()  # closing the engine closed its connection
    assert svc.paths() == ["hello", "placement"] + ["move"] * 5
    assert {s["conn"] for s in svc.seen} == {1}


@pytest.mark.parametrize("mode", ["close", "http/1.0", "one"])
async def test_a_service_that_closes_after_every_answer_still_plays(
    nursery: trio.Nursery, mode: Mode
) -> None:
    svc = await service(first_open, nursery, mode)
    async with http_engine(svc.url) as engine:
        assert await play(engine, 4) == ["A1"] * 4
    # A connection for each request, each asked once: the engine did not send any twice.
    assert svc.paths() == ["hello", "placement"] + ["move"] * 4
    assert [s["conn"] for s in svc.seen] == list(range(1, 7))


async def test_a_request_the_kept_connection_closed_under_is_sent_once_more(
    nursery: trio.Nursery,
) -> None:
    svc = await service(first_open, nursery, "race")
    async with http_engine(svc.url) as engine:
        assert await play(engine, 3) == ["A1"] * 3
    # Each request after the first met the previous one's connection closing, and went again
    # on a new connection, which answered it.
    assert svc.paths() == ["hello"] + [p for p in ["placement"] + ["move"] * 3 for _ in "12"]
    assert [s["conn"] for s in svc.seen] == [1, 1, 2, 2, 3, 3, 4, 4, 5]


async def test_a_request_is_sent_again_once_only(nursery: trio.Nursery) -> None:
    def hangs_up(path: str, req: dict[str, Any]) -> Reply:
        return CLOSE if path.endswith("/move") else first_open(path, req)

    svc = await service(hangs_up, nursery)
    async with http_engine(svc.url) as engine:
        with pytest.raises(EngineFault) as e:
            await play(engine, 1)
    assert e.value.reason == "crashed" and "closed before an answer" in e.value.detail
    assert svc.paths() == ["hello", "placement", "move", "move"]
    assert [s["conn"] for s in svc.seen] == [1, 1, 1, 2]


async def test_a_new_connection_closed_before_an_answer_is_crashed(
    nursery: trio.Nursery,
) -> None:
    svc = await service(lambda path, req: CLOSE, nursery)
    async with http_engine(svc.url) as engine:
        with pytest.raises(EngineFault) as e:
            await engine.start()
    assert e.value.reason == "crashed" and svc.paths() == ["hello"]


async def test_a_late_answer_is_never_read_as_the_next_requests(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    moves = 0

    def late_first_move(path: str, req: dict[str, Any]) -> Reply:
        nonlocal moves
        if path.endswith("/move"):
            moves += 1
            if moves == 1:
                return Late(3, (200, b'{"type":"fire","cells":["J10"]}'))
        return first_open(path, req)

    svc = await service(late_first_move, nursery)
    async with http_engine(svc.url, move_time=2) as engine:
        with pytest.raises(EngineFault) as e:
            await play(engine, 1)
        assert e.value.reason == "timeout"
        # The next request goes out at once: the late answer comes while it waits for its own.
        move = await engine.move(turn(Side(RUSSIAN, 0, 1)))
    assert [c.label() for c in move.cells] == ["A1"]
    assert [s["conn"] for s in svc.seen] == [1, 1, 1, 2]


async def test_bytes_after_an_answer_are_not_read_as_the_next_answer(
    nursery: trio.Nursery,
) -> None:
    svc = await service(first_open, nursery, "twice")
    async with http_engine(svc.url) as engine:
        assert await play(engine, 3) == ["A1"] * 3
    assert [s["conn"] for s in svc.seen] == list(range(1, 6))


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"<html>", "garbage"), (b'{"type":"fleet","ships":[]}', "illegal_fleet")],
    ids=["garbage", "illegal_fleet"],
)
async def test_after_a_fault_the_next_request_has_a_new_connection(
    nursery: trio.Nursery, body: bytes, reason: str
) -> None:
    svc = await service(failing("/engine/placement", 200, body), nursery)
    async with http_engine(svc.url) as engine:
        with pytest.raises(EngineFault) as e:
            await play(engine, 0)
        assert e.value.reason == reason
        move = await engine.move(turn(Side(RUSSIAN, 0, 1)))
    assert [c.label() for c in move.cells] == ["A1"]
    assert [s["conn"] for s in svc.seen] == [1, 1, 2]


async def test_a_service_without_hello_plays_any_rules(nursery: trio.Nursery) -> None:
    def no_hello(path: str, req: dict[str, Any]) -> Reply:
        return (404, b"") if path.endswith("/hello") else first_open(path, req)

    svc = await service(no_hello, nursery)
    async with http_engine(svc.url) as engine:
        hello = await engine.start()
        assert await play(engine, 1) == ["A1"]
    assert hello.name == svc.url.split("//")[1].split("/")[0] and hello.plays(preset("classic"))
    assert svc.connections == 1  # a 404 is a whole answer: the connection is kept


def failing(path: str, status: int, body: bytes | None) -> Answer:
    def answer(p: str, req: dict[str, Any]) -> Reply:
        if p == path:
            return None if body is None else (status, body)
        return first_open(p, req)

    return answer


@pytest.mark.parametrize(
    ("answer", "reason", "detail"),
    [
        (failing("/engine/move", 500, b"Traceback"), "crashed", "/move answered HTTP 500"),
        (failing("/engine/move", 200, None), "timeout", "no answer from /move in 0.3 s"),
        (failing("/engine/move", 200, b"<html>"), "garbage", "not JSON"),
        (failing("/engine/move", 302, b"{}"), "garbage", "HTTP 302, not 200"),
        (failing("/engine/move", 200, b'{"type":"fire","cells":["K1"]}'), "illegal_move", "K1"),
        (failing("/engine/placement", 200, b'{"type":"fleet","ships":[]}'), "illegal_fleet", ""),
    ],
    ids=["500", "slow", "html", "redirect", "off-grid", "no-ships"],
)
async def test_each_failure_is_a_fault(
    nursery: trio.Nursery, answer: Answer, reason: str, detail: str
) -> None:
    svc = await service(answer, nursery)
    async with http_engine(svc.url, move_time=0.3) as engine:
        await engine.start()
        await engine.new_game(RUSSIAN, 0, 1)
        with pytest.raises(EngineFault) as e:
            await engine.place(RUSSIAN)
            await engine.move(turn(Side(RUSSIAN, 0, 1)))
    assert e.value.reason == reason and detail in e.value.detail


async def test_an_answer_that_is_not_http_is_garbage(nursery: trio.Nursery) -> None:
    async def babble(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    listeners = await nursery.start(partial(trio.serve_tcp, babble, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    async with http_engine(f"http://127.0.0.1:{port}") as engine:
        with pytest.raises(EngineFault) as e:
            await engine.start()
    assert e.value.reason == "garbage" and "not HTTP" in e.value.detail


async def test_nobody_listening_is_crashed() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # the port is free again: a connection there is refused
    with pytest.raises(EngineFault) as e:
        await HttpEngine(f"http://127.0.0.1:{port}").start()
    assert e.value.reason == "crashed"


async def test_an_http_engine_plays_a_verified_match_through_the_bridge(
    nursery: trio.Nursery, server: tuple[str, int]
) -> None:
    svc = await service(first_open, nursery)
    first, _, record = await server_match(server, [HttpEngine(svc.url), BuiltinEngine("random")])
    assert not first.faults and first.ended and first.engine == "first-open"
    assert verify_record(record).ok
    moves = [s["body"] for s in svc.seen if s["path"] == "/engine/move"]
    assert moves and all("salt" not in json.dumps(m) for m in moves)
    assert svc.connections == 1  # the whole match on one kept-alive connection
