"""The bridge: an engine playing a real match, on a server or in peer play (spec/engine.md 6).

The match is the client library's: a :class:`~seabattle.client.match.MatchHandle` (a quick,
invited or challenged match on a server, reconnecting as the client does) or a peer match
(:mod:`seabattle.client.peer`). Underneath, the pure seat plays the protocol honestly: it
commits, opens, reveals and checks every proof. The engine only chooses. This module feeds a
:class:`~.side.Side` per game with the seat's events, asks the engine for a fleet and for each
call, holds the answers to the rules, and when the engine fails (:class:`~.base.EngineFault`)
resigns that game for it: the match goes on with the next game, and the result lists every
fault with its reason.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from seabattle.bots.play import BotResult
from seabattle.client.events import (
    GameEnded,
    GameStarted,
    IncomingShot,
    MatchEnded,
    Refused,
    Resumed,
    ShotResult,
    YourTurn,
)
from seabattle.client.match import MatchHandle
from seabattle.client.peer import Move as PeerMove
from seabattle.client.peer import Player
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.verdict import Shot, Verdict

from .base import Engine, EngineFault, Move
from .side import Side

__all__ = ["EnginePlayer", "EngineResult", "Fault", "play_engine_match"]

#: The referee's refusals that say a call broke the rules (the others, ``NOT_YOUR_TURN``,
#: ``WRONG_PHASE``, ``GAME_OVER``, say the game moved on while the engine thought).
_ILLEGAL = frozenset(
    {
        ErrorCode.OFF_BOARD,
        ErrorCode.ALREADY_FIRED,
        ErrorCode.CROSSED_OUT,
        ErrorCode.WRONG_SALVO_SIZE,
        ErrorCode.DUPLICATE_IN_SALVO,
        ErrorCode.RADAR_USED,
        ErrorCode.RADAR_NOT_ALLOWED,
    }
)


@dataclass(frozen=True, slots=True)
class Fault:
    """Game ``game`` was lost for the engine's fault: ``reason`` (one of
    :data:`~.base.FAULTS`) and what it did."""

    game: int
    reason: str
    detail: str

    def line(self) -> str:
        """``game 2: timeout (no answer to 'move' in 5 s)``."""
        return f"game {self.game}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class EngineResult(BotResult):
    """One match an engine played on a server: a :class:`~seabattle.bots.play.BotResult`,
    with the engine's name and the games it lost by a fault."""

    engine: str = ""
    faults: list[Fault] = field(default_factory=list)


def _checked(side: Side, move: Move) -> Move:
    """The engine's move, held to the rules once more (a built-in engine's is not parsed)."""
    why = side.illegal(move.cells, move.radar)
    if why is not None:
        raise EngineFault("illegal_move", why)
    return move


async def play_engine_match(
    match: MatchHandle, engine: Engine, *, rng: random.Random | None = None
) -> EngineResult:
    """Play ``match`` to its end with ``engine`` (started already, or started by its first
    game): a fleet for each game (a uniformly random one, drawn from ``rng``, when the engine
    asks for it) and each call. A game in which the engine fails is resigned, and the fault
    recorded; the next game asks the engine again."""
    rng = rng or random.SystemRandom()
    await match.wait_started()
    rules, seat = match.rules, match.seat
    assert rules is not None and seat is not None
    faults: list[Fault] = []
    side = Side(rules, seat, 0)
    dead = 0  # the game the engine lost by a fault: it is asked nothing more in it
    moved = False  # a move of ours is out, and not answered yet
    result: dict[str, Any] = {}
    won: bool | None = None
    ratings: dict[str, Any] | None = None
    reason: str | None = None
    ended = False

    async def fault(game: int, e: EngineFault) -> None:
        nonlocal dead
        faults.append(Fault(game, e.reason, e.detail))
        dead = game
        with suppress(ProtocolError):
            await match.resign()

    async def begin(game: int, *, place: bool) -> None:
        nonlocal side
        side = Side(rules, seat, game)
        try:
            await engine.new_game(rules, seat, game)
            fleet: Fleet | None = None
            if place:
                fleet = await engine.place(rules)
        except EngineFault as e:
            await fault(game, e)
            return
        if place:
            side.fleet = await match.place(fleet, rng=rng)
        elif match.committed is not None:
            side.fleet = match.committed.fleet

    async def ask(turn: YourTurn) -> None:
        nonlocal moved
        c = match.clock
        ours = c is not None and c.kind == "shot" and c.seat == seat
        side.clock = c.remaining() if ours and c is not None else None
        try:
            move = _checked(side, await engine.move(side))
        except EngineFault as e:
            await fault(turn.game, e)
            return
        if match.game_no != turn.game:
            return  # the game ended while the engine thought (a resignation, the clock)
        moved = True
        if move.radar is not None:
            await match.radar(move.radar)
        else:
            await match.fire(list(move.cells))

    if match.game_no and not match.placed:
        await begin(match.game_no, place=True)
    async for ev in match.events():
        if isinstance(ev, GameStarted):
            if ev.game != side.game:
                await begin(ev.game, place=not match.placed)
        elif isinstance(ev, YourTurn):
            moved = False
            if ev.game == side.game:
                side.feed(ev)
                if dead != ev.game:
                    await ask(ev)
        elif isinstance(ev, Refused):
            if moved and dead != side.game and ev.code in _ILLEGAL:
                # The referee refused what the rules (as this side knows them) allowed: the
                # engine would only be asked the same again.
                moved = False
                await fault(side.game, EngineFault("illegal_move", f"refused: {ev.slug} {ev.msg}"))
        elif isinstance(ev, ShotResult | IncomingShot):
            if ev.game == side.game:
                if isinstance(ev, ShotResult):
                    moved = False
                side.feed(ev)
                if dead != ev.game:
                    try:
                        await engine.told(ev)
                    except EngineFault as e:
                        await fault(ev.game, e)
        elif isinstance(ev, Resumed):
            moved = False
            phase = ev.view.get("phase")
            if ev.game is not None and ev.game != side.game:
                await begin(ev.game, place=phase == "setup" and not match.placed)
            elif phase == "setup" and not match.placed and dead != side.game:
                await begin(side.game, place=True)
            if ev.game == side.game:
                side.resume(ev.view)
        elif isinstance(ev, GameEnded):
            reason = ev.outcome.get("reason")
            if ev.game == side.game and dead != ev.game:
                with suppress(EngineFault):
                    await engine.game_over(ev.won, str(reason))
        elif isinstance(ev, MatchEnded):
            result, won, ratings, ended = ev.result, ev.won, ev.ratings, True
    return EngineResult(
        match.id,
        match.seat,
        won,
        result,
        list(match.lies),
        0,
        ratings,
        reason,
        ended,
        engine=engine.name,
        faults=faults,
    )


