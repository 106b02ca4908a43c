"""Fleets: a refusal names the ship and the rule; random fleets are legal and uniformly drawn."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import Fleet, IllegalFleet, Placement, _ship_by_ship, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import PRESETS, RuleSet, ShipSpec, preset

# A legal 000 fleet: every ship one clear cell from the next, corners included.
RUSSIAN = Fleet.of(
    ("A1", "across"),  # Battleship A1-D1
    ("F1", "across"),  # Cruiser-1 F1-H1
    ("A3", "across"),  # Cruiser-2 A3-C3
    ("E3", "across"),  # Destroyer-1 E3-F3
    ("H3", "across"),  # Destroyer-2 H3-I3
    ("A5", "across"),  # Destroyer-3 A5-B5
    ("D5", "across"),
    ("F5", "across"),
    ("H5", "across"),
    ("J5", "across"),
)
CLASSIC = Fleet.of(
    ("A1", "across"), ("A2", "across"), ("A3", "across"), ("A4", "across"), ("A5", "across")
)


def refusal(fleet: Fleet, rules_name: str) -> str:
    with pytest.raises(IllegalFleet) as info:
        fleet.validate(preset(rules_name))
    assert info.value.code is ErrorCode.ILLEGAL_FLEET
    return info.value.detail


def test_legal_fleets_pass() -> None:
    RUSSIAN.validate(preset("russian"))
    CLASSIC.validate(preset("classic"))  # packed side by side: 002 lets ships touch


def test_overlap_names_both_ships_and_the_cell() -> None:
    fleet = Fleet.of(
        ("A1", "across"), ("C1", "down"), ("A3", "across"), ("A4", "across"), ("A5", "across")
    )
    assert refusal(fleet, "classic") == "Battleship overlaps Carrier at C1"


def test_off_board_names_the_ship_and_the_first_cell_outside() -> None:
    fleet = Fleet.of(
        ("G1", "across"), ("A2", "across"), ("A3", "across"), ("A4", "across"), ("A5", "across")
    )
    assert refusal(fleet, "classic") == "Carrier leaves the board at K1"
    down = Fleet((Placement(7, 9, True), *CLASSIC.placements[1:]))
    assert refusal(down, "classic") == "Carrier leaves the board at J11"
    negative = Fleet((Placement(-1, 0, False), *CLASSIC.placements[1:]))
    assert refusal(negative, "classic") == "Carrier leaves the board at (-1,0)"


def test_touching_along_a_side_is_refused_where_ships_may_not_touch() -> None:
    # Cruiser-2 moved up a row: it lies right under the Battleship.
    fleet = Fleet((RUSSIAN.placements[0], RUSSIAN.placements[1], Placement(1, 0, False)))
    fleet = Fleet(fleet.placements + RUSSIAN.placements[3:])
    detail = refusal(fleet, "russian")
    assert detail.startswith("Battleship touches Cruiser-2")
    assert "corners included" in detail


def test_touching_at_a_corner_is_refused_too() -> None:
    # Boat-1 at E2 touches the Battleship's end D1 only at a corner.
    placements = list(RUSSIAN.placements)
    placements[6] = Placement(1, 4, False)
    detail = refusal(Fleet(tuple(placements)), "russian")
    assert "Battleship touches Boat-1" in detail
    assert "D1/E2" in detail or "E2/D1" in detail


def test_touching_is_legal_where_the_rules_allow_it() -> None:
    rules = preset("russian").replace(touching=True, crossed_out=False)
    placements = list(RUSSIAN.placements)
    placements[6] = Placement(1, 4, False)
    Fleet(tuple(placements)).validate(rules)


def test_wrong_number_of_ships_is_refused() -> None:
    detail = refusal(Fleet(CLASSIC.placements[:4]), "classic")
    assert detail == "4 ships placed; the fleet has 5"


def test_wire_form_round_trip_and_malformed_placements() -> None:
    assert Fleet.from_list(RUSSIAN.to_list()) == RUSSIAN
    for bad in ([0, 0], [0, 0, 1], [True, 0, False], "A1", [0, "1", False]):
        with pytest.raises(IllegalFleet, match="a placement is"):
            Placement.from_list(bad)
    with pytest.raises(IllegalFleet, match="a fleet is a list"):
        Fleet.from_list([[0, 0, False]] * 65)


def test_occupancy_marks_each_ship_by_index() -> None:
    occ = CLASSIC.occupancy(preset("classic"))
    assert occ[:5] == [1] * 5 and occ[5:10] == [0] * 5
    assert occ[10:14] == [2] * 4
    assert sum(1 for o in occ if o) == 17


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(PRESETS)), seed=st.integers(0, 2**32 - 1))
def test_random_fleets_are_legal_for_every_preset(name: str, seed: int) -> None:
    rules = PRESETS[name]
    fleet = random_fleet(rules, random.Random(seed))
    fleet.validate(rules)
    assert sum(1 for o in fleet.occupancy(rules) if o) == rules.fleet_cells


def _breaks_a_rule(fleet: Fleet, rules: RuleSet) -> bool:
    """The rules read cell by cell: on the board, no two ships on one cell, and where ships may
    not touch, no cell of a ship beside (corners included) a cell of another."""
    owner: dict[Cell, int] = {}
    for i, (p, spec) in enumerate(zip(fleet.placements, rules.fleet, strict=True)):
        for c in p.cells(spec.length):
            if not c.on(rules.rows, rules.cols) or c in owner:
                return True
            owner[c] = i
    return not rules.touching and any(
        owner.get(n, i) != i for c, i in owner.items() for n in c.neighbours(rules.rows, rules.cols)
    )


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(PRESETS)),
    seed=st.integers(0, 2**32 - 1),
    moves=st.lists(
        st.tuples(st.integers(0, 9), st.integers(-2, 2), st.integers(-2, 2), st.booleans()),
        max_size=2,
    ),
)
def test_validation_refuses_exactly_the_fleets_that_break_a_rule(
    name: str, seed: int, moves: list[tuple[int, int, int, bool]]
) -> None:
    # Legal fleets with up to two ships moved or turned: legal and illegal ones, every way.
    rules = PRESETS[name]
    placements = list(random_fleet(rules, random.Random(seed)).placements)
    for k, dr, dc, vertical in moves:
        p = placements[k % len(placements)]
        placements[k % len(placements)] = Placement(p.row + dr, p.col + dc, vertical)
    fleet = Fleet(tuple(placements))
    if _breaks_a_rule(fleet, rules):
        with pytest.raises(IllegalFleet):
            fleet.validate(rules)
    else:
        fleet.validate(rules)


def test_random_fleets_are_reproducible_from_the_seed() -> None:
    rules = preset("russian")
    assert random_fleet(rules, random.Random(7)) == random_fleet(rules, random.Random(7))


def test_random_placement_is_fast_on_every_preset() -> None:
    # A bot or a "place for me" button places a fleet per game: russian, the densest seed fleet,
    # takes about 2 ms (median) on a laptop core; the margin absorbs a loaded test machine.
    for rules in PRESETS.values():
        rng = random.Random(1)
        random_fleet(rules, rng)  # the lists are built once per grid and fleet
        start = time.perf_counter()
        for _ in range(50):
            random_fleet(rules, rng)
        assert time.perf_counter() - start < 2.0, rules.name


def test_a_fleet_that_cannot_be_shown_to_fit_is_refused_within_the_search_bound() -> None:
    # Twelve 5-cell ships in an 8x8 grid pass the area bound (60 <= 64) but have no placement;
    # rule sets arrive from the network, so the refusal must come from a bounded search.
    from seabattle.protocol.rules import BadRules, RuleSet, ShipSpec

    fleet = tuple(ShipSpec(f"s{i}", 5) for i in range(12))
    with pytest.raises(BadRules, match="search bound"):
        RuleSet(rows=8, cols=8, fleet=fleet)


# -- uniformity against an exact count ------------------------------------------------------------


def _board(rows: int, lengths: tuple[int, ...], touching: bool) -> RuleSet:
    ships = tuple(ShipSpec(f"s{i}", n) for i, n in enumerate(lengths))
    return RuleSet(name="small", rows=rows, cols=rows, fleet=ships, touching=touching)


def _every_fleet(rules: RuleSet) -> list[Fleet]:
    """Every legal fleet, by exhaustive search with cell sets (independent of the sampler)."""
    n, out = rules.rows, []

    def ring(cells: tuple[Cell, ...]) -> set[Cell]:
        near = {
            Cell(c.row + dr, c.col + dc) for c in cells for dr in (-1, 0, 1) for dc in (-1, 0, 1)
        }
        return set(cells) if rules.touching else near

    def place(k: int, taken: set[Cell], chosen: tuple[Placement, ...]) -> None:
        if k == len(rules.fleet):
            out.append(Fleet(chosen))
            return
        length = rules.fleet[k].length
        for vertical in (False, True) if length > 1 else (False,):
            for r in range(n):
                for c in range(n):
                    p = Placement(r, c, vertical)
                    cells = p.cells(length)
                    if all(x.on(n, n) and x not in taken for x in cells):
                        place(k + 1, taken | ring(cells), (*chosen, p))

    place(0, set(), ())
    return out


def _occupied(rules: RuleSet, fleet: Fleet) -> list[int]:
    return [i for i, o in enumerate(fleet.occupancy(rules)) if o]


def _worst_z(rules: RuleSet, draw: Callable[[random.Random], Fleet], n: int) -> float:
    """The largest |z| of the binomial counts of each cell, the corners and the edges being
    occupied in ``n`` draws, against the exact frequencies over every legal fleet."""
    size = rules.rows
    edge = [i for i in range(rules.cells) if {*divmod(i, size)} & {0, size - 1}]
    corners = [0, size - 1, rules.cells - size, rules.cells - 1]
    regions = [[i] for i in range(rules.cells)] + [corners, edge]

    def share(fleets: list[Fleet]) -> list[float]:
        hits = Counter(i for f in fleets for i in _occupied(rules, f))
        # A region's count: ship cells in it, over the most it can hold per fleet.
        return [sum(hits[i] for i in reg) / (len(fleets) * len(reg)) for reg in regions]

    every = _every_fleet(rules)
    exact = share(every)
    rng = random.Random(20261201)
    seen = share([draw(rng) for _ in range(n)])
    worst = 0.0
    for p, q in zip(exact, seen, strict=True):
        # The cells of a region are not independent, but a draw's share of them lies in [0, 1]
        # with mean p, so its variance is at most p(1 - p) (Bhatia-Davis): this z errs low.
        sd = math.sqrt(p * (1 - p) / n)
        worst = max(worst, abs(q - p) / sd if sd else math.inf * (q != p))
    return worst


def _chi2_bound(df: int) -> float:
    """The chi-square quantile 5 standard deviations out (p about 3e-7), by Wilson-Hilferty."""
    return df * (1 - 2 / (9 * df) + 5 * math.sqrt(2 / (9 * df))) ** 3


SMALL = [
    _board(5, (3, 2, 1), touching=False),
    _board(5, (3, 2, 2), touching=False),
    _board(4, (2, 2, 1), touching=True),
    _board(4, (3, 1, 1), touching=False),
]


@pytest.mark.parametrize("rules", SMALL, ids=lambda r: f"{r.rows}x{r.cols}-{r.touching}")
def test_random_fleets_fill_cells_corners_and_edges_as_often_as_the_exact_count(
    rules: RuleSet,
) -> None:
    # Fixed seed, so the verdict is deterministic; 4.5 standard errors leave chance no room.
    assert _worst_z(rules, lambda rng: random_fleet(rules, rng), 5000) < 4.5


def test_the_occupancy_test_rejects_ship_by_ship_placement() -> None:
    # The same test and bound catch the old sampler (longest ship first, then the rest among
    # the positions left), which crowds the centre where ships may not touch.
    rules = SMALL[0]
    assert _worst_z(rules, lambda rng: _ship_by_ship(rules, rng, {}), 2000) > 4.5


def test_every_legal_fleet_is_equally_likely_on_a_tiny_board() -> None:
    # 240 fleets: a chi-square test over the fleets themselves, not only their cells.
    rules = SMALL[3]
    every = _every_fleet(rules)
    rng = random.Random(7)
    n = 12_000
    counts = Counter(random_fleet(rules, rng) for _ in range(n))
    assert set(counts) <= set(every)
    expected = n / len(every)
    chi2 = sum((counts[f] - expected) ** 2 / expected for f in every)
    assert chi2 < _chi2_bound(len(every) - 1)


def test_a_completion_around_kept_ships_is_uniform_among_completions() -> None:
    rules = SMALL[0]
    kept = {0: Placement(0, 0, False)}  # the 3-ship along the top left
    completions = [f for f in _every_fleet(rules) if f.placements[0] == kept[0]]
    rng = random.Random(11)
    n = 4000
    counts = Counter(random_fleet(rules, rng, placed=kept) for _ in range(n))
    assert set(counts) <= set(completions)
    expected = n / len(completions)
    chi2 = sum((counts[f] - expected) ** 2 / expected for f in completions)
    assert chi2 < _chi2_bound(len(completions) - 1)


def test_a_rule_set_too_crowded_for_the_budget_still_gets_a_legal_fleet() -> None:
    rules = preset("russian")
    fleet = random_fleet(rules, random.Random(3), budget=1)
    fleet.validate(rules)
