"""Several server nodes on one store (PostgreSQL): leases, pairing across nodes, redirects and
failover (``spec/protocol.md`` 4.10).

Theory of operation. PostgreSQL is the coordinator; there is no other channel between nodes.

* **Leases.** A node registers itself (``nodes``: its name, the address players reach it at, its
  key) with a lease of ``lease`` seconds, renewed every ``lease / 4``. All nodes sign with one key
  (the cluster key: records and tickets); a node that finds another live node with another key
  refuses to start. A planned stop ends the lease at once, so the matches move without waiting.
* **Failover.** Every ``sweep`` seconds a node looks for leases that ended: in one transaction it
  locks such a node's row (``FOR UPDATE SKIP LOCKED``: two live nodes never take the same dead
  one), makes its running matches its own under new ownership epochs and deletes the row; then it
  replays their journals (:meth:`~.lobby_state.LobbyState.take_up`), as a restart would. A node
  sweeps only once the store has answered it for a whole lease (:meth:`Cluster.may_sweep`):
  after an outage every lease looks ended, and the live nodes renew theirs first.
* **Fencing.** Every write for a running match (journal rows, its record, its result, its
  rating, its abort) is checked in its own transaction against the match's node and epoch
  (``Fence``): a node that stalled past its lease (a pause, a long GC, a store outage) and wakes
  cannot write into a match another node took over. A fenced write makes the node let go of the
  match at once and quietly (nothing sent, nothing aborted; its players are redirected to the
  node that has it). Before a journal batch a node makes sure its lease holds
  (:meth:`Cluster.confirm`): one that wakes past it renews first, and releases nothing before.
* **Nothing ends a node.** A node that cannot reach the store keeps trying, says so on
  ``/healthz/ready`` (503, :attr:`Cluster.problem`) and holds what its matches caused until the
  store takes it (``journal``: the matches stand still meanwhile). One that finds its lease taken
  lets go of the matches it lost (:meth:`~.lobby.Lobby.lease_lost`), registers again and goes
  on with the rest.
* **Pairing.** A quick request that finds no partner on its own node pairs with the oldest entry
  another node put in the shared queue for the same rules (``queue_pair``); if there is none, the
  request waits on its node and, when its player follows redirects (capability ``redirect``), in
  the shared queue too (put there in the transaction that looked, which no other such transaction
  runs beside: two players asking on two nodes at once are paired). Open matches and invitations
  are in the store: a player of any node joins one whose host follows redirects. Either way the
  match runs on the node that made the pairing, and the player waiting elsewhere is handed off
  (``handoffs``, polled every ``poll`` seconds by a node with someone waiting): its node answers
  its request and sends it ``redirect``.
* **Redirects.** ``redirect{match, ticket, sig}`` carries a ticket (``protocol.ticket``)
  signed with the cluster key: the player, the match, the node and its address, an expiry. A
  player who authenticates on a node while a match of its runs on another is redirected there
  too (after a failover, its old node is gone). The node it reaches checks the ticket on
  ``redeem``; its seat is given back on ``auth`` as on any node (seats belong to players).

Why polling and not LISTEN/NOTIFY: psycopg's notifications need a connection of their own per
node held in a thread, and the waiting players are few (a poll costs one indexed read, and only
while someone waits); BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol.ticket import Ticket, issue_ticket

from .store import POOL_WAIT, Store
from .store_cluster import Handoff

__all__ = ["Cluster", "ClusterConfig", "LeaseUnconfirmed", "Node"]

_log = logging.getLogger("seabattle.server.cluster")


@dataclass(frozen=True)
class ClusterConfig:
    """A node's place in a cluster: its name, the address players reach it at, and timings."""

    node: str
    addr: str = ""  #: ``host:port`` sent in tickets (empty: the address the node is bound to)
    lease: float = 10.0  #: seconds a node's matches are its own without renewal
    poll: float = 0.05  #: seconds between looks for handoffs, while someone waits
    sweep: float = 1.0  #: seconds between looks for nodes whose lease ended
    ticket_life: int = 60  #: seconds a redirect ticket is valid


class Node(Protocol):
    """What the cluster asks of this node's lobby."""

    def handed_off(self, handoffs: list[Handoff]) -> None:
        """Send the players the handoffs name to their matches on other nodes."""

    async def sweep(self) -> None:
        """Take over the matches of every node whose lease ended."""

    async def lease_lost(self) -> None:
        """This node's lease was taken: let go of what other nodes took over."""

    async def rejoined(self) -> None:
        """This node registered again after its lease was taken."""


