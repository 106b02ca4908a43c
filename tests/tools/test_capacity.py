"""The capacity figures (``python -m bench.capacity``) are measured, not assumed:
a short run on a real PostgreSQL reports every figure BENCHMARKS.md's capacity model uses, from
PostgreSQL's own counters and the processes' CPU time."""

from __future__ import annotations

import pytest

from bench.capacity import capacity_run, pairing_run

# A kill or measuring run of real processes: left out of the quick run (-m "not slow").
pytestmark = pytest.mark.slow


async def test_a_short_capacity_run_reports_every_figure(postgres_db: str) -> None:
    result = await capacity_run(postgres_db, 1, pairs=1, seconds=4)
    assert result["inputs"] > 0 and result["inputs_per_s"] > 0
    # Every accepted input is one journal row, written before anything it caused was sent.
    assert 0.5 <= result["journal_rows_per_input"] <= 1.5
    assert result["wal_bytes_per_input"] > 0 and result["pg_commits_per_s"] > 0
    assert result["pg_cpu_s_per_1k_inputs"] > 0 and result["node_cpu_s_per_1k_inputs"] > 0
    assert result["machine"]["cores"] >= 1


async def test_pairing_across_nodes_is_measured(postgres_db: str) -> None:
    result = await pairing_run(postgres_db, rounds=3)
    # The waiting player hears of its pairing within a few handoff polls (50 ms each).
    assert 0 < result["handoff_ms_p50"] <= result["handoff_ms_max"] < 2000
    assert result["empty_look_us_p50"] > 0
