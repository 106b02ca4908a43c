"""What an attacker knows of the opponent's grid: the :class:`TargetView` that bot strategies read.

Pure computation: no I/O, no clock, no randomness. It is a player's knowledge, derived from the
verdicts alone, as the seat's mirror is its check: peer play (:mod:`seabattle.client.peer`) keeps
one for the player whose turn it is, fed by :func:`feed_view` with each verdict, and so does a bot
playing a server match; the strategies (:mod:`seabattle.bots.strategies`, which re-exports it)
only read it.
:func:`view_from_snapshot` builds one again from a snapshot after a reconnect.

Theory of operation. A :class:`TargetView` is the attacker's tracking grid, fed only with what the
rules reveal (miss, hit, sunk, salvo totals, radar answers, crossed-out cells). It keeps one
:class:`CellState` per cell and mirrors the states as bitmasks (Python ints, bit ``i`` for the cell
of index ``i``): the density strategy tests hundreds of precomputed ship placements per choice, and
an AND of two ints is the cheapest test Python has. After every fact the view draws the
consequences until nothing changes (:meth:`TargetView._settle`): no-touch borders become water,
settled salvo totals become hits or misses, named sinkings are located, and under silent sinking a
no-touch run of hits closed at both ends is a ship found whole. Inference is sound: a cell becomes
water or sunk only when every fleet consistent with the facts agrees.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, ShipSpec, SunkReport
from seabattle.protocol.verdict import Result, SunkClaim, Verdict

__all__ = ["CellState", "TargetView", "feed_view", "view_from_snapshot"]


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
    near: tuple[int, ...]  # the ring of every cell index as a mask
    within: tuple[int, ...]  # [k]: the cells with k more cells to their right on the grid


@functools.lru_cache(maxsize=32)
def _geometry(rows: int, cols: int) -> _Geometry:
    ring, corners = [], []
    for i in range(rows * cols):
        c = Cell(*divmod(i, cols))
        ring.append(tuple(n.index(cols) for n in c.neighbours(rows, cols)))
        corners.append(tuple(n.index(cols) for n in c.corners(rows, cols)))
    near = tuple(sum(1 << j for j in r) for r in ring)
    within = tuple(
        sum(1 << i for i in range(rows * cols) if i % cols + k < cols)
        for k in range(max(rows, cols) + 1)  # a ship may be longer than a row, down
    )
    return _Geometry(tuple(ring), tuple(corners), near, within)


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
    """A ship reported sunk whose cells are not all located yet.

    It covers a cell of ``group`` (the sinking cell; with salvo totals, one of the salvo's cells)
    and lies within ``allowed``, the cells fired at and not water when it sank: a ship sinks on
    its last cell hit.
    """

    group: int
    allowed: int
    length: int | None  # None: the rules named no ship and showed no cells
    ship: int | None = None  # its fleet index, when the rules name it
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
        self._located = 0  # cells of sunk ships located whole (SUNK cells not pending)
        # What _settle_runs last read when it found nothing to change (see there).
        self._runs_fixed: tuple[int, ...] = ()

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
            self._pend(1 << i, ship_index)
        self._settle()

    def _pend(self, group: int, ship_index: int | None) -> None:
        length = None if ship_index is None else self.rules.fleet[ship_index].length
        # With no name the length is learnt, and a ship of it dropped, once the ship is located.
        m = self._masks
        self._pending.append(_Pending(group, m[_HIT] | m[_SUNK] | m[_FIRED], length, ship_index))

    def salvo_total(
        self,
        cells: tuple[Cell, ...] | list[Cell],
        hits: int,
        sunk: Sequence[tuple[int | None, tuple[Cell, ...] | None]] = (),
    ) -> None:
        """A salvo at ``cells`` reported only as a number of hits (002 "total hits only").

        ``sunk`` holds the ships the salvo sank, as the verdict's claims tell them: the fleet
        index (when named) and the ship's cells (when shown). Cells already fired at are left
        out: the protocol refuses repeated cells.
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
        for ship_index, shown in sunk:
            if ship_index is not None and ship_index in self._afloat:
                self._afloat.remove(ship_index)
            if shown:
                idx = [c.index(self._cols) for c in shown]
                for j in idx:
                    self._hit(j, reported=False)  # counted in the total
                self._sink(idx, drop_length=None if ship_index is not None else len(idx))
            else:
                self._pend(sum(1 << i for i in group), ship_index)
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

    def crossed(self, *cells: Cell) -> None:
        """The rules crossed ``cells`` out: no ship can be there."""
        for cell in cells:
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
            self._located |= 1 << j
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
                    if not m & p.group or m & ~(usable & p.allowed):
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
        hits = self._masks[_HIT]
        if not hits:
            return False  # hunting: nothing to settle (the common case, and called every fact)
        longest = max((self.rules.fleet[k].length for k in self._afloat), default=0)
        if self.rules.sunk is not SunkReport.SILENT and not self._has_straight(hits, longest):
            return False  # no run as long as a ship afloat: no end of one can be water yet
        # What the runs' inference reads: the hits, the states of the cells around them, the
        # longest ship afloat. Unchanged since it last changed nothing (a miss far from every
        # hit, most facts), it would change nothing again: it runs on every fact, so skip it.
        near, h, m = 0, hits, self._masks
        while h:
            low = h & -h
            h ^= low
            near |= self._geo.near[low.bit_length() - 1]
        key = (hits, longest, *(m[st] & near for st in (_UNKNOWN, _FIRED, _MISS, _CROSSED)))
        if key == self._runs_fixed:
            return False
        changed = False
        cols, rows = self._cols, self.rules.rows
        seen: set[int] = set()
        while hits:
            low = hits & -hits
            hits ^= low
            start = low.bit_length() - 1
            if start in seen:
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
        if not changed:
            self._runs_fixed = key
        return changed

    def _has_straight(self, hits: int, length: int) -> bool:
        """Whether ``length`` hits lie in a row, across or down (on masks: a shift a cell)."""
        if length <= 1:
            return length == 1 and bool(hits)
        cols, within = self._cols, self._geo.within
        across = down = hits
        for k in range(1, length):
            across &= (hits >> k) & within[k]
            down &= hits >> (k * cols)
        return bool(across or down)


def feed_view(
    view: Any,
    rules: RuleSet,
    cells: Sequence[Cell],
    radar: bool,
    v: Verdict,
    crossed: Sequence[Cell] = (),
) -> None:
    """Tell a :class:`TargetView` what verdict ``v`` on ``cells`` showed, and the cells the
    rules ``crossed`` out after it (all at once: one inference, not one a cell)."""
    if radar:
        if v.found is not None:
            view.radar(cells[0], rules.radar_size, v.found)
    elif v.total is not None:
        # A total hides which cells hit, but its sunk claims still name (or show) the ships.
        view.salvo_total(list(cells), v.total, [_claim(rules, k) for k in v.sunk])
    else:
        for c, res in zip(cells, v.results, strict=True):
            if res.result is Result.MISS:
                view.miss(c)
            elif res.result is Result.HIT:
                view.hit(c)
            else:
                ship, shown = (None, None) if res.sunk is None else _claim(rules, res.sunk)
                view.sunk(c, ship, shown)
    if crossed:
        view.crossed(*crossed)


def _claim(rules: RuleSet, claim: SunkClaim) -> tuple[int | None, tuple[Cell, ...] | None]:
    """What a sunk claim tells: the ship's fleet index, and its cells when shown."""
    if rules.sunk is SunkReport.SILENT:
        return None, None
    shown = None
    if claim.opening is not None:
        shown = claim.opening.placement.cells(rules.fleet[claim.ship].length)
    return claim.ship, shown


def view_from_snapshot(rules: RuleSet, board: dict[str, Any]) -> Any:
    """A :class:`TargetView` of the opponent's grid as a snapshot shows it
    (``view["boards"][opponent]``, spec 6.6): what a bot knows again after a reconnect."""
    view = TargetView(rules)
    cols = rules.cols
    for i, result in board.get("fired", ()):
        # nil: fired at in a salvo reported as a total, its result unknown: left as it is.
        if result == "miss":
            view.miss(Cell(*divmod(i, cols)))
        elif result in ("hit", "sunk"):
            view.hit(Cell(*divmod(i, cols)))
    for ship, cells in board.get("sunk", ()):
        if cells:  # a shown ship; an unshown sinking is found again from its hits
            shown = tuple(Cell(*divmod(i, cols)) for i in cells)
            view.sunk(shown[-1], ship, shown)
    for i in board.get("crossed", ()):
        view.crossed(Cell(*divmod(i, cols)))
    return view
