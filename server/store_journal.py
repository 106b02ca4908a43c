"""The journal of running matches and the resume tokens: the part of `Store` a restart reads.

A running match's journal (``server/journal.py``) is appended in batches, read whole when the
server starts again, and dropped when the match ends (its record then holds what matters). Resume
tokens are kept as SHA-256 hashes: a stolen database gives no token that resumes anything.

A server alone on a SQLite database appends its rows to a file of its own instead
(``server/journal_file.py``); :meth:`JournalStore.import_journal_files` moves sealed segments'
rows of running matches into ``journal`` and removes them (on start and stop, and while the server
runs only when the segments kept grow past their bound). Nodes of a cluster on SQLite write the rows
to ``journal_log`` (schema 6), in the order they are stored, with no index
to update: one page at the table's end per batch, where ``journal``'s ``(match_id, n)`` index took
one page per match in the batch. :meth:`JournalStore.compact_journal` moves the log's rows of
running matches into ``journal`` in bulk (sorted, so that each index page is written once per
chunk, not once per batch) and drops the rest: at bot speed most rows belong to matches that have
ended by then, and are never copied. Reading a journal compacts first, in the same transaction,
so ``journal`` alone answers. PostgreSQL writes to ``journal`` directly (its identity values are
not in commit order, so a prefix of the log could not be moved safely while others insert).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .journal_file import FileMoved, read_frames
from .schema import Cursor
from .store_base import StoreBase
from .store_rows import _MATCH_COLS, Fence, MatchRow, _check_match_id, _match

__all__ = ["COMPACT_CHUNK", "JournalGap", "JournalStore", "fenced_ids", "token_hash"]

COMPACT_CHUNK = 2048
"""Rows of ``journal_log`` moved per transaction: a few milliseconds of holding the write lock."""


_ROWS_A_STATEMENT = 256
"""Journal rows stored by one ``INSERT`` (three parameters a row: far below either engine's
bound)."""


class JournalGap(Exception):
    """A running match's journal misses an entry (a journal file lost it): it cannot be replayed."""


def fenced_ids(
    execute: Callable[[str, Sequence[Any]], Any], fences: Mapping[str, Fence]
) -> frozenset[str]:
    """In a write transaction (``execute`` runs one statement with ``?`` placeholders): the ids
    of the matches of ``fences`` that their fence's node no longer referees under its epoch."""
    if not fences:
        return frozenset()
    ids = sorted(fences)
    marks = ", ".join("?" * len(ids))
    rows = execute(
        f"SELECT id, node, epoch FROM matches WHERE id IN ({marks}) AND status = 'playing'", ids
    ).fetchall()
    owned = {r[0] for r in rows if Fence(r[1], int(r[2])) == fences[r[0]]}
    return frozenset(i for i in ids if i not in owned)


def token_hash(token: bytes) -> bytes:
    """What the store keeps of a resume token."""
    return hashlib.sha256(b"seabattle/v1/resume\x00" + token).digest()