SLOW = 0.5
"""Seconds a renewal may wait for the store before the node says the store does not answer."""

RENEW_EVERY = 0.5
"""Seconds between renewals at most (a quarter of the lease if that is shorter)."""


class LeaseUnconfirmed(Exception):
    """This node cannot tell that its lease still holds (it stalled past it, or the store is
    away): nothing it caused may be sent until it can."""


class Cluster:
    """This node's lease, its handoff poll and its failover sweep; see the module docstring.

    ``wall()`` is wall-clock seconds (the lobby's :class:`~.journal.Clock`, so that tests may run
    it in virtual time). :attr:`problem` says why the node takes no players now (``None``: it
    does); it clears by itself once the store answers again.
    """

    def __init__(
        self,
        store: Store,
        key: Ed25519PrivateKey,
        config: ClusterConfig,
        wall: Callable[[], float],
    ) -> None:
        self.store = store
        self.key = key
        self.config = config
        self.node = config.node
        self.wall = wall
        self._waiting = 0  # players of this node waiting for a handoff: the poll runs only then
        self._wake = trio.Event()
        self._started = 0  #: wall-clock ms of this node's registration (which renewals name)
        self._held_until = 0.0  #: wall-clock seconds until which the lease is known to hold
        #: wall-clock seconds since which the store has answered without a break (``None``: it
        #: does not answer now)
        self._store_ok_since: float | None = None
        #: wall-clock seconds of the store's last answer to a renewal
        self._answered_at = 0.0
        # How long the store must have answered before this node sweeps (see may_sweep).
        self._sweep_after = config.lease
        self._problem: str | None = None
        #: wall-clock seconds since which a renewal waits for the store (``None``: none does)
        self._asking_since: float | None = None
        self.losses = 0  #: how many times this node found its lease taken
        self._renewing = trio.Lock()
        self._node: Node | None = None

    @property
    def problem(self) -> str | None:
        """Why this node takes no players now, or ``None``: the store did not answer its last
        renewal, or has kept one waiting for over :data:`SLOW` seconds, or its lease was taken
        and it has not registered again yet."""
        if self._problem is not None:
            return self._problem
        asking = self._asking_since
        if asking is not None and self.wall() - asking > SLOW:
            return f"the store has not answered for {self.wall() - asking:.1f} s"
        return None

    def _lease_end(self) -> int:
        return int((self.wall() + self.config.lease) * 1000)

    async def register(self) -> None:
        """Announce this node; before it takes up its own matches, so that no other node takes
        them meanwhile (a node whose lease runs is not taken over)."""
        public = self.key.public_key().public_bytes_raw()
        now = int(self.wall() * 1000)
        end = now + int(self.config.lease * 1000)
        await self.store.register_node(self.node, self.config.addr, public, end, now)
        self._started, self._held_until = now, end / 1000
        self._store_ok_since = self._answered_at = now / 1000
        _log.info("node %s registered at %s", self.node, self.config.addr)

    def ticket(self, player: str, match: bytes, node: str, addr: str) -> tuple[bytes, bytes]:
        """A signed ticket sending ``player`` to ``match`` on ``node`` at ``addr``."""
        expires = int(self.wall()) + self.config.ticket_life
        return issue_ticket(self.key, Ticket(player, match, node, addr, expires))

    def waits(self, delta: int) -> None:
        """A player of this node started (+1) or stopped (-1) waiting to be handed off."""
        self._waiting = max(0, self._waiting + delta)
        if self._waiting:
            self._wake.set()

    async def run(self, node: Node, *, task_status: trio.TaskStatus[None]) -> None:
        """Renew the lease, poll for handoffs, sweep for nodes to take over, until cancelled.
        Nothing the store does ends it: a node that cannot reach the store, or finds its lease
        taken, says so (:attr:`problem`) and comes back by itself."""
        self._node = node
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew)
            nursery.start_soon(self._poll, node)
            nursery.start_soon(self._sweep, node)
            task_status.started()

    async def confirm(self) -> None:
        """Return once this node's lease is known to hold now; raise :class:`LeaseUnconfirmed`
        if it cannot be (the store is away, or the lease was taken). The journal awaits it
        before each batch: a node that wakes from a stall longer than its lease renews first,
        and so releases nothing it caused before it knows that it still referees."""
        if self.wall() < self._held_until:
            return
        if not await self.renew():
            raise LeaseUnconfirmed(self._problem or "this node's lease is not confirmed")

    async def renew(self) -> bool:
        """Renew the lease now; whether it holds. A lease found taken is dealt with here: the
        lobby lets go of what other nodes took over, and the node registers again."""
        async with self._renewing:
            if self.wall() < self._held_until - self.config.lease + self._every() / 2:
                return True  # renewed by another task a moment ago
            end = self._lease_end()
            self._asking_since = self.wall()
            try:
                held = await self.store.renew_lease(self.node, end, self._started)
                if not held:
                    # Taken: what this node still holds is let go of and it registers again,
                    # after which its lease holds (raised: the store broke off meanwhile).
                    await self._lost()
                    return True
            except Exception as e:  # the store is away: try again soon; never give up
                if self._store_ok_since is not None or self._problem is None:
                    _log.warning("node %s: cannot renew its lease: %s", self.node, e)
                self._store_ok_since = None
                self._problem = "cannot reach the store: " + " ".join(str(e).split())[:200]
                return False
            finally:
                self._asking_since = None
            now = self.wall()
            silent, self._answered_at = now - self._answered_at, now
            # A store that was frozen (SIGSTOP, a paused VM, an I/O stall) fails no call: they
            # all return late. Silent for half a lease, it was away as surely as one that
            # refused: the other nodes' leases may look ended too, and they must renew first.
            if self._store_ok_since is None or silent > self.config.lease / 2:
                self._store_ok_since = now
                # Back from an outage: every other live node renews too, but one whose renewal
                # was waiting for a pooled connection when the store came back gets its answer
                # (a failure) up to POOL_WAIT later, and renews one round after that.
                self._sweep_after = max(self.config.lease, POOL_WAIT + 2 * self._every())
                _log.warning("node %s: the store answers again (after %.1f s)", self.node, silent)
            self._held_until = end / 1000
            self._problem = None
            return True

    async def _lost(self) -> None:
        """The lease was taken (another node swept this one): let go, then register again."""
        self.losses += 1
        self._problem = "its lease was taken: rejoining the cluster"
        _log.critical(
            "node %s: its lease is gone (another node took its matches over): it lets go of"
            " them and registers again",
            self.node,
        )
        if self._node is not None:
            await self._node.lease_lost()
        await self.register()
        self._problem = None
        if self._node is not None:
            await self._node.rejoined()

    def _every(self) -> float:
        """Seconds between two renewals."""
        return min(self.config.lease / 4, RENEW_EVERY)

    async def _renew(self) -> None:
        while True:
            # Often enough that an outage shows on /healthz/ready within a second or so, even
            # while no match writes (one indexed UPDATE of one row).
            await trio.sleep(self._every())
            try:
                await self.renew()
            except Exception:  # registering again failed (the store blinked): next round
                _log.exception("node %s: renewing its lease failed", self.node)

    async def _poll(self, node: Node) -> None:
        while True:
            if not self._waiting:
                self._wake = trio.Event()
                await self._wake.wait()
            try:
                found = await self.store.take_handoffs(self.node)
            except Exception as e:  # the store is away: the players wait a little longer
                _log.warning("node %s: cannot look for handoffs: %s", self.node, e)
                found = []
            if found:
                node.handed_off(found)
            await trio.sleep(self.config.poll)

    def may_sweep(self) -> bool:
        """Whether this node may take others over now: its own lease holds, and the store has
        answered it for a whole lease. After an outage every node's lease looks ended; a node
        that waits a lease first lets the live ones renew theirs, so that only the dead are
        taken over, and no match moves because of the outage alone. A live node's renewal may
        have been waiting for a pooled connection when the store came back, and fails up to
        ``POOL_WAIT`` later: after an outage the wait is at least that and two renewals (a node
        taken over for it would have its open matches withdrawn, for nothing)."""
        ok = self._store_ok_since
        now = self.wall()
        return ok is not None and now < self._held_until and now - ok >= self._sweep_after

    async def _sweep(self, node: Node) -> None:
        while True:
            await trio.sleep(self.config.sweep)
            if not self.may_sweep():
                continue
            try:
                await node.sweep()
            except Exception:
                _log.exception("node %s: failover sweep failed", self.node)

    async def release(self) -> None:
        """End the lease now (a planned stop): other nodes take the matches over at once."""
        with trio.move_on_after(2):
            await self.store.release_lease(self.node)
