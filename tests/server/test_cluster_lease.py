"""A node's lease through the faults that take it (``server/cluster.py``), on SQLite and
PostgreSQL, with the node's wall clock in the test's hands.

What an operator relies on: a node that wakes past its lease writes nothing before it has
renewed; one whose lease was taken lets go of what it lost, registers again and serves on (it
never exits); one that cannot reach the store says so and keeps trying; and after an outage no
node takes another over before the live ones have had a lease to renew.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.server.cluster import Cluster, ClusterConfig, LeaseUnconfirmed
from seabattle.server.store import POOL_WAIT, Store
from seabattle.server.store_cluster import Handoff

LEASE = 4.0
START = 1_800_000_000.0


class _Node:
    """The lobby's side, as the cluster calls it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def handed_off(self, handoffs: list[Handoff]) -> None:
        self.calls.append("handed_off")

    async def sweep(self) -> None:
        self.calls.append("sweep")

    async def lease_lost(self) -> None:
        self.calls.append("lease_lost")

    async def rejoined(self) -> None:
        self.calls.append("rejoined")


class _Away:
    """A store that is away: every call fails as an unreachable database does."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.away = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not self.away or not callable(attr):
            return attr

        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise sqlite3.OperationalError("unable to open database file")

        return fail


async def test_a_node_that_wakes_past_its_lease_renews_first_and_lets_go_if_taken(db: str) -> None:
    async with Store.open(db) as store:
        now = [START]
        key = Ed25519PrivateKey.generate()
        a = Cluster(store, key, ClusterConfig("a", "127.0.0.1:1", lease=LEASE), lambda: now[0])
        b = Cluster(store, key, ClusterConfig("b", "127.0.0.1:2", lease=LEASE), lambda: now[0])
        await a.register()
        await b.register()
        node = _Node()
        a._node = node
        await a.confirm()  # within its lease: nothing to ask
        assert a.problem is None and node.calls == []
        # a stalls for three leases; b, whose clock ran on, takes it over.
        now[0] += 3 * LEASE
        await b.renew()
        assert await store.take_over("b", int(now[0] * 1000))
        # a wakes: before writing anything it renews, finds its lease taken, lets go of what it
        # lost, registers again, and then its lease holds.
        await a.confirm()
        assert node.calls == ["lease_lost", "rejoined"]
        assert a.losses == 1 and a.problem is None
        assert {n.name for n in await store.nodes()} == {"a", "b"}


async def test_a_node_cut_off_from_its_store_says_so_and_comes_back_by_itself(db: str) -> None:
    async with Store.open(db) as real:
        now = [START]
        store = _Away(real)
        c = Cluster(
            store, Ed25519PrivateKey.generate(), ClusterConfig("c", lease=LEASE), lambda: now[0]
        )  # type: ignore[arg-type]
        await c.register()
        now[0] += LEASE  # time to renew; the store is not there
        store.away = True
        assert not await c.renew()
        assert c.problem is not None and "cannot reach the store" in c.problem
        now[0] += 2 * LEASE
        with pytest.raises(LeaseUnconfirmed):  # the journal holds its batch back
            await c.confirm()
        assert not c.may_sweep()
        # The store is back: the lease is renewed (nobody could take it meanwhile), and the node
        # is ready again at once, but sweeps others only after a whole lease of answers, and
        # at least as long as another live node's renewal may still have been waiting for a
        # pooled connection when the store came back (it then fails, and renews a round later).
        store.away = False
        await c.confirm()
        back = now[0]
        assert c.problem is None and not c.may_sweep()
        assert LEASE < POOL_WAIT + 1
        await _renew_until_it_may_sweep(c, now, back + POOL_WAIT + 1)  # two renewals more


async def _renew_until_it_may_sweep(c: Cluster, now: list[float], at: float) -> None:
    """Renew as the node's own task does (every 0.5 s) and check that ``c`` may sweep from
    wall-clock time ``at`` on, not before."""
    while now[0] < at:
        assert not c.may_sweep()
        now[0] = min(now[0] + 0.5, at)
        await c.renew()
    assert c.may_sweep()


class _Frozen:
    """A store that was frozen (SIGSTOP, a paused VM): the next renewal fails nothing, it
    returns ``seconds`` late."""

    def __init__(self, store: Store, now: list[float]) -> None:
        self.store = store
        self.now = now
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def renew_lease(self, *args: Any) -> bool:
        self.now[0] += self.seconds
        self.seconds = 0.0
        held: bool = await self.store.renew_lease(*args)
        return held


async def test_after_a_store_that_froze_no_node_sweeps_before_the_others_have_renewed(
    db: str,
) -> None:
    # A frozen store refuses nothing: every node's renewal just returns late, and every lease
    # looks ended when it thaws. The first node answered must not take the others over before
    # their own late renewals are in.
    async with Store.open(db) as real:
        now = [START]
        store = _Frozen(real, now)
        c = Cluster(
            store, Ed25519PrivateKey.generate(), ClusterConfig("c", lease=LEASE), lambda: now[0]
        )  # type: ignore[arg-type]
        await c.register()
        await _renew_until_it_may_sweep(c, now, now[0] + LEASE)  # a whole lease of answers
        store.seconds = 3 * LEASE
        now[0] += 0.5
        assert await c.renew()  # the next round's renewal, answered three leases late
        assert c.problem is None and not c.may_sweep()
        await _renew_until_it_may_sweep(c, now, now[0] + max(LEASE, POOL_WAIT + 1))
