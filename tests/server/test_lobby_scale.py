"""The lobby's per-connection work touches only what concerns the connection: a player who comes
back gets its own seats, a connection that ends frees only its own seats, watches, queue places,
offers and open matches, and the indexes that make this cheap forget matches once they are gone.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import FakePeer, place_msg, player_id, player_key
from seabattle.protocol import messages as m
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import load_record, verify_record
from seabattle.server.config import Limits
from seabattle.server.lobby import Lobby
from seabattle.server.referee import Referee
from seabattle.server.store import Store

RULES: dict[str, Any] = {"preset": "classic"}  # no shape keys: checked inline, no worker thread


@asynccontextmanager
async def _lobby(nursery: trio.Nursery, **limits: Any) -> AsyncIterator[tuple[Lobby, Store]]:
    # A frozen clock (mock_clock) keeps every match clock and grace period from running out
    # while the store works in its thread; the matches end by leaving, which needs no time.
    limits = {"create_rate": 1.0, "create_burst": 1_000, **limits}
    async with Store.open(":memory:") as store:
        yield Lobby(store, Ed25519PrivateKey.generate(), nursery, Limits(**limits)), store


async def _peer(store: Store, tag: str) -> FakePeer:
    peer = FakePeer(player_id(tag))
    await store.upsert_player(peer.player, peer.name, 0)
    return peer


async def _match(lobby: Lobby, host: FakePeer, guest: FakePeer) -> Referee:
    """A running match between ``host`` and ``guest`` (create, then join), both told ``start``."""
    await lobby.request(host, m.Create(1, RULES, "custody", True))
    mid = host.of(m.Ok)[-1].data["match"]
    assert mid in lobby._hosted[host]
    await lobby.request(guest, m.Join(2, mid, None))
    await trio.testing.wait_all_tasks_blocked()
    assert host.of(m.Start, mid) and guest.of(m.Start, mid)
    return lobby.running[mid]


async def _end(lobby: Lobby, peer: FakePeer, ref: Referee) -> None:
    """``peer`` leaves ``ref``, which ends the match; return once the lobby has filed it."""
    await lobby.request(peer, m.Leave(3, ref.match_id))
    await ref.done.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert ref.match_id not in lobby.running


def _sets(index: dict[Any, dict[Any, None]]) -> dict[Any, set[Any]]:
    return {k: set(v) for k, v in index.items()}


def _check_indexes(lobby: Lobby) -> None:
    """Every index says exactly what a scan of the lobby's matches would find."""
    present: dict[Any, set[Referee]] = {}
    for ref in [*lobby.running.values(), *lobby.finished.values()]:
        for p in [s.peer for s in ref.seats if s.peer is not None] + list(ref.spectators):
            present.setdefault(p, set()).add(ref)
    assert _sets(lobby._present) == present
    seated: dict[str, set[Referee]] = {}
    for ref in lobby.running.values():
        for s in ref.seats:
            seated.setdefault(s.player, set()).add(ref)
    assert _sets(lobby._seated) == seated
    hosted: dict[Any, set[bytes]] = {}
    for mid, om in lobby.open.items():
        hosted.setdefault(om.host, set()).add(mid)
    assert _sets(lobby._hosted) == hosted
    assert lobby._queued == {w.peer: key for key, w in lobby.quick_queue.items()}
    offered: dict[Any, set[bytes]] = {}
    for mid, offers in lobby.rematch_offers.items():
        for w in offers.values():
            offered.setdefault(w.peer, set()).add(mid)
    assert _sets(lobby._offered) == offered


