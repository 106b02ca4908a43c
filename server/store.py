"""Persistence for the server: players, matches, signed records and the rating ladder.

Theory of operation
-------------------
`Store` is the only way the server touches the database. Its API is async (trio); each method is
one blocking function that runs whole in a worker thread (`trio.to_thread.run_sync`) behind a
`trio.CapacityLimiter` of one, on one sqlite3 connection. The limiter is what makes sharing that
connection between threads safe, and it also means each method is atomic with respect to the
others: a transaction never interleaves with another task's statements. A task cancelled while
its statement runs waits for the thread to finish, so a transaction is never cut in half.

The store never reads the clock for what it stores: every timestamp (integer unix seconds) comes
from the caller, so tests and replays are deterministic. It only times its own calls, for the
``on_call`` hook the server's metrics use.

Signed records are written once and never change (`Store.put_record`); the signatures added later
(players co-signing the referee's record) go to ``record_sigs``, one row per role, each checked
against the stored record's head before it is kept (`Store.add_signature`). `Store.get_record`
returns the stored signed record with every added signature appended, so the signed body stays
byte-for-byte what was first stored while its signatures grow.

The SQL is written once for SQLite and PostgreSQL; what differs between the two (`Dialect`), the
migrations and their runner are in ``schema``, and run when the store opens. Only the SQLite
backend is wired up today.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from .schema import (
    COSIGNED_SLOTS,
    MIGRATIONS,
    POSTGRES,
    SQLITE,
    BadSignature,
    Conflict,
    Dialect,
    NotFound,
    StoreError,
    migrate,
)
from .store_journal import JournalStore
from .store_matches import MatchStore
from .store_players import PlayerStore
from .store_records import RecordStore
from .store_rows import MatchRow, MatchStatus, PlayerRow, RatingChange, RecordRow

__all__ = [
    "COSIGNED_SLOTS",
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "BadSignature",
    "Conflict",
    "Dialect",
    "MatchRow",
    "MatchStatus",
    "NotFound",
    "PlayerRow",
    "RatingChange",
    "RecordRow",
    "Store",
    "StoreError",
]


def _connect_sqlite(path: str) -> sqlite3.Connection:
    # isolation_level=None: the store issues BEGIN/COMMIT itself, the module must not.
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Another process (a backup, an admin tool) may hold the lock for a moment.
        conn.execute("PRAGMA busy_timeout=5000")
        migrate(conn, SQLITE)
    except BaseException:
        conn.close()
        raise
    return conn


class Store(PlayerStore, MatchStore, RecordStore, JournalStore):
    """The server's database: players, matches, records, the ladder, and the journals of
    running matches (async, trio).

    Open it with ``async with Store.open(path) as store``; the connection closes when the block
    ends. All methods may be called from any number of tasks at once.
    """

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        on_call: Callable[[str, float], None] | None = None,
    ) -> AsyncIterator[Store]:
        """Open (creating and migrating if needed) the SQLite database at ``path``.

        ``":memory:"`` gives a private in-memory database, for tests. ``on_call(method,
        seconds)``, if given, is told how long each call took, waiting for the thread included.
        """
        limiter = trio.CapacityLimiter(1)
        conn = await trio.to_thread.run_sync(_connect_sqlite, os.fspath(path), limiter=limiter)
        store = cls(conn, SQLITE, limiter, on_call)
        try:
            yield store
        finally:
            store._closed = True
            # Shielded: a cancelled owner must still close the file cleanly (checkpoint the WAL).
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close, limiter=limiter)
