"""Fleets: placement, validation with a precise reason, random legal placement.

A :class:`Fleet` holds one :class:`Placement` per ship of the rule set, in the rule set's order (the
order 004 places them in). Validation names the ship and the rule it breaks, so a refused fleet can
be placed again knowingly (000: "A fleet that breaks the rule is refused, and placed again").
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ErrorCode, ProtocolError
from .grid import Cell

if TYPE_CHECKING:
    from .rules import RuleSet

__all__ = ["Fleet", "IllegalFleet", "Placement", "can_place", "random_fleet"]


class IllegalFleet(ProtocolError):
    """A fleet that breaks the rules; ``detail`` names the ship and the rule."""

    def __init__(self, detail: str) -> None:
        super().__init__(ErrorCode.ILLEGAL_FLEET, detail)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one ship lies: its first cell (top or left end) and its direction."""

    row: int
    col: int
    vertical: bool

    def cells(self, length: int) -> tuple[Cell, ...]:
        """The ship's cells, from its first cell on."""
        if self.vertical:
            return tuple(Cell(self.row + i, self.col) for i in range(length))
        return tuple(Cell(self.row, self.col + i) for i in range(length))

    def to_list(self) -> list[Any]:
        """Wire form ``[row, col, vertical]`` (zero-based)."""
        return [self.row, self.col, self.vertical]

    @classmethod
    def from_list(cls, v: Any) -> Placement:
        """Parse the wire form; raises :class:`IllegalFleet` on a malformed value."""
        if (
            not isinstance(v, list | tuple)
            or len(v) != 3
            or any(isinstance(x, bool) or not isinstance(x, int) for x in v[:2])
            or not isinstance(v[2], bool)
        ):
            raise IllegalFleet(f"a placement is [row, col, vertical], got {v!r}")
        return cls(v[0], v[1], v[2])


@dataclass(frozen=True, slots=True)
class Fleet:
    """A whole fleet: ``placements[i]`` places ``rules.fleet[i]``."""

    placements: tuple[Placement, ...]

    def ship_cells(self, rules: RuleSet) -> list[tuple[Cell, ...]]:
        """The cells of every ship, in fleet order."""
        return [p.cells(s.length) for p, s in zip(self.placements, rules.fleet, strict=True)]

    def occupancy(self, rules: RuleSet) -> list[int]:
        """For every cell index, the ship index + 1 that occupies it, or 0 for water."""
        occ = [0] * rules.cells
        for i, cells in enumerate(self.ship_cells(rules)):
            for c in cells:
                occ[c.index(rules.cols)] = i + 1
        return occ

    def validate(self, rules: RuleSet) -> None:
        """Raise :class:`IllegalFleet` naming the first ship and rule that the fleet breaks."""
        if len(self.placements) != len(rules.fleet):
            raise IllegalFleet(
                f"{len(self.placements)} ships placed; the fleet has {len(rules.fleet)}"
            )
        # Every player's fleet is checked several times a game (placed, committed, revealed):
        # a legal one passes on masks; an illegal one is searched cell by cell for its reason.
        taken, rows, cols, touching = 0, rules.rows, rules.cols, rules.touching
        for p, spec in zip(self.placements, rules.fleet, strict=True):
            shape = _shapes(rows, cols, touching, spec.length).get((p.row, p.col, p.vertical))
            if shape is None or shape[0] & taken:
                break
            taken |= shape[1]
        else:
            return
        owner: dict[Cell, int] = {}
        for i, (p, spec) in enumerate(zip(self.placements, rules.fleet, strict=True)):
            for c in p.cells(spec.length):
                if not c.on(rules.rows, rules.cols):
                    raise IllegalFleet(f"{spec.name} leaves the board at {_label(c)}")
                if c in owner:
                    other = rules.fleet[owner[c]].name
                    raise IllegalFleet(f"{spec.name} overlaps {other} at {c.label()}")
                owner[c] = i
        if not rules.touching:
            for c, i in owner.items():
                for n in c.neighbours(rules.rows, rules.cols):
                    j = owner.get(n)
                    if j is not None and j != i:
                        a, b = sorted((i, j))
                        raise IllegalFleet(
                            f"{rules.fleet[a].name} touches {rules.fleet[b].name} "
                            f"({c.label()}/{n.label()}): ships may not touch, corners included"
                        )

    def to_list(self) -> list[list[Any]]:
        """Wire form: a list of placements."""
        return [p.to_list() for p in self.placements]

    @classmethod
    def from_list(cls, v: Any) -> Fleet:
        """Parse the wire form (validation against a rule set is separate)."""
        if not isinstance(v, list | tuple) or len(v) > 64:
            raise IllegalFleet("a fleet is a list of placements")
        return cls(tuple(Placement.from_list(p) for p in v))

    @classmethod
    def of(cls, *placements: tuple[str, str]) -> Fleet:
        """Convenience for tests and scripts: ``Fleet.of(("A1", "across"), ("C3", "down"))``."""
        from .grid import parse_cell

        out = []
        for text, direction in placements:
            c = parse_cell(text, 26, 26)
            out.append(Placement(c.row, c.col, direction.lower() in ("down", "v", "vertical")))
        return cls(tuple(out))