async def test_a_disconnect_frees_only_its_own_seats_and_a_return_takes_them_back(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    async with _lobby(nursery) as (lobby, store):
        a, b, c = [await _peer(store, t) for t in "abc"]
        ab, ac = await _match(lobby, a, b), await _match(lobby, a, c)
        await lobby.request(b, m.Watch(4, ac.match_id))  # b plays in ab and watches ac
        _check_indexes(lobby)

        lobby.disconnected(b)
        assert ab.seats[1].peer is None
        assert ab.core.wake_at <= trio.current_time() + ab.rules.clocks.grace  # grace runs
        assert b not in ac.spectators
        assert [x.present for x in a.of(m.OpponentStatus)] == [False]
        assert a.of(m.OpponentStatus, ab.match_id) and not c.of(m.OpponentStatus)
        assert [s.peer for s in ac.seats] == [a, c] and ab.seats[0].peer is a
        _check_indexes(lobby)

        # Without its token, a player gets back only the seats nobody holds.
        b2 = await _peer(store, "b")
        lobby.authenticated(b2, resume=False)
        assert ab.seats[1].peer is b2 and [x.match for x in b2.of(m.Start)] == [ab.match_id]
        a2 = await _peer(store, "a")
        lobby.authenticated(a2, resume=False)
        assert a2.got == [] and ab.seats[0].peer is a and ac.seats[0].peer is a
        _check_indexes(lobby)

        # With it, every seat: the connection it replaces is closed and forgotten.
        lobby.authenticated(a2, resume=True)
        assert ab.seats[0].peer is a2 and ac.seats[0].peer is a2 and a.closed == "replaced"
        assert {x.match for x in a2.of(m.Start)} == {ab.match_id, ac.match_id}
        _check_indexes(lobby)
        assert a not in lobby._present
        before = len(c.got)
        lobby.disconnected(a)  # the replaced connection ends: the seats stay with a2
        assert ab.seats[0].peer is a2 and ac.seats[0].peer is a2 and len(c.got) == before

        # A disconnect also gives up the peer's open matches, quick place and rematch offers.
        await lobby.request(c, m.Create(5, RULES, "custody", False))
        await lobby.request(c, m.Quick(6, RULES, "blind"))
        await _end(lobby, a2, ab)
        await lobby.request(b2, m.Rematch(7, ab.match_id))
        assert lobby.open and lobby.quick_queue and lobby.rematch_offers[ab.match_id]
        _check_indexes(lobby)
        lobby.disconnected(c)
        lobby.disconnected(b2)
        await trio.testing.wait_all_tasks_blocked()
        assert not lobby.open and not lobby.quick_queue
        assert not lobby.rematch_offers[ab.match_id]
        assert ac.seats[1].peer is None and ab.seats[0].peer is a2
        _check_indexes(lobby)
        assert set(lobby._present) == {a2}
        await _end(lobby, a2, ac)  # before the store closes: an aborted match writes to it


async def test_finished_and_evicted_matches_leave_no_trace_in_the_indexes(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    kept = 3
    async with _lobby(nursery, finished_kept=kept) as (lobby, store):
        # Long-lived connections: what they played, watched and offered must not pile up.
        a, b, spy = [await _peer(store, t) for t in "abd"]
        gone: list[Referee] = []
        for i in range(4 * kept):
            if i % 4 == 3:
                # b takes up a's offer of a rematch of the last match: the offers are spent.
                last = gone[-1].match_id
                assert lobby.rematch_offers[last]  # a's, made when it ended
                await lobby.request(b, m.Rematch(8, last))
                mid = b.of(m.Ok)[-1].data["match"]
                await trio.testing.wait_all_tasks_blocked()
                ref = lobby.running[mid]
                assert last not in lobby.rematch_offers
            else:
                ref = await _match(lobby, a, b)
            await lobby.request(spy, m.Watch(9, ref.match_id))
            # a quick place that is replaced, then matched
            await lobby.request(a, m.Quick(10, RULES, "blind"))
            await lobby.request(a, m.Quick(11, RULES, "custody"))
            assert len(lobby.quick_queue) == 1
            _check_indexes(lobby)
            await _end(lobby, b, ref)
            await lobby.request(a, m.Rematch(12, ref.match_id))  # left pending
            gone.append(ref)
            _check_indexes(lobby)
            assert len(lobby._present[a]) <= kept + 1
        await lobby.request(b, m.Quick(13, RULES, "custody"))  # matches a's place
        await trio.testing.wait_all_tasks_blocked()
        assert not lobby.quick_queue and not lobby._queued
        quick = next(iter(lobby.running.values()))
        await lobby.request(spy, m.Watch(14, quick.match_id))
        await _end(lobby, a, quick)
        gone.append(quick)

        assert not lobby.running and not lobby._seated
        assert list(lobby.finished.values()) == gone[-kept:]
        _check_indexes(lobby)
        evicted = set(gone[:-kept])
        for index in (lobby._present, lobby._seated):
            assert not evicted & {ref for refs in index.values() for ref in refs}
        assert set(lobby._offered.get(a, {})) <= set(lobby.finished)
        assert len(lobby._present[spy]) == kept
        for p in (a, b, spy):
            lobby.disconnected(p)
        assert not (lobby._present or lobby._offered or lobby._hosted or lobby._queued)


async def test_a_finished_match_kept_in_memory_holds_no_games_and_is_still_cosigned(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    # What a server keeps of up to finished_kept matches must be small whatever the match was:
    # the games go (the record is in the store); who played, the rules and the head stay.
    async with _lobby(nursery) as (lobby, store):
        key = player_key("a")  # a real key: its co-signature is checked
        a = FakePeer(player_id("a"))
        await store.upsert_player(a.player, a.name, 0)
        b = await _peer(store, "b")
        ref = await _match(lobby, a, b)
        rules = ref.rules
        rng = random.Random(3)
        for seat, (p, tag) in enumerate(((a, "a"), (b, "b"))):
            fleet = tuple(random_fleet(rules, rng).to_list())
            msg = place_msg(ref.match_id, 1, fleet, rng.randbytes(32), seat, rules, tag)
            await lobby.game_message(p, msg)
        g = ref.game
        assert g is not None
        seq = 0
        while g.turn is not None:
            seq += 1
            shooter = (a, b)[g.turn]
            free = next(i for i in range(rules.cells) if i not in g.boards[1 - g.turn].fired)
            label = Cell(*divmod(free, rules.cols)).label()
            await lobby.game_message(shooter, m.Fire(ref.match_id, 1, (label,), 0, seq))
        await ref.done.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert lobby.finished[ref.match_id] is ref and ref.match.games == []
        head = a.of(m.MatchOver, ref.match_id)[0].head
        await lobby.game_message(a, m.CoSign(ref.match_id, head, key.sign(head)))
        row = await store.get_record(ref.match_id.hex(), 0)
        assert row is not None and verify_record(load_record(row.record)).ok
        assert {s["role"] for s in load_record(row.record)["sigs"]} == {"referee", "seat0"}
