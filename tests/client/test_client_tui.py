"""The terminal player's pure parts: move parsing and grid rendering."""

from __future__ import annotations

import pytest
from seabattle.cli.tui import parse_move, render_grids
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import PRESETS
from seabattle.protocol.verdict import Defender

RULES = PRESETS["classic"]


def test_parse_move() -> None:
    assert parse_move(" e5 ", RULES, 1) == ("fire", [Cell(4, 4)])
    assert parse_move("A1, B2", RULES, 2) == ("fire", [Cell(0, 0), Cell(1, 1)])
    assert parse_move("radar C3", RULES, 1) == ("radar", [Cell(2, 2)])
    with pytest.raises(ProtocolError):
        parse_move("K11", RULES, 1)
    with pytest.raises(ValueError):
        parse_move("A1 A2", RULES, 1)


def test_render_shows_fleet_hits_and_misses() -> None:
    fleet = Fleet.of(
        ("A1", "across"), ("A3", "across"), ("A5", "across"), ("A7", "across"), ("A9", "across")
    )
    mid = bytes(16)
    g = Game(RULES, mid, 1)
    mine = Committed(RULES, fleet, bytes(32), mid, 1, 0)
    theirs = Committed(RULES, fleet, bytes(range(32)), mid, 1, 1)
    g.commit(0, mine.commitment)
    g.commit(1, theirs.commitment)
    g.set_first(1)
    shot = g.fire(1, [Cell(0, 0)])[0].shot
    assert shot is not None
    g.answer(0, Defender(mine).answer(shot))
    text = render_grids(g, 0, fleet).plain
    assert "your fleet" in text and "target" in text
    first_row = text.splitlines()[2]
    assert first_row.split()[1] == "X"  # our carrier, hit at A1
    assert first_row.split()[2:6] == ["A"] * 4  # the rest of it: ship A, the fleet's first
    second_row = text.splitlines()[3]
    assert second_row.split()[1] == "~"
    assert text.splitlines()[4].split()[1:5] == ["B"] * 4  # the Battleship (fleet's second)
