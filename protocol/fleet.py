"""Fleets: placement, validation with a precise reason, random legal placement.

A :class:`Fleet` holds one :class:`Placement` per ship of the rule set, in the rule set's order (the
order 004 places them in). Validation names the ship and the rule it breaks, so a refused fleet can
be placed again knowingly (000: "A fleet that breaks the rule is refused, and placed again").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
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


def _label(c: Cell) -> str:
    return c.label() if c.row >= 0 and c.col >= 0 else f"({c.row},{c.col})"


def _blocked(rules: RuleSet, cells: Iterable[Cell]) -> set[Cell]:
    """The cells a ship at ``cells`` forbids to every other ship."""
    out = set(cells)
    if not rules.touching:
        for c in list(out):
            out.update(c.neighbours(rules.rows, rules.cols))
    return out


def _positions(rules: RuleSet, length: int, free: Sequence[bool]) -> list[Placement]:
    out = []
    for vertical in (False, True) if length > 1 else (False,):
        for r in range(rules.rows - (length - 1 if vertical else 0)):
            for c in range(rules.cols - (0 if vertical else length - 1)):
                p = Placement(r, c, vertical)
                if all(free[x.index(rules.cols)] for x in p.cells(length)):
                    out.append(p)
    return out


def random_fleet(rules: RuleSet, rng: random.Random, *, attempts: int = 1000) -> Fleet:
    """A uniformly chosen position for each ship in turn (largest first), restarting on a dead end.

    The caller passes the randomness (``random.Random(seed)`` for replays, ``random.SystemRandom()``
    for play): the core never draws its own.
    """
    order = sorted(range(len(rules.fleet)), key=lambda i: -rules.fleet[i].length)
    for _ in range(attempts):
        free = [True] * rules.cells
        chosen: dict[int, Placement] = {}
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
