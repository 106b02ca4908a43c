"""The matches: the part of `Store` that creates, starts and ends them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from .schema import Conflict, Cursor, NotFound
from .store_rows import _MATCH_COLS, Fence, MatchRow, MatchStatus, _check_match_id, _json, _match
from .store_teams import TeamStore

__all__ = ["MatchStore"]


class MatchStore(TeamStore):
    """Matches and their life (a part of `Store`)."""

    async def create_match(
        self,
        match_id: str,
        rules: bytes,
        mode: str,
        seat0: str,
        seat1: str | None,
        now: int,
        *,
        status: MatchStatus = "open",
        node: str | None = None,
        public: bool = True,
        invite: str | None = None,
        movable: bool = False,
        team_invites: tuple[str, str] | None = None,
    ) -> MatchRow:
        """Store a new match; its seats must be known players. Raises `Conflict` on a reused id
        (or invitation).

        ``node``: the server node that referees it (:meth:`running_matches`), or hosts it while
        it is open; ``public``: listed; ``invite``: its invitation code; ``movable``: its host
        follows redirects, so a player of another node may join it (``store_cluster``);
        ``team_invites``: a team match's invitation to each team, joined on any node
        (``store_teams``)."""
        _check_match_id(match_id)
        if status not in ("open", "playing"):
            raise ValueError(f"a new match is open or playing, not {status!r}")
        if seat1 is not None and seat1 == seat0:
            raise ValueError("a player cannot take both seats")

        def run() -> MatchRow:
            with self._transaction() as cur:
                self._require_players(cur, [p for p in (seat0, seat1) if p is not None])
                inserted = self._exec(
                    cur,
                    "INSERT INTO matches (id, rules, mode, seat0, seat1, status, created, node,"
                    " public, invite, movable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING",
                    (
                        match_id,
                        bytes(rules),
                        mode,
                        seat0,
                        seat1,
                        status,
                        now,
                        node,
                        int(public),
                        invite,
                        int(movable),
                    ),
                ).rowcount
                if not inserted:
                    raise Conflict(f"match {match_id} already exists")
                if team_invites is not None:
                    self._open_team(cur, match_id, seat0, team_invites, node)
                row = self._exec(
                    cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                ).fetchone()
            return _match(row)

        return await self._run(run)

    def _require_players(self, cur: Cursor, ids: Sequence[str]) -> None:
        for player_id in ids:
            if (
                self._exec(cur, "SELECT 1 FROM players WHERE id = ?", (player_id,)).fetchone()
                is None
            ):
                raise NotFound(f"no player {player_id!r}")

    async def start_match(
        self, match_id: str, seat1: str | None = None, *, node: str | None = None
    ) -> MatchRow:
        """Move an open match to playing, filling the second seat if ``seat1`` is given;
        ``node`` referees it."""

        def run() -> MatchRow:
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id)
                if match.status != "open":
                    raise Conflict(f"match {match_id} is {match.status}, not open")
                if seat1 is not None:
                    if match.seat1 is not None:
                        raise Conflict(f"match {match_id} already has a second seat")
                    if seat1 == match.seat0:
                        raise ValueError("a player cannot take both seats")
                    self._require_players(cur, [seat1])
                new_seat1 = match.seat1 if seat1 is None else seat1
                if new_seat1 is None:
                    raise Conflict(f"match {match_id} cannot start with an empty seat")
                self._exec(
                    cur,
                    "UPDATE matches SET status = 'playing', seat1 = ?, node = ? WHERE id = ?",
                    (new_seat1, node, match_id),
                )
                row = self._exec(
                    cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                ).fetchone()
            return _match(row)

        return await self._run(run)

    async def finish_match(
        self, match_id: str, result: Any, now: int, *, fence: Fence | None = None
    ) -> None:
        """Mark the match finished with ``result`` (any JSON value).

        Finishing again with the same result does nothing, so a retry after a crash is safe; a
        different result, or finishing an aborted match, raises `Conflict`. ``fence``: only if
        that node still referees it under that epoch (`Fenced` otherwise).
        """
        await self._end_match(match_id, "finished", _json(result), now, fence=fence)

    async def abort_match(
        self,
        match_id: str,
        now: int,
        reason: str | None = None,
        *,
        if_open: bool = False,
        fence: Fence | None = None,
    ) -> None:
        """Mark an open or playing match aborted (not rated; ``reason``, if given, is kept as its
        result ``{"aborted": reason}``); repeating is harmless. ``if_open``: only a match still
        open (a host cancelling, while a player of another node may be joining it). ``fence``:
        only if that node still referees it under that epoch (`Fenced` otherwise)."""
        result = None if reason is None else _json({"aborted": reason})
        await self._end_match(match_id, "aborted", result, now, if_open=if_open, fence=fence)

    async def _end_match(
        self,
        match_id: str,
        status: MatchStatus,
        result: str | None,
        now: int,
        *,
        if_open: bool = False,
        fence: Fence | None = None,
    ) -> None:
        def run() -> bool:  # whether the match has ended now
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id, fence)
                if if_open and match.status != "open":
                    # joined meanwhile: it runs, on the node that joined it
                    return match.status != "playing"
                if match.status in ("open", "playing"):
                    self._exec(
                        cur,
                        "UPDATE matches SET status = ?, result = ?, finished = ? WHERE id = ?",
                        (status, result, now, match_id),
                    )
                    # The journal served to resume the match; its record (if any) holds the rest.
                    self._exec(cur, "DELETE FROM journal WHERE match_id = ?", (match_id,))
                    return True
                # Compare canonical texts: JSON null and "no result" are different things.
                old = _json(match.result) if match.status == "finished" else None
                if match.status != status or (status == "finished" and old != result):
                    raise Conflict(f"match {match_id} is already {match.status}")
                return True

        if await self._run(run):
            for callback in self._on_match_end:
                callback(match_id)

    async def get_match(self, match_id: str) -> MatchRow | None:
        """Return the match, or None if there is no such match."""

        def run() -> MatchRow | None:
            row = self._one(f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,))
            return None if row is None else _match(row)

        return await self._run(run)

    async def list_matches(
        self, status: MatchStatus | None = None, limit: int = 100
    ) -> list[MatchRow]:
        """Return up to ``limit`` matches with the given status (any if None), oldest first."""
        if status is not None and status not in get_args(MatchStatus):
            raise ValueError(f"unknown match status {status!r}")

        def run() -> list[MatchRow]:
            if status is None:
                rows = self._all(
                    f"SELECT {_MATCH_COLS} FROM matches ORDER BY created, id LIMIT ?", (limit,)
                )
            else:
                rows = self._all(
                    f"SELECT {_MATCH_COLS} FROM matches WHERE status = ?"
                    " ORDER BY created, id LIMIT ?",
                    (status, limit),
                )
            return [_match(r) for r in rows]

        return await self._run(run)
