"""Posterior sampling of whole fleets: what every fleet consistent with a :class:`TargetView` says.

Pure computation: no I/O, no clock, and no randomness of its own (the caller passes a
``random.Random``), so a seeded game replays exactly.

Theory of operation. The opponent's fleet was drawn uniformly from every legal fleet (that is what
:func:`~seabattle.protocol.fleet.random_fleet` does, and what a shooter must assume of a stranger),
so after the facts a view holds, every legal fleet consistent with them is equally likely. A
:class:`Model` turns the view into constraints on the ships not located yet ("slots"): each ship
stays off water and off located sunk ships (and their borders where ships may not touch); a ship
afloat keeps a cell never fired at (else its sinking would have been announced); a ship reported
sunk covers a cell of its sinking shot and lies within the cells fired at by then; together the
ships cover every unresolved hit, put exactly the reported number of ship cells under every salvo
reported as a total, and touch every radar area that found something.

:class:`Sampler` walks a Markov chain over the fleets that meet them, whose stationary
distribution is the uniform one: a Gibbs step takes one ship up and puts it down uniformly among
its positions that keep the fleet consistent, and a Metropolis-Hastings pair step moves two ships
at once (one ship alone cannot hand a hit over to another, so without it the chain would never
learn which ship a hit belongs to; and where nothing is left to cover, an exact pair step puts
two ships down together, since ships that fence each other in can leave a fleet no single step
can move out of: on a crowded no-touch board the chain then stayed on one fleet, move after
move, and fired as if it were the only one). The chain's state survives from one shot to the
next; when a new fact makes it inconsistent, a randomised depth-first search repairs it around
the ships that still fit, and a few sweeps wash the repair's bias out. Each Gibbs step adds its
whole conditional distribution to the cell estimates (Rao-Blackwellisation), which makes a few
dozen sweeps worth many more independent samples. The work per call is a fixed number of
candidate tests, never a time: the same seed replays the same game.

Where the facts are cells and sinkings only (no salvo total, no radar area), :class:`Sampler`
draws whole fleets independently instead (issue 37: on russian, a chain's consecutive sweeps are
so alike that its estimates were twice as noisy as independent draws). Every way of covering the
unresolved hits with ships, each hit by exactly one, is listed (:meth:`Sampler._coverings`); a
draw picks one in proportion to the product of the other ships' positions beside it, then puts
those ships down one at a time, each uniformly among its positions beside the ships before it,
and weighs the fleet by the product of the shares of positions each found left. The weighted
draws are exactly the uniform posterior's (the issue's rejection sampler, with the rejection
replaced by its probability), so their weights' effective sample size says how much they are
worth; a call draws until it reaches :attr:`Sampler.target_ess`. The draws are carried from
move to move (:meth:`Sampler._carry`): a fleet drawn for fewer facts is a draw for more once the
fleets that the new facts rule out are dropped, so that while hunting most of a move's estimate
comes from earlier moves' draws, and after a hit only the fleets with a ship there are kept. The
ships that cover hits are Rao-Blackwellised (each such ship's positions given the others).
``python -m bench.marginals`` measures the estimates against exact marginals.
"""

from __future__ import annotations

import bisect
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.targeting import (
    _CROSSED,
    _HIT,
    _MISS,
    _SUNK,
    _UNKNOWN,
    TargetView,
    _placements,
)

__all__ = ["Estimate", "Model", "Sampler"]

# One position of one ship: its cells, the cells it forbids to every other ship (its cells, and
# its ring where ships may not touch), and its index into the geometry's table of positions.
_Lay = tuple[int, int, int]


# The positions of one length and orientation by their first cell, a byte of first cells at a
# time: ``[j][b]`` holds, in cell order, the positions whose first cell is a set bit of the byte
# value ``b`` at byte ``j`` of a mask. A mask of first cells becomes its positions in one lookup
# a byte, in the order the positions have in the table.
_Starts = tuple[tuple[tuple[_Lay, ...], ...], ...]


class _Table(NamedTuple):
    by_length: dict[int, tuple[_Lay, ...]]
    cells: tuple[tuple[int, ...], ...]  # the cell indices of every position, by its index
    #: by length: the positions lying along a row, and those along a column, by first cell
    starts: dict[int, tuple[_Starts, _Starts]]
    full: int  # every cell
    nbytes: int  # bytes of a mask


@functools.lru_cache(maxsize=16)
def _table(rows: int, cols: int, touching: bool, lengths: tuple[int, ...]) -> _Table:
    by_length: dict[int, tuple[_Lay, ...]] = {}
    cells: list[tuple[int, ...]] = []
    starts: dict[int, tuple[_Starts, _Starts]] = {}
    nbytes = (rows * cols + 7) // 8
    for length in lengths:
        lays = []
        first: tuple[dict[int, _Lay], dict[int, _Lay]] = ({}, {})
        for m, border, cs in _placements(rows, cols, length):
            lay = (m, m if touching else m | border, len(cells))
            lays.append(lay)
            cells.append(cs)
            first[len(cs) > 1 and cs[1] - cs[0] == cols][cs[0]] = lay
        by_length[length] = tuple(lays)
        starts[length] = (_by_byte(first[0], nbytes), _by_byte(first[1], nbytes))
    return _Table(by_length, tuple(cells), starts, (1 << rows * cols) - 1, nbytes)


