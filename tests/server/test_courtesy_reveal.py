"""Fleets shown after an early end over real TCP (spec 7.3 decision 20): in blind mode, after a
resignation in firing, each seat sends its courtesy reveal, the server checks and relays it
before ``match_over`` (it waits a moment for them), and each player is shown the other's fleet;
the record holds no reveal, verifies, and both co-sign it."""

from __future__ import annotations

from typing import Any

import trio
from helpers import Bot, pair, play_both
from seabattle.protocol import messages as m
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.seat import Out
from seabattle.protocol.seat_events import FleetShown, LieDetected, YourTurn


class Watching(Bot):
    """A bot that keeps every message it is sent and every event its seat gives, and resigns
    on its turn number ``quit_on`` (``None``: never)."""

    def __init__(self, *a: Any, quit_on: int | None = None, **k: Any) -> None:
        super().__init__(*a, **k)
        self.got: list[Any] = []
        self.events: list[Any] = []
        self.quit_on, self.turns = quit_on, 0

    async def _react(self, ev: Any) -> None:
        if isinstance(ev, YourTurn) and self.quit_on is not None:
            self.turns += 1
            if self.turns == self.quit_on:
                assert self.machine is not None
                await self._play(self.machine.resign())
                return
        await super()._react(ev)

    async def on(self, msg: Any) -> None:
        self.got.append(msg)
        await super().on(msg)

    async def _play(self, out: Out) -> None:
        self.events += out.events
        await super()._play(out)


async def test_a_resigning_player_is_shown_the_other_fleet_blind(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, mid = await pair(server, nursery, {"preset": "classic"}, "blind")
    ba, bb = Watching(a, "blind", 1), Watching(b, "blind", 2, quit_on=3)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == []
    assert [o["reason"] for o in ba.outcomes] == ["resigned"]
    for me, them in ((ba, bb), (bb, ba)):
        assert them.committed is not None
        shown = [e for e in me.events if isinstance(e, FleetShown) and e.seat == them.seat]
        assert [(e.game, e.fleet) for e in shown] == [(1, them.committed.fleet)]
        assert not [e for e in me.events if isinstance(e, LieDetected)]
        kinds = [type(x) for x in me.got if isinstance(x, m.Revealed | m.GameOver | m.MatchOver)]
        # Both fleets after game_over and before match_over (the server waited for them).
        assert kinds == [m.GameOver, m.Revealed, m.Revealed, m.MatchOver], kinds
    assert ba.result is not None and bb.result is not None
    assert ba.result.head == bb.result.head
    # Both seats co-signed (the seat does after match_over); the record holds no reveal.
    with trio.fail_after(10):
        while True:
            ok = await a.request(m.GetRecord(7, mid))
            assert isinstance(ok, m.Ok), ok
            signed = load_record(ok.data["record"])
            if len(signed["sigs"]) == 3:
                break
            await trio.sleep(0.05)
    assert verify_record(signed).ok
    ops = [e["in"] for e in signed["record"]["games"][0]["transcript"]]
    assert "reveal" not in ops and ops[-1] == "resign"
