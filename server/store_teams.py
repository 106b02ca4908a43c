"""Team matches on a cluster (spec 6.8, 4.10): their invitations and members, shared by every
node (a part of `Store`).

A team match is refereed by the node that hosts it (its host does not move). Its members may
join on any node: each join is one transaction that locks the match's row and counts the teams,
so two members joining the last place on two nodes at once cannot both take it. The join that
fills both teams starts the match in the store (``playing``, the captains in ``seat0``/``seat1``)
and, in the same transaction, hands every member waiting on a third node, and the host's node if
it is not the joining one, a ``handoffs`` row: the host's node then starts the match, and the
others send their members there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schema import Conflict, Cursor
from .store_base import StoreBase

__all__ = ["TeamJoin", "TeamMember", "TeamStore"]


@dataclass(frozen=True)
class TeamMember:
    """``player`` is member ``member`` of team ``team`` (0: its captain), waiting on ``node``."""

    player: str
    team: int
    member: int
    node: str | None


@dataclass(frozen=True)
class TeamJoin:
    """A join taken: the team it went to; once both teams are full, every member (by team,
    then member), and where the host's node is."""

    team: int
    members: tuple[TeamMember, ...] | None
    host_node: str
    host_addr: str | None


class TeamStore(StoreBase):
    """Team invitations and members across nodes (a part of `Store`)."""

    def _open_team(
        self, cur: Cursor, match_id: str, host: str, invites: tuple[str, str], node: str | None
    ) -> None:
        """Inside ``create_match``'s transaction: the host as member 0 of team 0, and each
        team's invitation."""
        self._exec(
            cur,
            "INSERT INTO team_members (match_id, player, team, member, node)"
            " VALUES (?, ?, 0, 0, ?)",
            (match_id, host, node),
        )
        for team, code in enumerate(invites):
            inserted = self._exec(
                cur,
                "INSERT INTO team_invites (code, match_id, team) VALUES (?, ?, ?)"
                " ON CONFLICT (code) DO NOTHING",
                (code, match_id, team),
            ).rowcount
            if not inserted:
                raise Conflict(f"invitation {code} is in use")

    async def team_invite(self, code: str) -> tuple[str, int] | None:
        """(the open match, the team) that invitation ``code`` joins, if any."""

        def run() -> tuple[str, int] | None:
            row = self._one(
                "SELECT t.match_id, t.team FROM team_invites t JOIN matches m ON m.id = t.match_id"
                " WHERE t.code = ? AND m.status = 'open'",
                (code,),
            )
            return None if row is None else (str(row[0]), int(row[1]))

        return await self._run(run)

    async def team_join(
        self, match_id: str, player: str, team: int | None, node: str, size: int, now: int
    ) -> TeamJoin:
        """Put ``player`` (waiting on ``node``) in team ``team`` of the open team match
        ``match_id`` (``None``: the smaller team, team 1 on a tie), each team ``size`` strong.

        `Conflict` when the match is not open or the team is full; `ValueError` when the player
        is in the match already. When this join fills both teams, the match is playing on the
        host's node, its captains stored, and the handoffs are written (module docstring)."""

        def run() -> TeamJoin:
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id)
                if match.status != "open" or match.node is None:
                    raise Conflict(f"match {match_id} is not open")
                members = self._members(cur, match_id)
                if any(t.player == player for t in members):
                    raise ValueError("you are in this match already")
                sizes = [sum(1 for t in members if t.team == k) for k in (0, 1)]
                chosen = team if team is not None else (0 if sizes[0] < sizes[1] else 1)
                if sizes[chosen] >= size:
                    raise Conflict(f"team {chosen} is full")
                known = self._exec(cur, "SELECT 1 FROM players WHERE id = ?", (player,))
                if known.fetchone() is None:
                    raise Conflict(f"no player {player}")
                number = max((t.member for t in members if t.team == chosen), default=-1) + 1
                self._exec(
                    cur,
                    "INSERT INTO team_members (match_id, player, team, member, node)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (match_id, player, chosen, number, node),
                )
                addr = self._exec(
                    cur, "SELECT addr FROM nodes WHERE name = ?", (match.node,)
                ).fetchone()
                host_addr = None if addr is None else str(addr[0])
                sizes[chosen] += 1
                if sizes != [size, size]:
                    return TeamJoin(chosen, None, match.node, host_addr)
                full = self._members(cur, match_id)
                captain1 = next(t.player for t in full if t.team == 1)
                self._exec(
                    cur,
                    "UPDATE matches SET status = 'playing', seat1 = ? WHERE id = ?",
                    (captain1, match_id),
                )
                told = {node, match.node}
                for t in full:
                    if t.node is not None and t.node not in told:
                        self._exec(
                            cur,
                            "INSERT INTO handoffs (node, player, match_id, entry, created)"
                            " VALUES (?, ?, ?, NULL, ?)",
                            (t.node, t.player, match_id, now),
                        )
                if match.node != node:
                    # The host's node starts the match (its host and its own members are there).
                    self._exec(
                        cur,
                        "INSERT INTO handoffs (node, player, match_id, entry, created)"
                        " VALUES (?, ?, ?, NULL, ?)",
                        (match.node, match.seat0, match_id, now),
                    )
            return TeamJoin(chosen, tuple(full), match.node, host_addr)

        return await self._run(run)

    async def team_leave(self, match_id: str, player: str) -> bool:
        """``player`` gives up its place in the open team match ``match_id`` (it left, or its
        session ended); whether it had one. Nothing changes once the match has started."""

        def run() -> bool:
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id)
                if match.status != "open" or match.seat0 == player:
                    return False
                gone = self._exec(
                    cur,
                    "DELETE FROM team_members WHERE match_id = ? AND player = ?",
                    (match_id, player),
                ).rowcount
            return bool(gone)

        return await self._run(run)

    async def team_withdrawn(self, match_id: str, node: str, now: int) -> None:
        """The host's node ``node`` withdrew the team match ``match_id`` (ended while open):
        a handoff to every node where a member waits, which tells it so."""

        def run() -> None:
            with self._transaction() as cur:
                for t in self._members(cur, match_id):
                    if t.node is not None and t.node != node:
                        self._exec(
                            cur,
                            "INSERT INTO handoffs (node, player, match_id, entry, created)"
                            " VALUES (?, ?, ?, NULL, ?)",
                            (t.node, t.player, match_id, now),
                        )

        await self._run(run)

    async def team_members(self, match_id: str) -> list[TeamMember]:
        """Every member of the team match ``match_id``, by team, then member (captains first)."""

        def run() -> list[TeamMember]:
            with self._transaction() as cur:
                return self._members(cur, match_id)

        return await self._run(run)

    def _members(self, cur: Cursor, match_id: str) -> list[TeamMember]:
        rows = self._exec(
            cur,
            "SELECT player, team, member, node FROM team_members WHERE match_id = ?"
            " ORDER BY team, member",
            (match_id,),
        ).fetchall()
        return [TeamMember(str(r[0]), int(r[1]), int(r[2]), r[3]) for r in rows]
