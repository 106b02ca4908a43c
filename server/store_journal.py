"""The journal of running matches and the resume tokens: the part of `Store` a restart reads.

A running match's journal (``server/journal.py``) is appended in batches, read whole when the
server starts again, and dropped when the match ends (its record then holds what matters). Resume
tokens are kept as SHA-256 hashes: a stolen database gives no token that resumes anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .store_base import StoreBase
from .store_rows import _MATCH_COLS, MatchRow, _check_match_id, _match

__all__ = ["JournalStore", "token_hash"]


def token_hash(token: bytes) -> bytes:
    """What the store keeps of a resume token."""
    return hashlib.sha256(b"seabattle/v1/resume\x00" + token).digest()


class JournalStore(StoreBase):
    """Journals of running matches and resume tokens (a part of `Store`)."""

    async def append_journal(self, rows: Sequence[tuple[str, int, bytes]]) -> None:
        """Store journal ``rows`` (match id, entry number, entry) in one transaction."""

        def run() -> None:
            with self._transaction() as cur:
                cur.executemany(
                    self._dialect.sql("INSERT INTO journal (match_id, n, entry) VALUES (?, ?, ?)"),
                    rows,
                )

        await self._run(run)

    async def journal(self, match_id: str) -> list[bytes]:
        """The journal of ``match_id``, in order (empty if it has none)."""
        _check_match_id(match_id)

        def run() -> list[bytes]:
            rows = self._all("SELECT entry FROM journal WHERE match_id = ? ORDER BY n", (match_id,))
            return [bytes(r[0]) for r in rows]

        return await self._run(run)

    async def running_matches(self, node: str | None = None) -> list[MatchRow]:
        """Every match still ``playing`` (refereed by ``node``, or by no node in particular, if
        ``node`` is given): what a restart must take up again, oldest first."""

        def run() -> list[MatchRow]:
            params: tuple[str, ...]
            if node is None:
                where, params = "status = ?", ("playing",)
            else:
                where, params = "status = ? AND (node = ? OR node IS NULL)", ("playing", node)
            rows = self._all(
                f"SELECT {_MATCH_COLS} FROM matches WHERE {where} ORDER BY created, id", params
            )
            return [_match(r) for r in rows]

        return await self._run(run)

    async def drop_journal(self, match_id: str) -> None:
        """Forget the journal of a match that ended."""

        def run() -> None:
            with self._transaction() as cur:
                self._exec(cur, "DELETE FROM journal WHERE match_id = ?", (match_id,))

        await self._run(run)

    async def put_resume_token(self, player_id: str, token: bytes, now: int) -> None:
        """Keep (the hash of) ``player_id``'s resume token, replacing an older one."""

        def run() -> None:
            with self._transaction() as cur:
                # One statement, not a delete then an insert: two at once for one player (two
                # nodes, PostgreSQL) would both find nothing to delete, and one insert would fail.
                self._exec(
                    cur,
                    "INSERT INTO resume_tokens (hash, player, created) VALUES (?, ?, ?)"
                    " ON CONFLICT (player) DO UPDATE SET hash = excluded.hash,"
                    " created = excluded.created",
                    (token_hash(token), player_id, now),
                )

        await self._run(run)

    async def resume_player(self, token: bytes) -> str | None:
        """The player a resume token belongs to, or ``None``."""

        def run() -> str | None:
            row = self._one("SELECT player FROM resume_tokens WHERE hash = ?", (token_hash(token),))
            return None if row is None else str(row[0])

        return await self._run(run)
