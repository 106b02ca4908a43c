"""Several server nodes on one store (PostgreSQL): leases, pairing across nodes, redirects and
failover (``spec/protocol.md`` 4.10).

Theory of operation. PostgreSQL is the coordinator; there is no other channel between nodes.

* **Leases.** A node registers itself (``nodes``: its name, the address players reach it at, its
  key) with a lease of ``lease`` seconds, renewed every ``lease / 4``. All nodes sign with one key
  (the cluster key: records and tickets); a node that finds another live node with another key
  refuses to start. A planned stop ends the lease at once, so the matches move without waiting.
* **Failover.** Every ``sweep`` seconds a node looks for leases that ended: in one transaction it
  locks such a node's row (``FOR UPDATE SKIP LOCKED``: two live nodes never take the same dead
  one), makes its running matches its own and deletes the row; then it replays their journals
  (:meth:`~.lobby_state.LobbyState.take_up`), as a restart would. A node that finds at renewal
  that its lease is gone (it stalled past it and was taken over) stops refereeing at once.
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

from .store import Store
from .store_cluster import Handoff

__all__ = ["Cluster", "ClusterConfig", "Node"]

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


class Cluster:
    """This node's lease, its handoff poll and its failover sweep; see the module docstring.

    ``wall()`` is wall-clock seconds (the lobby's :class:`~.journal.Clock`, so that tests may run
    it in virtual time). ``lost`` is set when this node finds its lease gone.
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
        self.lost = trio.Event()
        self._waiting = 0  # players of this node waiting for a handoff: the poll runs only then
        self._wake = trio.Event()

    def _lease_end(self) -> int:
        return int((self.wall() + self.config.lease) * 1000)

    async def register(self) -> None:
        """Announce this node; before it takes up its own matches, so that no other node takes
        them meanwhile (a node whose lease runs is not taken over)."""
        public = self.key.public_key().public_bytes_raw()
        now = int(self.wall() * 1000)
        await self.store.register_node(
            self.node, self.config.addr, public, now + int(self.config.lease * 1000), now
        )
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
        """Renew the lease, poll for handoffs, sweep for nodes to take over, until cancelled or
        the lease is lost."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew, nursery.cancel_scope)
            nursery.start_soon(self._poll, node)
            nursery.start_soon(self._sweep, node)
            task_status.started()

    async def _renew(self, scope: trio.CancelScope) -> None:
        held_until = self._lease_end() / 1000
        while True:
            await trio.sleep(self.config.lease / 4)
            try:
                end = self._lease_end()
                held = await self.store.renew_lease(self.node, end)
                if held:
                    held_until = end / 1000
            except Exception as e:  # the store is unreachable: try again, up to the lease's end
                held = self.wall() < held_until
                _log.warning("node %s: cannot renew its lease: %s", self.node, e)
            if not held:
                _log.critical(
                    "node %s: its lease is gone (another node may have taken its matches over):"
                    " it stops refereeing",
                    self.node,
                )
                self.lost.set()
                scope.cancel()
                return

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

    async def _sweep(self, node: Node) -> None:
        while True:
            await trio.sleep(self.config.sweep)
            try:
                await node.sweep()
            except Exception:
                _log.exception("node %s: failover sweep failed", self.node)

    async def release(self) -> None:
        """End the lease now (a planned stop): other nodes take the matches over at once."""
        with trio.move_on_after(2):
            await self.store.release_lease(self.node)
