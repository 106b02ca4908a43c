"""The interface every engine kind implements, and the one way an engine fails.

An engine is driven game by game: :meth:`Engine.start` once (its hello: name and the rule sets
it plays), then for each game :meth:`Engine.new_game`, :meth:`Engine.place`, a
:meth:`Engine.move` whenever its side is to call a shot, :meth:`Engine.told` with every result
(its own shots' and the opponent's), and :meth:`Engine.game_over`; :meth:`Engine.close` at the
end. Whatever goes wrong inside an engine (it crashed, hung past its time, wrote garbage, named
an illegal cell or fleet, does not play the rules) is raised as :class:`EngineFault` with a
reason from :data:`FAULTS`: the shell then loses that game for it and goes on.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field

from seabattle.protocol.fleet import Fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import PRESETS, RuleSet
from seabattle.protocol.seat_events import IncomingShot, ShotResult

from .side import Side

__all__ = ["FAULTS", "Engine", "EngineFault", "Hello", "Move"]

#: Why an engine lost a game it did not lose on the board, as the shells report it.
FAULTS = (
    "crashed",  # the process exited, or the HTTP service refused the connection
    "timeout",  # no answer within the time allowed
    "garbage",  # an answer that is not the protocol's (not JSON, wrong type, missing field)
    "illegal_move",  # a cell off the grid, already fired at, or the wrong number of cells
    "illegal_fleet",  # a placement the rules refuse
    "wrong_rules",  # it does not play these rules (its hello says so, or it said it did not)
)


class EngineFault(Exception):
    """The engine failed in a way that loses it the game: ``reason`` is one of :data:`FAULTS`,
    ``detail`` says what it did, in one line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in FAULTS, reason
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True, slots=True)
class Hello:
    """What an engine says of itself: its name, author, and the rule sets it plays (preset
    names; empty: any rules)."""

    name: str
    author: str = ""
    rules: tuple[str, ...] = field(default=())

    def plays(self, rules: RuleSet) -> bool:
        """Whether the engine said it plays ``rules`` (no list: everything). A name is the rule
        set's own, or a preset's whose games ``rules`` plays: the same in every option but the
        match format and the clocks (a best-of-3 ``russian`` is ``russian+custom``)."""
        if not self.rules or rules.name in self.rules or "*" in self.rules:
            return True
        return any(_same_games(rules, name) for name in self.rules)


def _same_games(rules: RuleSet, name: str) -> bool:
    """Whether ``rules`` plays the games of the preset ``name`` (whatever its match and clocks)."""
    p = PRESETS.get(name)
    if p is None:
        return False
    return dataclasses.replace(rules, name=p.name, match=p.match, clocks=p.clocks) == p


@dataclass(frozen=True, slots=True)
class Move:
    """One call of the side to move: ``cells`` to fire at (one, or a salvo), or a radar scan
    whose area's top-left cell is ``radar`` (then ``cells`` is empty)."""

    cells: tuple[Cell, ...] = ()
    radar: Cell | None = None


class Engine(abc.ABC):
    """One engine, playing one game at a time. Every method may raise :class:`EngineFault`."""

    #: The engine's name as tables show it (its hello's, once started).
    name: str = "engine"

    @abc.abstractmethod
    async def start(self) -> Hello:
        """Start the engine (run the process, reach the service) and read its hello."""

    @abc.abstractmethod
    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        """A game begins: its rules, our seat (0 or 1), the game's number in the match (1...)."""

    @abc.abstractmethod
    async def place(self, rules: RuleSet) -> Fleet | None:
        """Our fleet for the game, or ``None`` for a uniformly random one the shell draws."""

    @abc.abstractmethod
    async def move(self, side: Side) -> Move:
        """Our side's next call, given what it knows (``side.turn`` says how many cells and
        whether radar is allowed). The shell checks the answer against the rules."""

    async def told(self, event: ShotResult | IncomingShot) -> None:
        """A shot's result: one of ours (:class:`ShotResult`) or the opponent's at us."""
        return None

    async def game_over(self, won: bool | None, reason: str) -> None:
        """The game ended: whether we won (``None``: a draw), and why (``fleet_sunk``...)."""
        return None

    async def close(self) -> None:
        """Stop the engine (the process is told ``quit``, then killed if it lingers)."""
        return None
