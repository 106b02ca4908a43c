"""The store's part in a cluster (``server/store_cluster.py``), on SQLite and PostgreSQL: leases,
failover, the shared quick queue, open matches across nodes, handoffs.

What nodes rely on: a node whose lease runs is never taken over and a dead one exactly once; a
queue entry is paired at most once, never with a dead node's player nor with its own; what a
crashed node left waiting is gone when it comes back; nodes of one store share one key.
"""

from __future__ import annotations

import pytest
import trio
from seabattle.server.store import Conflict, Store, StoreError
from test_store import ALICE, BOB, CAROL, NOW, RULES, seed

DAVE = "d4" * 32

KEY, OTHER_KEY = b"k" * 32, b"o" * 32
DIGEST = b"d" * 32
MS = 1000


async def _nodes(store: Store, *names: str, until: int = (NOW + 10) * MS) -> None:
    for name in names:
        await store.register_node(name, f"127.0.0.1:{7000 + len(name)}", KEY, until, NOW * MS)


async def test_a_dead_nodes_matches_are_taken_over_once_and_a_live_one_never(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        await _nodes(store, "a", "b", "c")
        await store.create_match(
            "0" * 32, RULES, "blind", ALICE, BOB, NOW, status="playing", node="a"
        )
        await store.create_match(
            "1" * 32, RULES, "blind", BOB, CAROL, NOW, status="playing", node="b"
        )
        assert await store.take_over("c", NOW * MS) == []  # every lease still runs
        await store.release_lease("a")  # a graceful stop
        # b and c look at the same moment: one of them takes a's match, the other nothing.
        got: list[list[tuple[str, list[object]]]] = []

        async def sweep(name: str) -> None:
            got.append(await store.take_over(name, NOW * MS))  # type: ignore[arg-type]

        async with trio.open_nursery() as n:
            n.start_soon(sweep, "b")
            n.start_soon(sweep, "c")
        taken = [t for result in got for t in result]
        assert [(dead, [r.id for r in rows]) for dead, rows in taken] == [("a", ["0" * 32])]
        assert [n.name for n in await store.nodes()] == ["b", "c"]
        row = await store.match_node("0" * 32)
        assert row is not None and row[1] == "playing" and row[0] in ("b", "c")
        # A node that lost its lease cannot renew it: it must stop refereeing.
        assert not await store.renew_lease("a", (NOW + 20) * MS)
        assert await store.renew_lease("b", (NOW + 20) * MS)


async def test_nodes_of_one_store_share_one_key(db: str) -> None:
    async with Store.open(db) as store:
        await _nodes(store, "a")
        with pytest.raises(StoreError, match="another key"):
            await store.register_node("b", "127.0.0.1:1", OTHER_KEY, (NOW + 10) * MS, NOW * MS)
        await store.release_lease("a")  # a node long gone does not bind the others
        await store.register_node("b", "127.0.0.1:1", OTHER_KEY, (NOW + 10) * MS, NOW * MS)


async def test_a_quick_entry_is_paired_once_never_with_itself_nor_a_dead_node(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        await _nodes(store, "a", "b", "c")
        entry = await store.queue_put("a", ALICE, DIGEST, "blind", NOW)
        # Alice's own other session, and a player of the same node, do not take it.
        assert await store.queue_pair("b", ALICE, DIGEST, "blind", "2" * 32, RULES, NOW) is None
        assert await store.queue_pair("a", BOB, DIGEST, "blind", "2" * 32, RULES, NOW) is None
        assert await store.queue_pair("b", BOB, DIGEST, "custody", "2" * 32, RULES, NOW) is None
        paired = await store.queue_pair("b", BOB, DIGEST, "blind", "2" * 32, RULES, NOW)
        assert paired is not None and (paired.entry, paired.node, paired.player) == (
            entry,
            "a",
            ALICE,
        )
        assert (paired.match.seat0, paired.match.seat1, paired.match.status) == (
            ALICE,
            BOB,
            "playing",
        )
        assert await store.queue_pair("c", CAROL, DIGEST, "blind", "3" * 32, RULES, NOW) is None
        assert not await store.queue_drop(entry)  # a: its player was taken, a handoff waits
        (handoff,) = await store.take_handoffs("a")
        assert (handoff.player, handoff.match_id, handoff.entry, handoff.node) == (
            ALICE,
            "2" * 32,
            entry,
            "b",
        )
        assert await store.take_handoffs("a") == []  # each handoff is taken once
        # An entry of a node whose lease ran out is no partner.
        await store.queue_put("c", CAROL, DIGEST, "blind", NOW)
        await store.release_lease("c")
        assert await store.queue_pair("b", BOB, DIGEST, "blind", "4" * 32, RULES, NOW) is None


async def test_what_a_crashed_node_left_waiting_is_gone_when_it_comes_back(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        await _nodes(store, "a")
        await store.queue_put("a", ALICE, DIGEST, "blind", NOW)
        await store.create_match("5" * 32, RULES, "blind", BOB, None, NOW, node="a", invite="XY")
        await _nodes(store, "a")  # the same node, a new process
        await _nodes(store, "b")
        assert await store.queue_pair("b", BOB, DIGEST, "blind", "6" * 32, RULES, NOW) is None
        assert await store.open_matches() == []
        assert await store.invited_match("XY") is None


async def test_an_open_match_is_joined_from_another_node_once(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        await _nodes(store, "a", "b", "c")
        mid = "7" * 32
        await store.create_match(
            mid, RULES, "custody", ALICE, None, NOW, node="a", invite="INV", movable=True
        )
        assert [r.id for r in await store.open_matches()] == [mid]
        assert await store.invited_match("INV") == mid
        results: list[object] = []

        async def join(node: str, player: str) -> None:
            try:
                results.append(await store.join_open(mid, player, node, NOW))
            except StoreError as e:
                results.append(e)

        async with trio.open_nursery() as n:
            n.start_soon(join, "b", BOB)
            n.start_soon(join, "c", CAROL)
        joined = [r for r in results if isinstance(r, tuple)]
        assert len(joined) == 1 and len(results) == 2  # the other is refused: not open
        (handoff,) = await store.take_handoffs("a")
        assert handoff.player == ALICE and handoff.entry is None
        # A host who does not follow redirects is joined on its own node only.
        await store.create_match("8" * 32, RULES, "blind", ALICE, None, NOW, node="a")
        with pytest.raises(StoreError, match="only be joined on node a"):
            await store.join_open("8" * 32, BOB, "b", NOW)


async def test_a_host_cancelling_does_not_abort_a_match_another_node_just_joined(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        await _nodes(store, "a", "b")
        mid = "9" * 32
        await store.create_match(mid, RULES, "blind", ALICE, None, NOW, node="a", movable=True)
        await store.join_open(mid, BOB, "b", NOW)  # b joins as alice's node lets her go
        await store.abort_match(mid, NOW, if_open=True)
        assert await store.match_node(mid) == ("b", "playing")


async def test_a_team_match_fills_once_across_nodes_and_its_members_are_found(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL, DAVE)
        await _nodes(store, "a", "b", "c")
        mid = "2" * 32
        await store.create_match(
            mid, RULES, "custody", ALICE, None, NOW, node="a", team_invites=("T0", "T1")
        )
        assert await store.team_invite("T1") == (mid, 1)
        bob = await store.team_join(mid, BOB, 0, "b", 2, NOW)
        assert (bob.team, bob.members, bob.host_node) == (0, None, "a")
        with pytest.raises(Conflict):
            await store.team_join(mid, CAROL, 0, "c", 2, NOW)  # alice and bob fill team 0
        with pytest.raises(ValueError):
            await store.team_join(mid, BOB, 1, "b", 2, NOW)  # in the match already
        await store.team_join(mid, CAROL, None, "c", 2, NOW)  # the smaller team: 1
        last = await store.team_join(mid, DAVE, 1, "b", 2, NOW)
        assert last.members is not None
        assert [(t.player, t.team, t.member) for t in last.members] == [
            (ALICE, 0, 0), (BOB, 0, 1), (CAROL, 1, 0), (DAVE, 1, 1)
        ]  # fmt: skip
        row = await store.get_match(mid)
        assert row is not None and (row.status, row.seat1, row.node) == ("playing", CAROL, "a")
        # The join came on b: the host's node a starts it, c sends carol there; b's own are
        # b's to send (no handoff to itself).
        assert [(h.player, h.node) for h in await store.take_handoffs("c")] == [(CAROL, "a")]
        assert [h.player for h in await store.take_handoffs("a")] == [ALICE]
        assert await store.take_handoffs("b") == []
        # A member who is not a captain finds the match from any other node.
        assert [m for m, *_ in await store.elsewhere(DAVE, "c", NOW * MS)] == [mid]


async def test_a_dead_hosts_open_team_match_is_withdrawn_from_its_waiting_members(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        await _nodes(store, "a", "b")
        mid = "3" * 32
        await store.create_match(
            mid, RULES, "custody", ALICE, None, NOW, node="a", team_invites=("U0", "U1")
        )
        await store.team_join(mid, BOB, None, "b", 2, NOW)
        await store.release_lease("a")
        await store.take_over("b", NOW * MS)
        # bob, waiting on b, is handed the news there: the match is not playing.
        (h,) = await store.take_handoffs("b")
        assert h.player == BOB and h.match_id == mid
        status = await store.match_node(mid)
        assert status is not None and status[1] == "aborted"
        assert await store.team_invite("U1") is None
