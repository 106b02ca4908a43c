"""004's marks on the placement board: every square the ship asked for could start on, no other."""

from __future__ import annotations

import random

import pytest
from seabattle.bots.placement import Placer
from seabattle.protocol.grid import parse_cell
from seabattle.protocol.rules import PRESETS

screen = pytest.importorskip("seabattle.cli.screen_view")


def marked(placer: Placer, vertical: bool) -> set[str]:
    rules = placer.rules
    assert placer.next_ship is not None
    starts = screen.legal_starts(placer, placer.next_ship, vertical)
    return {parse_cell_label(i, rules.cols) for i in starts}


def parse_cell_label(i: int, cols: int) -> str:
    return f"{chr(65 + i % cols)}{i // cols + 1}"


def test_marks_keep_clear_of_a_ship_where_ships_may_not_touch() -> None:
    placer = Placer(PRESETS["russian"])  # 10 x 10; no touching, corners included
    placer.command("A1 across", random.Random(1))  # the Battleship on A1-D1
    across = marked(placer, vertical=False)  # a Cruiser (3) next
    assert {"E1", "E2", "A2", "D2"}.isdisjoint(across)  # beside or corner to corner
    assert {"F1", "F2", "A3", "H10"} <= across
    assert "I1" not in across  # it would leave the board
    assert len(across) == 70  # 8 rows of 8, and F-H on the two rows beside the Battleship
    down = marked(placer, vertical=True)
    assert {"A2", "E2", "C1"}.isdisjoint(down) and {"F1", "A3", "J8"} <= down
    assert "A9" not in down  # A9-A11 leaves the board


def test_marks_follow_the_fleet_order_and_what_is_left() -> None:
    rules = PRESETS["sea-battle"]  # ordered: Ship-5 first; ships may touch
    placer = Placer(rules)
    assert len(marked(placer, vertical=False)) == 6 * 10
    for line in ("A1 across", "A2 across", "A3 across", "A4 across"):
        placer.command(line, random.Random(1))
    last = marked(placer, vertical=True)  # Ship-2 down, beside the four ships on rows 1-4
    assert "A1" not in last and "A4" not in last and "F1" in last and "A5" in last
    for label in last:  # each mark is a placement the rules accept
        trial = Placer(rules)
        trial.placed = dict(placer.placed)
        trial.place(4, parse_cell(label, rules.rows, rules.cols), True)