def _by_byte(first: dict[int, _Lay], nbytes: int) -> _Starts:
    return tuple(
        tuple(
            tuple(first[8 * j + k] for k in range(8) if b >> k & 1 and 8 * j + k in first)
            for b in range(256)
        )
        for j in range(nbytes)
    )


def _first_cells(
    cols: int, cells: tuple[tuple[int, ...], ...], lays: tuple[_Lay, ...]
) -> tuple[int, int]:
    """The masks of the first cells of ``lays``: those along a row, and those along a column."""
    row = col = 0
    for x in lays:
        cs = cells[x[2]]
        if len(cs) > 1 and cs[1] - cs[0] == cols:
            col |= 1 << cs[0]
        else:
            row |= 1 << cs[0]
    return row, col


@dataclass(slots=True)
class _Slot:
    """A ship not located yet: its key (fleet index, or a pending sinking's), and its positions
    that meet every constraint of its own."""

    key: object
    length: int
    cands: tuple[_Lay, ...]
    ok: frozenset[int] = field(default_factory=frozenset)  # the candidates' indices
    #: the candidates' first cells, along a row and along a column (see :meth:`Sampler._free`)
    row_starts: int = 0
    col_starts: int = 0
    _by_cell: dict[int, list[_Lay]] | None = None

    def covering(self, bit: int) -> list[_Lay]:
        """The candidates covering the cell of mask ``bit``."""
        if self._by_cell is None:
            self._by_cell = {}
            for x in self.cands:
                m = x[0]
                while m:
                    low = m & -m
                    self._by_cell.setdefault(low, []).append(x)
                    m ^= low
        return self._by_cell.get(bit, [])


class _Spec(NamedTuple):
    """A slot as :meth:`Sampler._draws` reads it: its first cells along a row and a column, the
    shifts that test a ship's further cells, its candidates, and its sums a byte at a time."""

    slot: _Slot
    row: int
    col: int
    shift_row: tuple[int, ...]
    shift_col: tuple[int, ...]
    cands: tuple[_Lay, ...]
    ncands: int
    rows: list[float]
    cols: list[float]


def _count(spec: _Spec, free: int) -> int:
    """How many of the slot's candidates lie wholly on ``free`` cells."""
    row = spec.row & free
    for k in spec.shift_row:
        row &= free >> k
    col = spec.col & free
    if col:
        for k in spec.shift_col:
            col &= free >> k
    return row.bit_count() + col.bit_count()


@dataclass(slots=True)
class _Generation:
    """The draws of one call, carried to later ones (see :meth:`Sampler._carry`): each draw's
    cells, its ships' cells and its weight; and, by position index, the weight of the draws that
    hold each position, with the sum of the weights and of their squares."""

    parts: list[tuple[int, tuple[_Lay, ...], float]]
    acc: list[float]
    total: float = 0.0
    square: float = 0.0


class Model:
    """The constraints a view puts on the ships not located yet (see the module docstring)."""

    def __init__(self, view: TargetView) -> None:
        rules = view.rules
        masks = view._masks
        self.rules: RuleSet = rules
        lengths = tuple(sorted({s.length for s in rules.fleet}))
        self.table = _table(rules.rows, rules.cols, rules.touching, lengths)
        fixed = view._located
        forbid = fixed
        if not rules.touching:
            for m, border, _ in _placements(rules.rows, rules.cols, 1):
                if m & fixed:
                    forbid |= border
        water = masks[_MISS] | masks[_CROSSED] | forbid
        self.fixed = fixed
        self.unknown = masks[_UNKNOWN]
        self.required = masks[_HIT] | (masks[_SUNK] & ~fixed)
        self.groups = [
            (g, total - (g & fixed).bit_count())
            for g, total in ((sum(1 << i for i in grp), t) for grp, t in view._salvos)
        ]
        self.radar = [a for a in view._radar_found if not a & fixed]
        #: False when the view holds a sinking this model cannot place (an unnamed, unshown one)
        self.usable = True
        announced = rules.sunk is not SunkReport.SILENT
        unknown = self.unknown
        self.slots: list[_Slot] = []
        for k in view._afloat:
            length = rules.fleet[k].length
            lays = self.table.by_length[length]
            if announced:
                cands = tuple(x for x in lays if not x[0] & water and x[0] & unknown)
            else:
                cands = tuple(x for x in lays if not x[0] & water)
            self.slots.append(_Slot(k, length, cands))
        for j, p in enumerate(view._pending):
            if p.length is None:
                self.usable = False
                continue
            lays = self.table.by_length[p.length]
            cands = tuple(
                x for x in lays if not x[0] & water and x[0] & p.group and not x[0] & ~p.allowed
            )
            self.slots.append(
                _Slot(p.ship if p.ship is not None else ("pending", j), p.length, cands)
            )
        for s in self.slots:
            s.ok = frozenset(x[2] for x in s.cands)
            s.row_starts, s.col_starts = _first_cells(rules.cols, self.table.cells, s.cands)
            if not s.cands:
                self.usable = False
        self.constrained = bool(self.required or self.groups or self.radar)

    def consistent(self, lays: list[_Lay]) -> bool:
        """Whether one position per slot (in slot order) makes a fleet these facts allow."""
        union = 0
        for s, x in zip(self.slots, lays, strict=True):
            if x[2] not in s.ok:
                return False
        for i, x in enumerate(lays):
            for y in lays[i + 1 :]:
                if x[0] & y[1]:
                    return False
            union |= x[0]
        return self._global(union)

    def _global(self, union: int) -> bool:
        if self.required & ~union:
            return False
        if any((union & g).bit_count() != t for g, t in self.groups):
            return False
        return all(union & a for a in self.radar)


