"""The reference client keeps its match across a dropped connection (spec 4.7, 4.9, 4.10).

What a person or a bot relies on: a connection that drops mid-match is opened again by itself,
the seat comes back with the resume token, the match's handle says ``Reconnecting`` then
``Resumed`` with the server's snapshot, and the match is played to its end with a record that
verifies; after a cluster node stops, the client gets back in through another node. Real
servers, real TCP, the client library.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import SMALL, cluster_node, start_server
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.client.events import Reconnecting, Resumed, ShotResult
from seabattle.protocol.record import verify_record


class Watched:
    """A match handle whose events are also kept as the bot consumes them; ``then`` is run
    (once) when the ``after``-th verdict on our own shots arrives: bots at full speed finish a
    match without virtual time passing, so the test acts from inside the event stream."""

    def __init__(self, h: api.MatchHandle, after: int, then: Any) -> None:
        self.seen: list[Any] = []
        original = h._emit

        def emit(ev: Any) -> None:
            self.seen.append(ev)
            verdicts = sum(isinstance(e, ShotResult) for e in self.seen)
            if isinstance(ev, ShotResult) and verdicts == after:
                then()
            original(ev)

        h._emit = emit  # type: ignore[method-assign]


async def _play(h: api.MatchHandle, seed: int, out: dict[int, BotResult]) -> None:
    out[seed] = await play_match(h, make_strategy("random"), random.Random(seed))


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_a_dropped_connection_is_resumed_and_the_match_finishes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    async with trio.open_nursery() as servers:
        addr, stop = await start_server(servers, tmp_path)
        async with api.connect(*addr, name="host") as a, api.connect(*addr, name="guest") as b:
            ha, invite = await a.create(SMALL, mode)
            assert invite is not None
            hb = await b.join(invite)
            token = a.wire.resume
            out: dict[int, BotResult] = {}
            async with trio.open_nursery() as n:
                # After host's second verdict, the network drops its connection.
                wa = Watched(ha, 2, lambda: n.start_soon(a.wire.stream.aclose))
                n.start_soon(_play, ha, 1, out)
                n.start_soon(_play, hb, 2, out)
            assert a.wire.resume == token  # the same standing, resumed with its token
            kinds = [type(e) for e in wa.seen]
            assert Reconnecting in kinds and Resumed in kinds
            assert kinds.index(Reconnecting) < kinds.index(Resumed)
            # Played to its end by the rules, not lost by abandonment.
            assert {out[1].won, out[2].won} == {True, False}
            assert out[1].result["over"] and not ha.disputed
            signed = await a.get_record(ha.id)
            assert verify_record(signed).ok
            games = signed["record"]["games"]
            assert all(g["outcome"]["reason"] != "abandoned" for g in games)
        stop.set()


async def test_after_a_node_stops_the_client_gets_back_in_through_another(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as outer:
        a, stop_a = await cluster_node(outer, postgres_db, tmp_path, "a")
        async with trio.open_nursery() as node_b:
            b, stop_b = await cluster_node(node_b, postgres_db, tmp_path, "b")
            async with (
                api.connect(*b, name="p0", also=[a]) as p0,
                api.connect(*b, name="p1", also=[a]) as p1,
            ):
                h0, invite = await p0.create(SMALL, "blind")
                assert invite is not None
                h1 = await p1.join(invite)
                out: dict[int, BotResult] = {}
                async with trio.open_nursery() as n:
                    # A deploy: b stops mid-match (after p0's second verdict); a takes it over.
                    w0 = Watched(h0, 2, stop_b.set)
                    n.start_soon(_play, h0, 3, out)
                    n.start_soon(_play, h1, 4, out)
                assert Resumed in [type(e) for e in w0.seen]
                assert {out[3].won, out[4].won} == {True, False}
                signed = await p0.get_record(h0.id)
                assert verify_record(signed).ok
        stop_a.set()
