"""Bot strategies: they win, they stay legal, and the view infers only what is true."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seabattle.bots.strategies import (
    STRATEGIES,
    CellState,
    DensityStrategy,
    Strategy,
    TargetView,
    make_strategy,
    simulate_shots_to_win,
)
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import PRESETS, RuleSet, SalvoReport, ShotMode, SunkReport

CLASSIC, RUSSIAN, SIX = PRESETS["classic"], PRESETS["russian"], PRESETS["six-ship"]
WATER = (CellState.MISS, CellState.CROSSED)

# Every preset, plus the variants that stress inference: silent sinking with and without touching,
# a no-touch fleet whose rules cross nothing out, and sinkings shown without naming the ship.
VARIANTS: list[RuleSet] = [
    *PRESETS.values(),
    CLASSIC.replace(sunk=SunkReport.SILENT),
    RUSSIAN.replace(sunk=SunkReport.SILENT),
    SIX.replace(sunk=SunkReport.SILENT),
    CLASSIC.replace(touching=False),
    RUSSIAN.replace(crossed_out=False, sunk=SunkReport.NAMED),
]


def c(label: str) -> Cell:
    return parse_cell(label, 26, 26)


def cells(*labels: str) -> tuple[Cell, ...]:
    return tuple(c(x) for x in labels)


# -- playing whole games ---------------------------------------------------------------------------


@pytest.mark.parametrize("rules", list(PRESETS.values()), ids=list(PRESETS))
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_wins_every_preset(name: str, rules: RuleSet) -> None:
    for seed in range(2):
        shots = simulate_shots_to_win(rules, make_strategy(name), random.Random(seed))
        assert rules.fleet_cells <= shots <= rules.cells


def test_density_beats_hunt_beats_random_on_average() -> None:
    # On uniform boards density leads hunt by about 4 shots with a spread of 9 a game: 100 games
    # keep the fixed seeds' outcome well clear of chance.
    def mean(name: str) -> float:
        return statistics.mean(
            simulate_shots_to_win(CLASSIC, make_strategy(name), random.Random(seed))
            for seed in range(100)
        )

    density, hunt, rand = mean("density"), mean("hunt"), mean("random")
    assert density < hunt < rand
    assert density < 0.6 * rand


def test_density_choice_is_fast() -> None:
    view, strategy, rng = TargetView(CLASSIC), DensityStrategy(), random.Random(0)
    strategy.choose(view, 1, rng)  # placements are computed once per grid: not part of a choice
    times = []
    for _ in range(30):
        t = time.perf_counter()
        strategy.choose(view, 1, rng)
        times.append(time.perf_counter() - t)
    # The target is well under 10 ms; the margin absorbs a loaded test machine.
    assert statistics.median(times) < 0.010


def test_make_strategy_refuses_unknown_names() -> None:
    assert isinstance(make_strategy("density"), DensityStrategy)
    with pytest.raises(ValueError, match="strategies: random, hunt, density"):
        make_strategy("psychic")


# -- soundness: every cell the view settles is settled truly ---------------------------------------


def assert_sound(
    view: TargetView, rules: RuleSet, ships: list[tuple[Cell, ...]], hit: set[Cell]
) -> None:
    owner = {x: k for k, ship in enumerate(ships) for x in ship}
    for r in range(rules.rows):
        for col in range(rules.cols):
            cell, state = Cell(r, col), view.state(Cell(r, col))
            if state in WATER:
                assert cell not in owner, f"{cell} is a ship cell, the view says {state}"
            elif state is CellState.HIT:
                assert cell in owner and cell in hit
            elif state is CellState.SUNK:
                assert cell in owner and set(ships[owner[cell]]) <= hit, f"{cell} is not sunk"
    afloat = Counter(len(s) for s in ships if not set(s) <= hit)
    assert not afloat - Counter(s.length for s in view.remaining_ships())
    assert view.fleet_destroyed == (not afloat)


def play_checked(
    rules: RuleSet, strategy: Strategy, rng: random.Random, *, max_salvo: int, name_ships: bool
) -> None:
    """A game of salvos reported cell by cell, checking legality and soundness after each salvo."""
    ships = random_fleet(rules, rng).ship_cells(rules)
    owner = {x: k for k, ship in enumerate(ships) for x in ship}
    hit: set[Cell] = set()
    view = TargetView(rules)
    for _ in range(rules.cells):
        if view.fleet_destroyed:
            return
        count = rng.randint(1, max_salvo)
        picks = strategy.choose(view, count, rng)
        assert len(picks) == min(count, len(view.unknown_cells()))
        assert len(set(picks)) == len(picks)
        assert all(view.state(p) is CellState.UNKNOWN for p in picks)
        for cell in picks:
            k = owner.get(cell)
            if k is None:
                view.miss(cell)
                continue
            hit.add(cell)
            if not set(ships[k]) <= hit or rules.sunk is SunkReport.SILENT:
                view.hit(cell)
                crossed = cell.corners(rules.rows, rules.cols)
            else:
                index = k if name_ships else None
                shown = ships[k] if rules.sunk is SunkReport.SHOWN else None
                view.sunk(cell, index, shown)
                crossed = [n for x in ships[k] for n in x.neighbours(rules.rows, rules.cols)]
            if rules.crossed_out:
                for x in crossed:
                    if x not in owner:
                        view.crossed(x)
        assert_sound(view, rules, ships, hit)
    assert view.fleet_destroyed


@settings(max_examples=40, deadline=None)
@given(
    rules=st.sampled_from(VARIANTS),
    name=st.sampled_from(list(STRATEGIES)),
    seed=st.integers(0, 2**32),
    max_salvo=st.integers(1, 5),
    name_ships=st.booleans(),
)
def test_choices_are_unknown_distinct_and_inference_sound(
    rules: RuleSet, name: str, seed: int, max_salvo: int, name_ships: bool
) -> None:
    play_checked(
        rules, make_strategy(name), random.Random(seed), max_salvo=max_salvo, name_ships=name_ships
    )


@settings(max_examples=25, deadline=None)
@given(touching=st.booleans(), seed=st.integers(0, 2**32), name=st.sampled_from(list(STRATEGIES)))
def test_salvo_totals_stay_sound(touching: bool, seed: int, name: str) -> None:
    rules = CLASSIC.replace(
        touching=touching,
        shots=ShotMode.SALVO_FIXED,
        salvo_report=SalvoReport.TOTAL,
        sunk=SunkReport.SILENT,
    )
    rng, strategy = random.Random(seed), make_strategy(name)
    ships = random_fleet(rules, rng).ship_cells(rules)
    owner = {x for ship in ships for x in ship}
    hit: set[Cell] = set()
    view = TargetView(rules)
    for _ in range(rules.cells):
        if view.fleet_destroyed:
            break
        picks = strategy.choose(view, rules.salvo_size, rng)
        assert picks and all(view.state(p) is CellState.UNKNOWN for p in picks)
        hit |= owner & set(picks)
        view.salvo_total(picks, len(owner & set(picks)))
        assert_sound(view, rules, ships, hit)
    assert hit == owner


# -- what the view infers --------------------------------------------------------------------------


def test_no_touch_hit_makes_its_diagonals_water() -> None:
    view = TargetView(SIX)  # 003: no touching, and nothing is crossed out for the player
    view.hit(c("E5"))
    for x in ("D4", "F4", "D6", "F6"):
        assert view.state(c(x)) is CellState.CROSSED
    for x in ("E4", "D5", "F5", "E6"):
        assert view.state(c(x)) is CellState.UNKNOWN
    touching = TargetView(CLASSIC)
    touching.hit(c("E5"))
    assert touching.state(c("D4")) is CellState.UNKNOWN


def test_shown_sunk_ship_border_becomes_water() -> None:
    view = TargetView(RUSSIAN.replace(crossed_out=False))
    view.hit(c("B2"))
    view.hit(c("C2"))
    view.sunk(c("D2"), 1, cells("B2", "C2", "D2"))
    for x in ("B2", "C2", "D2"):
        assert view.state(c(x)) is CellState.SUNK
    for x in ("A1", "A2", "A3", "B1", "B3", "C1", "C3", "D1", "D3", "E1", "E2", "E3"):
        assert view.state(c(x)) is CellState.CROSSED, x
    assert view.state(c("F2")) is CellState.UNKNOWN
    assert [s.name for s in view.remaining_ships()].count("Cruiser-2") == 1
    assert "Cruiser-1" not in [s.name for s in view.remaining_ships()]


def test_shown_sunk_ship_without_a_name_drops_one_ship_of_its_length() -> None:
    view = TargetView(PRESETS["sea-battle"])  # 004 shows the ship, never names it
    view.hit(c("A1"))
    view.hit(c("A2"))
    view.sunk(c("A3"), None, cells("A1", "A2", "A3"))
    assert sorted(s.length for s in view.remaining_ships()) == [2, 3, 4, 5]


def test_named_sinking_is_located_from_the_hits() -> None:
    view = TargetView(CLASSIC)  # ships may touch: only the hits in line can tell
    for x in ("A1", "B1", "C1"):
        view.hit(c(x))
    view.miss(c("A2"))
    view.sunk(c("D1"), 2)  # the Cruiser, 3 long: B1-D1 or ... A1-C1 does not hold D1
    assert [view.state(c(x)) for x in ("A1", "B1", "C1", "D1")] == [
        CellState.HIT,
        CellState.SUNK,
        CellState.SUNK,
        CellState.SUNK,
    ]
    assert "Cruiser" not in [s.name for s in view.remaining_ships()]


def test_named_sinking_beside_a_single_hit_is_located() -> None:
    view = TargetView(CLASSIC)
    for x in ("B1", "C1", "D1", "E1"):
        view.hit(c(x))
    view.sunk(c("C2"), 4)  # the Destroyer, 2 long: of the lines through C2, only C1-C2 is all hit
    assert view.state(c("C1")) is CellState.SUNK and view.state(c("C2")) is CellState.SUNK
    assert view.state(c("B1")) is CellState.HIT and view.state(c("D1")) is CellState.HIT


def test_named_sinking_keeps_only_the_certain_cells_when_ambiguous() -> None:
    view = TargetView(CLASSIC)
    for x in ("B1", "C1", "D1", "F1", "G1"):
        view.hit(c(x))
    view.sunk(c("E1"), 2)  # the Cruiser, 3 long: C1-E1, D1-F1 or E1-G1; only E1 is certain
    assert [view.state(c(x)) for x in ("C1", "D1", "E1", "F1", "G1")] == [
        CellState.HIT,
        CellState.HIT,
        CellState.SUNK,
        CellState.HIT,
        CellState.HIT,
    ]
    view.miss(c("H1"))  # does not settle it: the Cruiser may still be any of the three
    assert view.state(c("D1")) is CellState.HIT
    view.sunk(c("A1"), 1)  # the Battleship, 4 long: A1-D1, so the Cruiser is E1-G1
    assert all(view.state(c(x)) is CellState.SUNK for x in ("A1", "B1", "C1", "D1"))
    assert all(view.state(c(x)) is CellState.SUNK for x in ("E1", "F1", "G1"))


def test_no_touch_named_sinking_is_the_run_of_hits() -> None:
    view = TargetView(SIX)
    view.hit(c("C3"))
    view.hit(c("C4"))
    view.sunk(c("C5"), 2)  # the Cruiser: the whole run, then its border is water
    assert all(view.state(c(x)) is CellState.SUNK for x in ("C3", "C4", "C5"))
    assert view.state(c("C2")) is CellState.CROSSED and view.state(c("C6")) is CellState.CROSSED


def test_silent_no_touch_run_closed_at_both_ends_is_sunk() -> None:
    view = TargetView(SIX.replace(sunk=SunkReport.SILENT))
    view.hit(c("A1"))
    view.hit(c("B1"))
    assert view.state(c("A1")) is CellState.HIT
    view.miss(c("C1"))  # A1-B1 now closed by the edge and a miss: a ship of 2, found whole
    assert view.state(c("A1")) is CellState.SUNK and view.state(c("B1")) is CellState.SUNK
    assert view.state(c("C2")) is CellState.CROSSED
    assert "Destroyer" not in [s.name for s in view.remaining_ships()]


def test_no_touch_run_as_long_as_the_longest_ship_is_closed() -> None:
    view = TargetView(RUSSIAN)
    for x in ("B5", "C5", "D5", "E5"):  # 4 long: the longest ship there is
        view.hit(c(x))
    assert view.state(c("A5")) is CellState.CROSSED and view.state(c("F5")) is CellState.CROSSED


def test_salvo_total_zero_clears_its_cells() -> None:
    rules = CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT, salvo_report=SalvoReport.TOTAL)
    view = TargetView(rules)
    view.salvo_total(cells("A1", "C3", "J10"), 0)
    assert all(view.state(x) is CellState.MISS for x in cells("A1", "C3", "J10"))
    view.salvo_total(cells("B1", "B2"), 2)
    assert all(view.state(x) is CellState.HIT for x in cells("B1", "B2"))
    view.salvo_total(cells("E5", "F6"), 1)
    assert view.state(c("E5")) is CellState.FIRED
    assert c("E5") not in view.unknown_cells()
    view.miss(c("F6"))  # not possible in play; shows the total settling once one cell is known
    assert view.state(c("E5")) is CellState.HIT


def test_radar_not_found_clears_its_area() -> None:
    view = TargetView(CLASSIC.replace(radar=True))
    view.radar(c("I9"), 2, found=False)
    assert all(view.state(x) is CellState.CROSSED for x in cells("I9", "J9", "I10", "J10"))
    view.radar(c("A1"), 2, found=True)
    assert view.state(c("A1")) is CellState.UNKNOWN
    density = DensityStrategy().density(view)
    # A ship is known in A1-B2: its cells outscore the mirror corner on the other side.
    assert density[c("B2").index(10)] > density[c("I2").index(10)]


def test_crossed_cells_are_never_chosen() -> None:
    view = TargetView(CLASSIC)
    for x in view.unknown_cells():
        if x != c("E5"):
            view.crossed(x)
    for name in STRATEGIES:
        assert make_strategy(name).choose(view, 3, random.Random(0)) == [c("E5")]


def test_density_finishes_a_hit_before_hunting() -> None:
    view = TargetView(CLASSIC)
    view.hit(c("E5"))
    pick = DensityStrategy().choose(view, 1, random.Random(0))[0]
    assert pick in cells("E4", "D5", "F5", "E6")
    view.hit(c("F5"))
    pick = DensityStrategy().choose(view, 1, random.Random(0))[0]
    assert pick in cells("D5", "G5")


def test_hunt_follows_the_line_of_two_hits() -> None:
    view = TargetView(CLASSIC)
    view.hit(c("E5"))
    view.hit(c("E6"))
    picks = STRATEGIES["hunt"]().choose(view, 2, random.Random(1))
    assert set(picks) == set(cells("E4", "E7"))


def test_simulation_offers_the_radar_until_it_is_used_once() -> None:
    class Scout(DensityStrategy):
        asked = 0

        def use_radar(self, view: TargetView, rng: random.Random) -> Cell | None:
            self.asked += 1
            return c("I9") if self.asked == 3 else None

    scout = Scout()
    shots = simulate_shots_to_win(CLASSIC.replace(radar=True), scout, random.Random(3))
    assert scout.asked == 3
    assert CLASSIC.fleet_cells + 1 <= shots <= CLASSIC.cells + 1
    assert simulate_shots_to_win(CLASSIC, Scout(), random.Random(3)) <= CLASSIC.cells