class JournalStore(StoreBase):
    """Journals of running matches and resume tokens (a part of `Store`)."""

    async def append_journal(
        self, rows: Sequence[tuple[str, int, bytes]], fences: Mapping[str, Fence] | None = None
    ) -> frozenset[str]:
        """Store journal ``rows`` (match id, entry number, entry) in one transaction.

        ``fences``: the rows of a match named there are stored only if its fence still holds
        (its node referees it under that epoch), checked in the same transaction, which holds
        those match rows until it commits (a takeover waits for it, and then replays what it
        wrote). Returns the ids of the matches whose rows were not stored for that."""
        table = "journal_log" if self._dialect.name == "sqlite" else "journal"
        share = self._dialect.share_rows

        def run() -> frozenset[str]:
            with self._transaction() as cur:
                fenced: frozenset[str] = frozenset()
                if fences:
                    fenced = fenced_ids(
                        lambda q, p: self._exec(cur, q + " ORDER BY id" + share, p), fences
                    )
                keep = rows if not fenced else [r for r in rows if r[0] not in fenced]
                # Statements of many rows, not executemany: psycopg pipelines that, and a node
                # stopped (SIGSTOP) in the middle of a pipeline leaves its session neither idle
                # nor done, holding its locks past idle_in_transaction_session_timeout for as
                # long as it is stopped, and the takeover that must fence it waits on them.
                for at in range(0, len(keep), _ROWS_A_STATEMENT):
                    chunk = keep[at : at + _ROWS_A_STATEMENT]
                    marks = ", ".join(["(?, ?, ?)"] * len(chunk))
                    self._exec(
                        cur,
                        f"INSERT INTO {table} (match_id, n, entry) VALUES {marks}",
                        [v for row in chunk for v in row],
                    )
            return fenced

        return await self._run(run)

    async def compact_journal(self, chunk: int = COMPACT_CHUNK) -> bool:
        """Move up to ``chunk`` of the oldest rows of ``journal_log`` into ``journal`` (those of
        matches still open or playing; the others are dropped), in one transaction; whether any
        are left. Nothing to do on PostgreSQL."""
        if self._dialect.name != "sqlite":
            return False

        def run() -> bool:
            with self._transaction() as cur:
                return self._compact(cur, chunk)

        return await self._run(run)

    def _compact(self, cur: Cursor, chunk: int | None) -> bool:
        """In a write transaction: move ``chunk`` rows of the log (all if ``None``)."""
        lo, hi = cur.execute("SELECT MIN(id), MAX(id) FROM journal_log").fetchone()
        if lo is None:
            return False
        upto = hi if chunk is None else min(hi, lo + chunk - 1)
        # OR IGNORE: an entry already in the journal (only a second process refereeing the same
        # match could have written one twice) keeps the one stored first.
        cur.execute(
            "INSERT OR IGNORE INTO journal (match_id, n, entry)"
            " SELECT l.match_id, l.n, l.entry FROM journal_log AS l WHERE l.id <= ? AND EXISTS"
            " (SELECT 1 FROM matches AS m WHERE m.id = l.match_id"
            " AND m.status IN ('open', 'playing'))"
            " ORDER BY l.match_id, l.n",
            (upto,),
        )
        cur.execute("DELETE FROM journal_log WHERE id <= ?", (upto,))
        return bool(upto < hi)

    async def import_journal_files(self, paths: Sequence[str]) -> FileMoved:
        """Move the rows of sealed journal files (``journal_file``) of matches still open or
        playing into ``journal``, durably and in one transaction, then remove the files. A
        missing file holds nothing."""

        def run() -> FileMoved:
            rows: list[tuple[str, int, bytes]] = []
            problems: list[str] = []
            found = []
            for path in paths:
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except FileNotFoundError:
                    continue
                found.append(path)
                got, wrong = read_frames(data)
                rows += got
                problems += [f"{os.path.basename(path)}: {w}" for w in wrong]
            if not found:
                return FileMoved(0, [], frozenset())
            conn = self._conn
            # The files are removed once their rows are in the database: they must be on the disk
            # by then, not only in the WAL's page cache, or a power cut could lose both.
            conn.execute("PRAGMA synchronous=FULL")
            try:
                with self._transaction() as cur:  # holding the write lock: no match ends meanwhile
                    running = {
                        r[0]
                        for r in cur.execute(
                            "SELECT id FROM matches WHERE status IN ('open', 'playing')"
                        ).fetchall()
                    }
                    # Sorted, each index page is written once however many files the rows came
                    # from (the table is ordered by match, the files by time).
                    cur.executemany(
                        "INSERT OR IGNORE INTO journal (match_id, n, entry) VALUES (?, ?, ?)",
                        sorted(r for r in rows if r[0] in running),
                    )
            finally:
                conn.execute("PRAGMA synchronous=NORMAL")
            for path in found:
                os.unlink(path)
            return FileMoved(len(rows), problems, frozenset(running))

        return await self._run(run)

    async def journal(self, match_id: str) -> list[bytes]:
        """The journal of ``match_id``, in order (empty if it has none); :class:`JournalGap` if
        an entry is missing."""
        _check_match_id(match_id)
        query = "SELECT n, entry FROM journal WHERE match_id = ? ORDER BY n"

        def run() -> list[bytes]:
            if self._dialect.name != "sqlite":
                rows = self._all(query, (match_id,))
            else:
                with self._transaction() as cur:  # the log first: all of it, then one read
                    self._compact(cur, None)
                    rows = cur.execute(query, (match_id,)).fetchall()
            for want, (n, _) in enumerate(rows):
                if n != want:
                    raise JournalGap(f"entry {want} of the journal is missing")
            return [bytes(r[1]) for r in rows]

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