@functools.lru_cache(maxsize=16)
def _empty_board(key: tuple[int, int, bool, tuple[int, ...], bool]) -> tuple[float, ...]:
    """Each cell's chance of a ship before any shot, for a board and fleet (``key``, see
    :meth:`Sampler._board_key`): many more draws than a move makes, from a fixed seed, once."""
    from seabattle.protocol.rules import ShipSpec

    rows, cols, touching, lengths, announced = key
    rules = RuleSet(
        name="empty",
        rows=rows,
        cols=cols,
        fleet=tuple(ShipSpec(f"S{i}", n) for i, n in enumerate(lengths)),
        touching=touching,
        sunk=SunkReport.NAMED if announced else SunkReport.SILENT,
    )
    sampler = Sampler("draws")
    sampler.min_draws = sampler.max_draws = _EMPTY_BOARD_DRAWS
    sampler.draws_per_ship2 = _EMPTY_BOARD_DRAWS
    model = Model(TargetView(rules))
    drawn = sampler._draws(model, random.Random(0))
    if drawn is None:  # no fleet at all: no cell holds a ship
        return (0.0,) * (rows * cols)
    est = sampler._combine(model, [], *drawn)

    # The board's symmetries leave the uniform fleet alone: their mean is as exact, and less noisy.
    def image(r: int, c: int, k: int) -> tuple[int, int]:
        # The k-th symmetry: bit 0 flips the rows, bit 1 the columns, bit 2 transposes.
        if k & 4:
            r, c = c, r
        return (rows - 1 - r if k & 1 else r), (cols - 1 - c if k & 2 else c)

    maps = range(8 if rows == cols else 4)
    marg = est.marginals
    out = []
    for i in range(rows * cols):
        r, c = divmod(i, cols)
        out.append(sum(marg[a * cols + b] for a, b in (image(r, c, k) for k in maps)) / len(maps))
    return tuple(out)


_EMPTY_BOARD_DRAWS = 6_000  # ten ships: about 0.3 s, once a rule set a process


class Estimate(NamedTuple):
    """What the samples say: each cell's probability of being a ship cell (index order), and the
    sampled fleets' cells (sampled ships and located sunk ones), one mask a sweep."""

    marginals: list[float]
    fleets: list[int]


