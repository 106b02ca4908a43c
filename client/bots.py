"""Bot strategies for the reference client: what an attacker knows, and where to fire next.

Pure computation: no I/O, no clock, and no randomness of its own (the caller passes a
``random.Random``), so a seeded game replays exactly.

Theory of operation. A :class:`TargetView` is the attacker's tracking grid, fed only with what the
rules reveal (miss, hit, sunk, salvo totals, radar answers, crossed-out cells). It keeps one
:class:`CellState` per cell and mirrors the states as bitmasks (Python ints, bit ``i`` for the cell
of index ``i``): the density strategy tests hundreds of precomputed ship placements per choice, and
an AND of two ints is the cheapest test Python has. After every fact the view draws the
consequences until nothing changes (:meth:`TargetView._settle`): no-touch borders become water,
settled salvo totals become hits or misses, named sinkings are located, and under silent sinking a
no-touch run of hits closed at both ends is a ship found whole. Inference is sound: a cell becomes
water or sunk only when every fleet consistent with the facts agrees.

Strategies (:class:`RandomStrategy`, :class:`HuntStrategy`, :class:`DensityStrategy`) only read a
view. :func:`simulate_shots_to_win` plays one side of a game locally, for ``seabattle bot --stats``.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, Protocol

from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, ShipSpec, SunkReport

__all__ = [
    "STRATEGIES",
    "CellState",
    "DensityStrategy",
    "HuntStrategy",
    "RandomStrategy",
    "Strategy",
    "TargetView",
    "make_strategy",
    "simulate_shots_to_win",
]


class CellState(StrEnum):
    """What the attacker knows of one cell of the opponent's grid."""

    UNKNOWN = "unknown"  #: not fired at, nothing known: a legal target
    MISS = "miss"  #: fired at, water
    HIT = "hit"  #: fired at, a ship cell whose ship is not known sunk
    SUNK = "sunk"  #: a cell of a ship known sunk
    CROSSED = "crossed"  #: not fired at, but no ship can be there (crossed out or inferred)
    FIRED = "fired"  #: fired at in a salvo reported as a total only: hit or water not yet known


_UNKNOWN, _MISS, _HIT, _SUNK, _CROSSED, _FIRED = CellState


class _Geometry(NamedTuple):
    ring: tuple[tuple[int, ...], ...]  # the up to 8 neighbours of every cell index
    corners: tuple[tuple[int, ...], ...]  # the up to 4 diagonal neighbours


@functools.lru_cache(maxsize=32)
def _geometry(rows: int, cols: int) -> _Geometry:
    ring, corners = [], []
    for i in range(rows * cols):
        c = Cell(*divmod(i, cols))
        ring.append(tuple(n.index(cols) for n in c.neighbours(rows, cols)))
        corners.append(tuple(n.index(cols) for n in c.corners(rows, cols)))
    return _Geometry(tuple(ring), tuple(corners))


# One straight placement of a ship: (cells mask, mask of the 8-neighbour border, cell indices).
_Lay = tuple[int, int, tuple[int, ...]]


@functools.lru_cache(maxsize=128)
def _placements(rows: int, cols: int, length: int) -> tuple[_Lay, ...]:
    """Every straight placement of a ship of ``length``, computed once per grid and length."""
    ring = _geometry(rows, cols).ring
    out = []
    for dr, dc in ((0, 1), (1, 0)) if length > 1 else ((0, 1),):
        for r in range(rows - dr * (length - 1)):
            for c in range(cols - dc * (length - 1)):
                cells = tuple((r + dr * k) * cols + c + dc * k for k in range(length))
                mask = sum(1 << i for i in cells)
                border = 0
                for i in cells:
                    for j in ring[i]:
                        border |= 1 << j
                out.append((mask, border & ~mask, cells))
    return tuple(out)


@dataclass(slots=True)
class _Pending:
    """A ship reported sunk at ``cell`` whose cells are not all located yet."""

    cell: int
    length: int | None  # None: the rules named no ship and showed no cells
    claimed: set[int] = field(default_factory=set)  # cells known to be this ship's


