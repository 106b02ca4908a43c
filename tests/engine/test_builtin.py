"""The built-in strategies as engines: they answer from what their side knows, within the rules."""

from __future__ import annotations

import pytest
from seabattle.engine.base import Move
from seabattle.engine.builtin import BUILTIN, BuiltinEngine
from seabattle.engine.side import Side
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import preset, rules_from_dict
from seabattle.protocol.seat_events import YourTurn


def test_builtin_names_are_the_strategies() -> None:
    assert BUILTIN == ("random", "hunt", "density", "best")
    with pytest.raises(ValueError, match="no built-in engine 'nope'"):
        BuiltinEngine("nope")
    with pytest.raises(ValueError, match="no placement"):
        BuiltinEngine("best", placement="nope")


@pytest.mark.parametrize("name", BUILTIN)
async def test_a_move_is_the_turns_count_of_fresh_cells(name: str) -> None:
    rules = rules_from_dict({"preset": "classic", "shots": "salvo-afloat"})
    engine = BuiltinEngine(name, seed=1)
    hello = await engine.start()
    assert hello.name == name and hello.plays(rules)
    await engine.new_game(rules, 0, 1)
    side = Side(rules, 0)
    side.turn = YourTurn(1, 5, False)
    move = await engine.move(side)
    assert move.radar is None and len(set(move.cells)) == 5
    assert all(0 <= c.row < rules.rows and 0 <= c.col < rules.cols for c in move.cells)


async def test_the_same_seed_gives_the_same_moves() -> None:
    rules = preset("russian")
    moves: list[Move] = []
    for _ in range(2):
        engine = BuiltinEngine("density", seed=7)
        engine.reseed(42)
        side = Side(rules, 1)
        side.turn = YourTurn(1, 1, False)
        moves.append(await engine.move(side))
    assert moves[0] == moves[1]


async def test_a_uniform_fleet_is_left_to_the_shell_and_others_are_legal() -> None:
    rules = preset("russian")
    assert await BuiltinEngine("best").place(rules) is None
    engine = BuiltinEngine("best", placement="unlikely", seed=3)
    assert engine.name == "best/unlikely"
    fleet = await engine.place(rules)
    assert isinstance(fleet, Fleet)
    fleet.validate(rules)


async def test_radar_is_the_strategys_call_where_the_turn_allows_it() -> None:
    import random

    from seabattle.bots.strategies import BestStrategy

    rules = rules_from_dict({"preset": "classic", "radar": True})
    for seed in range(3):
        side = Side(rules, 0)
        side.view.miss(Cell(0, 0))  # past the first shot, where a scan may be worth more
        wanted = BestStrategy().use_radar(side.view, random.Random(seed))
        for allowed in (True, False):
            engine = BuiltinEngine("best", seed=seed)
            side.turn = YourTurn(1, 1, allowed)
            move = await engine.move(side)
            assert move.radar == (wanted if allowed else None)
            assert (move.cells == ()) is (move.radar is not None)
