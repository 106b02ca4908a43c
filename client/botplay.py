"""Bots over the network: a :mod:`seabattle.client.bots` strategy playing a server match."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.verdict import Result, Verdict

from .events import GameStarted, LieDetected, MatchEnded, Refused, ShotResult, YourTurn
from .match import MatchHandle

if TYPE_CHECKING:
    from .api import Client

__all__ = ["BotResult", "feed_view", "play_bot", "play_match"]


def feed_view(view: Any, rules: RuleSet, cells: Sequence[Cell], radar: bool, v: Verdict) -> None:
    """Tell a :class:`~seabattle.client.bots.TargetView` what verdict ``v`` on ``cells`` showed."""
    if radar:
        if v.found is not None:
            view.radar(cells[0], rules.radar_size, v.found)
        return
    if v.total is not None:
        view.salvo_total(list(cells), v.total)
        return
    for c, res in zip(cells, v.results, strict=True):
        if res.result is Result.MISS:
            view.miss(c)
        elif res.result is Result.HIT:
            view.hit(c)
        else:
            claim = res.sunk
            shown = None
            ship = None
            if claim is not None and rules.sunk is not SunkReport.SILENT:
                ship = claim.ship
                if claim.opening is not None:
                    shown = claim.opening.placement.cells(rules.fleet[claim.ship].length)
            view.sunk(c, ship, shown)


@dataclass
class BotResult:
    """One match a bot played: id, our seat, whether we won, the result, lies seen, refusals."""

    match_id: bytes
    seat: int | None
    won: bool | None
    result: dict[str, Any]
    lies: list[LieDetected] = field(default_factory=list)
    refusals: int = 0


async def play_match(
    match: MatchHandle, strategy: Any, rng: random.Random | None = None
) -> BotResult:
    """Play ``match`` to its end with a :class:`~seabattle.client.bots.Strategy`."""
    from seabattle.client.bots import TargetView

    rng = rng or random.SystemRandom()
    await match.wait_started()
    assert match.rules is not None
    rules = match.rules
    if not match.placed:
        await match.place(rng=rng)
    view = TargetView(rules)
    refusals = 0
    last_turn: YourTurn | None = None
    result: dict[str, Any] = {}
    won: bool | None = None
    async for ev in match.events():
        if isinstance(ev, GameStarted):
            view = TargetView(rules)
            if not match.placed:
                await match.place(rng=rng)
        elif isinstance(ev, YourTurn | Refused):
            if isinstance(ev, Refused):
                refusals += 1
                if last_turn is None:
                    continue
                if refusals > 50:
                    # The strategy keeps calling what the referee refuses: give the game up
                    # rather than stall the match until the clock runs out.
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
        elif isinstance(ev, ShotResult):
            last_turn = None
            feed_view(view, rules, ev.cells, ev.radar, ev.verdict)
            for c in ev.crossed:
                view.crossed(c)
        elif isinstance(ev, MatchEnded):
            result, won = ev.result, ev.won
    return BotResult(match.id, match.seat, won, result, list(match.lies), refusals)


async def play_bot(
    client: Client,
    strategy: Any,
    rules: dict[str, Any] | None = None,
    mode: str = "blind",
    games: int = 1,
    rng: random.Random | None = None,
) -> list[BotResult]:
    """Play ``games`` quick matches in a row with ``strategy`` (a ``bots.Strategy``)."""
    out = []
    for _ in range(games):
        match = await client.quick(rules, mode)
        out.append(await play_match(match, strategy, rng))
    return out
