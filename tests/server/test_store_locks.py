"""The PostgreSQL store never waits for ever on a lock (``server/store.py``, ``LOCK_WAIT``).

A row lock held by a session that does not finish (its client stopped in the middle of a
statement) would keep every statement that needs the row waiting, and with it a pooled
connection and a worker thread for each: a node whose lease renewals wait so cannot serve, nor
learn that its matches were taken over. Past ``LOCK_WAIT`` such a statement fails as the store
being away (`transient`), which its caller retries; the lock gone, the same call goes through.
And a test that waits on a lock all the same fails, saying on what (``helpers_watchdog``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from seabattle.server import store as store_module
from seabattle.server.store import Store, transient

KEY = b"k" * 32
NOW_MS = 1_800_000_000_000


@asynccontextmanager
async def _node_row_locked(store: Store, url: str) -> AsyncIterator[Any]:
    """Node a registered, and a session that locks its row and then does nothing more: it never
    commits (it is closed when the block ends, or sooner by its user)."""
    import psycopg

    await store.register_node("a", "127.0.0.1:7001", KEY, NOW_MS + 10_000, NOW_MS)
    holder = await trio.to_thread.run_sync(psycopg.connect, url)
    try:
        await trio.to_thread.run_sync(
            holder.execute, "UPDATE nodes SET addr = addr WHERE name = 'a'"
        )
        yield holder
    finally:
        await trio.to_thread.run_sync(holder.close)


async def test_a_lock_held_by_a_session_that_does_not_finish_is_waited_for_a_while_only(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    wait = 0.5
    # Read when the store opens; raising=False: the test must fail for the wait, not the name.
    monkeypatch.setattr(store_module, "LOCK_WAIT", wait, raising=False)
    async with Store.open(postgres_db) as store:
        async with _node_row_locked(store, postgres_db) as holder:

            async def let_go_later() -> None:
                # Bounded even where the store waits for ever: the test then fails, not hangs.
                await trio.sleep(10 * wait + 5)
                await trio.to_thread.run_sync(holder.close)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(let_go_later)
                start = time.monotonic()
                with pytest.raises(psycopg.OperationalError) as caught:
                    await store.renew_lease("a", NOW_MS + 20_000)
                took = time.monotonic() - start
                nursery.cancel_scope.cancel()
            assert wait <= took < 10 * wait, took
            assert transient(caught.value)  # its caller tries again, as after an outage
        # The lock gone, the same call goes through on the same pool.
        assert await store.renew_lease("a", NOW_MS + 20_000)


async def test_the_watchdog_fails_a_test_that_waits_on_a_lock_and_says_on_what(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a test that hangs in real I/O gets from ``helpers_watchdog``: past the wall-clock
    deadline a failure naming the statement that waits and the session it waits on, and the
    sessions ended, so that the waiting worker thread returns and the test unwinds."""
    import psycopg
    from helpers_watchdog import Hung, watchdog

    monkeypatch.setattr(store_module, "LOCK_WAIT", 600.0, raising=False)  # as good as for ever
    async with Store.open(postgres_db) as store:
        async with _node_row_locked(store, postgres_db):
            with pytest.raises(Hung) as caught:
                async with watchdog(1000.0, 1.0, postgres=postgres_db):
                    await store.renew_lease("a", NOW_MS + 20_000)
        said = str(caught.value)
        assert "past 1 s of real time" in said
        assert "in renew_lease" in said  # where the test's task stood
        assert "waits Lock/" in said and "UPDATE nodes SET lease_until" in said
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)  # its session ended