@functools.lru_cache(maxsize=64)
def _shapes(
    rows: int, cols: int, touching: bool, length: int
) -> dict[tuple[int, int, bool], tuple[int, int]]:
    """Every placement of a ship of ``length`` on the board: its cells as a mask, and the mask of
    the cells it forbids to every other ship (its own, and its ring where ships may not touch).
    Two ships fit together iff one's cells avoid the other's forbidden cells (see ``_Layout``)."""
    out: dict[tuple[int, int, bool], tuple[int, int]] = {}
    for vertical in (False, True):
        for r in range(rows - (length - 1 if vertical else 0)):
            for c in range(cols - (0 if vertical else length - 1)):
                cells = Placement(r, c, vertical).cells(length)
                forbid = _blocked_on(rows, cols, touching, cells)
                out[(r, c, vertical)] = (
                    sum(1 << x.index(cols) for x in cells),
                    sum(1 << x.index(cols) for x in forbid),
                )
    return out


def _blocked_on(rows: int, cols: int, touching: bool, cells: Iterable[Cell]) -> set[Cell]:
    out = set(cells)
    if not touching:
        for c in list(out):
            out.update(c.neighbours(rows, cols))
    return out


def _label(c: Cell) -> str:
    return c.label() if c.row >= 0 and c.col >= 0 else f"({c.row},{c.col})"


def _blocked(rules: RuleSet, cells: Iterable[Cell]) -> set[Cell]:
    """The cells a ship at ``cells`` forbids to every other ship."""
    return _blocked_on(rules.rows, rules.cols, rules.touching, cells)


def _positions(rules: RuleSet, length: int, free: Sequence[bool]) -> list[Placement]:
    out = []
    for vertical in (False, True) if length > 1 else (False,):
        for r in range(rules.rows - (length - 1 if vertical else 0)):
            for c in range(rules.cols - (0 if vertical else length - 1)):
                p = Placement(r, c, vertical)
                if all(free[x.index(rules.cols)] for x in p.cells(length)):
                    out.append(p)
    return out


# A legal layout of some of the ships: (cells mask, mask of the cells it forbids to every other
# ship, its (ship index, placement) pairs). Two layouts fit together iff one's cells avoid the
# other's forbidden cells: the test is symmetric, since a ship forbids its own cells and, where
# ships may not touch, its ring, and one ship lies in another's ring iff the other lies in its.
_Layout = tuple[int, int, tuple[tuple[int, Placement], ...]]
# Draws one uniform legal layout of some ships with ``getrandbits``; ``None`` once the budget
# (a one-item list, counting joins tried) is spent.
_Draw = Callable[[Callable[[int], int], list[int]], "_Layout | None"]

# Two ships are listed together when their positions make at most this many pairs: the list
# costs one test per pair to build (a few milliseconds for the presets' pairs, once per geometry).
_PAIR_LIMIT = 40_000


