"""A bot strategy playing one side of a game locally, for ``seabattle bot --stats``.

Pure computation, as :mod:`seabattle.client.bots`, which re-exports :func:`simulate_shots_to_win`.
:func:`measure` plays many games on boards drawn from their own seeded stream, so that two
strategies measured with the same seed and placement face the same boards.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport

from .targeting import _UNKNOWN, TargetView

if TYPE_CHECKING:
    from .bots import Strategy

__all__ = ["ShotStats", "measure", "simulate_shots_to_win"]


def simulate_shots_to_win(
    rules: RuleSet, strategy: Strategy, rng: random.Random, fleet: Fleet | None = None
) -> int:
    """Sink ``fleet`` (a uniformly random one if ``None``) with single shots; the number of turns
    it took (a radar scan is one).

    The view is fed exactly what the rules reveal: ``rules.sunk`` decides what a sinking tells, and
    with ``rules.crossed_out`` the corners of a hit and the border of a sunk ship are crossed out.
    Self-contained (no game engine), so that it measures the strategy and nothing else.
    """
    if fleet is None:
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


@dataclass(frozen=True, slots=True)
class ShotStats:
    """Turns to win over a number of games: mean with its standard error, median, p90, max."""

    games: int
    mean: float
    sem: float  #: standard error of the mean (0 for a single game)
    median: float
    p90: float
    max: int

    def line(self) -> str:
        """One line for a person: ``mean 44.52 ± 0.17, median 45, p90 56, max 83``."""
        return (
            f"mean {self.mean:.2f} ± {self.sem:.2f}, median {self.median:g}, "
            f"p90 {self.p90:g}, max {self.max}"
        )


def measure(
    rules: RuleSet,
    make: Callable[[], Strategy],
    games: int,
    seed: int,
    placement: str = "uniform",
    advance: Callable[[], None] | None = None,
) -> ShotStats:
    """Play ``games`` games of a fresh ``make()`` against fleets placed by ``placement``.

    The boards come from ``random.Random(seed)`` and the shooter's own draws from a second
    stream, so the same seed and placement give the same boards whatever the strategy.
    """
    from .placement import place_fleet  # placement reads the density strategy, which needs us

    boards, shots = random.Random(seed), random.Random(f"{seed}/shots")
    results = []
    for _ in range(games):
        fleet = place_fleet(rules, boards, placement)
        results.append(simulate_shots_to_win(rules, make(), shots, fleet))
        if advance is not None:
            advance()
    n = len(results)
    sem = statistics.stdev(results) / math.sqrt(n) if n > 1 else 0.0
    # The 90th percentile by the nearest rank: a turn count that some game took.
    p90 = sorted(results)[max(math.ceil(0.9 * n) - 1, 0)]
    return ShotStats(
        n, statistics.fmean(results), sem, statistics.median(results), p90, max(results)
    )
