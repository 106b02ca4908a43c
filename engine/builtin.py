"""The built-in strategies as engines: ``random``, ``hunt``, ``density``, ``best``.

A :class:`BuiltinEngine` is a :mod:`seabattle.bots.strategies` strategy behind the
:class:`~.base.Engine` interface. It runs in process and reads what its side knows directly
(:attr:`Side.view <.side.Side.view>`, :attr:`Side.turn <.side.Side.turn>`): no JSON, no
process, no time limit of its own. Its fleet is placed by a :mod:`seabattle.bots.placement`
strategy; under ``uniform`` it asks the shell for a uniformly random fleet (``place`` returns
``None``), which is the same draw, and lets the arena's paired boards give both engines of a
pair the same fleets to shoot at.
"""

from __future__ import annotations

import random

from seabattle.bots.placement import PLACEMENTS, off_loop, place_fleet
from seabattle.bots.strategies import STRATEGIES, Strategy, make_strategy
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import RuleSet

from .base import Engine, Hello, Move
from .side import Side

__all__ = ["BUILTIN", "BuiltinEngine"]

#: The built-in engines' names, as the arena and the bridge take them.
BUILTIN: tuple[str, ...] = tuple(STRATEGIES)


class BuiltinEngine(Engine):
    """The built-in ``strategy`` (see :data:`BUILTIN`), fleets placed by ``placement`` (see
    :data:`~seabattle.bots.placement.PLACEMENTS`), its choices drawn from ``seed`` (``None``:
    from the system's entropy)."""

    def __init__(self, strategy: str, *, placement: str = "uniform", seed: int | None = None):
        if strategy not in STRATEGIES:
            raise ValueError(f"no built-in engine {strategy!r}; built-in: {', '.join(BUILTIN)}")
        if placement not in PLACEMENTS:
            raise ValueError(f"no placement {placement!r}; placements: {', '.join(PLACEMENTS)}")
        self.strategy_name = strategy
        self.placement = placement
        self.name = strategy if placement == "uniform" else f"{strategy}/{placement}"
        self.rng = random.Random(seed)
        self.strategy: Strategy = make_strategy(strategy)

    def reseed(self, seed: int) -> None:
        """Draw the next game's choices from ``seed``: the arena gives every game its own, so
        that a seed gives the same games whatever order concurrent games run in."""
        self.rng.seed(seed)

    async def start(self) -> Hello:
        """Nothing to start: the strategy plays any rules."""
        return Hello(self.name, "seabattle")

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        """A fresh strategy (the best one keeps a sampler for the game it is in)."""
        self.strategy = make_strategy(self.strategy_name)

    async def place(self, rules: RuleSet) -> Fleet | None:
        """``None`` under ``uniform`` (the shell draws it); else the placement's fleet, placed
        in a thread when it takes seconds."""
        if self.placement == "uniform":
            return None
        return await off_loop(self.placement, place_fleet, rules, self.rng, self.placement)

    async def move(self, side: Side) -> Move:
        """The strategy's radar scan, where the turn allows one and it wants it; else its
        ``side.turn.count`` cells."""
        turn = side.turn
        assert turn is not None, "move asked when it is not our turn"
        if turn.radar:
            at = self.strategy.use_radar(side.view, self.rng)
            if at is not None:
                return Move(radar=at)
        return Move(tuple(self.strategy.choose(side.view, turn.count, self.rng)))
