"""SIGKILL the server under running matches, ten times, and lose nothing anyone was told.

The whole operator's story with real processes: ``seabattle serve`` on one store, killed with
SIGKILL at random moments and started again, blind and custody matches reconnecting and playing
on; every record verifies and holds every verdict a player was told
(``python -m bench.crash --kills 50`` is the long version).
"""

from __future__ import annotations

import pytest
import trio

from bench.crash import crash_run

# A kill or measuring run of real processes: left out of the quick run (-m "not slow").
pytestmark = pytest.mark.slow


async def test_ten_kills_lose_no_acknowledged_move() -> None:
    lines: list[str] = []
    with trio.fail_after(120):
        summary = await crash_run(10, pairs=1, seed=7, log=lines.append)
    assert summary["ok"], summary["problems"]
    assert len(lines) == 10 and summary["matches"] >= 2
    assert summary["verdicts_acknowledged"] > 0
    assert all(not line.endswith(" 0 matches running") for line in lines)  # kills under load
