"""HTTP engines (engine/http.py) against a web service in the test: the same JSON bodies as the
line protocol, each failure a fault with its reason, and a whole match through the bridge."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import h11
import pytest
import trio
from helpers import quick_pair
from seabattle.client.api import connect
from seabattle.engine.base import EngineFault
from seabattle.engine.bridge import play_engine_match
from seabattle.engine.builtin import BuiltinEngine
from seabattle.engine.http import HttpEngine
from seabattle.engine.side import Side
from seabattle.protocol.record import verify_record
from seabattle.protocol.rules import preset
from seabattle.protocol.seat_events import YourTurn

RUSSIAN = preset("russian")
#: How the service answers one request: (status, body); ``None`` never answers.
Answer = Callable[[str, dict[str, Any]], tuple[int, bytes] | None]


def first_open(path: str, req: dict[str, Any]) -> tuple[int, bytes] | None:
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


async def service(answer: Answer, nursery: trio.Nursery) -> tuple[str, list[dict[str, Any]]]:
    """An HTTP engine on 127.0.0.1, port 0: its URL, and the requests it got (path and body)."""
    seen: list[dict[str, Any]] = []

    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        body = b""
        request: h11.Request | None = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        assert request is not None
        req = json.loads(body)
        path = request.target.decode()
        seen.append({"path": path, "method": request.method.decode(), "body": req})
        out = answer(path, req)
        if out is None:
            await trio.sleep_forever()
            return
        status, data = out
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
        await stream.send_all(conn.send(h11.Data(data=data)) + conn.send(h11.EndOfMessage()))
        await stream.aclose()

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/engine", seen


def turn(side: Side) -> Side:
    side.feed(YourTurn(side.game, 1, False))
    return side


async def test_hello_placement_and_move_are_posted_as_json(nursery: trio.Nursery) -> None:
    url, seen = await service(first_open, nursery)
    engine = HttpEngine(url, move_time=2)
    hello = await engine.start()
    assert (hello.name, hello.rules, engine.name) == ("first-open", ("russian",), "first-open")
    await engine.new_game(RUSSIAN, 1, 2)
    assert await engine.place(RUSSIAN) is None
    move = await engine.move(turn(Side(RUSSIAN, 1, 2)))
    assert [c.label() for c in move.cells] == ["A1"]
    assert [(s["method"], s["path"]) for s in seen] == [
        ("POST", "/engine/hello"),
        ("POST", "/engine/placement"),
        ("POST", "/engine/move"),
    ]
    assert seen[0]["body"] == {"type": "engine", "protocol": 1}
    assert seen[1]["body"]["type"] == "place" and seen[1]["body"]["game"] == 2
    assert seen[2]["body"]["rules"] == RUSSIAN.to_dict() and seen[2]["body"]["seat"] == 1


async def test_a_service_without_hello_plays_any_rules(nursery: trio.Nursery) -> None:
    def no_hello(path: str, req: dict[str, Any]) -> tuple[int, bytes] | None:
        return (404, b"") if path.endswith("/hello") else first_open(path, req)

    url, _ = await service(no_hello, nursery)
    engine = HttpEngine(url)
    hello = await engine.start()
    assert hello.name == url.split("//")[1].split("/")[0] and hello.plays(preset("classic"))


def failing(path: str, status: int, body: bytes | None) -> Answer:
    def answer(p: str, req: dict[str, Any]) -> tuple[int, bytes] | None:
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
    url, _ = await service(answer, nursery)
    engine = HttpEngine(url, move_time=0.3)
    await engine.start()
    await engine.new_game(RUSSIAN, 0, 1)
    with pytest.raises(EngineFault) as e:
        await engine.place(RUSSIAN)
        await engine.move(turn(Side(RUSSIAN, 0, 1)))
    assert e.value.reason == reason and detail in e.value.detail


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
    url, seen = await service(first_open, nursery)
    engines = [HttpEngine(url), BuiltinEngine("random")]
    out: list[Any] = [None, None]
    async with connect(*server) as a, connect(*server) as b:
        pair = await quick_pair(a, b, {"preset": "russian"}, "blind")

        async def one(i: int) -> None:
            await engines[i].start()
            out[i] = await play_engine_match(pair[i], engines[i])

        async with trio.open_nursery() as n:
            n.start_soon(one, 0)
            n.start_soon(one, 1)
        record = await a.get_record(pair[0].id)
    assert not out[0].faults and out[0].ended and out[0].engine == "first-open"
    assert verify_record(record).ok
    moves = [s["body"] for s in seen if s["path"] == "/engine/move"]
    assert moves and all("salt" not in json.dumps(m) for m in moves)
