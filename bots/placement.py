"""Placing a fleet by hand, one ship at a time, with the rules' own refusal reasons.

A :class:`Placer` holds the ships placed so far and applies one typed command at a time:

* ``A1 across`` / ``C3 down`` (``a``/``d``, ``h``/``v`` also do) places the next ship; a ship of
  length 1 needs no direction. ``Cruiser C3 down`` names the ship, where the rules allow any order.
* ``move Carrier`` picks a placed ship up again; ``undo`` picks up the last one placed.
* ``random`` places the rest at random around the ships already down, by the placer's strategy.

The next ship is always the first unplaced one in fleet order, so under ordered placement (004:
5, 4, 3, 3, 2 in that order) a ship picked up is the next one asked for. Each placement is checked
at once with :meth:`Fleet.validate` on the ships down so far, so the refusal names the ship and the
rule it breaks, exactly as the referee would. Once the last ship is down the fleet is fixed: the
caller takes :meth:`Placer.fleet` and there is nothing left to move.

Placement strategies (:data:`PLACEMENTS`, :func:`place_fleet`) say how a fleet is placed for a
player who does not place it by hand: ``uniform`` draws it uniformly from every legal fleet (no
layout is more likely than another, so no shooter can be tuned to a bias); ``unlikely`` keeps the
one of :data:`UNLIKELY_DRAWS` uniform draws whose cells are least likely to hold a ship before the
first shot (every ship cell's chance, plus each ship's highest), which costs a shooter that looks
where ships are likely shots (STRENGTH.md), at the price of a bias that an opponent who knew of
it could learn; ``evasive`` races :data:`EVASIVE_DRAWS` uniform draws against a simulated
density shooter (:data:`EVASIVE_ROUNDS`, 144 games in all) and keeps the one it took the most
shots to sink, which costs the ``best`` shooter more shots than ``unlikely`` wherever both were
measured (classic, russian, six-ship: STRENGTH.md). It takes one or two seconds: it plays those
games.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Callable
from typing import Any, TypeVar

import trio
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet, IllegalFleet, Placement, random_fleet
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet

__all__ = [
    "EVASIVE_DRAWS",
    "EVASIVE_ROUNDS",
    "HELP",
    "PLACEMENTS",
    "QUICK_PLACEMENTS",
    "UNLIKELY_DRAWS",
    "PlacementRefused",
    "Placer",
    "off_loop",
    "place_fleet",
]

#: The placement strategies by the name the command line and :func:`place_fleet` take.
PLACEMENTS = ("uniform", "unlikely", "evasive")
#: The placements that take milliseconds. The others run a sampler or play simulated games for
#: up to a second or two, so an event loop runs them in a thread.
QUICK_PLACEMENTS = frozenset({"uniform"})
#: How many uniform fleets ``unlikely`` draws to keep the least likely-looking one.
UNLIKELY_DRAWS = 32
#: How many uniform fleets ``evasive`` draws for its race.
EVASIVE_DRAWS = 64
#: ``evasive``'s race, round by round: every draw still in it plays ``games`` more simulated
#: density games, and the ``keep`` that took the most shots so far go on. A layout's own
#: difficulty spreads less than one game's luck (six-ship, for ``best``: 2.9 shots against 9.2,
#: STRENGTH.md), so one game judges a draw poorly; the race spends its games on the draws still
#: likely to win, which picked harder layouts than 16 draws of 2 games each (+3.6 shots against
#: +2.0 on six-ship, for ``best``).
EVASIVE_ROUNDS: tuple[tuple[int, int], ...] = ((1, 16), (3, 4), (8, 1))

HELP = (
    "place the next ship: A1 across, C3 down (a/d also do); "
    "move NAME or undo picks a ship up again; random places the rest; "
    "the fleet is fixed when the last ship is down"
)

_DIRECTIONS = {
    "across": False,
    "a": False,
    "h": False,
    "horizontal": False,
    "right": False,
    "down": True,
    "d": True,
    "v": True,
    "vertical": True,
}


def place_fleet(
    rules: RuleSet,
    rng: random.Random,
    placement: str = "uniform",
    *,
    placed: dict[int, Placement] | None = None,
) -> Fleet:
    """A fleet for ``rules`` by the strategy ``placement`` (see :data:`PLACEMENTS`).

    ``placed`` keeps those ships (fleet index to placement) and places the others around them.
    Raises :class:`ValueError` for an unknown strategy and
    :class:`~seabattle.protocol.fleet.IllegalFleet` when the other ships cannot be placed.
    """
    if placement == "uniform":
        return random_fleet(rules, rng, placed=placed)
    if placement == "unlikely":
        prior = _prior(rules)

        def score(f: Fleet) -> float:
            # Its cells' scores, for the cells a shooter sees rarely; plus each ship's highest,
            # for the shot that first finds it.
            ships = [[prior[c.index(rules.cols)] for c in cells] for cells in f.ship_cells(rules)]
            return sum(sum(s) + max(s) for s in ships)

        return min(
            (random_fleet(rules, rng, placed=placed) for _ in range(UNLIKELY_DRAWS)), key=score
        )
    if placement == "evasive":
        return _evasive(rules, rng, placed)
    raise ValueError(f"no placement {placement!r}; placements: {', '.join(PLACEMENTS)}")


_T = TypeVar("_T")


async def off_loop(placement: str, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, which places by ``placement``: called at once if the placement is quick
    (:data:`QUICK_PLACEMENTS`), else in a thread, so that the event loop (a match's clock, the
    server's pings, a screen's countdown) goes on while it simulates games."""
    if placement in QUICK_PLACEMENTS:
        return fn(*args)
    return await trio.to_thread.run_sync(fn, *args)


