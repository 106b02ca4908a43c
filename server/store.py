"""Persistence for the server: players, matches, signed records and the rating ladder.

Theory of operation
-------------------
`Store` is the only way the server touches the database. Its API is async (trio); each method is
one blocking function that runs whole in a worker thread (`trio.to_thread.run_sync`) on a
connection it borrows for the call, behind a `trio.CapacityLimiter` as wide as there are
connections. A task cancelled while its statement runs waits for the thread to finish, so a
transaction is never cut in half.

Two backends. SQLite (a file path, the default; ``":memory:"`` for tests) has one sqlite3
connection and a limiter of one: that is what makes sharing the connection between threads safe,
and it makes each method atomic with respect to the others. PostgreSQL (a ``postgresql://`` URL,
for several server nodes on one database) uses psycopg 3's blocking API (its async API is asyncio
only) and a `psycopg_pool.ConnectionPool`, so several transactions run at once, here and on other
nodes: each method is written to be correct under that, with its rows locked
(`Dialect.lock_rows`) before they are read to be changed, in one order, or with a single statement
that cannot race (``INSERT ... ON CONFLICT``).

The store never reads the clock for what it stores: every timestamp (integer unix seconds) comes
from the caller, so tests and replays are deterministic. It only times its own calls, for the
``on_call`` hook the server's metrics use.

Signed records are written once and never change (`Store.put_record`); the signatures added later
(players co-signing the referee's record) go to ``record_sigs``, one row per role, each checked
against the stored record's head before it is kept (`Store.add_signature`). `Store.get_record`
returns the stored signed record with every added signature appended, so the signed body stays
byte-for-byte what was first stored while its signatures grow.

The SQL is written once for SQLite and PostgreSQL; what differs between the two (`Dialect`), the
migrations and their runner are in ``schema``, and run when the store opens. A database that
cannot be opened (a missing folder, an unreachable server, a wrong URL or password, a schema
newer than this code) is a `StoreError` whose message is one line, naming the database without
its password.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import trio

from .schema import (
    COSIGNED_SLOTS,
    MIGRATIONS,
    POSTGRES,
    SQLITE,
    BadSignature,
    Conflict,
    Dialect,
    Fenced,
    NotFound,
    StoreError,
    migrate,
)
from .store_cluster import ClusterStore
from .store_journal import JournalStore
from .store_matches import MatchStore
from .store_players import PlayerStore
from .store_records import RecordStore
from .store_rows import Fence, MatchRow, MatchStatus, PlayerRow, RatingChange, RecordRow

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

_log = logging.getLogger("seabattle.server.store")

_T = TypeVar("_T")

__all__ = [
    "COSIGNED_SLOTS",
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "BadSignature",
    "Conflict",
    "Dialect",
    "Fence",
    "Fenced",
    "MatchRow",
    "MatchStatus",
    "NotFound",
    "PlayerRow",
    "RatingChange",
    "RecordRow",
    "Store",
    "StoreError",
    "stored",
    "transient",
]

#: Seconds a call waits for a pooled PostgreSQL connection before it fails (and is retried by
#: its caller). A call made while the store was away may return this long after it is back,
#: which the cluster's sweep waits out (``Cluster.may_sweep``).
POOL_WAIT = 5.0

#: Seconds a PostgreSQL statement waits for a row (or advisory) lock before it fails, as a
#: transient error that its caller retries like a store that is away. A lock is held for a few
#: milliseconds by a transaction that runs; one held longer is held by a session that does not
#: finish (one whose client stopped mid-statement), and a call that waited for ever would keep
#: its pooled connection and worker thread: four such and the node renews no lease, writes no
#: journal and cannot even learn that its matches were taken over.
LOCK_WAIT = 10.0


def transient(err: BaseException) -> bool:
    """Whether ``err`` says the store is away for a while (unreachable, restarting, out of disk
    space, busy), so that the same call may succeed later, rather than that the call itself is
    wrong: a journal batch that failed so is written again, not given up."""
    if isinstance(err, sqlite3.OperationalError | OSError):
        return True
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return False
    if isinstance(err, psycopg.OperationalError):
        return True
    # The server ended the session's transaction itself, and with it the connection: a store
    # frozen (SIGSTOP, a VM paused, an I/O stall) in the middle of a transaction finds, when it
    # thaws, that the transaction sat idle past idle_in_transaction_session_timeout. Nothing of
    # it was committed, so the same call may simply be made again.
    ended = (psycopg.errors.IdleInTransactionSessionTimeout, psycopg.errors.TransactionTimeout)
    return isinstance(err, ended)


async def stored(call: Callable[[], Awaitable[_T]], what: str) -> _T:
    """``call()`` (a write to the store), called again with back-off for as long as the store is
    away (:func:`transient`): a match that ended while the store blinked is recorded
    once it is back, not aborted. Any other error, `Fenced` among them, is raised."""
    backoff = 0.05
    warned = False
    while True:
        try:
            return await call()
        except Exception as err:
            if not transient(err):
                raise
            if not warned:
                _log.warning("%s waits for the store: %s", what, " ".join(str(err).split()))
                warned = True
        await trio.sleep(backoff)
        backoff = min(2 * backoff, 1.0)


def _connect_sqlite(path: str) -> sqlite3.Connection:
    # isolation_level=None: the store issues BEGIN/COMMIT itself, the module must not.
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        _wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Another process (a backup, an admin tool) may hold the lock for a moment.
        conn.execute("PRAGMA busy_timeout=5000")
        migrate(conn, SQLITE)
    except BaseException:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    # Turning a new file to WAL needs it alone, and SQLite does not wait for that (no busy
    # timeout): another process opening the new file at the same moment would make this fail.
    for attempt in range(50):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == 49:
                raise
            time.sleep(0.1)


def _open_sqlite(path: str) -> sqlite3.Connection:
    """`_connect_sqlite`, creating the file owner-only first, with errors as `StoreError`."""
    where = f"the SQLite database {path}"
    if path != ":memory:":
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise StoreError(f"cannot open {where}: there is no folder {folder}")
        try:
            # It will hold custody fleets and the secrets of running matches: 0600. SQLite
            # gives the -wal and -shm files it makes beside it the same mode.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        except OSError as e:
            raise StoreError(f"cannot create {where}: {e.strerror}") from None
    try:
        return _connect_sqlite(path)
    except StoreError as e:
        raise StoreError(f"{where}: {e}") from None
    except sqlite3.Error as e:
        raise StoreError(f"cannot open {where}: {_one_line(e)}") from None


def _open_postgres(url: str, size: int, app: str = "seabattle") -> ConnectionPool:
    """Check the database at ``url``, migrate it, and open a pool of ``size`` connections to it
    (autocommit: the store issues BEGIN and COMMIT itself) named ``app`` in the server's view
    (``pg_stat_activity``, its logs' ``%a``); errors as `StoreError`."""
    where = f"the PostgreSQL database {_redact(url)}"
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        from psycopg_pool import ConnectionPool
    except ImportError as e:
        raise StoreError(
            f"{where} needs psycopg and psycopg-pool ({e}): pip install 'seabattle[postgres]'"
        ) from None
    try:
        params = conninfo_to_dict(url)
        # libpq waits for an unreachable host forever by default.
        params.setdefault("connect_timeout", 10)
        params.setdefault("application_name", app)
        # A node stopped (SIGSTOP, a VM paused) in the middle of a transaction would hold its row
        # locks for as long as it is stopped, and the takeover that must fence it out would wait
        # on them: the server ends such a session after 5 s idle in a transaction, and the
        # stopped node finds its connection gone (a transient error) when it wakes.
        # And no statement waits for a lock longer than LOCK_WAIT.
        opts = "-c idle_in_transaction_session_timeout=5000"
        opts += f" -c lock_timeout={int(LOCK_WAIT * 1000)}"
        params["options"] = f"{params['options']} {opts}" if params.get("options") else opts
        conninfo = make_conninfo("", **params)
        # One connection first: it says clearly what is wrong, where a pool would only time out.
        with psycopg.connect(conninfo, autocommit=True) as conn:
            # Another node's migration is waited for, however long it takes.
            conn.execute("SET lock_timeout = 0")
            migrate(conn, POSTGRES)
        pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=size,
            kwargs={"autocommit": True},
            open=False,
            name="seabattle",
            # A connection that broke while the server was away (restarted, unreachable) is
            # found and replaced when it is lent, not by the call that borrowed it; and a call
            # waits for a connection 5 s at most, so that an outage shows as failed calls
            # (retried by their callers) rather than as calls that hang for half a minute.
            check=ConnectionPool.check_connection,
            timeout=POOL_WAIT,
            # The pool's own reconnection backs off exponentially (1, 2, 4, 8, 16 s...), so
            # after an outage of 15 s it would wait 16 s more; given up after 2 s, a connection
            # is made again on demand instead, when a call needs one (the journal asks every
            # second at most while it waits), and service is back as soon as the server is.
            reconnect_timeout=2.0,
        )
        try:
            pool.open(wait=True, timeout=30)
        except BaseException:
            pool.close()
            raise
    except StoreError as e:
        raise StoreError(f"{where}: {e}") from None
    except psycopg.Error as e:
        # libpq may quote the URL it could not parse: never with its password.
        message = _one_line(e).replace(url, _redact(url))
        for secret in _passwords(url):
            message = message.replace(secret, "***")
        raise StoreError(f"cannot open {where}: {message}") from None
    return pool


