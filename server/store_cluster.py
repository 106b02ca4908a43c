"""What the nodes that share one store share: their leases, the quick-match queue, open matches
and the handoffs that send a player to the node its match runs on (a part of `Store`; the theory
of operation is in ``server/cluster.py``).

Every claim is one transaction that first locks the rows it takes with the dialect's
``claim_rows`` (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite has one writer at a time), so two
nodes never take one row, and neither waits for the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schema import Conflict, Cursor, StoreError
from .store_base import StoreBase
from .store_rows import _MATCH_COLS, MatchRow, _match

__all__ = ["ClusterStore", "Handoff", "NodeRow", "OpenRow", "Paired"]


@dataclass(frozen=True)
class NodeRow:
    """A node as registered: its name, where players reach it, its key, and its lease."""

    name: str
    addr: str
    key: bytes
    lease_until: int  #: wall-clock milliseconds


@dataclass(frozen=True)
class Handoff:
    """``player``, waiting on this node, is to play ``match_id`` on another node; ``entry`` is
    its quick-queue entry (``None``: it hosted the open match ``match_id``)."""

    id: int
    player: str
    match_id: str
    entry: int | None
    node: str  #: the node that referees the match
    addr: str  #: where players reach it


@dataclass(frozen=True)
class Paired:
    """A quick-queue entry of another node, taken: its player now plays ``match`` here."""

    entry: int
    node: str
    player: str
    match: MatchRow


@dataclass(frozen=True)
class OpenRow:
    """An open public match, whichever node hosts it."""

    id: str
    rules: bytes
    mode: str
    host: str
    node: str | None


class ClusterStore(StoreBase):
    """Leases, the shared quick queue, open matches across nodes, handoffs (a part of `Store`)."""

    # -- nodes and leases -------------------------------------------------------------------------

    async def register_node(
        self, name: str, addr: str, key: bytes, lease_until: int, now: int
    ) -> None:
        """Announce node ``name`` at ``addr`` with its lease (wall-clock milliseconds, as
        ``now``); `StoreError` if a node whose lease runs at ``now`` signs with another key (one
        cluster, one key: records and tickets).

        What a previous process of the same node left waiting is gone with its connections: its
        quick-queue entries and handoffs are dropped, its open matches aborted."""

        def run() -> None:
            with self._transaction() as cur:
                other = self._exec(
                    cur,
                    "SELECT name FROM nodes WHERE key <> ? AND name <> ? AND lease_until > ?",
                    (key, name, now),
                ).fetchone()
                if other is not None:
                    raise StoreError(
                        f"node {other[0]!r} on this database signs with another key: the nodes"
                        " of one cluster share one --key file"
                    )
                self._exec(
                    cur,
                    "INSERT INTO nodes (name, addr, key, lease_until, started)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                    " addr = excluded.addr, key = excluded.key,"
                    " lease_until = excluded.lease_until, started = excluded.started",
                    (name, addr, key, lease_until, now),
                )
                for table in ("quick_queue", "handoffs"):
                    self._exec(cur, f"DELETE FROM {table} WHERE node = ?", (name,))
                self._exec(
                    cur,
                    "UPDATE matches SET status = 'aborted', finished = ?"
                    " WHERE status = 'open' AND node = ?",
                    (now // 1000, name),
                )

        await self._run(run)

    async def renew_lease(self, name: str, lease_until: int, started: int | None = None) -> bool:
        """Extend ``name``'s lease; ``False`` if it has none (another node took its matches).
        ``started``: only the registration made at that time (:meth:`register_node`'s ``now``),
        so that a process that lost its registration never renews another's."""

        def run() -> bool:
            with self._transaction() as cur:
                if started is None:
                    n = self._exec(
                        cur, "UPDATE nodes SET lease_until = ? WHERE name = ?", (lease_until, name)
                    ).rowcount
                else:
                    n = self._exec(
                        cur,
                        "UPDATE nodes SET lease_until = ? WHERE name = ? AND started = ?",
                        (lease_until, name, started),
                    ).rowcount
            return bool(n)

        return await self._run(run)

    async def claim_running(self, name: str) -> list[MatchRow]:
        """Make every running match that ``name`` referees (or no node in particular) ``name``'s
        under a new ownership epoch, and return them, oldest first: a restart taking up its own
        matches. A process of the same node that is still alive somewhere (stalled, not dead)
        is fenced off them by the new epoch."""

        def run() -> list[MatchRow]:
            with self._transaction() as cur:
                ids = [
                    r[0]
                    for r in self._exec(
                        cur,
                        "SELECT id FROM matches WHERE status = 'playing'"
                        " AND (node = ? OR node IS NULL) ORDER BY id" + self._dialect.lock_rows,
                        (name,),
                    ).fetchall()
                ]
                return self._move(cur, ids, name)

        return await self._run(run)

    def _move(self, cur: Cursor, ids: list[str], name: str) -> list[MatchRow]:
        """In a transaction that locked the match rows ``ids``: make them ``name``'s, each under
        its next epoch; the rows, oldest first."""
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        self._exec(
            cur,
            f"UPDATE matches SET node = ?, epoch = epoch + 1 WHERE id IN ({marks})",
            (name, *ids),
        )
        rows = self._exec(
            cur,
            f"SELECT {_MATCH_COLS} FROM matches WHERE id IN ({marks}) ORDER BY created, id",
            ids,
        ).fetchall()
        return [_match(r) for r in rows]

    async def owned(self, name: str, fences: dict[str, int]) -> set[str]:
        """Of the matches ``fences`` names (id -> epoch), those ``name`` still referees under
        that epoch, still running."""

        def run() -> set[str]:
            if not fences:
                return set()
            ids = sorted(fences)
            marks = ", ".join("?" * len(ids))
            rows = self._all(
                f"SELECT id, epoch FROM matches WHERE id IN ({marks}) AND node = ?"
                " AND status = 'playing'",
                (*ids, name),
            )
            return {r[0] for r in rows if int(r[1]) == fences[r[0]]}

        return await self._run(run)

    async def release_lease(self, name: str) -> None:
        """End ``name``'s lease now (a planned stop): other nodes take its matches at once."""

        def run() -> None:
            with self._transaction() as cur:
                self._exec(cur, "UPDATE nodes SET lease_until = 0 WHERE name = ?", (name,))

        await self._run(run)

    async def nodes(self) -> list[NodeRow]:
        """Every registered node, by name."""

        def run() -> list[NodeRow]:
            rows = self._all("SELECT name, addr, key, lease_until FROM nodes ORDER BY name", ())
            return [NodeRow(r[0], r[1], bytes(r[2]), r[3]) for r in rows]

        return await self._run(run)

    async def take_over(self, name: str, now: int) -> list[tuple[str, list[MatchRow]]]:
        """Take the running matches of every node whose lease ended before ``now``: they are
        ``name``'s now. Returns (the node, its matches) for each node taken over; that node's
        registration, queue entries and handoffs are gone, its open matches aborted."""

        def run() -> list[tuple[str, list[MatchRow]]]:
            taken: list[tuple[str, list[MatchRow]]] = []
            with self._transaction() as cur:
                if self._dialect.name == "postgresql":
                    # A stopped node may hold locks on its matches; the next sweep tries again.
                    self._exec(cur, "SET LOCAL lock_timeout = '5s'")
                dead = self._exec(
                    cur,
                    "SELECT name FROM nodes WHERE lease_until < ? AND name <> ? ORDER BY name"
                    + self._dialect.claim_rows,
                    (now, name),
                ).fetchall()
                for (node,) in dead:
                    # Locked in the order of their ids, as a journal batch locks them, and moved
                    # under new epochs: what the dead node may still try to write is fenced.
                    ids = [
                        r[0]
                        for r in self._exec(
                            cur,
                            "SELECT id FROM matches WHERE status = 'playing' AND node = ?"
                            " ORDER BY id" + self._dialect.lock_rows,
                            (node,),
                        ).fetchall()
                    ]
                    rows = self._move(cur, ids, name)
                    # Members waiting on other nodes for one of its team matches to fill are
                    # told it is gone (a handoff each, answered there: store_teams).
                    self._exec(
                        cur,
                        "INSERT INTO handoffs (node, player, match_id, entry, created)"
                        " SELECT t.node, t.player, t.match_id, NULL, ? FROM team_members t"
                        " JOIN matches m ON m.id = t.match_id WHERE m.status = 'open'"
                        " AND m.node = ? AND t.node IS NOT NULL AND t.node <> ?",
                        (now, node, node),
                    )
                    # Aborted, and the taker's from now on: the handoffs above find a live node.
                    self._exec(
                        cur,
                        "UPDATE matches SET status = 'aborted', finished = ?, node = ?"
                        " WHERE status = 'open' AND node = ?",
                        (now // 1000, name, node),
                    )
                    for table in ("quick_queue", "handoffs"):
                        self._exec(cur, f"DELETE FROM {table} WHERE node = ?", (node,))
                    self._exec(cur, "DELETE FROM nodes WHERE name = ?", (node,))
                    taken.append((node, rows))
            return taken

        return await self._run(run)

    async def elsewhere(
        self, player: str, name: str, now: int
    ) -> list[tuple[str, str, str | None]]:
        """(match id, node, address) of every running match of ``player`` that a node other than
        ``name`` referees; the address is ``None`` when that node's lease ended before ``now``
        (it is to be taken over)."""

        def run() -> list[tuple[str, str, str | None]]:
            rows = self._all(
                "SELECT m.id, m.node, n.addr, n.lease_until FROM matches m"
                " LEFT JOIN nodes n ON n.name = m.node"
                " WHERE m.status = 'playing' AND m.node <> ? AND (m.seat0 = ? OR m.seat1 = ?"
                # A team's members other than its captain (team play, store_teams).
                " OR m.id IN (SELECT match_id FROM team_members WHERE player = ?))"
                " ORDER BY m.created, m.id",
                (name, player, player, player),
            )
            return [(r[0], r[1], r[2] if r[3] is not None and r[3] > now else None) for r in rows]

        return await self._run(run)

    async def match_home(self, match_id: str, now: int) -> tuple[str, str] | None:
        """(the node that referees the running match ``match_id``, its address), if that node's
        lease runs at ``now`` (wall-clock milliseconds); else ``None``."""

        def run() -> tuple[str, str] | None:
            row = self._one(
                "SELECT m.node, n.addr FROM matches m JOIN nodes n ON n.name = m.node"
                " WHERE m.id = ? AND m.status = 'playing' AND n.lease_until > ?",
                (match_id, now),
            )
            return None if row is None else (str(row[0]), str(row[1]))

        return await self._run(run)

    async def match_node(self, match_id: str) -> tuple[str | None, str] | None:
        """(the node that referees ``match_id``, its status), or ``None`` for no such match."""

        def run() -> tuple[str | None, str] | None:
            row = self._one("SELECT node, status FROM matches WHERE id = ?", (match_id,))
            return None if row is None else (row[0], row[1])

        return await self._run(run)

    # -- the quick-match queue --------------------------------------------------------------------

    async def queue_put(self, node: str, player: str, digest: bytes, mode: str, now: int) -> int:
        """Queue ``player`` (waiting on ``node``) for rules ``digest`` and ``mode``; its entry."""

        def run() -> int:
            with self._transaction() as cur:
                return self._put(cur, node, player, digest, mode, now)

        return await self._run(run)

    async def queue_drop(self, entry: int) -> bool:
        """Take entry ``entry`` out of the queue; ``False`` if it was gone (another node paired
        its player: a handoff is on its way)."""

        def run() -> bool:
            with self._transaction() as cur:
                n = self._exec(cur, "DELETE FROM quick_queue WHERE id = ?", (entry,)).rowcount
            return bool(n)

        return await self._run(run)

    async def queue_pair(
        self,
        node: str,
        player: str,
        digest: bytes,
        mode: str,
        match_id: str,
        rules: bytes,
        now: int,
        *,
        or_queue: bool = False,
    ) -> Paired | int | None:
        """Pair ``player`` of ``node`` with the oldest entry of another node for the same rules
        (a node whose lease runs at ``now``, Unix seconds): the match ``match_id`` is created
        playing on ``node`` (the entry's player in seat 0) and the entry's node is handed its
        player. ``None`` if no such entry is free; with ``or_queue``, the player's new entry
        instead (:meth:`queue_put`), in the same transaction, which no other such transaction
        runs beside: of two players asking on two nodes at once, the second finds the first."""

        def run() -> Paired | int | None:
            with self._transaction() as cur:
                if or_queue and self._dialect.queue_lock:
                    self._exec(cur, self._dialect.queue_lock)
                row = self._exec(
                    cur,
                    "SELECT id, node, player FROM quick_queue WHERE digest = ? AND mode = ?"
                    " AND node <> ? AND player <> ?"
                    " AND node IN (SELECT name FROM nodes WHERE lease_until > ?)"
                    " ORDER BY id LIMIT 1" + self._dialect.claim_rows,
                    (digest, mode, node, player, now * 1000),
                ).fetchone()
                if row is None:
                    return self._put(cur, node, player, digest, mode, now) if or_queue else None
                entry, other, waiting = int(row[0]), str(row[1]), str(row[2])
                self._exec(cur, "DELETE FROM quick_queue WHERE id = ?", (entry,))
                self._exec(
                    cur,
                    "INSERT INTO matches (id, rules, mode, seat0, seat1, status, created, node,"
                    " public) VALUES (?, ?, ?, ?, ?, 'playing', ?, ?, 1)",
                    (match_id, rules, mode, waiting, player, now, node),
                )
                self._handoff(cur, other, waiting, match_id, entry, now)
                match = _match(
                    self._exec(
                        cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                    ).fetchone()
                )
            return Paired(entry, other, waiting, match)

        return await self._run(run)

    def _put(self, cur: Cursor, node: str, player: str, digest: bytes, mode: str, now: int) -> int:
        self._exec(
            cur,
            "INSERT INTO quick_queue (node, player, digest, mode, created) VALUES (?, ?, ?, ?, ?)",
            (node, player, digest, mode, now),
        )
        row = self._exec(
            cur,
            "SELECT MAX(id) FROM quick_queue WHERE node = ? AND player = ?",
            (node, player),
        ).fetchone()
        return int(row[0])

    # -- open matches and invitations -------------------------------------------------------------

    async def open_matches(self, limit: int = 100) -> list[OpenRow]:
        """The oldest ``limit`` open public matches, oldest first."""

        def run() -> list[OpenRow]:
            rows = self._all(
                "SELECT id, rules, mode, seat0, node FROM matches"
                " WHERE status = 'open' AND public = 1 ORDER BY created, id LIMIT ?",
                (limit,),
            )
            return [OpenRow(r[0], bytes(r[1]), r[2], r[3], r[4]) for r in rows]

        return await self._run(run)

    async def invited_match(self, invite: str) -> str | None:
        """The open match with invitation ``invite``, if any."""

        def run() -> str | None:
            row = self._one(
                "SELECT id FROM matches WHERE invite = ? AND status = 'open'", (invite,)
            )
            return None if row is None else str(row[0])

        return await self._run(run)

    async def join_open(
        self, match_id: str, player: str, node: str, now: int
    ) -> tuple[MatchRow, bool]:
        """Seat ``player`` in the open match ``match_id``, hosted on another node, and referee it
        on ``node``; the host's node is handed its host. Returns the match and whether it is
        public. `Conflict` if the match is not open, is hosted here, or its host does not follow
        redirects."""

        def run() -> tuple[MatchRow, bool]:
            with self._transaction() as cur:
                row = self._exec(
                    cur,
                    f"SELECT {_MATCH_COLS}, public, node, movable FROM matches WHERE id = ?"
                    + self._dialect.lock_rows,
                    (match_id,),
                ).fetchone()
                if row is None or row[5] != "open":
                    raise Conflict(f"match {match_id} is not open")
                public, host_node, movable = row[-3:]
                if host_node == node:
                    raise Conflict(f"match {match_id} is not open on this node")
                if not movable:
                    raise Conflict(f"match {match_id} can only be joined on node {host_node}")
                if row[3] == player:
                    raise ValueError("a player cannot take both seats")
                self._exec(
                    cur,
                    "UPDATE matches SET status = 'playing', seat1 = ?, node = ? WHERE id = ?",
                    (player, node, match_id),
                )
                if host_node is not None:
                    self._handoff(cur, host_node, row[3], match_id, None, now)
                out = self._exec(
                    cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                ).fetchone()
            return _match(out), bool(public)

        return await self._run(run)

    # -- handoffs ---------------------------------------------------------------------------------

    def _handoff(
        self, cur: Cursor, node: str, player: str, match_id: str, entry: int | None, now: int
    ) -> None:
        self._exec(
            cur,
            "INSERT INTO handoffs (node, player, match_id, entry, created) VALUES (?, ?, ?, ?, ?)",
            (node, player, match_id, entry, now),
        )

    async def take_handoffs(self, node: str) -> list[Handoff]:
        """The handoffs for ``node``'s players, removed from the store (each is taken once)."""

        def run() -> list[Handoff]:
            # Polled often and nearly always empty: a plain read first, a write only for rows.
            if not self._all("SELECT 1 FROM handoffs WHERE node = ? LIMIT 1", (node,)):
                return []
            with self._transaction() as cur:
                rows = self._exec(
                    cur,
                    "SELECT id, player, match_id, entry FROM handoffs WHERE node = ? ORDER BY id"
                    + self._dialect.claim_rows,
                    (node,),
                ).fetchall()
                out = []
                for r in rows:
                    self._exec(cur, "DELETE FROM handoffs WHERE id = ?", (r[0],))
                    where = self._exec(
                        cur,
                        "SELECT m.node, n.addr FROM matches m JOIN nodes n ON n.name = m.node"
                        " WHERE m.id = ?",
                        (r[2],),
                    ).fetchone()
                    if where is not None:  # else the match's node is gone: nowhere to send
                        out.append(Handoff(int(r[0]), r[1], r[2], _int(r[3]), *where))
            return out

        return await self._run(run)


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))