def _evasive(rules: RuleSet, rng: random.Random, placed: dict[int, Placement] | None) -> Fleet:
    """The draw a density shooter took longest to sink in :data:`EVASIVE_ROUNDS`' race."""
    # Loaded when used, as _prior's sampler is: placing by hand needs no shooter.
    from .simulate import simulate_shots_to_win
    from .strategies import DensityStrategy

    draws = [random_fleet(rules, rng, placed=placed) for _ in range(EVASIVE_DRAWS)]
    # The games' own stream comes from ``rng``, so a seed replays the same fleet.
    shooter = random.Random(rng.getrandbits(64))
    shots = [0] * len(draws)
    racing = list(range(len(draws)))
    for games, keep in EVASIVE_ROUNDS:
        for k in racing:
            for _ in range(games):
                shots[k] += simulate_shots_to_win(rules, DensityStrategy(), shooter, draws[k])
        # Every draw still racing has played as many games, so the totals rank them.
        racing = sorted(racing, key=lambda k: -shots[k])[:keep]
    return draws[racing[0]]


@functools.lru_cache(maxsize=16)
def _prior(rules: RuleSet) -> tuple[float, ...]:
    """Each cell's chance of holding a ship in a uniform legal fleet, as the best shooter sees it
    before its first shot (its sampler, run long on the empty board, from a fixed seed): a fleet
    on unlikely cells is among the last it looks for. Where ships may not touch the uniform
    fleet favours edges and corners, which the density shooter's per-ship count misses."""
    from seabattle.protocol.targeting import TargetView

    from .posterior import Sampler  # posterior imports nothing of this module

    sampler, view, rng = Sampler("chain"), TargetView(rules), random.Random(0)
    sampler.min_sweeps = sampler.max_sweeps = _PRIOR_SWEEPS
    est = sampler.estimate(view, rng)
    if est is None:  # no fleet found within the search budget: every cell alike
        return (1.0,) * rules.cells
    return tuple(est.marginals)


_PRIOR_SWEEPS = 600  # about 0.2 s once per rule set; the estimate is then within ~0.02


class PlacementRefused(ValueError):
    """A placement command that cannot be applied; ``str()`` says why, for the player."""


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", "", name.lower())


