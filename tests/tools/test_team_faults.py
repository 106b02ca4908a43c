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
import signal
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio
from fault_play import Gate, clients, judge, node_of, play_through, record_verifies, team_match

from bench.crash import Server

pytestmark = pytest.mark.slow

LEASE = 2.0
RULES = {"preset": "classic", "team_size": 2}
NAMES = ["alice", "bob", "carol", "dave"]


async def _run(tmp_path: Path, db: str, fault_kind: str) -> None:
    servers = [
        Server(tmp_path, db, ("--node", f"n{i}", "--cluster", "--lease", str(LEASE)))
        for i in (0, 1)
    ]
    for s in servers:
        await trio.to_thread.run_sync(s.start)
    try:
        async with AsyncExitStack() as stack:
            addrs = [s.addr for s in servers]
            # alice hosts on node 0; bob joins her team on node 1, carol team 1 on node 0,
            # dave by the match's invitation on node 1.
            cs = await clients(stack, NAMES, [addrs[0], addrs[1], addrs[0], addrs[1]], addrs)
            handles = await team_match(cs, RULES)
            mid = handles[0].id
            # The host's node referees the match: the fault hits that one.
            assert await node_of(db, mid) == ("n0", "playing")
            victim = servers[0]
            assert victim.proc is not None
            gate = Gate(after=12)

            async def fault() -> None:
                assert victim.proc is not None
                if fault_kind == "kill":
                    await trio.to_thread.run_sync(victim.kill)
                else:
                    os.kill(victim.proc.pid, signal.SIGSTOP)
                    # Paused past its lease: the other node takes the match over. The paused
                    # one wakes holding the match in memory, finds itself fenced, and must
                    # send its players over rather than end anything.
                    while (await node_of(db, mid))[0] != "n1":
                        await trio.sleep(0.2)
                    os.kill(victim.proc.pid, signal.SIGCONT)
                gate.open.set()

            results = await play_through(handles, gate, fault)
            # The woken node is still up: it let go of the match, quietly.
            if fault_kind == "pause":
                assert victim.proc is not None and victim.proc.poll() is None
        assert len(results) == 4
        judge(results)
        won = [r.won for r in results]
        assert won[0] == won[1] and won[2] == won[3] and won[0] != won[2], won
        # Everyone was sent to (or found) the node that finished the match.
        assert await node_of(db, mid) == ("n1", "finished")
        await record_verifies(servers[1].addr, mid)
    finally:
        for s in servers:
            if s.proc is not None and fault_kind == "pause":
                os.kill(s.proc.pid, signal.SIGCONT)
            await trio.to_thread.run_sync(s.stop)


async def test_a_team_matchs_node_killed_mid_match(tmp_path: Path, postgres_db: str) -> None:
    await _run(tmp_path, postgres_db, "kill")


async def test_a_team_matchs_node_paused_past_its_lease(tmp_path: Path, postgres_db: str) -> None:
    await _run(tmp_path, postgres_db, "pause")
