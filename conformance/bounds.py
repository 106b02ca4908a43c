"""Cases on the bounds and the order of a message's checks (spec 2.4, 2.5, 5.2-5.4): integers at
the edge of their range, messages wrong in two ways, and ``join``'s rule that ties two fields.

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from typing import Any

from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.errors import ErrorCode

from .probe import Probe, describe
from .results import CaseFailed, Trace
from .suite import Suite, case

TOP = m.MAX_UINT32
"""The largest value of `id`, `seq`, `n` and `ref` (2^32-1, spec 2.4)."""


async def _send_map(p: Probe, body: dict[str, Any], what: str) -> None:
    """Send ``body`` as it is, whatever the message layer would say of it."""
    data = canonical_pack(body)
    await p.send_raw(len(data).to_bytes(4, "big") + data, what)


async def _answer(p: Probe, ref: int) -> m.Ok | m.Error:
    """The ``ok`` or ``error`` that must answer the request or shot ``ref``."""
    msg = await p.expect(m.Ok, m.Error)
    assert isinstance(msg, m.Ok | m.Error)
    if msg.ref != ref:
        raise CaseFailed(f"{p.name}: answer {describe(msg)} has ref {msg.ref!r}, not {ref}")
    return msg


@case(
    "2.4-integer-bounds",
    "2.4 From map to message",
    "Ids, seqs and n at 2^32-1 and at 2^32",
    "An integer outside it is refused with `BAD_MESSAGE`, as a value of the wrong type is [...] "
    "No range is negative or goes past 2^32-1, so that every valid value fits a msgpack `uint32`",
    "list{id: 2^32-1} answered with ok{ref: 2^32-1}; fire{seq: 2^32-1} for an unknown match "
    "refused with ref 2^32-1; ping{n: 2^32-1} answered by pong{n: 2^32-1}; list{id: 2^32}, "
    "fire{seq: 2^32} and ping{n: 2^32} refused with BAD_MESSAGE (ref: nil); the session goes on",
)
async def _integer_bounds(s: Suite, t: Trace) -> None:
    p = await s.player(t, "C")
    await p.send(m.ListMatches(TOP))
    if not isinstance(await _answer(p, TOP), m.Ok):
        raise CaseFailed("list with id 2^32-1 is refused")
    await p.send(m.Fire(bytes(16), 1, ("A1",), 0, TOP))
    t.expect("a shot at no match is refused, naming its seq 2^32-1")
    if not isinstance(await _answer(p, TOP), m.Error):
        raise CaseFailed("a fire at an unknown match was not refused")
    await p.send(m.Ping(TOP))
    pong = await p.expect(m.Pong)
    assert isinstance(pong, m.Pong)
    if pong.n != TOP:
        raise CaseFailed(f"pong n={pong.n}, ping n={TOP}")
    over = TOP + 1
    for body in (
        {"t": "list", "id": over},
        {"t": "fire", "match": bytes(16), "game": 1, "cells": ["A1"], "member": 0, "seq": over},
        {"t": "ping", "n": over},
    ):
        await _send_map(p, body, f"{body['t']} with {list(body)[-1]} = 2^32")
        await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    t.expect("the session goes on: ping answered by pong")
    await p.alive()
    await p.aclose()


@case(
    "2.5-check-order",
    "2.5 What a refusal does to the session",
    "A message wrong in two ways gets the first check's code",
    "A receiver checks a frame in this order and refuses a message with the code of the first "
    "check that fails; it makes no later check.",
    "before the handshake: create{id: true} BAD_MESSAGE (shape before state), welcome "
    "UNEXPECTED_MESSAGE (direction before state); once ready: welcome without guests "
    "BAD_MESSAGE (shape before direction), hello with an extra key BAD_MESSAGE (shape before "
    "state), hello UNEXPECTED_MESSAGE; the session goes on",
)
async def _check_order(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    create = {"t": "create", "id": True, "rules": {"preset": "classic"}, "mode": "blind"}
    await _send_map(p, create | {"public": True}, "create with id = true, before hello")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    welcome = {
        "t": "welcome",
        "version": 2,
        "caps": [],
        "server": bytes(32),
        "challenge": bytes(32),
        "guests": True,
    }
    await _send_map(p, welcome, "welcome (S->C), before hello")
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    t.expect("the handshake still works")
    await p.login()
    without = {k: v for k, v in welcome.items() if k != "guests"}
    await _send_map(p, without, "welcome (S->C) without guests")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    hello = {"t": "hello", "versions": [2], "agent": "conformance", "caps": []}
    await _send_map(p, hello | {"zz": 0}, "hello with an extra key, once ready")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await _send_map(p, hello, "hello, once ready")
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    t.expect("the session goes on: ping answered by pong")
    await p.alive()
    await p.aclose()


@case(
    "2.5-join-one-of",
    "2.5 What a refusal does to the session",
    "join naming both or neither of match and invite",
    "a `join` with both or neither of `match` and `invite`, `BAD_MESSAGE` (5.3)",
    "before the handshake: join{match, invite} HANDSHAKE_REQUIRED (state before the receiver's "
    "rule); once ready: join with both, and join with neither, error{BAD_MESSAGE, ref: id}; the "
    "match stays open and is joined by its invitation",
)
async def _join_one_of(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A")
    data = await a.ok(lambda i: m.Create(i, {"preset": "classic"}, "blind", False))
    mid, invite = data["match"], data["invite"]
    b = await s.connect(t, "B")
    await b.send(m.Join(1, mid, invite))
    await b.expect_error(ErrorCode.HANDSHAKE_REQUIRED, None)
    await b.login()
    for match, code in ((mid, invite), (None, None)):
        rid = b.next_id()
        await b.send(m.Join(rid, match, code))
        ans = await _answer(b, rid)
        if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.BAD_MESSAGE):
            raise CaseFailed(f"join with match={match!r} invite={code!r}: got {describe(ans)}")
    t.expect("nothing was joined: the invitation still works")
    joined = await b.ok(lambda i: m.Join(i, None, invite))
    if joined.get("match") != mid:
        raise CaseFailed("join by invitation: ok.data.match is not the match")