class Placer:
    """The fleet being placed by hand under ``rules`` (see the module docstring)."""

    def __init__(self, rules: RuleSet, placement: str = "uniform") -> None:
        self.rules = rules
        #: The strategy (:data:`PLACEMENTS`) that ``random`` places the rest of the fleet by.
        self.placement = placement
        self.placed: dict[int, Placement] = {}
        self._order: list[int] = []  # the order ships went down, for undo

    # -- state -----------------------------------------------------------------------------------

    @property
    def next_ship(self) -> int | None:
        """The ship to place next: the first unplaced one in fleet order (``None``: all down)."""
        return next((k for k in range(len(self.rules.fleet)) if k not in self.placed), None)

    @property
    def done(self) -> bool:
        """Whether every ship is down (the fleet is then fixed)."""
        return len(self.placed) == len(self.rules.fleet)

    def fleet(self) -> Fleet:
        """The finished fleet, in fleet order."""
        if not self.done:
            raise PlacementRefused(f"{len(self.rules.fleet) - len(self.placed)} ship(s) to place")
        return Fleet(tuple(self.placed[k] for k in range(len(self.rules.fleet))))

    def ship_named(self, text: str) -> int:
        """The ship called ``text``: case, blanks and dashes aside; a unique prefix will do."""
        want = _norm(text)
        names = [_norm(s.name) for s in self.rules.fleet]
        if want in names:
            return names.index(want)
        hits = [k for k, n in enumerate(names) if want and n.startswith(want)]
        if len(hits) == 1:
            return hits[0]
        known = ", ".join(s.name for s in self.rules.fleet)
        if hits:
            known = ", ".join(self.rules.fleet[k].name for k in hits)
            raise PlacementRefused(f"{text!r} could be {known}: say which")
        raise PlacementRefused(f"no ship called {text!r}; the fleet is {known}")

    # -- changes ---------------------------------------------------------------------------------

    def place(self, ship: int, at: Cell, vertical: bool) -> None:
        """Put ``ship`` down at ``at`` (its top or left end); refused with the rules' reason."""
        if self.done:
            raise PlacementRefused("the fleet is complete and fixed")
        spec = self.rules.fleet[ship]
        if ship in self.placed:
            raise PlacementRefused(f"{spec.name} is placed already: move {spec.name} first")
        nxt = self.next_ship
        if self.rules.ordered_placement and ship != nxt and nxt is not None:
            raise PlacementRefused(
                f"these rules place the ships in fleet order: next is "
                f"{self.rules.fleet[nxt].name} ({self.rules.fleet[nxt].length})"
            )
        trial = {**self.placed, ship: Placement(at.row, at.col, vertical and spec.length > 1)}
        self._check(trial)
        self.placed = trial
        self._order.append(ship)

    def pick_up(self, ship: int) -> None:
        """Take ``ship`` off the board again (before the last ship is down)."""
        name = self.rules.fleet[ship].name
        if self.done:
            raise PlacementRefused("the fleet is complete and fixed")
        if ship not in self.placed:
            raise PlacementRefused(f"{name} is not placed")
        del self.placed[ship]
        self._order.remove(ship)

    def fill_random(self, rng: random.Random) -> None:
        """Place every remaining ship at random around those already down (by the placer's
        strategy: uniformly among the fleets that keep them, by default)."""
        rest = self._rest()
        refusal = "the rest of the fleet does not fit around these ships: move one"
        if not self.fits_rest():
            raise PlacementRefused(refusal)  # at once, not after the sampler's whole budget
        try:
            fleet = place_fleet(self.rules, rng, self.placement, placed=self.placed)
        except IllegalFleet:
            raise PlacementRefused(refusal) from None
        trial = {k: fleet.placements[k] for k in range(len(self.rules.fleet))}
        self._check(trial)
        self.placed = trial
        self._order.extend(rest)

    def fits_rest(self, budget: int = 1000) -> bool:
        """Whether the unplaced ships still fit somewhere (``True`` when the search gives up)."""
        lengths = [self.rules.fleet[k].length for k in self._rest()]
        left = [budget]

        def search(blocked: set[Cell], i: int) -> bool:
            if i == len(lengths):
                return True
            for p in self._positions(blocked, lengths[i]):
                left[0] -= 1
                if left[0] < 0:
                    return True  # unsure: better no warning than a wrong one
                if search(blocked | self._around(p, lengths[i]), i + 1):
                    return True
            return False

        return search(self._blocked(self.placed), 0)

    # -- typed commands --------------------------------------------------------------------------

    def command(self, text: str, rng: random.Random) -> str:
        """Apply one typed command; return what happened, or raise :class:`PlacementRefused`."""
        words = text.split()
        if not words:
            raise PlacementRefused("type a cell and a direction, e.g. A1 across (or help)")
        verb = words[0].lower()
        if verb in ("help", "?"):
            return HELP
        if verb == "random" and len(words) == 1:
            self.fill_random(rng)
            return "the rest of the fleet is placed at random"
        if verb == "undo" and len(words) == 1:
            if not self._order:
                raise PlacementRefused("no ship is placed yet")
            k = self._order[-1]
            self.pick_up(k)
            return f"{self.rules.fleet[k].name} picked up"
        if verb == "move":
            if len(words) == 1:
                raise PlacementRefused("move which ship? e.g. move " + self.rules.fleet[0].name)
            k = self.ship_named(" ".join(words[1:]))
            self.pick_up(k)
            return f"{self.rules.fleet[k].name} picked up: place it again"
        return self._place_command(words)

    def _place_command(self, words: list[str]) -> str:
        vertical: bool | None = None
        if len(words) >= 2 and words[-1].lower() in _DIRECTIONS:
            vertical = _DIRECTIONS[words[-1].lower()]
            words = words[:-1]
        cell_text = words[-1]
        if not re.fullmatch(r"[A-Za-z]+[0-9]+", cell_text):
            raise PlacementRefused(
                f"{' '.join(words)!r}: type a cell and a direction, e.g. A1 across (or help)"
            )
        try:
            at = parse_cell(cell_text, self.rules.rows, self.rules.cols)
        except ProtocolError as e:
            raise PlacementRefused(e.detail) from None
        if len(words) > 1:
            ship = self.ship_named(" ".join(words[:-1]))
        else:
            nxt = self.next_ship
            if nxt is None:
                raise PlacementRefused("the fleet is complete and fixed")
            ship = nxt
        spec = self.rules.fleet[ship]
        if vertical is None:
            if spec.length > 1:
                raise PlacementRefused(
                    f"which way does {spec.name} ({spec.length}) lie from {at.label()}? "
                    f"{at.label()} across, or {at.label()} down"
                )
            vertical = False
        self.place(ship, at, vertical)
        way = "" if spec.length == 1 else " down" if vertical else " across"
        msg = f"{spec.name} placed at {at.label()}{way}"
        if not self.done and not self.fits_rest():
            msg += "; the rest of the fleet no longer fits: move or undo a ship"
        return msg

    # -- helpers ---------------------------------------------------------------------------------

    def _check(self, placed: dict[int, Placement]) -> None:
        """Validate the ships in ``placed`` with the fleet's own rules (the referee's reasons)."""
        ships = sorted(placed)
        part = dataclasses.replace(self.rules, fleet=tuple(self.rules.fleet[k] for k in ships))
        try:
            Fleet(tuple(placed[k] for k in ships)).validate(part)
        except IllegalFleet as e:
            raise PlacementRefused(e.detail) from None

    def _rest(self) -> list[int]:
        """The unplaced ships, longest first (the order that fits them most easily)."""
        rest = [k for k in range(len(self.rules.fleet)) if k not in self.placed]
        return sorted(rest, key=lambda k: -self.rules.fleet[k].length)

    def _around(self, p: Placement, length: int) -> set[Cell]:
        """The cells a ship at ``p`` takes from every other ship (its neighbours too, if apart)."""
        r = self.rules
        cells = set(p.cells(length))
        if not r.touching:
            for c in list(cells):
                cells.update(c.neighbours(r.rows, r.cols))
        return cells

    def _blocked(self, placed: dict[int, Placement]) -> set[Cell]:
        out: set[Cell] = set()
        for k, p in placed.items():
            out |= self._around(p, self.rules.fleet[k].length)
        return out

    def _positions(self, blocked: set[Cell], length: int) -> list[Placement]:
        r = self.rules
        out = []
        for vertical in (False, True) if length > 1 else (False,):
            for row in range(r.rows - (length - 1 if vertical else 0)):
                for col in range(r.cols - (0 if vertical else length - 1)):
                    p = Placement(row, col, vertical)
                    if blocked.isdisjoint(p.cells(length)):
                        out.append(p)
        return out
