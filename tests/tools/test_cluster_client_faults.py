"""Reference clients on a cluster under the faults operators meet: the players' side of
``test_faults.py``, whose players speak the raw protocol. Bugs of a client's way back (its
resume, its mirror, a bot's refusals) show only here.

* The store is stopped for three leases while 1-vs-1 matches (both modes) and a 2-vs-2 match
  are played, and started again: the nodes cannot journal, their leases run out, every node
  must wait for the store rather than end anything, and the players' shots fired into the
  outage are answered once it is back.
* The store is frozen (SIGSTOP) for three leases under 1-vs-1 matches whose shot clock is shorter
  than that: the matches stand still, nobody loses on time, and no node takes another over
  when it thaws.
* The node that referees two 1-vs-1 matches (both modes) is SIGSTOPped past its lease and
  woken (SIGCONT) once the other node took them over: the players go over, the woken node
  writes nothing more into them.
* Under ``serve --workers 2``, the worker that referees two 1-vs-1 matches is SIGKILLed; its
  supervisor starts it again, and the matches are taken up where they were.
* Under ``serve --workers 2``, that worker is SIGSTOPped past its lease, its players knowing only
  the shared port: they notice after 60 s of silence (spec 4.6), and the matches the other
  worker took over wait for them (spec 4.10) rather than forfeit them.

Success is judged from what the players were told against the store and the records: every
player ends with ``match_over`` and no lie, every game ended on the board (no forfeit, no
abort), the store says each match finished, and each record verifies. Real processes
(``seabattle serve --node nI --cluster``, ``serve --workers``), a PostgreSQL of the test's own
that it stops and starts, real TCP.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from fault_play import (
    Gate,
    clients,
    judge,
    node_of,
    play_through,
    record_verifies,
    team_match,
)
from seabattle.cli.common import _hostport
from seabattle.client.api import Client, MatchHandle

from bench.crash import Server
from bench.pg import Postgres

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("postgres_binaries")]

LEASE = 2.0
ONE = {"preset": "classic"}
TEAM = {"preset": "classic", "team_size": 2}


@asynccontextmanager
async def _serving(
    tmp_path: Path, *servers_args: tuple[str, ...]
) -> AsyncIterator[tuple[Postgres, str, list[Server]]]:
    """A PostgreSQL of our own (so that it can be stopped), and a ``seabattle serve`` on it for
    each of ``servers_args`` (its options), all signing with one key."""
    pg = Postgres()
    await trio.to_thread.run_sync(pg.start)
    servers: list[Server] = []
    try:
        db = await trio.to_thread.run_sync(pg.create_database, "seabattle")
        # One key for them all, one folder (and log) each.
        for i, args in enumerate(servers_args):
            folder = tmp_path / f"s{i}"
            folder.mkdir()
            if i:
                shutil.copy(tmp_path / "s0" / "server.key", folder / "server.key")
            server = Server(folder, db, args)
            servers.append(server)
            await trio.to_thread.run_sync(server.start)
        yield pg, db, servers
    finally:
        pg.thaw()  # a test that failed in a freeze
        for s in servers:
            if s.proc is not None:
                os.kill(s.proc.pid, signal.SIGCONT)
            await trio.to_thread.run_sync(s.stop)
        await trio.to_thread.run_sync(pg.close)


def _cluster(tmp_path: Path) -> AbstractAsyncContextManager[tuple[Postgres, str, list[Server]]]:
    """Two nodes of a cluster (``serve --node nI --cluster``) on a PostgreSQL of our own."""
    return _serving(
        tmp_path, *(("--node", f"n{i}", "--cluster", "--lease", str(LEASE)) for i in (0, 1))
    )


async def _pair(cs: list[Client], mode: str, rules: dict[str, object] = ONE) -> list[MatchHandle]:
    host, guest = cs
    handle, invite = await host.create(rules, mode)
    assert invite is not None
    return [handle, await guest.join(invite)]


async def _all_finished(db: str, addr: tuple[str, int], mids: set[bytes]) -> None:
    """Each match finished, by the store; its record (from any node: they share the store)
    verifies."""
    for mid in mids:
        node, status = await node_of(db, mid)
        assert status == "finished", (mid.hex(), node, status)
        await record_verifies(addr, mid)


def _three_leases_of(
    gate: Gate, begin: Callable[[], object], end: Callable[[], object]
) -> Callable[[], Awaitable[None]]:
    """The fault for :func:`play_through`: ``begin`` a store fault, open ``gate`` (the shots
    now are fired into it), and ``end`` it three leases later."""

    async def fault() -> None:
        await trio.to_thread.run_sync(begin)
        gate.open.set()
        await trio.sleep(3 * LEASE)
        await trio.to_thread.run_sync(end)

    return fault


async def test_reference_clients_play_through_a_store_outage_of_three_leases(
    tmp_path: Path,
) -> None:
    async with _cluster(tmp_path) as (pg, db, servers), AsyncExitStack() as stack:
        a0, a1 = (s.addr for s in servers)
        addrs = [a0, a1]
        # A blind pair hosted on node 0 and joined on node 1 (it runs where it was joined), a
        # custody pair on node 0, four players of a team match on both.
        cs = await clients(
            stack,
            ["ann", "ben", "cat", "dan", "eve", "fay", "gus", "hal"],
            [a0, a1, a0, a0, a0, a1, a0, a1],
            addrs,
        )
        handles = await _pair(cs[0:2], "blind") + await _pair(cs[2:4], "custody")
        handles += await team_match(cs[4:8], TEAM)
        gate = Gate(after=24)

        outage = _three_leases_of(gate, partial(pg.stop, "fast"), pg.start)
        results = await play_through(handles, gate, outage)
        assert len(results) == 8
        judge(results)
        await _all_finished(db, a1, {h.id for h in handles})
        # No node gave up: both still serve.
        assert all(s.proc is not None and s.proc.poll() is None for s in servers)


async def test_reference_clients_play_through_a_store_frozen_for_three_leases(
    tmp_path: Path,
) -> None:
    # The database is SIGSTOPped (a paused VM, a storage stall), not stopped: the nodes' calls
    # neither fail nor return. The matches must stand still as when the store is away (a shot
    # clock shorter than the freeze, whose first expiry forfeits, would show it), and when it
    # thaws, with every lease looking ended, no node takes the other's matches over.
    clocked = {**ONE, "clocks": {"shot": 4, "max_expiries": 1}}
    async with _cluster(tmp_path) as (pg, db, servers), AsyncExitStack() as stack:
        a0, a1 = (s.addr for s in servers)
        cs = await clients(stack, ["ann", "ben", "cat", "dan"], [a0, a0, a1, a1], [a0, a1])
        handles = await _pair(cs[0:2], "blind", clocked) + await _pair(cs[2:4], "custody", clocked)
        mids = {h.id for h in handles}
        where = {mid: (await node_of(db, mid))[0] for mid in mids}
        assert sorted(where.values()) == ["n0", "n1"]
        gate = Gate(after=10)

        results = await play_through(handles, gate, _three_leases_of(gate, pg.freeze, pg.thaw))
        assert len(results) == 4
        judge(results)
        await _all_finished(db, a1, mids)
        assert {mid: (await node_of(db, mid))[0] for mid in mids} == where
        assert all(s.proc is not None and s.proc.poll() is None for s in servers)


async def test_reference_clients_play_on_after_their_node_paused_past_its_lease(
    tmp_path: Path,
) -> None:
    async with _cluster(tmp_path) as (_, db, servers), AsyncExitStack() as stack:
        a0, a1 = (s.addr for s in servers)
        cs = await clients(stack, ["ann", "ben", "cat", "dan"], [a0, a0, a0, a0], [a0, a1])
        handles = await _pair(cs[0:2], "blind") + await _pair(cs[2:4], "custody")
        mids = {h.id for h in handles}
        for mid in mids:
            assert await node_of(db, mid) == ("n0", "playing")
        victim = servers[0]
        assert victim.proc is not None
        pid = victim.proc.pid
        gate = Gate(after=10)

        async def pause() -> None:
            os.kill(pid, signal.SIGSTOP)
            # Past its lease: the other node takes both matches over; then it wakes.
            for mid in mids:
                while (await node_of(db, mid))[0] != "n1":
                    await trio.sleep(0.2)
            os.kill(pid, signal.SIGCONT)
            gate.open.set()

        results = await play_through(handles, gate, pause)
        assert len(results) == 4
        judge(results)
        await _all_finished(db, a1, mids)
        assert victim.proc is not None and victim.proc.poll() is None  # woken, still up


@asynccontextmanager
async def _two_workers(
    tmp_path: Path, *, other_own: bool
) -> AsyncIterator[tuple[str, Server, list[dict[str, Any]], list[MatchHandle]]]:
    """``serve --workers 2`` on a PostgreSQL of our own, and a blind and a custody match that its
    first worker referees, their players connected there; they know the shared port, and the
    other worker's own port if ``other_own``. The database, the supervisor, its workers' status
    and the match handles."""
    async with (
        _serving(tmp_path, ("--workers", "2", "--lease", str(LEASE))) as (_, db, (supervisor,)),
        AsyncExitStack() as stack,
    ):
        workers = supervisor.status["workers"]
        own = [_hostport(w["own"]) for w in workers]
        knows = [own[1], supervisor.addr] if other_own else [supervisor.addr]
        cs = await clients(stack, ["ann", "ben", "cat", "dan"], [own[0]] * 4, knows)
        handles = await _pair(cs[0:2], "blind") + await _pair(cs[2:4], "custody")
        for mid in {h.id for h in handles}:
            assert await node_of(db, mid) == (workers[0]["node"], "playing")
        yield db, supervisor, workers, handles


async def test_reference_clients_play_on_after_their_worker_is_killed(tmp_path: Path) -> None:
    # serve --workers 2: the worker that referees two matches (both modes) is SIGKILLed; its
    # supervisor starts it again, and its matches are taken up (by it, or by the other worker
    # once the lease ran out). The players know the shared port and the other worker's own.
    async with _two_workers(tmp_path, other_own=True) as (db, supervisor, workers, handles):
        mids = {h.id for h in handles}

        async def kill() -> None:
            os.kill(workers[0]["pid"], signal.SIGKILL)
            gate.open.set()

        gate = Gate(after=10)
        results = await play_through(handles, gate, kill)
        assert len(results) == 4
        judge(results)
        await _all_finished(db, supervisor.addr, mids)
        assert supervisor.proc is not None and supervisor.proc.poll() is None


async def test_reference_clients_play_on_after_their_worker_paused_past_its_lease(
    tmp_path: Path,
) -> None:
    # serve --workers 2: the worker that referees two matches is SIGSTOPped past its lease and
    # woken once the other worker took them over. The players know only the shared port, which
    # the kernel may still hand a new connection of theirs to the stopped worker's backlog.
    async with _two_workers(tmp_path, other_own=False) as (db, supervisor, workers, handles):
        mids = {h.id for h in handles}
        pid = workers[0]["pid"]

        async def pause() -> None:
            os.kill(pid, signal.SIGSTOP)
            gate.open.set()  # the shots now are fired into the stopped worker
            try:
                for mid in mids:
                    while (await node_of(db, mid))[0] != workers[1]["node"]:
                        await trio.sleep(0.2)
                # Play goes on on the other worker before this one wakes.
                moved = gate.fired
                with trio.fail_after(150):
                    while gate.fired < moved + 8:
                        await trio.sleep(0.2)
            finally:
                os.kill(pid, signal.SIGCONT)

        gate = Gate(after=10)
        results = await play_through(handles, gate, pause)
        assert len(results) == 4
        judge(results)
        await _all_finished(db, supervisor.addr, mids)
        assert supervisor.proc is not None and supervisor.proc.poll() is None
