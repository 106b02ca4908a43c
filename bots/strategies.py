"""Bot strategies: what an attacker knows, and where to fire next.

Pure computation: no I/O, no clock, and no randomness of its own (the caller passes a
``random.Random``), so a seeded game replays exactly.

Strategies (:class:`RandomStrategy`, :class:`HuntStrategy`, :class:`DensityStrategy`,
:class:`BestStrategy`, the strongest: posterior sampling by :mod:`.posterior`) only read a
:class:`TargetView`, the attacker's tracking grid (:mod:`seabattle.protocol.targeting`, with its
theory of operation: what the view infers from what the rules reveal). :func:`simulate_shots_to_win`
plays one side of a game locally, for ``seabattle bot --stats`` (:mod:`.simulate`). Both are
importable from here too.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Protocol

from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.targeting import (
    _CROSSED,
    _FIRED,
    _HIT,
    _MISS,
    _SUNK,
    _UNKNOWN,
    CellState,
    TargetView,
    _placements,
)

from .posterior import Estimate, Sampler
from .simulate import simulate_shots_to_win

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "BestStrategy",
    "CellState",
    "DensityStrategy",
    "HuntStrategy",
    "RandomStrategy",
    "Strategy",
    "TargetView",
    "make_strategy",
    "simulate_shots_to_win",
]


class Strategy(Protocol):
    """Where to fire next, given a :class:`TargetView`."""

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        """``count`` distinct unknown cells to fire at (fewer only if fewer are unknown)."""
        ...

    def use_radar(self, view: TargetView, rng: random.Random) -> Cell | None:
        """The top-left cell of an area to scan instead of firing, or ``None`` to fire."""
        return None


def _cells(view: TargetView, idx: list[int]) -> list[Cell]:
    return [Cell(*divmod(i, view._cols)) for i in idx]


def _unknown_idx(view: TargetView) -> list[int]:
    return [i for i, s in enumerate(view._state) if s is _UNKNOWN]


class RandomStrategy(Strategy):
    """Uniformly random unknown cells: the baseline every other strategy must beat."""

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        """``count`` distinct cells drawn uniformly from the unknown cells."""
        pool = _unknown_idx(view)
        return _cells(view, rng.sample(pool, min(count, len(pool))))


class HuntStrategy(Strategy):
    """Hunt and target: checkerboard hunting, then the neighbours of hits, then along their line.

    Hunting fires only on cells with ``(row + col) % n == 0``, ``n`` the length of the smallest ship
    left, since every such ship must cover one of them.
    """

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        """Line extensions first, then neighbours of hits, then hunting cells, then any."""
        cols, rows = view._cols, view.rules.rows
        st = view._state
        line: set[int] = set()
        near: set[int] = set()
        for h in (i for i, s in enumerate(st) if s is _HIT):
            r, c = divmod(h, cols)
            for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                nr, nc = r + dr, c + dc
                if not (0 <= nr < rows and 0 <= nc < cols):
                    continue
                if st[nr * cols + nc] is _UNKNOWN:
                    near.add(nr * cols + nc)
                # Two hits in a row: the first unknown cell past the run, in that direction.
                if st[nr * cols + nc] is _HIT and not (
                    0 <= r - dr < rows
                    and 0 <= c - dc < cols
                    and st[(r - dr) * cols + c - dc] is _HIT
                ):
                    while 0 <= nr < rows and 0 <= nc < cols and st[nr * cols + nc] is _HIT:
                        nr, nc = nr + dr, nc + dc
                    if 0 <= nr < rows and 0 <= nc < cols and st[nr * cols + nc] is _UNKNOWN:
                        line.add(nr * cols + nc)
        unknown = _unknown_idx(view)
        step = min((s.length for s in view.remaining_ships()), default=1)
        hunt = [i for i in unknown if sum(divmod(i, cols)) % step == 0]
        out: list[int] = []
        for tier in (sorted(line), sorted(near - line), hunt, unknown):
            fresh = [i for i in tier if i not in out]
            rng.shuffle(fresh)
            out.extend(fresh[: count - len(out)])
            if len(out) >= count:
                break
        return _cells(view, out)


class DensityStrategy(Strategy):
    """Probability density: fire where the most fleet placements consistent with the view overlap.

    For every ship left and every straight placement that avoids known water and sunk ships (and,
    with no-touch rules, does not lie beside a hit it does not cover), each unknown cell it covers
    scores the placement's weight. A placement covering ``k`` unresolved hits weighs
    ``hit_weight ** k``, so hits are finished before hunting resumes. Salvo cells of unsettled
    totals and radar areas that found a ship weigh placements by how likely they make them.
    """

    hit_weight = 50.0
    radar_weight = 4.0

    def density(self, view: TargetView) -> list[float]:
        """The score of every cell index (0 for cells that are not unknown)."""
        masks = view._masks
        rules = view.rules
        hits, fired, unknown = masks[_HIT], masks[_FIRED], masks[_UNKNOWN]
        blocked = masks[_MISS] | masks[_CROSSED] | masks[_SUNK]
        no_touch = not rules.touching
        announced = rules.sunk is not SunkReport.SILENT
        odds = self._fired_odds(view) if fired else {}
        radar = [a for a in view._radar_found if not a & (hits | masks[_SUNK] | masks[_FIRED])]
        hw = self.hit_weight
        dens = [0.0] * rules.cells
        for length, mult in Counter(s.length for s in view.remaining_ships()).items():
            for m, border, cells in _placements(rules.rows, rules.cols, length):
                if m & blocked or (no_touch and border & hits):
                    continue
                h = m & hits
                if h:
                    # A ship whose every cell is hit would have been announced sunk.
                    if announced and h == m:
                        continue
                    w = mult * hw ** h.bit_count()
                else:
                    w = float(mult)
                if m & fired:
                    for i in cells:
                        w *= odds.get(i, 1.0)
                for a in radar:
                    if m & a:
                        w *= self.radar_weight
                for i in cells:
                    dens[i] += w
        return [d if unknown >> i & 1 else 0.0 for i, d in enumerate(dens)]

    @staticmethod
    def _fired_odds(view: TargetView) -> dict[int, float]:
        # Treat salvo cells as independent: a cell whose salvo still owes t hits among n open cells
        # is a ship with probability t/n; weigh placements by its odds against the prior odds.
        unknown_cells = view._masks[_UNKNOWN].bit_count() + view._masks[_FIRED].bit_count()
        left = sum(s.length for s in view.remaining_ships()) - view._masks[_HIT].bit_count()
        prior = min(max(left / max(unknown_cells, 1), 0.01), 0.99)
        out: dict[int, float] = {}
        for group, total in view._salvos:
            known = sum(view._state[i] in (_HIT, _SUNK) for i in group)
            open_ = [i for i in group if view._state[i] is _FIRED]
            p = min(max((total - known) / max(len(open_), 1), 0.01), 0.99)
            for i in open_:
                out[i] = (p / (1 - p)) / (prior / (1 - prior))
        return out

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        """The ``count`` unknown cells of highest density, ties broken at random."""
        dens = self.density(view)
        pool = _unknown_idx(view)
        keyed = sorted(pool, key=lambda i: (-dens[i], rng.random()))
        return _cells(view, keyed[:count])


def _entropy(p: float) -> float:
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


class BestStrategy(Strategy):
    """The strongest strategy measured on each rule set: posterior sampling, or density.

    :class:`~.posterior.Sampler` draws whole fleets uniformly among those that every fact allows
    (misses, hits, crossed-out cells, no-touch borders, sunk ships shown or named, salvo totals
    and the sinkings they report, radar answers), and each cell's chance of being a ship cell is
    read off them. A turn fires at the ``count`` most likely cells (a salvo: the set with the
    most hits expected; a total then tells the sampler exactly how many of them were ships). The
    radar is used once, while no hit is unresolved, when the best area's answer is worth at
    least :attr:`radar_gain` bits more than the best shot's (single shots only: a salvo's turn
    holds several shots). Where the sampler has nothing to say (an unnamed, unshown sinking) the
    density strategy decides.

    What it is on each preset (STRENGTH.md has the figures): on ``classic``, ``classic-8x8`` and
    ``sea-battle`` (single shots, ships may touch, sinkings told, no radar) it *is*
    :class:`DensityStrategy` (:meth:`density_suffices`): there the posterior was density's equal
    over 6,000 games each, at twenty times the time. On ``russian`` and ``six-ship`` (no
    touching) it fires at the likeliest cell of the sampler's independent weighted draws; with
    salvo totals or a radar, of its Gibbs chain.
    """

    radar_gain = 0.3

    def __init__(self) -> None:
        self._view: TargetView | None = None
        self._sampler = Sampler()
        self._fallback = DensityStrategy()
        self._cached: tuple[object, Estimate | None] | None = None

    def estimate(self, view: TargetView, rng: random.Random) -> Estimate | None:
        """The sampler's estimate for ``view`` (computed once per state of the view)."""
        if view is not self._view:
            self._view, self._sampler, self._cached = view, Sampler(), None
        key = (
            tuple(view._masks.values()),
            len(view._salvos),
            len(view._pending),
            len(view._radar_found),
            len(view._afloat),
        )
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, self._sampler.estimate(view, rng))
        return self._cached[1]

    @staticmethod
    def density_suffices(rules: RuleSet) -> bool:
        """Whether :class:`DensityStrategy` plays these rules as well as the posterior does, and
        is what this strategy plays: single shots at ships that may touch, sinkings told, no
        radar (classic, classic-8x8: equal over 6,000 games each, at a fiftieth of the time).
        Where ships may not touch, the posterior knows the edges and the borders that the
        density's count misses; salvo totals, radar answers and silent sinkings it uses exactly."""
        return (
            rules.touching
            and not rules.is_salvo
            and not rules.radar
            and rules.sunk is not SunkReport.SILENT
        )

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        """The ``count`` unknown cells most likely to hold a ship, ties broken at random."""
        if self.density_suffices(view.rules):
            return self._fallback.choose(view, count, rng)
        est = self.estimate(view, rng)
        if est is None:
            return self._fallback.choose(view, count, rng)
        marg = est.marginals
        keyed = sorted(_unknown_idx(view), key=lambda i: (-marg[i], rng.random()))
        return _cells(view, keyed[:count])

    def use_radar(self, view: TargetView, rng: random.Random) -> Cell | None:
        """The area whose answer is most uncertain, when it beats a shot (see the class)."""
        rules = view.rules
        if not rules.radar or rules.is_salvo or view._masks[_HIT]:
            return None
        est = self.estimate(view, rng)
        if est is None or not est.fleets:
            return None
        size, cols = rules.radar_size, rules.cols
        seen = view._masks[_HIT] | view._masks[_SUNK] | view._masks[_FIRED]
        best, best_h = None, -1.0
        n = len(est.fleets)
        for r in range(rules.rows - size + 1):
            for c in range(cols - size + 1):
                area = sum(
                    1 << ((r + dr) * cols + c + dc) for dr in range(size) for dc in range(size)
                )
                if area & seen or not area & view._masks[_UNKNOWN]:
                    continue
                h = _entropy(sum(1 for f in est.fleets if f & area) / n)
                if h > best_h:
                    best, best_h = Cell(r, c), h
        if best is None or best_h < _entropy(max(est.marginals)) + self.radar_gain:
            return None
        return best


STRATEGIES: dict[str, type[Strategy]] = {
    "random": RandomStrategy,
    "hunt": HuntStrategy,
    "density": DensityStrategy,
    "best": BestStrategy,
}
"""Strategy classes by the name the command line uses."""

#: The strategy ``bot`` and ``demo`` play when none is named.
DEFAULT_STRATEGY = "best"


def make_strategy(name: str) -> Strategy:
    """A fresh strategy by name (``random``, ``hunt``, ``density``, ``best``)."""
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ValueError(f"no strategy {name!r}; strategies: {', '.join(STRATEGIES)}") from None
