"""``seabattle bench`` runs end to end on a tiny load and reports every figure (no timing checks).

Each run starts real child processes (the server, the bare relay or echo) on port 0, as the real
benchmark does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from seabattle.client.bench import BARS, FIGURES, bench, local_record, time_verify
from seabattle.protocol.rules import preset


def _run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(bench, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _check_figures(figures: dict[str, Any]) -> None:
    for key, *_ in FIGURES:
        assert figures[key] is not None, key
    assert figures["shots"] > 0
    assert figures["errors"] == {}


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_tiny_bench_reports_every_figure_and_ratio(mode: str) -> None:
    report = _run("--matches", "2", "--duration", "0.6", "--mode", mode)
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    (sc,) = report["scenarios"]
    assert sc["mode"] == mode and sc["matches"] == 2
    _check_figures(sc["target"])
    _check_figures(sc["baseline"])
    for key, *_ in FIGURES:
        # The bare baseline's few connections may fit in memory its allocator already holds (the
        # heap's layout shifts with what was imported): no growth, so no ratio to it.
        if key == "server_kb_per_conn" and sc["baseline"][key] == 0:
            continue
        assert sc["ratios"][key] is not None, key
    assert sc["target"]["connections"] == 4
    assert set(report["bars"]) == set(BARS)
    verify = report["verify"]
    assert verify["records"] > 0 and verify["failed"] == 0 and verify["ms_per_game"] > 0


def test_human_pace_with_a_shot_limit_and_no_baseline() -> None:
    report = _run(
        "--matches", "2", "--pace", "0.05", "--shots", "4", "--duration", "5", "--mode", "blind",
        "--no-baseline",
    )  # fmt: skip
    (sc,) = report["scenarios"]
    assert sc["baseline"] is None and sc["pace"] == 0.05
    _check_figures(sc["target"])
    assert sc["target"]["shots"] <= 8
    # No match finishes in 4 shots: the records verified are built locally.
    assert report["verify"]["source"] == "local" and report["verify"]["failed"] == 0
    assert report["bars"]["human_p99_ms"]["value"] is not None


def test_local_records_verify() -> None:
    rules = preset("classic")
    v = time_verify([local_record(rules, 1), local_record(rules, 2)])
    assert v["records"] == 2 and v["games"] >= 2 and v["failed"] == 0


def test_bad_options_are_usage_errors() -> None:
    r = CliRunner().invoke(bench, ["--matches", "0"])
    assert r.exit_code == 2
    r = CliRunner().invoke(bench, ["--server", "nowhere"])
    assert r.exit_code == 2
