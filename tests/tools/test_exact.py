"""Exact figures on small boards: the fleets counted, the optimum bounding every strategy."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from helpers import every_fleet as brute_force_fleets
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from seabattle.bots.strategies import STRATEGIES, TargetView, make_strategy
from seabattle.cli.main import main
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import BadRules, RuleSet, ShipSpec, SunkReport, preset

from bench.exact import Board, TooLarge, every_fleet, strategy_turns


def board(rows: int, cols: int, *lengths: int, touching: bool = True, **kw: object) -> RuleSet:
    ships = tuple(ShipSpec(f"S{i}", n) for i, n in enumerate(lengths))
    return RuleSet(name="small", rows=rows, cols=cols, fleet=ships, touching=touching, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("touching", [True, False])
def test_every_legal_fleet_is_listed_once(touching: bool) -> None:
    rules = board(4, 4, 3, 2, 2, touching=touching)
    listed = every_fleet(rules)
    counted = [
        tuple(frozenset(ship) for ship in fleet.ship_cells(rules))
        for fleet in brute_force_fleets(rules)
    ]
    as_cells = {
        tuple(frozenset(Cell(*divmod(i, rules.cols)) for i in range(16) if m >> i & 1) for m in f)
        for f in listed
    }
    assert len(listed) == len(as_cells) == len(counted)
    assert as_cells == set(counted)


def test_a_board_too_large_to_list_says_so() -> None:
    with pytest.raises(TooLarge):
        Board(preset("classic"))
    with pytest.raises(TooLarge):
        Board(board(4, 4, 3, 2), budget=10).optimal()


def test_one_ship_of_two_on_two_by_two_takes_three_turns() -> None:
    # By hand: every cell holds the ship in two of its four positions. A hit (1/2) leaves two
    # positions, 1.5 turns more; water leaves two positions sharing the opposite corner, a sure
    # hit and then 1.5 turns more. 1 + (1.5 + 2.5) / 2 = 3.
    b = Board(board(2, 2, 2))
    assert b.optimal() == b.greedy() == b.rollout() == pytest.approx(3.0)


def test_greedy_is_not_optimal_and_one_step_of_rollout_closes_the_gap_here() -> None:
    # Two ships of two on three by three: firing at the likeliest cell loses 0.06 turns a game.
    b = Board(board(3, 3, 2, 2))
    assert b.optimal() == pytest.approx(6.25)
    assert b.greedy() > b.optimal() + 0.05
    assert b.rollout() == pytest.approx(b.optimal())


def test_a_strategys_exact_figure_is_its_mean_over_every_fleet() -> None:
    class RowByRow:
        """Cells in reading order: it wins on the fleet's last ship cell in that order."""

        def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
            return [c for c in view.unknown_cells()][:count]

        def use_radar(self, view: TargetView, rng: random.Random) -> Cell | None:
            return None

    # Silent sinkings on a touching fleet: the view infers no water, so every cell is fired.
    rules = board(3, 4, 3, 2, sunk=SunkReport.SILENT)
    fleets = every_fleet(rules)
    by_hand = sum(max(m.bit_length() for m in f) for f in fleets) / len(fleets)
    assert strategy_turns(rules, RowByRow) == pytest.approx(by_hand)


def _small(rows: int, cols: int, lengths: list[int], touching: bool, sunk: SunkReport) -> RuleSet:
    try:
        return board(rows, cols, *lengths, touching=touching, sunk=sunk)
    except BadRules:
        reject()  # a fleet that does not fit the board is no rule set


small_rules = st.builds(
    _small,
    st.integers(2, 3),
    st.integers(3, 4),
    st.lists(st.integers(1, 3), min_size=1, max_size=2),
    st.booleans(),
    st.sampled_from(list(SunkReport)),
)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_rules)
def test_no_strategy_beats_the_optimum_and_rollout_never_loses_to_greedy(rules: RuleSet) -> None:
    try:
        b = Board(rules, fleets=400, budget=200_000)
        optimal = b.optimal()
    except TooLarge:
        return
    eps = 1e-9
    assert rules.fleet_cells <= optimal + eps
    assert optimal <= b.rollout() + eps <= b.greedy() + 2 * eps
    assert optimal <= b.lookahead(2) + eps
    for name in ("density", "hunt"):
        assert optimal <= strategy_turns(rules, STRATEGIES[name]) + eps


def test_best_plays_within_a_few_percent_of_the_optimum() -> None:
    rules = board(3, 3, 2, 2)
    b = Board(rules)
    best = strategy_turns(rules, lambda: make_strategy("best"))
    assert b.optimal() <= best <= b.optimal() * 1.05


def test_bot_exact_prints_every_figure() -> None:
    rules = json.dumps({"rows": 3, "cols": 3, "fleet": [["A", 2], ["B", 2]]})
    result = CliRunner().invoke(
        main, ["bot", "--exact", "--strategy", "density", "--rules", rules, "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["fleets"] == 88
    assert report["optimal"] == pytest.approx(6.25)
    assert report["optimal"] <= report["rollout"] <= report["greedy"]
    assert report["optimal"] <= report["density"]
    refused = CliRunner().invoke(main, ["bot", "--exact", "--rules", "classic"])
    assert refused.exit_code != 0
    assert "small boards" in refused.output
