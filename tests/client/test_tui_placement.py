"""Placing a fleet by typed commands: the order, picking ships up, and the rules' own reasons."""

from __future__ import annotations

import random

import pytest
from seabattle.bots.placement import PlacementRefused, Placer
from seabattle.protocol.fleet import Placement
from seabattle.protocol.rules import PRESETS, RuleSet, ShipSpec

RNG = random.Random(7)


def run(placer: Placer, *commands: str) -> list[str]:
    return [placer.command(c, RNG) for c in commands]


def refusal(placer: Placer, command: str) -> str:
    with pytest.raises(PlacementRefused) as e:
        placer.command(command, RNG)
    return str(e.value)


def test_ordered_placement_asks_5_4_3_3_2_and_refuses_another_order() -> None:
    p = Placer(PRESETS["sea-battle"])
    asked = []
    for row in range(1, 6):
        assert p.next_ship is not None
        asked.append(p.rules.fleet[p.next_ship].length)
        if row == 2:
            why = refusal(p, "Ship-2 J1 down")
            assert "fleet order" in why and "Ship-4" in why
        run(p, f"A{row * 2 - 1} across")
    assert asked == [5, 4, 3, 3, 2]
    assert p.done


def test_a_picked_up_ship_is_asked_for_again_until_the_last_is_down() -> None:
    p = Placer(PRESETS["sea-battle"])
    run(p, "A1 across", "A3 across")
    assert run(p, "move ship-5") == ["Ship-5 picked up: place it again"]
    assert p.next_ship == 0  # ordered: the first unplaced ship in fleet order comes next
    run(p, "B5 down", "undo")
    assert p.next_ship == 0 and 0 not in p.placed
    run(p, "J1 down", "C5 across", "C7 across", "C9 across")
    assert p.done
    fleet = p.fleet()
    fleet.validate(p.rules)
    # Fixed once the last ship is down: nothing can be picked up or placed any more.
    assert "fixed" in refusal(p, "move Ship-5")
    assert "fixed" in refusal(p, "undo")
    assert "fixed" in refusal(p, "A10 across")


def test_refusals_name_the_ship_and_the_rule() -> None:
    p = Placer(PRESETS["classic"])
    assert refusal(p, "G1 across") == "Carrier leaves the board at K1"
    assert "K1 is off the board" in refusal(p, "K1 across")
    assert "which way" in refusal(p, "C3")
    assert "type a cell and a direction" in refusal(p, "hello")
    run(p, "A1 across")
    assert refusal(p, "A1 down") == "Battleship overlaps Carrier at A1"
    assert "placed already" in refusal(p, "Carrier B1 across")
    assert "no ship called" in refusal(p, "move Dinghy")
    touchless = Placer(PRESETS["six-ship"])
    run(touchless, "A1 across")
    why = refusal(touchless, "B2 across")
    assert "touches" in why and "corners included" in why


def test_any_order_where_the_rules_allow_it() -> None:
    p = Placer(PRESETS["classic"])
    assert run(p, "Destroyer J9 down") == ["Destroyer placed at J9 down"]
    assert p.next_ship == 0
    assert "could be" in refusal(Placer(PRESETS["russian"]), "Cruiser C3 down")
    assert run(Placer(PRESETS["russian"]), "cruiser-2 c3 d") == ["Cruiser-2 placed at C3 down"]


def test_random_fills_the_rest_around_the_ships_down() -> None:
    for name, rules in PRESETS.items():
        p = Placer(rules)
        run(p, "A1 down")
        first = p.placed[0]
        run(p, "random")
        assert p.done, name
        assert p.fleet().placements[0] == first
        p.fleet().validate(rules)


def test_a_boat_needs_no_direction() -> None:
    rules = PRESETS["russian"]
    p = Placer(rules.replace(fleet=rules.fleet[-2:]))
    assert run(p, "B2") == ["Boat-3 placed at B2"]
    assert p.placed[0] == Placement(1, 1, False)


def test_a_placement_that_leaves_no_room_is_flagged_and_random_says_why() -> None:
    tiny = RuleSet(
        name="tiny",
        rows=3,
        cols=3,
        fleet=(ShipSpec("Long", 3), ShipSpec("Other", 3)),
        touching=False,
    )
    p = Placer(tiny)
    (said,) = run(p, "A2 across")
    assert "no longer fits" in said
    assert "does not fit" in refusal(p, "random")
    run(p, "undo", "A1 across")
    assert run(p, "random") == ["the rest of the fleet is placed at random"]
    assert p.fleet().placements[1] == Placement(2, 0, False)
