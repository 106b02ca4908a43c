"""Exact figures for small boards: every legal fleet, the optimum, greedy, and one-step rollout.

Pure computation: no I/O, no clock, and no randomness of its own.

Theory of operation. On a board small enough that its legal fleets can be listed, the shooter's
whole problem is finite: every fleet is equally likely, a state is the cells fired so far with
the set of fleets consistent with what they answered, and a shot splits that set by its answer
(water, hit, a sinking as the rules report it, the last sinking). So expected turns to win can be
computed exactly rather than estimated from games:

* :meth:`Board.optimal`: the least expected turns of any strategy (dynamic programming over the
  states, with branch and bound; exponential, so bounded by a state budget);
* :meth:`Board.greedy`: firing at a cell most likely to hold a ship, with the exact posterior
  (what :class:`~.bots.BestStrategy` estimates by sampling), ties shared evenly;
* :meth:`Board.lookahead`: firing where the fewest misses are expected over the next ``h`` shots,
  greedy after the first (``h=1`` is greedy);
* :meth:`Board.rollout`: one step of policy improvement over greedy, firing where greedy's own
  expected turns to win after the shot are least (never worse than greedy, by the policy
  improvement theorem);
* :func:`strategy_turns`: any :class:`~.bots.Strategy` played once against every legal fleet, its
  random stream started afresh each game (so the strategy is a fixed function of what it saw,
  and the mean over every fleet is its exact expectation for that stream).

Single shots only: a salvo's or radar's answers are not modelled (:class:`Board` refuses them).
The answers are those of :func:`~seabattle.protocol.verdict.true_answer`; crossed-out cells add
nothing here, since what they cross out the no-touch rule already implies.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from seabattle.protocol.fleet import Fleet, Placement
from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.targeting import _placements

if TYPE_CHECKING:
    from seabattle.bots.strategies import Strategy

__all__ = ["Board", "TooLarge", "as_fleet", "every_fleet", "strategy_turns"]

# A state: the cells fired (a mask of cells) and the fleets consistent with their answers (a mask
# of fleet indices). Python ints make both an AND and a hashable memo key.
_State = tuple[int, int]


class TooLarge(ValueError):
    """The board has more legal fleets, or a computation more states, than its budget allows."""


def every_fleet(rules: RuleSet, limit: int = 20_000) -> list[tuple[int, ...]]:
    """Every legal fleet of ``rules``: one cell mask per ship, in fleet order.

    Ships of one length are told apart (the rules name them), so a fleet and the same fleet with
    two equal ships swapped are two fleets, as :func:`~seabattle.protocol.fleet.random_fleet`
    draws them. Raises :class:`TooLarge` past ``limit`` fleets.
    """
    lays = [_placements(rules.rows, rules.cols, s.length) for s in rules.fleet]
    out: list[tuple[int, ...]] = []
    ships: list[int] = []

    def place(k: int, occupied: int, fence: int) -> None:
        if k == len(lays):
            if len(out) >= limit:
                raise TooLarge(f"{rules.name}: more than {limit} legal fleets")
            out.append(tuple(ships))
            return
        for mask, border, _ in lays[k]:
            if mask & occupied or (not rules.touching and mask & fence):
                continue
            ships.append(mask)
            place(k + 1, occupied | mask, fence | border)
            ships.pop()

    place(0, 0, 0)
    return out


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class Board:
    """The exact single-shot game of a small rule set against a uniformly random legal fleet.

    Every method returns expected turns to win from the start (a float); the memo tables stay
    with the board, so asking twice costs once. ``budget`` bounds the states any one computation
    may visit (:class:`TooLarge` past it).
    """

    def __init__(self, rules: RuleSet, *, fleets: int = 20_000, budget: int = 2_000_000) -> None:
        if rules.is_salvo or rules.radar:
            raise ValueError("exact figures are for single shots without radar")
        self.rules = rules
        self.budget = budget
        self.fleets = every_fleet(rules, fleets)
        n, cells = len(self.fleets), rules.cells
        self._whole = [0] * n  # every ship cell of fleet i
        self._cover = [0] * cells  # fleets with a ship on cell c
        self._ship_on = [[0] * len(rules.fleet) for _ in range(cells)]  # ... ship k on cell c
        for i, ships in enumerate(self.fleets):
            bit = 1 << i
            for k, mask in enumerate(ships):
                self._whole[i] |= mask
                for c in _bits(mask):
                    self._cover[c] |= bit
                    self._ship_on[c][k] |= bit
        self.start: _State = (0, (1 << n) - 1)
        self._greedy: dict[_State, float] = {}
        self._optimal: dict[_State, float] = {}

    # -- the game ----------------------------------------------------------------------------

    def counts(self, state: _State) -> list[int]:
        """How many consistent fleets hold each cell not fired at (0 for fired cells)."""
        fired, fleets = state
        return [
            0 if fired >> c & 1 else (cover & fleets).bit_count()
            for c, cover in enumerate(self._cover)
        ]

    def answers(self, state: _State, cell: int) -> list[int]:
        """The fleets of ``state`` split by what a shot at ``cell`` answers, the game's last
        sinking left out (it ends the game): one mask of fleets per answer."""
        fired, fleets = state
        after = fired | 1 << cell
        groups: dict[object, int] = {}
        water = fleets & ~self._cover[cell]
        if water:
            groups["water"] = water
        sunk = self.rules.sunk
        for k, on in enumerate(self._ship_on[cell]):
            for i in _bits(fleets & on):
                if not self._whole[i] & ~after:
                    continue  # the last ship cell: the game is won
                ship = self.fleets[i][k]
                key: object
                if sunk is SunkReport.SILENT or ship & ~after:
                    key = "hit"
                elif sunk is SunkReport.NAMED:
                    key = ("sunk", k)
                else:
                    key = ("sunk", k, ship)
                groups[key] = groups.get(key, 0) | 1 << i
        return list(groups.values())

    def after(self, state: _State, cell: int, value: Callable[[_State], float]) -> float:
        """Expected turns to win from ``state`` when it fires at ``cell``, then plays ``value``."""
        fired = state[0] | 1 << cell
        total = state[1].bit_count()
        return (
            1.0 + sum(g.bit_count() * value((fired, g)) for g in self.answers(state, cell)) / total
        )

    def _sure_or_candidates(self, state: _State, *, sure_first: bool = True) -> list[int]:
        """The cells worth firing at: a certain hit alone if there is one and ``sure_first``,
        else every cell some fleet holds, likeliest first."""
        counts = self.counts(state)
        total = state[1].bit_count()
        if sure_first and total in counts:
            return [counts.index(total)]
        return sorted((c for c, n in enumerate(counts) if n), key=lambda c: -counts[c])

    def _most_likely(self, state: _State) -> list[int]:
        counts = self.counts(state)
        top = max(counts)
        return [c for c, n in enumerate(counts) if n == top]

    def _spend(self, memo: dict[_State, float]) -> None:
        if len(memo) >= self.budget:
            raise TooLarge(f"more than {self.budget} states")

    # -- strategies ----------------------------------------------------------------------------

    def greedy(self) -> float:
        """Expected turns to win firing at a most likely cell, ties shared evenly."""
        return self._greedy_value(self.start)

    def _greedy_value(self, state: _State) -> float:
        v = self._greedy.get(state)
        if v is None:
            self._spend(self._greedy)
            picks = self._most_likely(state)
            v = sum(self.after(state, c, self._greedy_value) for c in picks) / len(picks)
            self._greedy[state] = v
        return v

    def rollout(self) -> float:
        """Expected turns to win firing, at every turn, where greedy's own expected turns after the
        shot are least (ties shared evenly)."""
        return self._play(lambda state, c: self.after(state, c, self._greedy_value))

    def lookahead(self, h: int, width: int = 6) -> float:
        """Expected turns to win firing, among the ``width`` most likely cells, where the fewest
        misses are expected over the next ``h`` shots (greedy after the first; ties shared)."""
        misses: dict[tuple[_State, int], float] = {}

        def miss_after(state: _State, cell: int, h: int) -> float:
            fleets = state[1]
            m = (fleets & ~self._cover[cell]).bit_count() / fleets.bit_count()
            if h == 1:
                return m
            fired = state[0] | 1 << cell
            rest = sum(g.bit_count() * expect((fired, g), h - 1) for g in self.answers(state, cell))
            return m + rest / fleets.bit_count()

        def expect(state: _State, h: int) -> float:
            key = (state, h)
            v = misses.get(key)
            if v is None:
                picks = self._most_likely(state)
                v = sum(miss_after(state, c, h) for c in picks) / len(picks)
                misses[key] = v
            return v

        return self._play(lambda state, c: miss_after(state, c, h), width)

    def _play(self, score: Callable[[_State, int], float], width: int | None = None) -> float:
        """Expected turns to win firing, at every turn, at a cell of least ``score`` among the
        candidates (a sure hit, else the ``width`` most likely cells), ties shared evenly."""
        memo: dict[_State, float] = {}

        def value(state: _State) -> float:
            v = memo.get(state)
            if v is None:
                self._spend(memo)
                q = {c: score(state, c) for c in self._sure_or_candidates(state)[:width]}
                low = min(q.values())
                picks = [c for c, x in q.items() if x <= low + 1e-12]
                v = sum(self.after(state, c, value) for c in picks) / len(picks)
                memo[state] = v
            return v

        return value(self.start)

    def optimal(self) -> float:
        """The least expected turns to win of any strategy."""
        return self._optimal_value(self.start)

    def _optimal_value(self, state: _State) -> float:
        v = self._optimal.get(state)
        if v is not None:
            return v
        self._spend(self._optimal)
        fired, fleets = state
        total = fleets.bit_count()
        best = float("inf")
        # A certain hit loses nothing fired first when sinkings are silent: it is fired in every
        # line of play and always answers "hit", so when it is fired tells nothing. Where
        # sinkings are told, its answer ("hit", or "sunk" as its ship's last cell) depends on
        # what was fired before it, and so does what it tells: on 2x3 with two ships of 2,
        # named, firing sure hits first costs 0.09 turns a game. The strategies (greedy,
        # rollout, lookahead) do fire them first: that is a strategy, not a bound.
        silent = self.rules.sunk is SunkReport.SILENT
        for c in self._sure_or_candidates(state, sure_first=silent):
            groups = self.answers(state, c)
            after = fired | 1 << c
            # Every answer not yet won needs at least one more turn: that floor first, then each
            # answer's value in its place, dropping the cell once it cannot beat the best so far.
            bound = float(sum(g.bit_count() for g in groups))
            if 1.0 + bound / total >= best:
                continue
            for g in groups:
                bound += g.bit_count() * (self._optimal_value((after, g)) - 1.0)
                if 1.0 + bound / total >= best:
                    break
            else:
                best = 1.0 + bound / total
        self._optimal[state] = best
        return best


def strategy_turns(rules: RuleSet, make: Callable[[], Strategy], seed: int = 0) -> float:
    """The mean turns ``make()``'s strategy takes to win against every legal fleet, once each.

    Its random stream is started afresh from ``seed`` for every fleet, so the strategy is one fixed
    function of what it has seen, and this mean is that function's exact expectation.
    """
    from seabattle.bots.simulate import simulate_shots_to_win

    total = 0
    fleets = every_fleet(rules)
    for ships in fleets:
        total += simulate_shots_to_win(rules, make(), random.Random(seed), as_fleet(rules, ships))
    return total / len(fleets)


def as_fleet(rules: RuleSet, ships: tuple[int, ...]) -> Fleet:
    """The :class:`~seabattle.protocol.fleet.Fleet` of one of :func:`every_fleet`'s fleets."""
    out = []
    for mask in ships:
        cells = list(_bits(mask))
        r, c = divmod(cells[0], rules.cols)
        out.append(Placement(r, c, len(cells) > 1 and cells[1] - cells[0] == rules.cols))
    return Fleet(tuple(out))
