"""`best` on russian replays a game from its seed (its draws are carried from move to move)."""

from __future__ import annotations

import random

from seabattle.bots.strategies import BestStrategy, simulate_shots_to_win
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.rules import preset


def test_a_seed_replays_a_russian_game() -> None:
    rules = preset("russian")
    fleet = random_fleet(rules, random.Random(4))
    times: list[float] = []
    a = simulate_shots_to_win(rules, BestStrategy(), random.Random(9), fleet, times)
    b = simulate_shots_to_win(rules, BestStrategy(), random.Random(9), fleet)
    assert a == b
    assert 20 <= a <= rules.cells and len(times) == a
