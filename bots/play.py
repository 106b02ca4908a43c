"""Bots over the network: a :mod:`.strategies` strategy playing a server match."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seabattle.client.events import (
    GameEnded,
    GameStarted,
    LieDetected,
    MatchEnded,
    Refused,
    Resumed,
    ShotResult,
    YourTurn,
)
from seabattle.client.match import MatchHandle
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.targeting import TargetView, feed_view, view_from_snapshot

if TYPE_CHECKING:
    from seabattle.client.api import Client

__all__ = ["BotResult", "play_bot", "play_match"]

#: Refusals that say no move is due now, rather than that the cells were wrong.
_NOT_NOW = frozenset(
    {
        ErrorCode.NOT_YOUR_TURN,
        ErrorCode.NOT_CALLER,
        ErrorCode.WRONG_PHASE,
        ErrorCode.GAME_OVER,
        # A node that does not referee the match (yet: it is about to take it over).
        ErrorCode.NO_SUCH_MATCH,
    }
)


@dataclass
class BotResult:
    """One match a bot played: id, our seat, whether we won, the result, lies seen, refusals."""

    match_id: bytes
    seat: int | None
    won: bool | None
    result: dict[str, Any]
    lies: list[LieDetected] = field(default_factory=list)
    refusals: int = 0
    #: ``match_over.ratings``: player id to ``{old, new}``, or ``None`` for an unrated match
    ratings: dict[str, Any] | None = None
    reason: str | None = None  #: why the last game ended (``fleet_sunk``, ``timeout``...)
    #: ``result`` came from ``match_over``; ``False``: the events ended without one (the match
    #: was aborted, or the connection lost for good)
    ended: bool = False


async def play_match(
    match: MatchHandle,
    strategy: Any,
    rng: random.Random | None = None,
    *,
    placement: str = "uniform",
) -> BotResult:
    """Play ``match`` to its end with a :class:`~.strategies.Strategy`, placing every game's
    fleet by ``placement`` (:data:`~.placement.PLACEMENTS`)."""
    from .placement import off_loop, place_fleet

    rng = rng or random.SystemRandom()
    await match.wait_started()
    assert match.rules is not None
    rules = match.rules

    async def place() -> None:
        fleet = await off_loop(placement, place_fleet, rules, rng, placement)
        await match.place(fleet, rng=rng)

    if not match.placed:
        await place()
    view = TargetView(rules)
    refusals = 0
    last_turn: YourTurn | None = None
    result: dict[str, Any] = {}
    won: bool | None = None
    ratings: dict[str, Any] | None = None
    reason: str | None = None
    ended = False
    async for ev in match.events():
        if isinstance(ev, GameStarted):
            view = TargetView(rules)
            if not match.placed:
                await place()
        elif isinstance(ev, YourTurn | Refused):
            if isinstance(ev, Refused):
                refusals += 1
                if ev.code in _NOT_NOW:
                    # Not a bad cell: the move came when none was due (a resume raced it, or
                    # the game ended). Calling again at once would only be refused again: the
                    # next turn says when to call.
                    last_turn = None
                if last_turn is None:
                    continue
                if refusals > 50:
                    # The strategy keeps calling what the referee refuses: give the game up
                    # rather than stall the match until the clock runs out.
                    last_turn = None
                    await match.resign()
                    continue
                turn = last_turn
            else:
                turn = last_turn = ev
            at = strategy.use_radar(view, rng) if turn.radar else None
            if at is not None:
                await match.radar(at)
            else:
                await match.fire(strategy.choose(view, turn.count, rng))
        elif isinstance(ev, Resumed):
            # Back after a reconnect: what happened meanwhile is in the snapshot only.
            last_turn = None
            boards = ev.view.get("boards")
            if boards and match.seat is not None:
                view = view_from_snapshot(rules, boards[1 - match.seat])
            if ev.view.get("phase") == "setup" and not match.placed:
                await place()
        elif isinstance(ev, ShotResult):
            last_turn = None
            feed_view(view, rules, ev.cells, ev.radar, ev.verdict, ev.crossed)
        elif isinstance(ev, GameEnded):
            reason = ev.outcome.get("reason")
        elif isinstance(ev, MatchEnded):
            result, won, ratings, ended = ev.result, ev.won, ev.ratings, True
    return BotResult(
        match.id, match.seat, won, result, list(match.lies), refusals, ratings, reason, ended
    )


async def play_bot(
    client: Client,
    strategy: Any,
    rules: dict[str, Any] | None = None,
    mode: str = "blind",
    games: int = 1,
    rng: random.Random | None = None,
    placement: str = "uniform",
) -> list[BotResult]:
    """Play ``games`` quick matches in a row with ``strategy`` (a ``bots.Strategy``), fleets
    placed by ``placement``."""
    out = []
    for _ in range(games):
        match = await client.quick(rules, mode)
        out.append(await play_match(match, strategy, rng, placement=placement))
    return out
