"""Fleets: a refusal names the ship and the rule; random fleets are always legal."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import Fleet, IllegalFleet, Placement, random_fleet
from seabattle.protocol.rules import PRESETS, preset

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


def test_random_fleets_are_reproducible_from_the_seed() -> None:
    rules = preset("russian")
    assert random_fleet(rules, random.Random(7)) == random_fleet(rules, random.Random(7))


def test_russian_random_placement_is_fast() -> None:
    # A bot or a "place for me" button places a fleet per game: the densest seed fleet too.
    rules = preset("russian")
    rng = random.Random(1)
    start = time.perf_counter()
    for _ in range(50):
        random_fleet(rules, rng)
    assert time.perf_counter() - start < 2.0  # about 5 ms each on a laptop core


def test_a_fleet_that_cannot_be_shown_to_fit_is_refused_within_the_search_bound() -> None:
    # Twelve 5-cell ships in an 8x8 grid pass the area bound (60 <= 64) but have no placement;
    # rule sets arrive from the network, so the refusal must come from a bounded search.
    from seabattle.protocol.rules import BadRules, RuleSet, ShipSpec

    fleet = tuple(ShipSpec(f"s{i}", 5) for i in range(12))
    with pytest.raises(BadRules, match="search bound"):
        RuleSet(rows=8, cols=8, fleet=fleet)
