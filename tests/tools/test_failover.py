"""Three nodes on one PostgreSQL; SIGKILL one under running matches, again and again, and another
node finishes them with nothing anyone was told lost, no match decided by a kill, and every player
back at its match within the lease and 5 seconds.

Real processes (``seabattle serve --node nI --cluster``), a real PostgreSQL, real TCP: every match
is opened across two nodes (so it begins with a redirect), the players of a killed node reconnect
to any node and are seated or redirected where their match went, every record verifies and holds
every verdict a player was told (``python -m bench.failover --db URL`` is the
long version: 20 kills under 10 pairs).
"""

from __future__ import annotations

import pytest
import trio

from bench.failover import failover_run

# A kill or measuring run of real processes: left out of the quick run (-m "not slow").
pytestmark = pytest.mark.slow


async def test_three_kills_of_cluster_nodes_lose_no_acknowledged_move(postgres_db: str) -> None:
    lines: list[str] = []
    with trio.fail_after(150):
        summary = await failover_run(postgres_db, 3, pairs=1, seed=3, log=lines.append)
    assert summary["problems"] == [], summary
    assert len([line for line in lines if line.startswith("kill ")]) == 3
    assert summary["matches"] >= 2 and summary["verdicts_acknowledged"] > 0
    assert summary["decided_by_kill"] == 0, summary["decided"]
    back = summary["back"]
    assert back["players"] > 0 and back["not_back"] == [], back  # the kills cut someone off
    assert back["p99"] is not None and back["p99"] <= back["bar"], back
    assert summary["ok"], summary
