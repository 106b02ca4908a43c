"""Peer play end to end over real TCP: bots on both sides, each the referee of the other."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing
from helpers import peer_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import RequestFailed, Wire
from seabattle.client.peer import BotPlayer, PeerCheated, host, join
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.game import EndReason
from seabattle.protocol.record import verify_record
from seabattle.protocol.rules import PRESETS, rules_from_dict
from seabattle.protocol.session import Role
from seabattle.protocol.verdict import CellResult, Result, Shot, Verdict


def bots(seed: int) -> tuple[BotPlayer, BotPlayer]:
    return (
        BotPlayer(make_strategy("density"), random.Random(seed)),
        BotPlayer(make_strategy("hunt"), random.Random(seed + 1000)),
    )


@pytest.mark.parametrize("name", sorted(PRESETS))
async def test_every_preset_ends_with_one_record_signed_by_both(name: str) -> None:
    h, j = await peer_match(PRESETS[name], *bots(1), name="joiner")
    assert h.seat == 0 and j.seat == 1
    assert h.report.ok and j.report.ok, (h.report.reason, j.report.reason)
    assert h.signed == j.signed
    assert {s["role"] for s in h.signed["sigs"]} == {"seat0", "seat1"}
    assert h.signed["record"]["referee"] is None
    # Independently of both players: the record verifies from itself alone.
    assert verify_record(h.signed).ok
    assert h.match.over and h.match.winner == j.match.winner is not None
    assert h.won is not j.won


@pytest.mark.parametrize(
    "options",
    [
        {"preset": "classic", "shots": "salvo-afloat"},
        {"preset": "classic", "shots": "salvo-fixed", "salvo_report": "total"},
        {"preset": "classic", "radar": True},
        {"preset": "classic", "sunk": "silent", "repeat": "wasted"},
        {"preset": "russian", "match": {"kind": "best-of", "games": 3, "sunk_bonus": 0}},
    ],
)
async def test_rule_variants(options: dict[str, Any]) -> None:
    h, j = await peer_match(rules_from_dict(options), *bots(2), name="joiner")
    assert h.report.ok and j.signed == h.signed
    assert len(h.signed["record"]["games"]) == h.match.to_dict()["games"]


class FalseMiss(BotPlayer):
    """Answers the first hit against it with a miss, keeping the true opening."""

    lied = False

    def answer(self, shot: Shot, verdict: Verdict) -> Verdict:
        if self.lied or shot.radar or not verdict.results:
            return verdict
        res = list(verdict.results)
        for i, r in enumerate(res):
            if r.result is not Result.MISS:
                res[i] = CellResult(Result.MISS, r.opening)
                self.lied = True
                return Verdict(verdict.n, tuple(res))
        return verdict


async def test_a_false_miss_is_caught_at_once_and_loses() -> None:
    liar = FalseMiss(make_strategy("random"), random.Random(5))
    honest = BotPlayer(make_strategy("density"), random.Random(4))
    h, j = await peer_match(PRESETS["classic"], honest, liar, name="joiner")
    assert liar.lied
    game = h.match.games[-1]
    assert game.outcome is not None
    assert game.outcome.reason is EndReason.FALSE_PROOF and game.outcome.winner == 0
    assert h.match.winner == 0 and j.match.winner == 0
    # The lie is in the record, and the record still verifies: it proves the liar lost.
    assert h.report.ok and h.signed == j.signed


async def test_host_reports_its_port_before_accepting() -> None:
    async with trio.open_nursery() as nursery:

        async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            await host(
                BotPlayer(make_strategy("random")),
                rules=PRESETS["classic-8x8"],
                task_status=task_status,
            )

        addr = await nursery.start(serve)
        assert addr[1] > 0
        nursery.cancel_scope.cancel()


async def test_the_host_answers_a_hello_with_no_version_in_common_and_gives_up() -> None:
    refused: list[RemoteProtocolError] = []

    async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await host(
                BotPlayer(make_strategy("random")),
                rules=PRESETS["classic-8x8"],
                task_status=task_status,
            )
        except RemoteProtocolError as e:
            refused.append(e)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(serve)
            wire = Wire(await trio.open_tcp_stream(*addr), role=Role.CLIENT)
            await wire.send(m.Hello((99,), "future", ("peer",)))
            with pytest.raises(RequestFailed) as e:
                await wire.expect(m.Welcome)
            assert e.value.code == ErrorCode.UNSUPPORTED_VERSION
            await wire.aclose()
    assert [r.code for r in refused] == [ErrorCode.UNSUPPORTED_VERSION]


async def test_the_joiner_stops_at_a_welcome_that_does_not_agree_peer() -> None:
    mine, theirs = trio.testing.memory_stream_pair()
    fake_host = Wire(theirs, role=Role.SERVER)

    async def welcome_without_peer() -> None:
        await fake_host.expect(m.Hello)
        await fake_host.send(m.Welcome(2, (), b"k" * 32, b"c" * 32, True))

    async def connect(address: str, port: int) -> trio.abc.Stream:
        return mine

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(welcome_without_peer)
            with pytest.raises(PeerCheated, match="capability peer"):
                await join(BotPlayer(make_strategy("random")), "memory", 0, connect=connect)