def _one_ship(rows: int, cols: int, touching: bool, ship: int, length: int) -> list[_Layout]:
    """Every position of one ship alone on the empty grid."""
    out: list[_Layout] = []
    for vertical in (False, True) if length > 1 else (False,):
        for r in range(rows - (length - 1 if vertical else 0)):
            for c in range(cols - (0 if vertical else length - 1)):
                p = Placement(r, c, vertical)
                cells = set(p.cells(length))
                mask = sum(1 << x.index(cols) for x in cells)
                if not touching:
                    cells.update(n for x in list(cells) for n in x.neighbours(rows, cols))
                out.append((mask, sum(1 << x.index(cols) for x in cells), ((ship, p),)))
    return out


def _join(a: list[_Layout], b: list[_Layout]) -> list[_Layout]:
    """Every layout of ``a`` with every layout of ``b`` that fits it."""
    return [(m1 | m2, f1 | f2, s1 + s2) for m1, f1, s1 in a for m2, f2, s2 in b if not m2 & f1]


# Few geometries are in use at once; a custom one's lists can take tens of megabytes.
@functools.lru_cache(maxsize=8)
def _sampler(rows: int, cols: int, touching: bool, ships: tuple[tuple[int, int], ...]) -> _Draw:
    """The sampling tree for ``ships`` (fleet index, length): longest first, paired where listing
    a pair is cheap, the groups halved into a balanced tree (see :func:`random_fleet`)."""
    order = sorted(ships, key=lambda s: -s[1])
    leaves: list[_Draw] = []
    k = 0
    while k < len(order):
        group = _one_ship(rows, cols, touching, *order[k])
        if k + 1 < len(order):
            two = _one_ship(rows, cols, touching, *order[k + 1])
            if len(group) * len(two) <= _PAIR_LIMIT:
                group = _join(group, two)
                k += 1
        leaves.append(_leaf(group))
        k += 1

    def build(part: list[_Draw]) -> _Draw:
        if len(part) == 1:
            return part[0]
        half = len(part) // 2
        return _node(build(part[:half]), build(part[half:]))

    return build(leaves)


def _leaf(items: list[_Layout]) -> _Draw:
    """Draw uniformly from ``items`` (exactly: rejection on the bits, no float rounding)."""
    n, bits = len(items), max(len(items) - 1, 1).bit_length()

    def draw(getrandbits: Callable[[int], int], budget: list[int]) -> _Layout | None:
        if not n:
            return None
        while True:
            x = getrandbits(bits)
            if x < n:
                return items[x]

    return draw


def _node(left: _Draw, right: _Draw) -> _Draw:
    """Draw a uniform layout of each half, again and again until the two fit together."""

    def draw(getrandbits: Callable[[int], int], budget: list[int]) -> _Layout | None:
        while budget[0] > 0:
            budget[0] -= 1
            a = left(getrandbits, budget)
            b = right(getrandbits, budget) if a is not None else None
            if a is None or b is None:
                return None
            if not b[0] & a[1]:
                return (a[0] | b[0], a[1] | b[1], a[2] + b[2])
        return None

    return draw


def random_fleet(
    rules: RuleSet,
    rng: random.Random,
    *,
    placed: Mapping[int, Placement] | None = None,
    budget: int = 200_000,
) -> Fleet:
    """A fleet drawn uniformly at random from every legal fleet of the rule set.

    Exact, by rejection: the ships are split into groups (pairs of ships whose every legal joint
    position is listed, or single ships), the groups into a balanced tree, and each node of the
    tree draws a uniform legal layout of each half independently and keeps the pair only if the
    two halves fit together, drawing both halves again otherwise. By induction every legal layout
    of a node's ships comes out with the same probability: a leaf draws uniformly from its list,
    and an inner node's output is a uniform pair of uniform halves conditioned on fitting. Ships
    of the same length are distinct ships, so a fleet and the one with two such ships swapped
    are two fleets, equally likely. A call takes tens of microseconds on most presets and a few
    milliseconds on ``russian`` (ten ships apart, the slowest); the lists are built once per
    grid and fleet, in a fraction of a second.

    ``placed`` keeps those ships (fleet index to placement, assumed legal together) and draws the
    others uniformly among the legal completions, by the same rejection. A custom rule set too
    crowded to be drawn within ``budget`` joins is placed ship by ship instead (legal, not
    uniform), since rule sets arrive from the network and an answer must come in bounded time;
    :class:`IllegalFleet` if even that finds no fleet. The budget biases nothing it lets
    finish: what a rejection sampler returns is independent of how many tries it took.

    The caller passes the randomness (``random.Random(seed)`` for replays, ``random.SystemRandom()``
    for play): the core never draws its own. One 128-bit draw from ``rng`` seeds the generator the
    rejection runs on, so a system source costs one call, not thousands.
    """
    fast = random.Random(rng.getrandbits(128))
    kept = dict(placed or {})
    rest = tuple((i, s.length) for i, s in enumerate(rules.fleet) if i not in kept)
    forbidden = 0
    for i, p in kept.items():
        forbidden |= _mask(rules, _blocked(rules, p.cells(rules.fleet[i].length)))
    left = [budget]
    layout: _Layout | None = (0, 0, ())
    if rest:
        draw = _sampler(rules.rows, rules.cols, rules.touching, rest)
        while left[0] > 0:
            left[0] -= 1
            layout = draw(fast.getrandbits, left)
            if layout is None or not layout[0] & forbidden:
                break
        else:
            layout = None
    if layout is None:
        return _ship_by_ship(rules, fast, kept)
    chosen = {**kept, **dict(layout[2])}
    return Fleet(tuple(chosen[i] for i in range(len(rules.fleet))))


