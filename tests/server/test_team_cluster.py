"""Team play on a cluster (spec 6.8, 4.10): members join a team match from any node, are sent
to the node that hosts it, play it through, and find it again after its node stops.

Real nodes (``serve --cluster``) on a real PostgreSQL, real TCP, the reference client.
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import SMALL, cluster_node
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import Client, MatchHandle, connect
from seabattle.client.wire import RequestFailed
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import verify_record
from seabattle.server.store import Store

SMALL_TEAMS = {**SMALL, "team_size": 2}
NAMES = ("alice", "bob", "carol", "dave")


async def _join(c: Client, code: str, out: dict[str, MatchHandle], who: str) -> None:
    out[who] = await c.join(code)


async def _teams_across(
    stack: AsyncExitStack, nodes: list[tuple[str, int]], mode: str
) -> tuple[list[Client], list[MatchHandle]]:
    """alice hosts on the first node; bob joins her team on the second, carol team 1 on the
    first, dave by the match's own invitation on the second."""
    where = [nodes[0], nodes[1], nodes[0], nodes[1 % len(nodes)]]
    clients = [
        await stack.enter_async_context(
            connect(*where[i], name=n, also=[x for x in nodes if x != where[i]])
        )
        for i, n in enumerate(NAMES)
    ]
    host, invite = await clients[0].create(SMALL_TEAMS, mode)
    assert host.team_invites is not None and invite is not None
    joined: dict[str, MatchHandle] = {}
    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            n.start_soon(_join, clients[1], host.team_invites[0].lower(), joined, "bob")
            n.start_soon(_join, clients[2], host.team_invites[1], joined, "carol")
            await trio.sleep(1)
            n.start_soon(_join, clients[3], invite, joined, "dave")
    handles = [host, joined["bob"], joined["carol"], joined["dave"]]
    for h in handles:
        assert h.id == host.id
        with trio.fail_after(30):
            await h.wait_started()
    return clients, handles


async def _play_all(handles: list[MatchHandle]) -> list[BotResult]:
    out: list[Any] = [None] * len(handles)

    async def one(i: int) -> None:
        out[i] = await play_match(handles[i], make_strategy("hunt"), random.Random(i))

    with trio.fail_after(600):
        async with trio.open_nursery() as n:
            for i in range(len(handles)):
                n.start_soon(one, i)
    return out


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_members_join_on_two_nodes_and_play_on_the_hosts_node(
    mode: str, postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        async with AsyncExitStack() as stack:
            clients, handles = await _teams_across(stack, [a, b], mode)
            # The match runs where it was created: those who joined on b were sent to a.
            assert [c.moves for c in clients] == [[], [f"{a[0]}:{a[1]}"], [], [f"{a[0]}:{a[1]}"]]
            assert [h.seat for h in handles] == [0, 0, 1, 1]
            results = await _play_all(handles)
        assert all(r.ended and not r.lies for r in results), results
        won = [r.won for r in results]
        assert won[0] == won[1] and won[2] == won[3] and won[0] != won[2]
        async with connect(*b, name="reader") as reader:
            signed = await reader.get_record(handles[0].id)
        verify_record(signed)
        stop_a.set()
        stop_b.set()


async def test_a_full_team_and_a_second_join_are_refused_from_any_node(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        async with (
            connect(*a, name="alice") as alice,
            connect(*b, name="bob") as bob,
            connect(*b, name="eve") as eve,
            trio.open_nursery() as n,
        ):
            host, _ = await alice.create(SMALL_TEAMS, "custody")
            assert host.team_invites is not None
            refused: list[RequestFailed] = []

            async def bob_joins() -> None:
                try:
                    await bob.join(host.team_invites[0])  # type: ignore[index]
                except RequestFailed as e:
                    refused.append(e)

            n.start_soon(bob_joins)
            await trio.sleep(1)
            with pytest.raises(RequestFailed) as full:
                await eve.join(host.team_invites[0])  # alice and bob fill team 0
            assert full.value.code == ErrorCode.MATCH_FULL
            with pytest.raises(RequestFailed) as again:
                await bob.join(host.team_invites[1])
            assert again.value.code == ErrorCode.NOT_ALLOWED
            # The host cancels: bob, waiting on the other node, is told so.
            await alice._request(lambda i: m.Leave(i, host.id))
            with trio.fail_after(10):
                while not refused:
                    await trio.sleep(0.1)
            assert refused[0].code == ErrorCode.NO_SUCH_MATCH
        stop_a.set()
        stop_b.set()


async def test_a_member_who_leaves_before_the_start_gives_its_place_back(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        async with connect(*a, name="alice") as alice:
            host, _ = await alice.create(SMALL_TEAMS, "custody")
            assert host.team_invites is not None
            code = host.team_invites[0]
            async with connect(*b, name="bob") as bob, trio.open_nursery() as n:
                n.start_soon(_join, bob, code, {}, "bob")
                await trio.sleep(1)
                n.cancel_scope.cancel()
            # bob's session ended while he waited: his place is free again, from any node.
            await trio.sleep(2)
            async with Store.open(postgres_db) as store:
                members = await store.team_members(host.id.hex())
            assert [t.player for t in members] == [alice.player]
        stop_a.set()
        stop_b.set()


async def test_a_team_match_whose_node_stops_goes_on_elsewhere_with_every_member(
    postgres_db: str, tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    b, stop_b = await cluster_node(nursery, postgres_db, tmp_path, "b")
    async with trio.open_nursery() as node_a:
        a, stop_a = await cluster_node(node_a, postgres_db, tmp_path, "a")
        async with AsyncExitStack() as stack:
            _, handles = await _teams_across(stack, [a, b], "custody")
            # A deploy: node a stops mid-match (its lease ends at once) and b takes it up from
            # its journal; every member, captain or not, reconnects and is seated there.
            async with trio.open_nursery() as n:
                results: list[Any] = [None] * 4

                async def one(i: int) -> None:
                    results[i] = await play_match(
                        handles[i], make_strategy("hunt"), random.Random(i)
                    )

                for i in range(4):
                    n.start_soon(one, i)
                await trio.sleep(3)
                stop_a.set()
    assert all(r is not None and r.ended and not r.lies for r in results), results
    won = [r.won for r in results]
    assert won[0] == won[1] and won[2] == won[3] and won[0] != won[2]
    async with Store.open(postgres_db) as store:
        row = await store.get_match(handles[0].id.hex())
        assert row is not None and row.status == "finished"
    stop_b.set()
