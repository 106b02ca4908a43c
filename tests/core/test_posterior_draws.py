"""Independent posterior draws (issue 37): exact against counted fleets, and `best` per preset."""

from __future__ import annotations

import random

import pytest
from helpers import every_fleet
from seabattle.bots.posterior import Sampler
from seabattle.bots.strategies import BestStrategy, DensityStrategy, TargetView
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import PRESETS, RuleSet, ShipSpec, SunkReport, preset
from seabattle.protocol.verdict import Result, Shot, true_answer


def small(touching: bool, sunk: SunkReport, *lengths: int) -> RuleSet:
    ships = tuple(ShipSpec(f"S{i}", n) for i, n in enumerate(lengths or (3, 2, 2)))
    return RuleSet(
        rows=5, cols=5, fleet=ships, touching=touching, sunk=sunk, crossed_out=not touching
    )


def told(rules: RuleSet, fleet: Fleet, shots: list[Cell]) -> list[object]:
    occupancy, hit, out = fleet.occupancy(rules), set[int](), list[object]()
    for n, c in enumerate(shots):
        t = true_answer(rules, occupancy, hit, Shot(n + 1, 0, (c,)))[0][0]
        if t.result is not Result.MISS:
            hit.add(c.index(rules.cols))
        out.append((t.result, t.ship))
    return out


def view_after(rules: RuleSet, fleet: Fleet, shots: list[Cell]) -> TargetView:
    """The view the simulator builds (crossed-out corners and borders included)."""
    view, ships = TargetView(rules), fleet.ship_cells(rules)
    for (result, ship), c in zip(told(rules, fleet, shots), shots, strict=True):
        if result is Result.MISS:
            view.miss(c)
            continue
        crossed = set(c.corners(rules.rows, rules.cols))
        if result is Result.HIT:
            view.hit(c)
        else:
            assert ship is not None
            view.sunk(c, ship, ships[ship] if rules.sunk is SunkReport.SHOWN else None)
            crossed.update(n for x in ships[ship] for n in x.neighbours(rules.rows, rules.cols))
        if rules.crossed_out:
            for x in sorted(crossed):
                view.crossed(x)
    return view


def cells(script: str) -> list[Cell]:
    return [Cell(int(x[1:]) - 1, ord(x[0]) - 65) for x in script.split()]


CASES = [
    (small(False, SunkReport.SHOWN), "C3 C2 C4 B4 A1 E5"),  # a hit and a sinking, shown
    (small(False, SunkReport.NAMED), "C3 D3 C2 C4 C5 A1"),  # named: where it lay is inferred
    (small(False, SunkReport.SHOWN, 3, 2, 1), "B2 D4 B4 A1"),  # two hits, apart
    (small(True, SunkReport.NAMED), "C3 C4 A1 B2 D4"),
    (small(True, SunkReport.SILENT), "C3 C2 B3"),
]


@pytest.mark.parametrize(("rules", "script"), CASES)
def test_the_draws_give_each_cell_its_share_of_the_consistent_fleets(
    rules: RuleSet, script: str
) -> None:
    fleets = list({tuple(f.occupancy(rules)): f for f in every_fleet(rules)}.values())
    shots = cells(script)
    truth = random.Random(script).choice(fleets)
    answer = told(rules, truth, shots)
    consistent = [f for f in fleets if told(rules, f, shots) == answer]
    exact = [
        sum(f.occupancy(rules)[i] > 0 for f in consistent) / len(consistent)
        for i in range(rules.cells)
    ]
    view = view_after(rules, truth, shots)
    sampler = Sampler("draws")
    sampler.min_draws = sampler.max_draws = 4000
    est = sampler.estimate(view, random.Random(1))
    assert est is not None
    assert sampler.last_ess > 500  # the draws answered, not the chain
    for i in range(rules.cells):
        if view._state[i].value == "unknown":
            assert est.marginals[i] == pytest.approx(exact[i], abs=0.03), (i, len(consistent))
        else:
            assert est.marginals[i] == 0.0


def test_a_seed_replays_the_same_draws() -> None:
    rules = preset("russian")
    view = TargetView(rules)
    for c in cells("E5 F6 A10 J1"):
        view.miss(c)
    a = Sampler().estimate(view, random.Random(7))
    b = Sampler().estimate(view, random.Random(7))
    assert a is not None and b is not None and a.marginals == b.marginals


def test_the_empty_board_is_the_uniform_fleets_and_as_symmetric() -> None:
    rules = preset("russian")
    est = Sampler().estimate(TargetView(rules), random.Random(0))
    assert est is not None
    m = est.marginals
    assert sum(m) == pytest.approx(rules.fleet_cells)
    for i in range(rules.cells):
        r, c = divmod(i, rules.cols)
        assert m[i] == pytest.approx(m[c * rules.cols + r])
        assert m[i] == pytest.approx(m[(9 - r) * rules.cols + 9 - c])
    # Where ships may not touch they favour the edges: a corner above the centre's 0.2 or so.
    assert m[0] > m[44] + 0.02


@pytest.mark.parametrize("name", ["classic", "classic-8x8"])
def test_best_is_density_where_ships_may_touch(name: str) -> None:
    rules = PRESETS[name]
    assert BestStrategy.density_suffices(rules)
    best, density = BestStrategy(), DensityStrategy()
    view = TargetView(rules)
    a, b = random.Random(3), random.Random(3)
    for _ in range(12):
        pick = best.choose(view, 1, a)
        assert pick == density.choose(view, 1, b)
        view.miss(pick[0])


@pytest.mark.parametrize("name", ["russian", "six-ship"])
def test_best_samples_where_ships_may_not_touch(name: str) -> None:
    assert not BestStrategy.density_suffices(PRESETS[name])
    assert not BestStrategy.density_suffices(PRESETS["classic"].replace(radar=True))