def _mask(rules: RuleSet, cells: Iterable[Cell]) -> int:
    return sum(1 << c.index(rules.cols) for c in cells)


def _ship_by_ship(
    rules: RuleSet, rng: random.Random, placed: dict[int, Placement], attempts: int = 1000
) -> Fleet:
    """Each other ship in turn (longest first) uniformly among the positions left, restarting on
    a dead end: legal, but not uniform (it under-fills corners where ships may not touch)."""
    rest = (i for i in range(len(rules.fleet)) if i not in placed)
    order = sorted(rest, key=lambda i: -rules.fleet[i].length)
    for _ in range(attempts):
        free = [True] * rules.cells
        chosen = dict(placed)
        for i, p in placed.items():
            for c in _blocked(rules, p.cells(rules.fleet[i].length)):
                free[c.index(rules.cols)] = False
        for i in order:
            length = rules.fleet[i].length
            options = _positions(rules, length, free)
            if not options:
                break
            p = rng.choice(options)
            chosen[i] = p
            for c in _blocked(rules, p.cells(length)):
                free[c.index(rules.cols)] = False
        else:
            return Fleet(tuple(chosen[i] for i in range(len(rules.fleet))))
    raise IllegalFleet(f"no random placement found in {attempts} attempts")


def can_place(rules: RuleSet, *, budget: int = 300_000) -> bool:
    """Whether some legal placement of the fleet exists (depth-first search, largest ship first).

    Every candidate position examined counts against ``budget``, so the answer comes within a
    bounded amount of work (tens of milliseconds) whatever the rule set: a rule set that cannot be
    shown to work within that effort is refused rather than risked, since rule sets arrive from
    the network and records.
    """
    rows, cols = rules.rows, rules.cols
    lengths = sorted((s.length for s in rules.fleet), reverse=True)
    # Per length: (start index, cells mask, blocked mask) for every position, as Python int masks.
    table: dict[int, list[tuple[int, int, int]]] = {}
    for length in set(lengths):
        opts = []
        for vertical in (False, True) if length > 1 else (False,):
            for r in range(rows - (length - 1 if vertical else 0)):
                for c in range(cols - (0 if vertical else length - 1)):
                    cells = Placement(r, c, vertical).cells(length)
                    mask = sum(1 << x.index(cols) for x in cells)
                    block = sum(1 << x.index(cols) for x in _blocked(rules, cells))
                    opts.append((r * cols + c, mask, block))
        table[length] = opts
    work = 0

    def place(k: int, taken: int, start: int) -> bool:
        nonlocal work
        if k == len(lengths):
            return True
        # Ships of equal length are interchangeable: only try them in increasing position.
        floor = start if k and lengths[k] == lengths[k - 1] else -1
        for idx, mask, block in table[lengths[k]]:
            work += 1
            if work > budget:
                return False
            if idx < floor or mask & taken:
                continue
            if place(k + 1, taken | block, idx):
                return True
        return False

    return place(0, 0, 0)