# ================================================================================================
# Peer play
# ================================================================================================


class EnginePlayer(Player):
    """An engine playing one side of a peer match (:func:`seabattle.client.peer.host` or
    ``join``) as ``seat`` (the host is seat 0, the joiner seat 1).

    The peer shell tells its player what happens through plain calls; the engine hears it
    (``result``, ``game_over``) before it is next asked anything. A fault resigns the game at
    the side's next turn (in setup the fleet is then drawn at random: a peer commits before it
    can resign); :attr:`faults` lists them.
    """

    def __init__(self, engine: Engine, seat: int, rng: random.Random | None = None) -> None:
        self.engine = engine
        self.seat = seat
        self.rng = rng or random.SystemRandom()
        self.faults: list[Fault] = []
        self.side: Side | None = None
        self._dead = 0
        self._told: list[Callable[[], Awaitable[None]]] = []

    def _fault(self, game: int, e: EngineFault) -> None:
        if self._dead != game:
            self.faults.append(Fault(game, e.reason, e.detail))
            self._dead = game

    async def flush(self) -> None:
        """Tell the engine what it has not heard yet (the match's last ``game_over`` is told
        by the caller's flush, after the match)."""
        told, self._told = self._told, []
        for notify in told:
            with suppress(EngineFault):
                await notify()

    async def fleet(self, rules: RuleSet, game: int) -> Fleet:
        """The engine's fleet for ``game``; a random one when it asks, or fails."""
        await self.flush()
        self.side = Side(rules, self.seat, game)
        fleet: Fleet | None = None
        try:
            await self.engine.new_game(rules, self.seat, game)
            fleet = await self.engine.place(rules)
        except EngineFault as e:
            self._fault(game, e)
        if fleet is None:
            fleet = random_fleet(rules, self.rng)
        self.side.fleet = fleet
        return fleet

    async def move(self, game: Game, seat: int, view: Any) -> PeerMove:
        """The engine's call, held to the rules; ``resign`` once it failed in this game."""
        await self.flush()
        side = self.side
        assert side is not None
        n = game.number
        if self._dead == n:
            return "resign", []
        radar = game.rules.radar and not game.boards[1 - seat].radar_used
        side.feed(YourTurn(n, game.shot_count(seat), radar))
        side.clock = None
        try:
            move = _checked(side, await self.engine.move(side))
        except EngineFault as e:
            self._fault(n, e)
            return "resign", []
        if move.radar is not None:
            return "radar", [move.radar]
        return "fire", list(move.cells)

    def refused(self, error: ProtocolError) -> None:
        """The peer machine refused the engine's call: the game is resigned at once."""
        if self.side is not None:
            self._fault(self.side.game, EngineFault("illegal_move", f"refused: {error}"))

    def shot_answered(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """Our shot's checked verdict: the side learns it, the engine hears it."""
        side = self.side
        if side is None:
            return
        cols = game.rules.cols
        crossed = {Cell(*divmod(i, cols)) for i in game.boards[1 - seat].crossed} - side.crossed
        order = sorted(crossed, key=lambda c: c.index(cols))
        ev = ShotResult(game.number, shot.n, shot.cells, shot.radar, verdict, tuple(order))
        self._feed(side, ev)

    def shot_at(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """The opponent's shot at us, and our verdict."""
        if self.side is not None:
            ev = IncomingShot(game.number, shot.n, shot.cells, shot.radar, verdict)
            self._feed(self.side, ev)

    def _feed(self, side: Side, ev: ShotResult | IncomingShot) -> None:
        side.feed(ev)
        if self._dead != ev.game:
            self._told.append(lambda: self.engine.told(ev))

    def game_over(self, game: Game, seat: int) -> None:
        """The game's end, told to the engine before it is next asked (or at the flush)."""
        outcome = game.outcome
        if outcome is None or self._dead == game.number:
            return
        won = None if outcome.winner is None else outcome.winner == seat
        reason = outcome.reason.value
        self._told.append(lambda: self.engine.game_over(won, reason))
