"""Several server nodes on one PostgreSQL (spec 4.10): what players and operators rely on.

Players who connected to different nodes are paired (quick match, an invitation, the listing),
the one whose match runs elsewhere is redirected there with a signed ticket and plays on; a node
that stops hands its running matches to another, where they finish with verified records; a
forged, expired or misdirected ticket is refused with a clear error. Real nodes (``serve``) on a
real PostgreSQL, real TCP, the reference client.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, Bot, cluster_node, connect, pair, play_both, play_some
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import verify_record
from seabattle.protocol.ticket import Ticket, issue_ticket
from seabattle.server.store import Store


async def _play(c: api.Client, match: api.MatchHandle, seed: int) -> BotResult:
    return await play_match(match, make_strategy("random"), random.Random(seed))


async def _verified(addr: tuple[str, int], mid: bytes) -> dict[str, Any]:
    async with api.connect(*addr, name="reader") as c:
        signed = await c.get_record(mid)
    verify_record(signed)
    return signed


async def test_quick_match_pairs_players_of_two_nodes(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        results: dict[str, BotResult] = {}
        clients: dict[str, api.Client] = {}

        async def player(who: str, addr: tuple[str, int], seed: int) -> None:
            async with api.connect(*addr, name=who) as c:
                clients[who] = c
                match = await c.quick(SMALL, "blind")
                results[who] = await _play(c, match, seed)

        async with trio.open_nursery() as n:
            n.start_soon(player, "alice", a, 1)
            await trio.sleep(1)  # alice waits on node a first
            n.start_soon(player, "bob", b, 2)
        # The match ran on bob's node; alice was sent there and played it through.
        assert clients["alice"].moves == [f"{b[0]}:{b[1]}"]
        assert clients["bob"].moves == []
        mid = results["alice"].match_id
        assert mid == results["bob"].match_id
        assert {results["alice"].won, results["bob"].won} == {True, False}
        signed = await _verified(a, mid)  # any node serves any record
        assert signed["record"]["match"] == mid
        stop_a.set()
        stop_b.set()


async def test_players_asking_on_two_nodes_at_once_are_paired(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Each pair asks for rules nobody else asks for, one player on each node, all at the same
    # moment: looking for a partner and queueing is one step, so none of them waits for ever.
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        paired: dict[tuple[int, str], bytes] = {}

        async def player(i: int, node: str, addr: tuple[str, int]) -> None:
            async with api.connect(*addr, name=f"{node}{i}") as c:
                match = await c.quick({**SMALL, "name": f"race-{i}"}, "blind")
                paired[i, node] = match.id
                await _play(c, match, i)

        with trio.fail_after(120):
            async with trio.open_nursery() as n:
                for i in range(6):
                    n.start_soon(player, i, "a", a)
                    n.start_soon(player, i, "b", b)
        assert all(paired[i, "a"] == paired[i, "b"] for i in range(6))
        stop_a.set()
        stop_b.set()


async def test_an_invitation_works_from_another_node(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        b, stop_b = await cluster_node(nodes, postgres_db, tmp_path, "b")
        async with api.connect(*a, name="host") as host, api.connect(*b, name="guest") as guest:
            match, invite = await host.create(SMALL, "custody")
            assert invite is not None
            # The listing of either node shows the match open on node a.
            assert [r["match"] for r in await guest.list()] == [match.id]
            joined = await guest.join(invite.lower())
            assert joined.id == match.id
            async with trio.open_nursery() as n:
                n.start_soon(_play, host, match, 3)
                n.start_soon(_play, guest, joined, 4)
            assert host.moves == [f"{b[0]}:{b[1]}"]
        await _verified(b, match.id)
        stop_a.set()
        stop_b.set()


async def test_a_node_that_stops_hands_its_matches_to_another(
    postgres_db: str, tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, stop_a = await cluster_node(nursery, postgres_db, tmp_path, "a")
    async with trio.open_nursery() as node_b:
        b, stop_b = await cluster_node(node_b, postgres_db, tmp_path, "b")
        p0, p1, mid = await pair(b, nursery, SMALL, "blind")
        bot0, bot1 = Bot(p0, "blind", 1), Bot(p1, "blind", 2)
        await play_some(bot0, bot1, 3)
        stop_b.set()  # a deploy: node b stops mid-match, and ends its lease at once
    # Node a takes the match over from its journal; its players reconnect there (to any node:
    # the one that referees it now seats them) and finish it.
    bot0.c = await connect(a, nursery, key=p0.key, name="alice", resume=p0.token)
    bot1.c = await connect(a, nursery, key=p1.key, name="bob")
    await play_both(bot0, bot1)
    assert bot0.result is not None and bot1.result is not None
    async with Store.open(postgres_db) as store:
        row = await store.get_match(mid.hex())
        assert row is not None and row.status == "finished"
    await _verified(a, mid)
    stop_a.set()


async def test_forged_expired_and_misdirected_tickets_are_refused(
    postgres_db: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nodes:
        a, stop_a = await cluster_node(nodes, postgres_db, tmp_path, "a")
        async with api.connect(*a, name="p") as c:
            cluster_key = api.load_key(tmp_path / "cluster.key")
            wall = int(time.time())  # the node's wall clock started as the real one
            cases = {
                "forged": (Ed25519PrivateKey.generate(), c.player, "a", wall + 60),
                "expired": (cluster_key, c.player, "a", wall - 1),
                "another player's": (cluster_key, "ab" * 32, "a", wall + 60),
                "for another node": (cluster_key, c.player, "z", wall + 60),
            }
            for why, (key, player, node, expires) in cases.items():
                body, sig = issue_ticket(
                    key, Ticket(player, b"\x01" * 16, node, f"{a[0]}:{a[1]}", expires)
                )
                try:
                    await c._request(lambda i, b=body, s=sig: m.Redeem(i, b, s))
                except api.RequestFailed as e:
                    assert e.code == ErrorCode.BAD_TICKET, why
                else:
                    raise AssertionError(f"a ticket {why} was accepted")
            # A good ticket for a match that is not there: a clear NO_SUCH_MATCH.
            body, sig = issue_ticket(
                cluster_key, Ticket(c.player, b"\x01" * 16, "a", f"{a[0]}:{a[1]}", wall + 60)
            )
            try:
                await c._request(lambda i: m.Redeem(i, body, sig))
            except api.RequestFailed as e:
                assert e.code == ErrorCode.NO_SUCH_MATCH
        stop_a.set()