class TargetView:
    """What an attacker knows about the opponent's grid, built only from what the rules reveal.

    Feed it with :meth:`miss`, :meth:`hit`, :meth:`sunk`, :meth:`salvo_total`, :meth:`radar` and
    :meth:`crossed`; read it with :meth:`state`, :meth:`unknown_cells`, :meth:`remaining_ships` and
    :attr:`fleet_destroyed`. With no-touch rules the view marks the water that the rule implies
    itself (diagonals of a hit, the border of a sunk ship), whether or not the rules cross it out.
    """

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._cols = rules.cols
        self._geo = _geometry(rules.rows, rules.cols)
        self._state = [_UNKNOWN] * rules.cells
        self._masks = dict.fromkeys(CellState, 0)
        self._masks[_UNKNOWN] = (1 << rules.cells) - 1
        self._afloat = list(range(len(rules.fleet)))  # fleet indices not known sunk
        self._hits_reported = 0
        self._salvos: list[tuple[tuple[int, ...], int]] = []
        self._pending: list[_Pending] = []
        self._radar_found: list[int] = []  # masks of areas that radar found a ship cell in

    # -- reading ---------------------------------------------------------------------------------

    def state(self, cell: Cell) -> CellState:
        """What is known of ``cell``."""
        return self._state[cell.index(self._cols)]

    def unknown_cells(self) -> list[Cell]:
        """The cells a strategy may fire at: not fired at and not known to be water."""
        return [Cell(*divmod(i, self._cols)) for i, s in enumerate(self._state) if s is _UNKNOWN]

    def unresolved_hits(self) -> list[Cell]:
        """Hit cells not yet known to belong to a sunk ship."""
        return [Cell(*divmod(i, self._cols)) for i, s in enumerate(self._state) if s is _HIT]

    def remaining_ships(self) -> tuple[ShipSpec, ...]:
        """The ships not known sunk; when sinkings are silent, a conservative (larger) multiset."""
        return tuple(self.rules.fleet[k] for k in self._afloat)

    @property
    def fleet_destroyed(self) -> bool:
        """Whether every ship cell has been hit (every ship known sunk, or enough hits counted)."""
        return not self._afloat or self._hits_reported >= self.rules.fleet_cells

    # -- feeding ---------------------------------------------------------------------------------

    def miss(self, cell: Cell) -> None:
        """A shot at ``cell`` found water."""
        i = cell.index(self._cols)
        if self._state[i] in (_UNKNOWN, _CROSSED, _FIRED):
            self._set(i, _MISS)
        self._settle()

    def hit(self, cell: Cell) -> None:
        """A shot at ``cell`` hit a ship (not reported sunk by this shot)."""
        self._hit(cell.index(self._cols), reported=True)
        self._settle()

    def sunk(
        self, cell: Cell, ship_index: int | None = None, cells: tuple[Cell, ...] | None = None
    ) -> None:
        """A shot at ``cell`` sank a ship; the shot counts as a hit, so :meth:`hit` is optional.

        ``ship_index`` (into ``rules.fleet``) when the rules name the ship, ``cells`` when they show
        it whole; with neither, the view still locates the ship when the facts allow it.
        """
        i = cell.index(self._cols)
        self._hit(i, reported=True)
        if ship_index is not None and ship_index in self._afloat:
            self._afloat.remove(ship_index)
        if cells:
            idx = [c.index(self._cols) for c in cells]
            for j in idx:
                self._hit(j, reported=False)
            self._sink(idx, drop_length=None if ship_index is not None else len(idx))
        else:
            length = None if ship_index is None else self.rules.fleet[ship_index].length
            # With no name the length is learnt, and a ship of it dropped, once the ship is located.
            self._pending.append(_Pending(i, length))
        self._settle()

    def salvo_total(self, cells: tuple[Cell, ...] | list[Cell], hits: int) -> None:
        """A salvo at ``cells`` reported only as a number of hits (002 "total hits only").

        Cells already fired at are left out: the protocol refuses repeated cells.
        """
        self._hits_reported += hits
        group = []
        for c in cells:
            i = c.index(self._cols)
            if self._state[i] is _UNKNOWN:
                self._set(i, _FIRED)
                group.append(i)
            elif self._state[i] is _CROSSED:
                self._set(i, _MISS)
                group.append(i)
        self._salvos.append((tuple(group), hits))
        self._settle()

    def radar(self, top_left: Cell, size: int, found: bool) -> None:
        """Radar on the ``size`` x ``size`` area at ``top_left``: a ship cell there, or not."""
        area = 0
        for r in range(top_left.row, top_left.row + size):
            for c in range(top_left.col, top_left.col + size):
                if Cell(r, c).on(self.rules.rows, self.rules.cols):
                    area |= 1 << (r * self._cols + c)
                    if not found:
                        self._water(r * self._cols + c)
        if found:
            self._radar_found.append(area)
        self._settle()

    def crossed(self, cell: Cell) -> None:
        """The rules crossed ``cell`` out: no ship can be there."""
        self._water(cell.index(self._cols))
        self._settle()

    # -- inference -------------------------------------------------------------------------------

    def _set(self, i: int, st: CellState) -> None:
        bit = 1 << i
        self._masks[self._state[i]] &= ~bit
        self._masks[st] |= bit
        self._state[i] = st

    def _water(self, i: int) -> bool:
        st = self._state[i]
        if st is _UNKNOWN:
            self._set(i, _CROSSED)
        elif st is _FIRED:
            self._set(i, _MISS)
        else:
            return False
        return True

    def _hit(self, i: int, *, reported: bool) -> None:
        st = self._state[i]
        if st in (_HIT, _SUNK):
            return
        if reported and st is not _FIRED:  # a FIRED cell's hit was counted in its salvo total
            self._hits_reported += 1
        self._set(i, _HIT)
        if not self.rules.touching:
            for j in self._geo.corners[i]:
                self._water(j)

    def _sink(self, cells: list[int] | tuple[int, ...], *, drop_length: int | None) -> None:
        """Mark a located ship sunk; unnamed, it drops a ship of ``drop_length`` from the afloat."""
        for j in cells:
            self._set(j, _SUNK)
        if not self.rules.touching:
            for j in cells:
                for n in self._geo.ring[j]:
                    self._water(n)
        if drop_length is not None:
            for k in self._afloat:
                if self.rules.fleet[k].length == drop_length:
                    self._afloat.remove(k)
                    break

    def _settle(self) -> None:
        changed = True
        while changed:
            changed = self._settle_salvos() | self._settle_pending()
            if not self.rules.touching:
                changed |= self._settle_runs()

    def _settle_salvos(self) -> bool:
        changed, keep = False, []
        for group, total in self._salvos:
            known = sum(self._state[i] in (_HIT, _SUNK) for i in group)
            open_ = [i for i in group if self._state[i] is _FIRED]
            if not open_:
                continue
            if known >= total:
                for i in open_:
                    self._set(i, _MISS)
            elif known + len(open_) == total:
                for i in open_:
                    self._hit(i, reported=False)
            else:
                keep.append((group, total))
                continue
            changed = True
        self._salvos = keep
        return changed

    def _settle_pending(self) -> bool:
        """Locate ships reported sunk: the cells in every consistent placement are that ship's."""
        changed, keep = False, []
        rows, cols = self.rules.rows, self._cols
        claimed_elsewhere = 0
        for p in self._pending:
            for j in p.claimed:
                claimed_elsewhere |= 1 << j
        for p in self._pending:
            mine = sum(1 << j for j in p.claimed)
            usable = self._masks[_HIT] | self._masks[_FIRED]
            usable = (usable & ~claimed_elsewhere) | mine
            touching_hits = self._masks[_HIT] | self._masks[_SUNK]
            lengths = (
                [p.length]
                if p.length is not None
                else sorted({s.length for s in self.remaining_ships()})
            )
            found: list[_Lay] = []
            for length in lengths:
                for lay in _placements(rows, cols, length):
                    m, border, _ = lay
                    if not m >> p.cell & 1 or m & ~usable:
                        continue
                    # No-touch: a hit beside the ship would be part of it, so it cannot be outside.
                    if not self.rules.touching and border & touching_hits & ~mine:
                        continue
                    found.append(lay)
            if not found:
                continue  # facts inconsistent with any ship: drop rather than guess
            common = functools.reduce(lambda a, b: a & b[0], found, found[0][0])
            new = [j for j in found[0][2] if common >> j & 1 and j not in p.claimed]
            if len(found) == 1:
                cells = found[0][2]
                for j in cells:
                    self._hit(j, reported=False)
                self._sink(cells, drop_length=len(cells) if p.length is None else None)
                changed = True
                continue
            for j in new:
                self._hit(j, reported=False)
                self._set(j, _SUNK)
                p.claimed.add(j)
                changed = True
            keep.append(p)
        self._pending = keep
        return changed

    def _settle_runs(self) -> bool:
        """No-touch: an 8-connected run of hits is one ship, straight, and its sides are water."""
        changed = False
        cols, rows = self._cols, self.rules.rows
        longest = max((s.length for s in self.remaining_ships()), default=0)
        seen: set[int] = set()
        for start, st in enumerate(self._state):
            if st is not _HIT or start in seen:
                continue
            run, todo = [], [start]
            seen.add(start)
            while todo:
                i = todo.pop()
                run.append(i)
                for j in self._geo.ring[i]:
                    if self._state[j] is _HIT and j not in seen:
                        seen.add(j)
                        todo.append(j)
            rs = {i // cols for i in run}
            cs = {i % cols for i in run}
            if len(run) == 1:
                r, c = divmod(run[0], cols)
                ends = [(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)]
            elif len(rs) == 1:
                r = next(iter(rs))
                ends = [(r, min(cs) - 1), (r, max(cs) + 1)]
            elif len(cs) == 1:
                c = next(iter(cs))
                ends = [(min(rs) - 1, c), (max(rs) + 1, c)]
            else:
                continue  # not straight: inconsistent facts, leave to the strategies
            on = [r * cols + c for r, c in ends if 0 <= r < rows and 0 <= c < cols]
            if len(run) >= longest:
                for j in on:
                    changed |= self._water(j)
            if self.rules.sunk is SunkReport.SILENT and all(
                self._state[j] in (_MISS, _CROSSED) for j in on
            ):
                # Closed at both ends: under silent sinking the ship is found whole.
                self._sink(sorted(run), drop_length=len(run))
                changed = True
        return changed


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


STRATEGIES: dict[str, type[Strategy]] = {
    "random": RandomStrategy,
    "hunt": HuntStrategy,
    "density": DensityStrategy,
}
"""Strategy classes by the name the command line uses."""


def make_strategy(name: str) -> Strategy:
    """A fresh strategy by name (``random``, ``hunt``, ``density``)."""
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise ValueError(f"no strategy {name!r}; strategies: {', '.join(STRATEGIES)}") from None


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
