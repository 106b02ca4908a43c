"""A team match on a cluster under the faults operators meet: the node that referees it is
SIGKILLed, or SIGSTOPped past its lease and woken (SIGCONT) once another node took the match
over. Every member, captains
and the others, joined on two nodes, gets back to the match where it went and plays it to its
end: nothing is decided by the fault, the woken node writes nothing more into it, and the
record verifies.

Real processes (``seabattle serve --node nI --cluster``), a real PostgreSQL, real TCP, the
reference client. The callers hold their shots at a gate while the fault is injected, so that
it always falls in the middle of play.
"""

from __future__ import annotations

import os
import random
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import Client, MatchHandle, connect
from seabattle.protocol.record import verify_record
from seabattle.server.store import Store

from bench.crash import Server

pytestmark = pytest.mark.slow

LEASE = 2.0
RULES = {"preset": "classic", "team_size": 2}
NAMES = ("alice", "bob", "carol", "dave")
#: Reasons a game may end for in these runs: on the board only.
BOARD = {"fleet_sunk"}


class _Gate:
    """Shared by the four players: once ``after`` shots were fired, the callers wait for
    ``open`` before the next; ``held`` is set when the first of them waits."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.fired = 0
        self.held = trio.Event()
        self.open = trio.Event()


class _Gated:
    """A match handle whose shots pass ``gate`` (everything else is the handle's own)."""

    def __init__(self, handle: MatchHandle, gate: _Gate) -> None:
        self._h = handle
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._h, name)

    async def fire(self, cells: Any) -> None:
        g = self._gate
        g.fired += 1
        if g.fired > g.after and not g.open.is_set():
            g.held.set()
            await g.open.wait()
        await self._h.fire(cells)


async def _join(c: Client, code: str, out: dict[str, MatchHandle], who: str) -> None:
    out[who] = await c.join(code)


async def _team_match(
    stack: AsyncExitStack, addrs: list[tuple[str, int]]
) -> tuple[list[Client], list[MatchHandle]]:
    """alice hosts on node 0; bob joins her team on node 1, carol team 1 on node 0, dave by the
    match's invitation on node 1. Every client knows both nodes."""
    where = [addrs[0], addrs[1], addrs[0], addrs[1]]
    clients = [
        await stack.enter_async_context(
            connect(*where[i], name=n, also=addrs)
        )
        for i, n in enumerate(NAMES)
    ]
    host, invite = await clients[0].create(RULES, "blind")
    assert host.team_invites is not None and invite is not None
    joined: dict[str, MatchHandle] = {}
    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            n.start_soon(_join, clients[1], host.team_invites[0], joined, "bob")
            n.start_soon(_join, clients[2], host.team_invites[1], joined, "carol")
            n.start_soon(_join, clients[3], invite, joined, "dave")
    return clients, [host, joined["bob"], joined["carol"], joined["dave"]]


async def _node_of(db: str, mid: bytes) -> tuple[str | None, str]:
    async with Store.open(db) as store:
        row = await store.get_match(mid.hex())
    assert row is not None
    return row.node, row.status


async def _run(tmp_path: Path, db: str, fault: str) -> None:
    servers = [
        Server(tmp_path, db, ("--node", f"n{i}", "--cluster", "--lease", str(LEASE)))
        for i in (0, 1)
    ]
    for s in servers:
        await trio.to_thread.run_sync(s.start)
    try:
        async with AsyncExitStack() as stack:
            _, handles = await _team_match(stack, [s.addr for s in servers])
            mid = handles[0].id
            # The host's node referees the match: the fault hits that one.
            assert await _node_of(db, mid) == ("n0", "playing")
            victim = servers[0]
            assert victim.proc is not None
            gate = _Gate(after=12)
            results: list[BotResult | None] = [None] * 4

            async def one(i: int) -> None:
                gated: Any = _Gated(handles[i], gate)
                results[i] = await play_match(gated, make_strategy("hunt"), random.Random(i))

            with trio.fail_after(240):
                async with trio.open_nursery() as n:
                    for i in range(4):
                        n.start_soon(one, i)
                    await gate.held.wait()
                    if fault == "kill":
                        await trio.to_thread.run_sync(victim.kill)
                        gate.open.set()
                    else:
                        os.kill(victim.proc.pid, signal.SIGSTOP)
                        # Paused past its lease: the other node takes the match over. The
                        # paused one wakes holding the match in memory, finds itself fenced,
                        # and must send its players over rather than end anything.
                        while (await _node_of(db, mid))[0] != "n1":
                            await trio.sleep(0.2)
                        os.kill(victim.proc.pid, signal.SIGCONT)
                        gate.open.set()
            # The woken node is still up: it let go of the match, quietly.
            if fault == "pause":
                assert victim.proc is not None and victim.proc.poll() is None
        for r in results:
            assert r is not None and r.ended and not r.lies, r
        done = [r for r in results if r is not None]
        assert all(r.reason in BOARD for r in done), [r.reason for r in done]
        won = [r.won for r in done]
        assert won[0] == won[1] and won[2] == won[3] and won[0] != won[2], won
        # Everyone was sent to (or found) the node that finished the match.
        assert await _node_of(db, mid) == ("n1", "finished")
        async with connect(*servers[1].addr, name="reader") as reader:
            signed = await reader.get_record(mid)
        report = verify_record(signed)
        assert report.ok, report
    finally:
        for s in servers:
            if s.proc is not None and fault == "pause":
                os.kill(s.proc.pid, signal.SIGCONT)
            await trio.to_thread.run_sync(s.stop)


async def test_a_team_matchs_node_killed_mid_match(tmp_path: Path, postgres_db: str) -> None:
    await _run(tmp_path, postgres_db, "kill")


async def test_a_team_matchs_node_paused_past_its_lease(tmp_path: Path, postgres_db: str) -> None:
    await _run(tmp_path, postgres_db, "pause")
