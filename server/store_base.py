"""What every part of `Store` stands on: the connection each call borrows, the worker thread it
runs in, and the blocking helpers that run there (the theory of operation is in ``store``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast

import trio

from .schema import Connection, Cursor, Dialect, Fenced, NotFound
from .store_rows import _MATCH_COLS, Fence, MatchRow, _match

__all__ = ["StoreBase"]

_T = TypeVar("_T")


def _op_name(fn: Callable[..., Any]) -> str:
    """``upsert_player`` for ``PlayerStore.upsert_player.<locals>.run``: every method's blocking
    body is a local function of the method, so its qualified name names the method (whichever
    part of `Store` defines it)."""
    parts = str(getattr(fn, "__qualname__", "?")).split(".")
    # A shared private body (``_end_match``: finish and abort) is named without its underscore.
    return (parts[-3] if len(parts) > 2 and parts[-2] == "<locals>" else parts[-1]).lstrip("_")


def _in_transaction(conn: Connection) -> bool:
    if isinstance(conn, sqlite3.Connection):
        return conn.in_transaction
    # psycopg: info.transaction_status is IDLE (0) outside a transaction.
    return bool(cast(Any, conn).info.transaction_status)


class StoreBase:
    """The connections, their threads and the blocking helpers, shared by the parts of `Store`."""

    def __init__(
        self,
        connection: Callable[[], AbstractContextManager[Connection]],
        dialect: Dialect,
        limiter: trio.CapacityLimiter,
        on_call: Callable[[str, float], None] | None = None,
    ) -> None:
        """Wrap a source of open, migrated connections (``connection()`` lends one for the length
        of a ``with`` block) no busier than ``limiter`` allows; use `Store.open`, not this."""
        self._connection = connection
        self._dialect = dialect
        self._limiter = limiter
        self._closed = False
        self._on_call = on_call
        self._local = threading.local()
        self._on_match_end: list[Callable[[str], None]] = []

    def on_match_end(self, callback: Callable[[str], None]) -> None:
        """Have ``callback`` called (in the event loop) with a match's id once its end (finished
        or aborted) is committed by this store: the journal file lets go of the match's rows."""
        self._on_match_end.append(callback)

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise trio.ClosedResourceError("the store is closed")
        if self._on_call is None:
            return await trio.to_thread.run_sync(self._call, fn, *args, limiter=self._limiter)
        # Wall time, not trio's clock: the cost is in a thread, which a test's virtual clock
        # does not see (and may jump across while it waits).
        start = time.perf_counter()
        try:
            return await trio.to_thread.run_sync(self._call, fn, *args, limiter=self._limiter)
        finally:
            self._on_call(_op_name(fn), time.perf_counter() - start)

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """In the worker thread: run ``fn`` with a connection borrowed for the whole call."""
        with self._connection() as conn:
            self._local.conn = conn
            try:
                return fn(*args)
            finally:
                self._local.conn = None

    # Blocking helpers; they only ever run inside _run, in the thread that borrowed `_conn`.

    @property
    def _conn(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            raise RuntimeError("the store's connection is only lent inside Store._run")
        return conn

    def _exec(self, cur: Cursor, query: str, params: Sequence[Any] = ()) -> Cursor:
        cur.execute(self._dialect.sql(query), params)
        return cur

    def _one(self, query: str, params: Sequence[Any]) -> Any:
        cur = self._conn.cursor()
        try:
            return self._exec(cur, query, params).fetchone()
        finally:
            cur.close()

    def _all(self, query: str, params: Sequence[Any]) -> list[Any]:
        cur = self._conn.cursor()
        try:
            return self._exec(cur, query, params).fetchall()
        finally:
            cur.close()

    @contextmanager
    def _transaction(self) -> Iterator[Cursor]:
        conn = self._conn
        cur = conn.cursor()
        try:
            cur.execute(self._dialect.begin_write)
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                # A failed COMMIT (e.g. busy) leaves the transaction open; end it either way. A
                # connection that broke cannot; the error that broke it is the one to see.
                if _in_transaction(conn):
                    with contextlib.suppress(Exception):
                        cur.execute("ROLLBACK")
                raise
        finally:
            cur.close()

    # Shared by every part that changes a match or what hangs off it (records, ratings).

    def _match_for_update(self, cur: Cursor, match_id: str, fence: Fence | None = None) -> MatchRow:
        """The match row, locked for the rest of the transaction; with ``fence``, `Fenced`
        unless the fence's node still referees it under the fence's epoch."""
        row = self._exec(
            cur,
            f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?{self._dialect.lock_rows}",
            (match_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no match {match_id!r}")
        match = _match(row)
        if fence is not None and (match.node, match.epoch) != (fence.node, fence.epoch):
            raise Fenced(
                f"match {match_id} is node {match.node}'s (epoch {match.epoch}), not"
                f" {fence.node}'s (epoch {fence.epoch})"
            )
        return match
