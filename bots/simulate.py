"""A bot strategy playing one side of a game locally, for ``seabattle bot --stats``.

Pure computation, as :mod:`.strategies`, which re-exports :func:`simulate_shots_to_win`, but for
the clock that times each move.
:func:`measure` plays many games on boards drawn from their own seeded stream, so that two
strategies measured with the same seed and placement face the same boards.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SalvoReport, ShotMode, SunkReport
from seabattle.protocol.targeting import _UNKNOWN, TargetView
from seabattle.protocol.verdict import Result, Shot, radar_cells, true_answer

if TYPE_CHECKING:
    from .strategies import Strategy

__all__ = ["ShotStats", "measure", "simulate_shots_to_win"]


def _turn_size(rules: RuleSet) -> int:
    """Cells a turn calls: one, the fixed salvo, or one per own ship afloat (all of them: the
    simulation plays one side, whose fleet is never fired at)."""
    if rules.shots is ShotMode.SALVO_FIXED:
        return rules.salvo_size
    if rules.shots is ShotMode.SALVO_AFLOAT:
        return len(rules.fleet)
    return 1


def simulate_shots_to_win(
    rules: RuleSet,
    strategy: Strategy,
    rng: random.Random,
    fleet: Fleet | None = None,
    times: list[float] | None = None,
) -> int:
    """Sink ``fleet`` (a uniformly random one if ``None``); the number of turns it took (a radar
    scan is one; a salvo is one).

    The view is fed exactly what the rules reveal: per-cell results or a salvo's total with the
    sinkings it caused (:func:`~seabattle.protocol.verdict.true_answer`, the defender's own
    answer), ``rules.sunk`` decides what a sinking tells, and with ``rules.crossed_out`` the
    corners of a hit and the border of a sunk ship are crossed out. Self-contained (no game
    engine), so that it measures the strategy and nothing else. ``times`` collects the seconds
    each turn's decision took (the strategy's calls, not the simulation's own work).
    """
    if fleet is None:
        fleet = random_fleet(rules, rng)
    ships = fleet.ship_cells(rules)
    occupancy = fleet.occupancy(rules)
    view = TargetView(rules)
    radar_left = rules.radar
    size = _turn_size(rules)
    totals = rules.is_salvo and rules.salvo_report is SalvoReport.TOTAL
    hit: set[int] = set()
    turns, cols = 0, rules.cols
    clock = time.perf_counter
    while len(hit) < rules.fleet_cells:
        if turns >= rules.cells + rules.radar:
            raise RuntimeError(f"{type(strategy).__name__} did not win in {rules.cells} turns")
        turns += 1
        t0 = clock()
        top_left = strategy.use_radar(view, rng) if radar_left else None
        if top_left is not None:
            if times is not None:
                times.append(clock() - t0)
            radar_left = False
            found = any(occupancy[c.index(cols)] for c in radar_cells(rules, top_left))
            view.radar(top_left, rules.radar_size, found)
            continue
        count = min(size, len(view.unknown_cells()))
        picks = strategy.choose(view, count, rng)
        if times is not None:
            times.append(clock() - t0)
        if len(set(picks)) != count or any(view.state(c) is not _UNKNOWN for c in picks):
            raise RuntimeError(
                f"{type(strategy).__name__} chose {picks}, not {count} distinct unknown cells"
            )
        truth, _ = true_answer(rules, occupancy, hit, Shot(turns, 0, tuple(picks)))
        hit.update(
            c.index(cols) for c, t in zip(picks, truth, strict=True) if t.result is not Result.MISS
        )
        crossed: set[Cell] = set()
        sunk: list[tuple[int | None, tuple[Cell, ...] | None]] = []
        for c, t in zip(picks, truth, strict=True):
            if t.result is Result.MISS:
                if not totals:
                    view.miss(c)
                continue
            crossed.update(c.corners(rules.rows, rules.cols))
            if t.result is Result.HIT:
                if not totals:
                    view.hit(c)
                continue
            k = t.ship
            assert k is not None
            shown = ships[k] if rules.sunk is SunkReport.SHOWN else None
            if totals:
                sunk.append((k, shown))
            else:
                view.sunk(c, k, shown)
            crossed.update(n for x in ships[k] for n in x.neighbours(rules.rows, rules.cols))
        if totals:
            view.salvo_total(picks, sum(t.result is not Result.MISS for t in truth), sunk)
        if rules.crossed_out:
            # Under silent sinking only the hits' corners are crossed: a border would tell.
            for c in sorted(crossed):
                view.crossed(c)
    return turns


@dataclass(frozen=True, slots=True)
class ShotStats:
    """Turns to win over a number of games: mean with its standard error, median, p90, max; and
    the time a turn's decision took, in milliseconds (median, p99, over every turn)."""

    games: int
    mean: float
    sem: float  #: standard error of the mean (0 for a single game)
    median: float
    p90: float
    max: int
    move_ms_median: float = 0.0
    move_ms_p99: float = 0.0

    def line(self) -> str:
        """One line for a person: ``mean 44.52 ± 0.17, median 45, p90 56, max 83; ...``."""
        return (
            f"mean {self.mean:.2f} ± {self.sem:.2f}, median {self.median:g}, "
            f"p90 {self.p90:g}, max {self.max}; a move takes {self.move_ms_median:.2f} ms "
            f"(median), {self.move_ms_p99:.2f} ms (p99)"
        )


def _rank(values: list[float], q: float) -> float:
    """The ``q`` quantile by the nearest rank: a value that occurred."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


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
    results: list[int] = []
    times: list[float] = []
    for _ in range(games):
        fleet = place_fleet(rules, boards, placement)
        results.append(simulate_shots_to_win(rules, make(), shots, fleet, times))
        if advance is not None:
            advance()
    n = len(results)
    sem = statistics.stdev(results) / math.sqrt(n) if n > 1 else 0.0
    return ShotStats(
        n,
        statistics.fmean(results),
        sem,
        statistics.median(results),
        _rank([float(r) for r in results], 0.9),
        max(results),
        statistics.median(times) * 1000 if times else 0.0,
        _rank(times, 0.99) * 1000 if times else 0.0,
    )
