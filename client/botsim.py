"""A bot strategy playing one side of a game locally, for ``seabattle bot --stats``.

Pure computation, as :mod:`seabattle.client.bots`, which re-exports :func:`simulate_shots_to_win`.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport

from .targeting import _UNKNOWN, TargetView

if TYPE_CHECKING:
    from .bots import Strategy

__all__ = ["simulate_shots_to_win"]


def simulate_shots_to_win(rules: RuleSet, strategy: Strategy, rng: random.Random) -> int:
    """Sink a random fleet with single shots; the number of turns it took (a radar scan is one).

    The view is fed exactly what the rules reveal: ``rules.sunk`` decides what a sinking tells, and
    with ``rules.crossed_out`` the corners of a hit and the border of a sunk ship are crossed out.
    Self-contained (no game engine), so that it measures the strategy and nothing else.
    """
    fleet = random_fleet(rules, rng)
    ships = fleet.ship_cells(rules)
    owner = {c: k for k, cells in enumerate(ships) for c in cells}
    afloat = [set(cells) for cells in ships]
    view = TargetView(rules)
    radar_left = rules.radar
    left, shots = rules.fleet_cells, 0
    while left:
        if shots >= rules.cells + rules.radar:
            raise RuntimeError(f"{type(strategy).__name__} did not win in {rules.cells} shots")
        shots += 1
        top_left = strategy.use_radar(view, rng) if radar_left else None
        if top_left is not None:
            radar_left = False
            size = rules.radar_size
            area = [
                Cell(top_left.row + r, top_left.col + c) for r in range(size) for c in range(size)
            ]
            view.radar(top_left, size, any(c in owner for c in area))
            continue
        picks = strategy.choose(view, 1, rng)
        if len(picks) != 1 or view.state(picks[0]) is not _UNKNOWN:
            raise RuntimeError(f"{type(strategy).__name__} chose {picks}, not one unknown cell")
        cell = picks[0]
        k = owner.get(cell)
        if k is None:
            view.miss(cell)
            continue
        left -= 1
        afloat[k].discard(cell)
        if afloat[k] or rules.sunk is SunkReport.SILENT:
            # Under silent sinking only the hit's corners are crossed: its border would tell.
            view.hit(cell)
            crossed = cell.corners(rules.rows, rules.cols)
        else:
            shown = ships[k] if rules.sunk is SunkReport.SHOWN else None
            view.sunk(cell, k, shown)
            border = {n for c in ships[k] for n in c.neighbours(rules.rows, rules.cols)}
            crossed = sorted(border - set(ships[k]))
        if rules.crossed_out:
            for c in crossed:
                view.crossed(c)
    return shots