class Sampler:
    """A chain over the fleets consistent with a view; :meth:`estimate` runs it (see the module
    docstring). One sampler follows one game: give it a fresh view, and it starts afresh."""

    #: candidate tests per estimate (a sweep over the ships costs about the sum of their
    #: candidates): the cost of a call, and so of a move
    work = 24_000
    min_sweeps, max_sweeps = 12, 80
    #: the fewest sweeps where ships may not touch: there a ship moves little in one step (its
    #: neighbours' borders fence it in), so a sweep says less and a dozen left single cells'
    #: estimates off by 0.15 on russian's empty board (0.07 at 64)
    min_sweeps_apart = 64
    #: sweeps between two exact pair steps where no hit, total or radar area is left to cover
    #: (see :meth:`estimate`)
    hunting_pair_every = 4
    burn_in = 4  # sweeps after a repair before the estimate counts
    dfs_budget = 20_000  # positions tried per repair before a fresh start

    #: independent draws (see :meth:`_draws`): the least and the most a call makes, and the
    #: effective sample size (of their weights) it stops at once the least is made
    min_draws, max_draws, target_ess = 64, 2_000, 2_000.0
    #: the draws a call may make are this many times the square of the ships left to draw: a
    #: draw costs about one ship step per ship, so a move's time goes with the cube of the ships,
    #: most on the first moves (ten ships: 1,600 draws, some 40 ms) and a few milliseconds once
    #: half the fleet is found
    draws_per_ship2 = 16
    #: the draws a call may make however few ships are left (each costs little then)
    draws_floor = 600
    #: the lengths of ships a draw Rao-Blackwellises where they cover no hit (see
    #: :meth:`_draws`); a boat's share of its free cells costs about what it saves, measured
    rb_lengths: frozenset[int] | set[int] = frozenset()
    #: the most earlier draws carried from call to call (see :meth:`_carry`)
    pool_size = 8_000
    #: ways of covering the unresolved hits past which a call falls back to the chain
    max_coverings = 4_000

    def __init__(self, method: str = "auto") -> None:
        if method not in ("auto", "chain", "draws"):
            raise ValueError(f"no sampling method {method!r}: auto, chain or draws")
        #: ``chain``: the Gibbs chain carried from call to call; ``draws``: independent weighted
        #: draws (:meth:`_draws`), the chain only where they cannot model the facts (salvo totals,
        #: radar areas) or the hits have too many coverings; ``auto``: the same as ``draws``
        self.method = method
        self._state: dict[object, _Lay] = {}
        self._pool: list[_Generation] = []  # the draws of earlier calls (see :meth:`_carry`)
        self._pool_hits = 0  # the hits and sunk cells the pool was last filtered by
        #: the effective sample size of the last call's draws (0 when the chain answered)
        self.last_ess = 0.0

    def estimate(self, view: TargetView, rng: random.Random) -> Estimate | None:
        """Cell probabilities under the uniform prior given the view, or ``None`` when the chain
        finds no consistent fleet (facts it cannot model, or a search that gave up)."""
        model = Model(view)
        if not model.usable:
            return None
        self.last_ess = 0.0
        if self.method != "chain" and not (model.groups or model.radar or view.rules.radar):
            if model.unknown == model.table.full and len(model.slots) == len(view.rules.fleet):
                # Nothing fired yet: the uniform fleet's own cell chances, drawn once a rule set.
                self._pool, self._pool_hits = [], 0
                return Estimate(list(_empty_board(self._board_key(model))), [])
            pool = self._carry(view)
            pool_ess = sum(g.total * g.total / g.square for g in pool)
            drawn = self._draws(model, rng, pool_ess)
            if drawn is not None:
                return self._combine(model, pool, *drawn)
        slots = model.slots
        resumed = self._resume(model, rng)
        if resumed is None:
            return None
        lays, fresh = resumed
        sweeps = self._sweeps(model)
        acc = [0.0] * len(model.table.cells)
        fleets: list[int] = []
        burn = self.burn_in if fresh else 0
        pairs = len(slots) > 1 and not model.constrained
        for sweep in range(burn + sweeps):
            counting = sweep >= burn
            self._sweep(model, lays, rng, acc if counting else None)
            if pairs and sweep % self.hunting_pair_every == 0:
                # Two ships taken up and put down together: one ship at a time cannot leave a
                # fleet whose ships fence each other in (on a crowded board such fleets exist),
                # and the estimate would stay on it. Taken at fixed sweeps, blind to the state,
                # so that each keeps the uniform distribution.
                s, t = rng.sample(range(len(slots)), 2)
                self._pair_gibbs(model, lays, s, t, rng)
            if counting:
                union = model.fixed
                for x in lays:
                    union |= x[0]
                fleets.append(union)
        self._state = {s.key: x for s, x in zip(slots, lays, strict=True)}
        marg = [0.0] * model.rules.cells
        cells = model.table.cells
        for idx, w in enumerate(acc):
            if w:
                for i in cells[idx]:
                    marg[i] += w
        for i in range(len(marg)):
            marg[i] = marg[i] / sweeps if model.unknown >> i & 1 else 0.0
        return Estimate(marg, fleets)

    def _sweeps(self, model: Model) -> int:
        """How many sweeps an estimate counts (see :attr:`work`)."""
        total = sum(len(s.cands) for s in model.slots) or 1
        floor = self.min_sweeps if model.rules.touching else self.min_sweeps_apart
        return max(floor, min(self.max_sweeps, self.work // total))

    # -- independent draws -----------------------------------------------------------------------

    def _combine(
        self,
        model: Model,
        pool: list[_Generation],
        acc: list[float],
        total: float,
        square: float,
        gen: _Generation,
    ) -> Estimate:
        # Each generation's own weighted mean, the generations weighed by their effective sample
        # sizes: the new draws by their Rao-Blackwellised shares, the carried ones by the
        # positions of their ships.
        scale = total / square
        out = [a * scale for a in acc]
        norm = total * scale
        ess = total * scale
        for g in pool:
            k = g.total / g.square
            for idx, a in enumerate(g.acc):
                if a:
                    out[idx] += a * k
            norm += g.total * k
            ess += g.total * k
        self.last_ess = ess
        self._pool.append(gen)
        while sum(len(g.parts) for g in self._pool) > self.pool_size:
            self._pool.pop(0)
        marg = [0.0] * model.rules.cells
        cells = model.table.cells
        for idx, a in enumerate(out):
            if a:
                for i in cells[idx]:
                    marg[i] += a
        unknown = model.unknown
        for i in range(len(marg)):
            marg[i] = max(marg[i] / norm, 0.0) if unknown >> i & 1 else 0.0
        return Estimate(marg, [])

    @staticmethod
    def _board_key(model: Model) -> tuple[int, int, bool, tuple[int, ...], bool]:
        rules = model.rules
        lengths = tuple(s.length for s in rules.fleet)
        return rules.rows, rules.cols, rules.touching, lengths, rules.sunk is not SunkReport.SILENT

    def _coverings(self, model: Model) -> list[tuple[list[tuple[int, _Lay]], int, int, int]] | None:
        """Every way of covering the unresolved hits with ships, each hit by exactly one: the
        ships' positions (by slot), the cells they cover, the cells they forbid to the others,
        and how many labelled ways it stands for. Ships of one length with the same candidates
        are told apart only by their names, so a way takes the first unused one of them and
        counts the others it could have taken. ``None``: more than :attr:`max_coverings`."""
        slots = model.slots
        required = model.required
        apart = not model.rules.touching
        classes: dict[tuple[int, frozenset[int]], list[int]] = {}
        for i, s in enumerate(slots):
            classes.setdefault((s.length, s.ok), []).append(i)
        groups = list(classes.values())
        out: list[tuple[list[tuple[int, _Lay]], int, int, int]] = []
        used = [0] * len(groups)
        chosen: list[tuple[int, _Lay]] = []

        def cover(left: int, union: int, forbid: int, mult: int) -> bool:
            if not left:
                out.append((list(chosen), union, forbid, mult))
                return len(out) <= self.max_coverings
            bit = left & -left
            for g, members in enumerate(groups):
                if used[g] == len(members):
                    continue
                i = members[used[g]]
                for x in slots[i].covering(bit):
                    if x[0] & forbid:
                        continue
                    # Beside a hit it does not cover: that hit's own ship would touch it.
                    if apart and x[1] & ~x[0] & required:
                        continue
                    used[g] += 1
                    chosen.append((i, x))
                    ok = cover(
                        left & ~x[0],
                        union | x[0],
                        forbid | x[1],
                        mult * (len(members) - used[g] + 1),
                    )
                    chosen.pop()
                    used[g] -= 1
                    if not ok:
                        return False
            return True

        if not cover(required, 0, 0, 1):
            return None
        return out

    def _draws(
        self, model: Model, rng: random.Random, pool_ess: float = 0.0
    ) -> tuple[list[float], float, float, _Generation] | None:
        """Independent fleets, weighed so that their weighted mean is the uniform posterior's,
        and each Rao-Blackwellised: what a draw adds to the estimate is, for every ship, the
        share of its positions beside the other ships of the draw that hold each cell.

        A draw picks a way of covering the unresolved hits (:meth:`_coverings`) in proportion to
        the product, over the other ships, of their positions beside it; then puts those ships
        down one at a time (the longest first), each uniformly among its positions beside the
        ships already down. Its weight is the product of the shares of positions each ship found
        left (its positions beside the ships before it, over those beside the way alone): 1 when
        no ship was in another's way, which makes this the issue's rejection sampler with the
        rejection replaced by its probability. Draws continue until the weights' effective
        sample size reaches :attr:`target_ess`, within :attr:`min_draws` to :attr:`max_draws`:
        a fixed rule, so a seed replays. ``None``: too many coverings.
        """
        ways = self._coverings(model)
        if not ways:
            return None
        slots = model.slots
        n = len(slots)
        table = model.table
        full, nbytes, cols = table.full, table.nbytes, model.rules.cols
        # What the draws add up, a byte of first cells at a time (see :meth:`_rao_blackwell`),
        # and for the positions of ships covering hits, one position at a time.
        by_byte: dict[int, tuple[list[float], list[float]]] = {
            length: ([0.0] * (nbytes << 8), [0.0] * (nbytes << 8)) for length in table.starts
        }
        specs = [
            _Spec(
                s,
                s.row_starts,
                s.col_starts,
                tuple(range(1, s.length)),
                tuple(k * cols for k in range(1, s.length)),
                s.cands,
                len(s.cands),
                *by_byte[s.length],
            )
            for s in slots
        ]
        plans: list[tuple[list[_Lay], int, list[tuple[_Spec, int]], list[_Spec]]] = []
        cum: list[float] = []
        total = 0.0
        for chosen, _union, forbid, mult in ways:
            taken = {i for i, _ in chosen}
            rest = sorted((i for i in range(n) if i not in taken), key=lambda i: -slots[i].length)
            weight = float(mult)
            counts: list[tuple[_Spec, int]] = []
            for i in rest:
                c = _count(specs[i], full & ~forbid)
                weight *= c
                counts.append((specs[i], c))
            if weight > 0.0:
                total += weight
                cum.append(total)
                order = [specs[i] for i, _ in chosen] + [spec for spec, _ in counts]
                plans.append(([x for _, x in chosen], forbid, counts, order))
        if not plans:
            return None
        acc = [0.0] * len(table.cells)
        wsum = wsq = 0.0
        draws = 0
        ess_goal, least = self.target_ess - pool_ess, self.min_draws
        gen = _Generation([], [0.0] * len(table.cells))
        parts, gen_acc, fixed = gen.parts, gen.acc, model.fixed
        most = max(least, min(self.max_draws, max(self.draws_floor, self.draws_per_ship2 * n * n)))
        single = plans[0] if len(plans) == 1 else None
        rnd = rng.random
        required = model.required
        rb_lengths = self.rb_lengths
        # With nothing to Rao-Blackwellise, a draw adds its own ships' positions, as carried
        # draws do (``gen.acc``).
        plain = not rb_lengths and not required
        while draws < most:
            draws += 1
            if single is None:
                placed, forbid, counts, order = plans[bisect.bisect_right(cum, rnd() * total)]
            else:
                placed, forbid, counts, order = single
            lays = list(placed)
            w = 1.0
            for spec, c in counts:
                free = full & ~forbid
                row = spec.row & free
                for sh in spec.shift_row:
                    row &= free >> sh
                col = spec.col & free
                if col:
                    for sh in spec.shift_col:
                        col &= free >> sh
                k = row.bit_count() + col.bit_count()
                if not k:
                    w = 0.0
                    break
                w *= k / c
                # Uniform among the positions clear of the others: a candidate at random until
                # one is clear (about c / k tries; the count itself was exact).
                cands, nc = spec.cands, spec.ncands
                x = cands[int(rnd() * nc)]
                while x[0] & forbid:
                    x = cands[int(rnd() * nc)]
                lays.append(x)
                forbid |= x[1]
            if not w:
                continue
            union = fixed
            for x in lays:
                union |= x[0]
                gen_acc[x[2]] += w
            parts.append((union, tuple(lays), w))
            if plain:
                wsum += w
                wsq += w * w
                if draws >= least and wsum * wsum >= ess_goal * wsq:
                    break
                continue
            if not rb_lengths:
                # Only the ships covering hits Rao-Blackwellised (their positions given the
                # others: few, and which ship covers which hit is what finishing turns on); the
                # others add their own positions.
                nchosen = len(placed)
                beside = 0
                for x in lays[nchosen:]:
                    acc[x[2]] += w
                    beside |= x[1]
                for i in range(nchosen):
                    others = beside
                    for j in range(nchosen):
                        if j != i:
                            others |= lays[j][1]
                    need = required & ~others
                    fits = [
                        x
                        for x in order[i].slot.covering(need & -need)
                        if not x[0] & others and x[0] & need == need
                    ]
                    share = w / len(fits)
                    for x in fits:
                        acc[x[2]] += share
                wsum += w
                wsq += w * w
                if draws >= least and wsum * wsum >= ess_goal * wsq:
                    break
                continue
            # Rao-Blackwellised: every ship's positions given all the others, each weighing w
            # over their number: where the others leave a hit uncovered, those covering it (few:
            # one by one into ``acc``); else every position clear of the others, added a byte of
            # first cells at a time into ``by_byte`` (expanded once, at the end of the call).
            m = len(lays)
            after = [0] * (m + 1)
            for i in range(m - 1, -1, -1):
                after[i] = after[i + 1] | lays[i][1]
            before = 0
            for i in range(m):
                spec = order[i]
                others = before | after[i + 1]
                before |= lays[i][1]
                need = required & ~others
                if need:
                    fits = [
                        x
                        for x in spec.slot.covering(need & -need)
                        if not x[0] & others and x[0] & need == need
                    ]
                    share = w / len(fits)
                    for x in fits:
                        acc[x[2]] += share
                    continue
                if spec.slot.length not in rb_lengths:
                    acc[lays[i][2]] += w
                    continue
                free = full & ~others
                row = spec.row & free
                for k in spec.shift_row:
                    row &= free >> k
                col = spec.col & free
                if col:
                    for k in spec.shift_col:
                        col &= free >> k
                share = w / (row.bit_count() + col.bit_count())
                if row:
                    sums = spec.rows
                    for j, b in enumerate(row.to_bytes(nbytes, "little")):
                        if b:
                            sums[j << 8 | b] += share
                if col:
                    sums = spec.cols
                    for j, b in enumerate(col.to_bytes(nbytes, "little")):
                        if b:
                            sums[j << 8 | b] += share
            wsum += w
            wsq += w * w
            if draws >= least and wsum * wsum >= ess_goal * wsq:
                break
        if not wsum:
            return None
        for length, (rows, cols_) in by_byte.items():
            along_row, along_col = table.starts[length]
            for sums, along in ((rows, along_row), (cols_, along_col)):
                for key, v in enumerate(sums):
                    if v:
                        for x in along[key >> 8][key & 255]:
                            acc[x[2]] += v
        gen.total, gen.square = wsum, wsq
        return list(gen_acc) if plain else acc, wsum, wsq, gen

    def _carry(self, view: TargetView) -> list[_Generation]:
        """The draws of earlier calls still consistent with ``view``: a fleet drawn for fewer
        facts, weighed for them, is a draw for these too once the fleets the new facts rule out
        are dropped (its weight against the uniform fleet is unchanged, and the consistent fleets
        are still equally likely). Kept where ships may not touch and every sinking is located;
        else none (and the pool is emptied)."""
        rules = view.rules
        masks = view._masks
        if rules.touching or rules.sunk is SunkReport.SILENT or view._pending:
            self._pool = []
            return []
        water = masks[_MISS] | masks[_CROSSED]
        hits = masks[_HIT] | masks[_SUNK]
        unknown, located = masks[_UNKNOWN], view._located
        new_hits = hits & ~self._pool_hits
        self._pool_hits = hits
        kept: list[_Generation] = []
        for gen in self._pool:
            alive = []
            acc = gen.acc
            for part in gen.parts:
                union, ships, w = part
                # Dropped: a ship on water, a hit not on a ship, or (a new hit on it) a ship hit
                # whole that was not reported sunk where it lies.
                if not (union & water or hits & ~union) and not (
                    union & new_hits and any(not x[0] & unknown and x[0] & ~located for x in ships)
                ):
                    alive.append(part)
                    continue
                gen.total -= w
                gen.square -= w * w
                for x in ships:
                    acc[x[2]] -= w
            gen.parts = alive
            if alive and gen.total > 0.0 and gen.square > 0.0:
                kept.append(gen)
        self._pool = kept
        return kept

    # -- the chain -------------------------------------------------------------------------------

    def _sweep(
        self, model: Model, lays: list[_Lay], rng: random.Random, acc: list[float] | None
    ) -> None:
        slots = model.slots
        n = len(slots)
        order = list(range(n))
        rng.shuffle(order)
        if model.constrained:
            for s in order:
                self._gibbs(model, lays, s, rng, acc)
        else:
            self._plain_sweep(model, lays, order, rng, acc)
        if model.required and n > 1:
            # Hand the hits over between ships. Pairs are drawn blind to the state, and a pair
            # moves only when the other ships leave a required cell to it: a condition its own
            # move cannot change, so each step keeps the uniform distribution.
            for _ in range(n):
                s, t = rng.sample(range(n), 2)
                union, _f = self._others(lays, (s, t))
                if model.required & ~union:
                    self._pair_gibbs(model, lays, s, t, rng)
        if (model.groups or model.radar) and n > 1:
            for _ in range(n):
                s, t = rng.sample(range(n), 2)
                self._pair(model, lays, s, t, rng)

    def _plain_sweep(
        self,
        model: Model,
        lays: list[_Lay],
        order: list[int],
        rng: random.Random,
        acc: list[float] | None,
    ) -> None:
        # The Gibbs steps of :meth:`_gibbs` where no hit, total or radar area is left to cover
        # (every shot so far a miss or a located sinking): a ship's positions are then those
        # clear of the others' forbidden cells, and only those cells need to be gathered.
        slots = model.slots
        for s in order:
            forbid = 0
            for i, x in enumerate(lays):
                if i != s:
                    forbid |= x[1]
            fits = self._free(model, slots[s], forbid)
            n = len(fits)
            if not n:  # cannot happen from a consistent state; keep it rather than break it
                continue
            lays[s] = fits[rng.randrange(n)] if n > 1 else fits[0]
            if acc is not None:
                w = 1.0 / n
                for x in fits:
                    acc[x[2]] += w

    def _others(self, lays: list[_Lay], skip: tuple[int, ...]) -> tuple[int, int]:
        union = forbid = 0
        for i, x in enumerate(lays):
            if i not in skip:
                union |= x[0]
                forbid |= x[1]
        return union, forbid

    def _free(self, model: Model, slot: _Slot, forbid: int) -> list[_Lay]:
        """The slot's candidates clear of ``forbid``, in their order, found a row (and a column)
        of cells at a time: a first cell is kept when its ship's cells are all free, tested as
        one AND of masks per cell of the ship rather than one test per candidate."""
        table = model.table
        row, col = self._starts(model, slot, table.full & ~forbid)
        out: list[_Lay] = []
        along_row, along_col = table.starts[slot.length]
        if row:
            for j, b in enumerate(row.to_bytes(table.nbytes, "little")):
                if b:
                    out.extend(along_row[j][b])
        if col:
            for j, b in enumerate(col.to_bytes(table.nbytes, "little")):
                if b:
                    out.extend(along_col[j][b])
        return out

    def _starts(self, model: Model, slot: _Slot, free: int) -> tuple[int, int]:
        row, col = slot.row_starts & free, slot.col_starts & free
        cols = model.rules.cols
        for k in range(1, slot.length):
            row &= free >> k
            col &= free >> k * cols
        return row, col

    def _fit(self, model: Model, cands: Sequence[_Lay], union: int, forbid: int) -> list[_Lay]:
        """The candidates that fit beside ships covering ``union`` (forbidding ``forbid``) and
        complete the fleet: the required cells covered, every total and radar area met."""
        need = model.required & ~union
        out = [x for x in cands if not x[0] & forbid and x[0] & need == need]
        for g, t in model.groups:
            want = t - (union & g).bit_count()
            out = [x for x in out if (x[0] & g).bit_count() == want]
        for a in model.radar:
            if not union & a:
                out = [x for x in out if x[0] & a]
        return out

    def _gibbs(
        self, model: Model, lays: list[_Lay], s: int, rng: random.Random, acc: list[float] | None
    ) -> None:
        union, forbid = self._others(lays, (s,))
        slot = model.slots[s]
        need = model.required & ~union
        if need:
            fits = self._fit(model, slot.covering(need & -need), union, forbid)
        elif model.groups or model.radar:
            fits = self._fit(model, slot.cands, union, forbid)
        else:
            fits = self._free(model, slot, forbid)
        if not fits:  # cannot happen from a consistent state; keep it rather than break it
            return
        lays[s] = fits[rng.randrange(len(fits))] if len(fits) > 1 else fits[0]
        if acc is not None:
            w = 1.0 / len(fits)
            for x in fits:
                acc[x[2]] += w

    def _pair_gibbs(
        self, model: Model, lays: list[_Lay], s: int, t: int, rng: random.Random
    ) -> None:
        # Both ships at once, exactly: every position of s weighs the number of positions of t
        # that complete the fleet with it. Where a required cell is left to t, only t's positions
        # on it are tested, so that the pair costs little more than two single steps.
        # Where t is left no required cell and no total or radar area constrains it, only the
        # number of its positions is counted, and the positions listed for the one drawn.
        union, forbid = self._others(lays, (s, t))
        need = model.required & ~union
        slot_t = model.slots[t]
        plain = not (model.groups or model.radar)
        options: list[tuple[_Lay, list[_Lay] | None, int]] = []
        weight = 0
        for x in self._free(model, model.slots[s], forbid):
            rest = need & ~x[0]
            fits: list[_Lay] | None
            if rest:
                fits = self._fit(model, slot_t.covering(rest & -rest), union | x[0], forbid | x[1])
                n = len(fits)
            elif plain:
                fits = None
                row, col = self._starts(model, slot_t, model.table.full & ~(forbid | x[1]))
                n = row.bit_count() + col.bit_count()
            else:
                fits = self._fit(model, slot_t.cands, union | x[0], forbid | x[1])
                n = len(fits)
            if n:
                options.append((x, fits, n))
                weight += n
        pick = rng.randrange(weight)
        for x, fits, n in options:
            if pick < n:
                if fits is None:
                    fits = self._free(model, slot_t, forbid | x[1])
                lays[s], lays[t] = x, fits[pick]
                return
            pick -= n

    def _pair(self, model: Model, lays: list[_Lay], s: int, t: int, rng: random.Random) -> None:
        # Propose s uniformly among the positions beside the others, then t uniformly among the
        # positions completing the fleet with it; accept with n_t(new) / n_t(old), the ratio of
        # the reverse proposal to the forward one, so that the uniform distribution stays put.
        union, forbid = self._others(lays, (s, t))
        free = self._free(model, model.slots[s], forbid)
        new_s = free[rng.randrange(len(free))]
        fits_new = self._fit(model, model.slots[t].cands, union | new_s[0], forbid | new_s[1])
        if not fits_new:
            return
        old_s = lays[s]
        fits_old = self._fit(model, model.slots[t].cands, union | old_s[0], forbid | old_s[1])
        if rng.random() * len(fits_old) < len(fits_new):
            lays[s] = new_s
            lays[t] = fits_new[rng.randrange(len(fits_new))]

    # -- keeping and repairing the state ---------------------------------------------------------

    def _resume(self, model: Model, rng: random.Random) -> tuple[list[_Lay], bool] | None:
        """The last state if it still fits (``fresh`` False), else a repaired one (True)."""
        slots = model.slots
        old = dict(self._state)
        kept: list[_Lay | None] = []
        for s in slots:
            x = old.pop(s.key, None)
            if x is None:  # a ship renamed (silent sinking drops one of a length): any of it
                x = next(
                    (y for k, y in old.items() if len(model.table.cells[y[2]]) == s.length), None
                )
                if x is not None:
                    old = {k: y for k, y in old.items() if y is not x}
            kept.append(x if x is not None and x[2] in s.ok else None)
        full = [x for x in kept if x is not None]
        if len(full) == len(slots) and model.consistent(full):
            return full, False
        # Drop ships that clash with ships kept before them, then search for the rest.
        for i, x in enumerate(kept):
            if x is not None and any(y is not None and (x[0] & y[1]) for y in kept[:i]):
                kept[i] = None
        for _attempt in range(4):
            found = self._search(model, kept, rng)
            if found is not None:
                return found, True
            kept = [None] * len(slots)  # start afresh, in another random order
        return None

    def _search(
        self, model: Model, kept: list[_Lay | None], rng: random.Random
    ) -> list[_Lay] | None:
        lays = list(kept)
        budget = [self.dfs_budget]
        union = forbid = 0
        for x in lays:
            if x is not None:
                union |= x[0]
                forbid |= x[1]
        if self._dfs(model, lays, union, forbid, rng, budget):
            return [x for x in lays if x is not None]
        return None

    def _dfs(
        self,
        model: Model,
        lays: list[_Lay | None],
        union: int,
        forbid: int,
        rng: random.Random,
        budget: list[int],
    ) -> bool:
        left = [i for i, x in enumerate(lays) if x is None]
        if not left:
            return model._global(union)
        if any((union & g).bit_count() > t for g, t in model.groups):
            return False
        # What must be covered next: a required cell, else a cell of a total still short, else a
        # radar area still empty; failing all, the ship with the fewest positions.
        target = model.required & ~union
        if target:
            target &= -target
        else:
            for g, t in model.groups:
                if (union & g).bit_count() < t:
                    target = g & ~union
                    break
            else:
                target = next((a for a in model.radar if not union & a), 0)
        options: list[tuple[int, _Lay]] = []
        if target:
            for i in left:
                options.extend(
                    (i, x) for x in model.slots[i].cands if x[0] & target and not x[0] & forbid
                )
        else:
            best = min(left, key=lambda i: len(model.slots[i].cands))
            options = [(best, x) for x in model.slots[best].cands if not x[0] & forbid]
        rng.shuffle(options)
        for i, x in options:
            budget[0] -= 1
            if budget[0] < 0:
                return False
            lays[i] = x
            if self._dfs(model, lays, union | x[0], forbid | x[1], rng, budget):
                return True
            lays[i] = None
        return False
