"""What the fault tests' reference-client players share: a gate that holds their shots while a
fault is injected, the matches they set up on two nodes, and what they check afterwards
(every player told how its match ended, no lie, games ended on the board, the record)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import trio
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import Client, MatchHandle, connect
from seabattle.protocol.record import verify_record
from seabattle.server.store import Store

#: Reasons a game may end for in these runs: on the board only.
BOARD = {"fleet_sunk"}


class Gate:
    """Shared by the players of a run: once ``after`` shots were fired, the callers wait for
    ``open`` before the next; ``held`` is set when the first of them waits."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.fired = 0
        self.held = trio.Event()
        self.open = trio.Event()


class Gated:
    """A match handle whose shots pass ``gate`` (everything else is the handle's own)."""

    def __init__(self, handle: MatchHandle, gate: Gate) -> None:
        self._h = handle
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._h, name)

    async def fire(self, cells: Any) -> None:
        """Fire ``cells``, once the gate lets this shot through."""
        g = self._gate
        g.fired += 1
        if g.fired > g.after and not g.open.is_set():
            g.held.set()
            await g.open.wait()
        await self._h.fire(cells)


async def clients(
    stack: AsyncExitStack, names: list[str], where: list[tuple[str, int]], addrs: list[Any]
) -> list[Client]:
    """A reference client for each of ``names``, connected to ``where[i]``, knowing every
    node of ``addrs`` (it goes to another when its node stops answering)."""
    return [
        await stack.enter_async_context(connect(*where[i], name=n, also=addrs))
        for i, n in enumerate(names)
    ]


async def team_match(cs: list[Client], rules: dict[str, Any]) -> list[MatchHandle]:
    """``cs[0]`` hosts a 2-vs-2 match; ``cs[1]`` joins its team, ``cs[2]`` the other team,
    ``cs[3]`` by the match's invitation."""
    host, invite = await cs[0].create(rules, "blind")
    assert host.team_invites is not None and invite is not None
    joined: dict[int, MatchHandle] = {}

    async def join(i: int, code: str) -> None:
        joined[i] = await cs[i].join(code)

    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            n.start_soon(join, 1, host.team_invites[0])
            n.start_soon(join, 2, host.team_invites[1])
            n.start_soon(join, 3, invite)
    return [host, joined[1], joined[2], joined[3]]


async def play_all(handles: list[MatchHandle], gate: Gate) -> list[BotResult]:
    """Every handle played to its end by a ``hunt`` bot, each shot through ``gate``."""
    results: list[BotResult | None] = [None] * len(handles)

    async def one(i: int) -> None:
        gated: Any = Gated(handles[i], gate)
        results[i] = await play_match(gated, make_strategy("hunt"), random.Random(i))

    async with trio.open_nursery() as n:
        for i in range(len(handles)):
            n.start_soon(one, i)
    return [r for r in results if r is not None]


async def play_through(
    handles: list[MatchHandle], gate: Gate, fault: Callable[[], Awaitable[None]]
) -> list[BotResult]:
    """Play every match to its end (:func:`play_all`), running ``fault`` once the gate holds
    the first shot held back; ``fault`` opens the gate."""
    results: list[BotResult] = []

    async def play() -> None:
        results.extend(await play_all(handles, gate))

    with trio.fail_after(240):
        async with trio.open_nursery() as n:
            n.start_soon(play)
            await gate.held.wait()
            await fault()
    return results


async def node_of(db: str, mid: bytes) -> tuple[str | None, str]:
    """The node the store says referees match ``mid``, and its status."""
    async with Store.open(db) as store:
        row = await store.get_match(mid.hex())
    assert row is not None
    return row.node, row.status


def judge(results: list[BotResult]) -> None:
    """Every player was told how its match ended, saw no lie, and its games ended on the
    board: none was decided by the fault."""
    for r in results:
        assert r.ended and not r.lies, r
    assert all(r.reason in BOARD for r in results), [r.reason for r in results]


async def record_verifies(addr: tuple[str, int], mid: bytes) -> None:
    """Match ``mid``'s signed record, fetched from the node at ``addr``, verifies."""
    async with connect(*addr, name="reader") as reader:
        signed = await reader.get_record(mid)
    report = verify_record(signed)
    assert report.ok, report
