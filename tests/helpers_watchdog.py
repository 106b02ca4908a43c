"""A watchdog for tests that may hang: a hang fails the test with a dump of where it stood,
instead of stalling the run until CI kills it.

Two deadlines. Virtual time (trio's clock: the autojump clock in most tests): past it, the trio
task tree is dumped and the test cancelled. Under the autojump clock a hang in trio alone (a
match that cannot end, every task waiting on another) becomes a failure within a moment of real
time, since the clock jumps from deadline to deadline. But the clock also jumps while every task
waits for a worker thread (a store call) and no nearer deadline exists, straight to the
watchdog's: enter it only once something keeps nearer deadlines (a cluster node's lease renewal,
every half a virtual second), never around a node's start.

Real time (a thread of its own): a hang in real I/O, where no task is woken at all (a statement
waiting on a PostgreSQL lock, a worker thread that never returns), cannot be cancelled from trio.
Past it the watchdog dumps the trio task tree, every thread's stack and, given the test's
database, what its PostgreSQL sessions wait on; cancels the test; and ends those sessions, so
that the statements that waited fail and the test unwinds. Should the test still not unwind
within the same time again, the dump goes to the process's standard error and the process exits:
a run that cannot go on should end now, with the dump, not when CI kills it.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["Hung", "task_tree", "watchdog"]


_TRIO = os.path.dirname(trio.__file__)


class Hung(AssertionError):
    """The test ran past the watchdog's deadline; the message holds where everything stood."""


def task_tree() -> str:
    """Every trio task of this run, as a tree, each with the frames it is suspended in (call it
    from inside the run)."""
    lines: list[str] = []

    def walk(task: trio.lowlevel.Task, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{task.name}")
        inside = False
        for frame, lineno in task.iter_await_frames():
            code = frame.f_code
            # Of trio's own frames only the first: what the task called (a sleep, a wait).
            if inside and code.co_filename.startswith(_TRIO):
                continue
            inside = code.co_filename.startswith(_TRIO)
            lines.append(f"{pad}  {code.co_filename}:{lineno} in {code.co_name}")
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child, depth + 1)

    root = trio.lowlevel.current_root_task()
    if root is not None:
        walk(root, 0)
    return "\n".join(lines)


def _threads() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"thread {names.get(ident, ident)}:")
        out += [line.rstrip() for line in traceback.format_stack(frame)]
    return "\n".join(out)


def _postgres(url: str, end: bool) -> str:
    """What the sessions on ``url``'s database are doing and waiting on; with ``end``, they are
    ended (the watchdog's own connection aside)."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        db = conninfo_to_dict(url).get("dbname")
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pid, application_name, state, wait_event_type, wait_event,"
                " pg_blocking_pids(pid), now() - xact_start, left(query, 300)"
                " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
                " ORDER BY pid",
                (db,),
            ).fetchall()
            if end:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (db,),
                )
        return "\n".join(
            f"pid {r[0]} ({r[1]}): {r[2]}, waits {r[3]}/{r[4]} on {r[5]},"
            f" in a transaction for {r[6]}: {r[7]}"
            for r in rows
        )
    except Exception as e:  # the dump must not fail for want of the database
        return f"(cannot ask PostgreSQL: {type(e).__name__}: {e})"


@asynccontextmanager
async def watchdog(
    virtual: float, real: float, *, postgres: str | None = None
) -> AsyncIterator[None]:
    """Fail the body with :class:`Hung` (and a dump of where it stood) once it has run
    ``virtual`` seconds of trio time or ``real`` seconds of wall time; ``postgres``: the URL of
    the test's database, whose sessions are dumped and, past the real deadline, ended."""
    token = trio.lowlevel.current_trio_token()
    scope = trio.CancelScope()
    dumps: list[str] = []
    done = threading.Event()

    def fire(why: str, tasks: str) -> None:
        """In the run: keep the dump, cancel the body (once)."""
        if not dumps:
            dumps.append(f"{why}\n\ntrio tasks:\n{tasks}")
            scope.cancel()

    async def virtual_timer() -> None:
        await trio.sleep(virtual)
        try:
            tasks = task_tree()
        except Exception as e:  # a system task must not raise: it would end the run
            tasks = f"(cannot walk the tasks: {e!r})"
        fire(f"past {virtual:g} s of trio time", tasks)

    def real_timer() -> None:
        if done.wait(real):
            return
        got: list[str] = []
        seen = threading.Event()

        def in_run() -> None:
            got.append(task_tree())
            seen.set()

        try:
            token.run_sync_soon(in_run)
        except trio.RunFinishedError:
            return
        seen.wait(5)  # a run loop that is itself blocked answers never: the threads say where
        tasks = got[0] if got else "(the run loop did not answer)"
        extra = f"\n\nthreads:\n{_threads()}"
        if postgres is not None:
            extra += f"\n\nPostgreSQL sessions (ended now):\n{_postgres(postgres, end=False)}"
        why = f"past {real:g} s of real time"
        with_all = f"{why}\n\ntrio tasks:\n{tasks}{extra}"
        print(f"\nwatchdog: {with_all}", file=sys.__stderr__, flush=True)
        fired = threading.Event()

        def fire_first() -> None:
            fire(why, tasks + extra)
            fired.set()

        try:
            token.run_sync_soon(fire_first)
        except trio.RunFinishedError:
            return
        # The body is cancelled before its sessions end: the error a stuck statement then
        # raises must reach a cancelled body (Hung), not race it out as the test's own failure.
        fired.wait(5)
        if postgres is not None:
            _postgres(postgres, end=True)
        if done.wait(real):
            return
        print("\nwatchdog: the test did not unwind; exiting", file=sys.__stderr__, flush=True)
        faulthandler.dump_traceback(file=sys.__stderr__ or sys.stderr)
        os._exit(70)

    thread = threading.Thread(target=real_timer, name="watchdog", daemon=True)
    thread.start()
    timer = trio.CancelScope()

    async def run_virtual() -> None:
        with timer:
            await virtual_timer()

    trio.lowlevel.spawn_system_task(run_virtual, name="watchdog")
    try:
        with scope:
            yield
    except BaseException as e:
        if not dumps:
            raise
        # What the cancellation caused says nothing; anything else that came of it may.
        rest = e.split(trio.Cancelled)[1] if isinstance(e, BaseExceptionGroup) else e
        raise Hung(dumps[0]) from (None if isinstance(rest, trio.Cancelled | None) else e)
    finally:
        done.set()
        timer.cancel()
    if dumps:
        raise Hung(dumps[0]) from None