def _is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def _redact(url: str) -> str:
    """``url`` without its password (``postgresql://u:***@h/d``), to be shown in messages."""
    for secret in _passwords(url):
        url = url.replace(f":{secret}@", ":***@", 1).replace(f"={secret}", "=***")
    return url


def _passwords(url: str) -> list[str]:
    """The passwords ``url`` holds (``user:password@``, ``?password=``), however malformed."""
    rest = url.partition("://")[2]
    netloc = rest.partition("/")[0]
    auth, at, _ = netloc.rpartition("@")
    found = [auth.split(":", 1)[1]] if at and ":" in auth else []
    query = rest.partition("?")[2]
    found += [p[9:] for p in query.split("&") if p.lower().startswith("password=")]
    return [p for p in found if p]


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


class Store(PlayerStore, MatchStore, RecordStore, JournalStore, ClusterStore):
    """The server's database: players, matches, records, the ladder, and the journals of
    running matches (async, trio).

    Open it with ``async with Store.open(db) as store``; the connections close when the block
    ends. All methods may be called from any number of tasks at once.
    """

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        db: str | os.PathLike[str],
        *,
        on_call: Callable[[str, float], None] | None = None,
        pool_size: int = 4,
        app: str = "seabattle",
    ) -> AsyncIterator[Store]:
        """Open (creating and migrating if needed) the database ``db``: a SQLite file path, or a
        ``postgresql://`` (or ``postgres://``) URL.

        ``":memory:"`` gives a private in-memory SQLite database, for tests. On PostgreSQL up to
        ``pool_size`` calls run at once, each on its own pooled connection. ``on_call(method,
        seconds)``, if given, is told how long each call took, waiting for the thread included.
        ``app``: the name PostgreSQL shows for this store's connections (a node's own name, so
        that an operator can tell which node wrote what). Raises `StoreError` (a one-line
        message) if the database cannot be opened.
        """
        where = os.fspath(db)
        close: Callable[[], None]
        if _is_postgres(where):
            if pool_size < 1:
                raise ValueError(f"pool_size must be 1 or more, got {pool_size}")
            limiter = trio.CapacityLimiter(pool_size)
            pool = await trio.to_thread.run_sync(_open_postgres, where, pool_size, app)
            store = cls(pool.connection, POSTGRES, limiter, on_call)
            close = pool.close
        else:
            limiter = trio.CapacityLimiter(1)
            conn = await trio.to_thread.run_sync(_open_sqlite, where, limiter=limiter)
            store = cls(lambda: contextlib.nullcontext(conn), SQLITE, limiter, on_call)
            close = conn.close
        try:
            yield store
        finally:
            store._closed = True
            # Shielded: a cancelled owner must still close cleanly (checkpoint the WAL, tell the
            # PostgreSQL server goodbye).
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(close, limiter=limiter)
