"""The marginals bench: its reference is the exact posterior, and it scores the estimators."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
from helpers import every_fleet
from seabattle.protocol.rules import RuleSet, ShipSpec, SunkReport

from bench.marginals import Position, _answers, main, positions, reference, run

# Russian's rules on a board small enough to count every fleet: no touching, sinkings shown,
# borders crossed out.
TINY = RuleSet(
    name="tiny",
    rows=5,
    cols=5,
    fleet=(ShipSpec("Cruiser", 3), ShipSpec("Destroyer", 2), ShipSpec("Boat", 1)),
    touching=False,
    sunk=SunkReport.SHOWN,
    crossed_out=True,
)


@functools.cache
def tiny_fleets() -> list[tuple[int, ...]]:
    """Every legal fleet of ``TINY``, as occupancies (a boat across and down is one fleet)."""
    return list({tuple(f.occupancy(TINY)) for f in every_fleet(TINY)})


def exact(position: Position) -> list[float]:
    """Each cell's share of every legal fleet that answers the position's shots as its own."""
    rules = position.rules
    told = _answers(rules, position.fleet.occupancy(rules), position.shots)
    counts, n = [0] * rules.cells, 0
    for occ in tiny_fleets():
        if _answers(rules, occ, position.shots) != told:
            continue
        n += 1
        for i, o in enumerate(occ):
            counts[i] += o > 0
    return [c / n for c in counts]


def test_the_reference_is_the_share_of_every_consistent_fleet() -> None:
    found, _ = positions(TINY, games=2, every=2, seed=1)
    assert {p.phase for p in found} == {"hunting", "finishing"}
    for p in found[:6]:
        truth = exact(p)
        ref = reference(p, 3000, random.Random(p.move), 10**6)
        assert ref.accepted == 3000
        for i, s in enumerate(p.state):
            if s == "unknown":
                # 3,000 draws: a share is good to 0.009 (one standard error) at worst.
                assert ref.marginals[i] == pytest.approx(truth[i], abs=0.04), (p.move, i)
            else:
                assert ref.marginals[i] == 0.0


def test_the_bench_scores_each_estimator_by_phase_and_caches_its_references(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "refs.json"
    scores, ms = run(TINY, ["chain", "draws"], games=3, every=2, draws=2000, cache=cache)
    assert {(s.estimator, s.phase) for s in scores} == {
        (e, ph) for e in ("chain", "draws") for ph in ("hunting", "finishing")
    }
    for s in scores:
        assert s.positions > 0 and 0.0 <= s.rms <= s.rms_raw and s.regret >= 0.0
        # On a board this small both estimators are close to exact.
        assert s.rms < 0.05, s
    assert set(ms) == {"chain", "draws"}
    stored = json.loads(cache.read_text())
    # One reference a position (two games may reach the same position: one entry).
    assert 0 < len(stored) <= sum(s.positions for s in scores) // 2
    again, _ = run(TINY, ["chain", "draws"], games=3, every=2, draws=2000, cache=cache)
    assert again == scores  # the same positions, estimates and references: the same figures


def test_the_command_prints_one_line_a_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = json.dumps(
        {
            "preset": "russian",
            "rows": 5,
            "cols": 5,
            "fleet": [["Cruiser", 3], ["Destroyer", 2], ["Boat", 1]],
        }
    )
    args = ["--rules", rules, "--games", "2", "--every", "3", "--draws", "500"]
    assert main([*args, "--estimators", "draws", "--json", "--cache", str(tmp_path / "c")]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {d["phase"] for d in lines} <= {"hunting", "finishing"} and lines
    assert all(d["estimator"] == "draws" and d["move_ms_median"] > 0 for d in lines)
