"""The journal: every input a running match accepted, stored before anything it caused is sent.

Theory of operation. A match is its pure referee (:mod:`seabattle.protocol.referee`), and the pure
referee is the inputs it was fed: feeding the same inputs, with the same times, to a fresh one
gives the same state and the same messages. So a server that stores each accepted input before it
sends what the input caused can lose nothing a player was told: after a crash, a restart feeds
each running match's journal to a fresh referee (:func:`replay`) and the match goes on.

Group commit. :meth:`Journal.append` queues a row with the sends it holds back; the writer task
(:meth:`Journal.run`) takes everything queued, waits ``window`` seconds for more (0: the rest of
this scheduler pass), writes the batch in one transaction, and only then lets the sends go, in the
order they were queued. A server alone on a SQLite database writes each batch from the event
loop itself, as one ``write`` to an append-only file of its own (:mod:`.journal_file`): at human
pace that is ~100 µs less a row than the cheapest SQLite commit, which runs cold between inputs,
and far less than the two thread switches of a worker-thread round trip; every ``compact_every``
rows the file is sealed as a segment, and segments whose matches have all ended are removed
(only past ``keep_bytes`` of them is the oldest moved into ``journal``, in a worker thread; on
start and stop all are). Nodes of a cluster on SQLite (``serve --workers``)
take up each other's matches from the database, so theirs go to the database from the event loop,
on a connection of the journal's own (:class:`DirectWriter`: a WAL commit into the page cache),
into ``journal_log``, a table with no index to update (one page per batch instead of one per match
in it), moved into ``journal`` every ``compact_every`` rows in the same way
(:meth:`~.store_journal.JournalStore.compact_journal`); when another writer holds the database
(a record being stored) such a batch goes the store's way, in a worker thread, and PostgreSQL's
always does.
:meth:`Journal.after` queues sends with no row of their own behind the rows before them (a
snapshot, a status), so that nothing overtakes. A batch that cannot be written releases nothing:
its matches are told and ended (``failed``).

Entries (msgpack arrays; ``t`` is wall-clock seconds, see :class:`Clock`):

* ``["start", lot, public, t]``: the match began; ``lot`` is the secret its lots are drawn from;
  a team match's is ``["start", lot, public, teams, t]``, ``teams`` each seat's members' ids;
* ``["in", seat, message, t]``: the wire map of a game message the referee accepted from ``seat``;
* ``["tick", t]``: time decided something (a clock ran out, a seat was away too long);
* ``["gone", seat, t]``, ``["back", seat, t]``, ``["leave", seat, t]``: presence; in a team
  match ``["gone", seat, member, t]`` and ``["back", seat, member, t]``, a member's own;
* ``["shift", seconds, t]``: the match stood still for ``seconds`` (the store was away, see
  below): every later ``t`` is that much behind the wall clock, and so are its clocks' deadlines.

The store may blink. A batch that cannot be written because the store is away (unreachable,
restarting, out of disk space: :func:`~.store.transient`) is written again, with back-off, for as
long as it takes; nothing it holds back is sent meanwhile, and later rows queue behind it, so a
journal never has a hole. A batch whose write has not returned within :data:`HANG_AFTER` (a store
that is frozen rather than away) counts the same from then on. While it waits the journal is
*stalled* (:attr:`Journal.stalled_since`):
every match on this server stands still, its clocks stopped (the referees read their time through
:meth:`Journal.frozen`), and when the batch is written each match is told how long it stood
(``on_resume``) and journals a ``shift``. Only an error that says the batch itself is wrong ends
its matches (``failed``).

Fencing. In a cluster each row carries its match's :class:`~.store_rows.Fence` (the node and the
ownership epoch it refereed the match under), and the store writes it only if the fence still
holds, in the same transaction; the rows of a match another node took over meanwhile are dropped,
and that match is told (``failed`` with ``fenced=True``) instead of released: the node that lost
it sends nothing it caused.

What a stolen database reveals (``spec/protocol.md`` 13): in custody mode the ``place`` entries of
running matches hold fleets and secrets; blind-mode entries hold only what both players were
shown. The store's files are created readable by the server's user only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgpack
import trio
from seabattle.protocol import messages as m
from seabattle.protocol.referee import Referee

from .journal_file import FileLog, FileMoved
from .outbox import one_flight
from .store import transient
from .store_journal import fenced_ids
from .store_rows import Fence

__all__ = [
    "MOVE_BYTES",
    "ONE_STATEMENT",
    "Clock",
    "DirectWriter",
    "Journal",
    "ReplayError",
    "RowStore",
    "entry",
    "replay",
    "started",
]

_log = logging.getLogger("seabattle.server.journal")

Row = tuple[str, int, bytes]
"""(match id as hex, entry number from 0, packed entry)."""


MOVE_BYTES = 64 << 20
"""Journal file bytes moved into the store in one transaction (read whole, and sorted, first)."""

HANG_AFTER = 1.0
"""Seconds a batch may wait for the store's answer before the journal counts as stalled. A store
that is frozen (SIGSTOP, a paused VM, an I/O stall) fails nothing: its calls just do not return.
Its matches must stand still as they do when it is away, or a player whose turn is held back
behind the batch would lose on time for it."""


def real_time() -> float:
    """Seconds on a clock that runs whatever trio's clock does (a hang is also timed on it)."""
    return time.monotonic()


class RowStore(Protocol):
    """What the journal needs of the store (``store_journal.JournalStore`` is the real one)."""

    async def append_journal(
        self, rows: list[Row], fences: Mapping[str, Fence] | None = None
    ) -> frozenset[str]:
        """Store ``rows`` in one transaction, but none of a match whose fence no longer holds;
        those matches' ids."""

    async def compact_journal(self) -> bool:
        """Move some of the oldest stored rows to where they are kept; whether any are left."""

    async def import_journal_files(self, paths: Sequence[str]) -> FileMoved:
        """Move sealed journal files' rows into the store, in one transaction; remove them."""

    def on_match_end(self, callback: Callable[[str], None]) -> None:
        """Have ``callback`` called with a match's id once its end is stored."""


class Clock:
    """Trio time for the shell and wall-clock time for the journal, one mapped onto the other.

    The pure referee is fed trio time (so tests run it in virtual time); a journal outlives the
    process whose trio clock it was, so its entries carry wall-clock time, and a replay maps them
    back onto the new process's trio clock.
    """

    __slots__ = ("_offset",)

    def __init__(self) -> None:
        self._offset = time.time() - trio.current_time()

    def wall(self, now: float) -> float:
        """Wall-clock seconds of trio time ``now``."""
        return now + self._offset

    def trio(self, wall: float) -> float:
        """Trio time of wall-clock seconds ``wall``."""
        return wall - self._offset


def entry(*fields: Any) -> bytes:
    """One journal entry, packed."""
    packed: bytes = msgpack.packb(list(fields), use_bin_type=True)
    return packed


def _unlink_all(paths: Iterable[str]) -> None:
    for path in paths:
        os.unlink(path)


class ReplayError(Exception):
    """A journal that cannot be replayed: the match it belongs to is ended as aborted."""


def started(first: bytes) -> tuple[bytes, bool, list[list[str]] | None]:
    """The lot secret, the public flag and (a team match) each seat's members' ids from a
    journal's first entry (:class:`ReplayError`)."""
    try:
        kind, lot, public, *teams, _t = msgpack.unpackb(first, raw=False)
        if kind != "start" or not isinstance(lot, bytes) or not isinstance(public, bool):
            raise ValueError("not a start entry")
        if teams and not (len(teams[0]) == 2 and all(isinstance(t, list) and t for t in teams[0])):
            raise ValueError("teams are two lists of ids")
    except Exception as err:
        raise ReplayError(f"entry 0: the journal does not begin with its start ({err})") from None
    return lot, public, teams[0] if teams else None


def replay(core: Referee, entries: Iterable[bytes], clock: Clock) -> float:
    """Feed a whole journal (its ``start`` first) to ``core``, a fresh referee made with the lot
    :func:`started` read from it; raises :class:`ReplayError` naming the entry that failed. What
    the referee sends is dropped: the players were told it before the crash.

    Returns the seconds its clocks stood still while its inputs could not be stored (the sum of
    its ``shift`` entries): the match's time is wall-clock time less that."""
    shift = 0.0
    for n, packed in enumerate(entries):
        try:
            kind, *rest = msgpack.unpackb(packed, raw=False)
            now = clock.trio(float(rest[-1]))
            if n == 0:
                if kind != "start":
                    raise ReplayError("the journal does not begin with its start")
                core.start(now)
            elif kind == "in":
                core.receive(int(rest[0]), m.decode(rest[1]), now)
            elif kind == "tick":
                core.tick(now)
            elif kind == "gone":
                core.seat_gone(int(rest[0]), now, int(rest[1]) if len(rest) == 3 else 0)
            elif kind == "back":
                core.seat_back(int(rest[0]), now, int(rest[1]) if len(rest) == 3 else 0)
            elif kind == "leave":
                core.leave(int(rest[0]), now)
            elif kind == "shift":
                shift += float(rest[0])
            else:
                raise ReplayError(f"unknown entry {kind!r}")
        except ReplayError as err:
            raise ReplayError(f"entry {n}: {err}") from None
        except Exception as err:  # a corrupted row must never take the server down
            raise ReplayError(f"entry {n}: {type(err).__name__}: {err}") from None
    return shift


_INSERT = "INSERT INTO journal_log (match_id, n, entry) VALUES (?, ?, ?)"

#: Batches of up to this many rows are written as one statement (one ``INSERT`` with a row of
#: values each), which in autocommit mode is a transaction of its own.
ONE_STATEMENT = 32
_VALUES = [""] + [
    "INSERT INTO journal_log (match_id, n, entry) VALUES " + ", ".join(["(?, ?, ?)"] * k)
    for k in range(1, ONE_STATEMENT + 1)
]


class DirectWriter:
    """Journal rows written from the event loop, on a SQLite connection of their own.

    It never waits: a database another connection is writing to (``busy_timeout`` 0) makes
    :meth:`write` answer ``False``, and the journal writes that batch in a worker thread instead.
    It never checkpoints either (``wal_autocheckpoint`` 0): the store's own connection does, in
    its thread, so that no checkpoint's fsync lands on the event loop. A batch of up to
    :data:`ONE_STATEMENT` rows is one statement in autocommit mode, without a ``BEGIN`` and a
    ``COMMIT`` of its own (two statements, ~10 µs, of a ~30 µs batch).
    """

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("busy_timeout=0", "synchronous=NORMAL", "wal_autocheckpoint=0"):
            self._conn.execute(f"PRAGMA {pragma}")

    def write_fenced(self, rows: list[Row], fences: Mapping[str, Fence]) -> frozenset[str] | None:
        """Store the rows of ``rows`` whose match's fence still holds (every match must have
        one), in one transaction; the ids of the matches whose did not, or ``None`` (nothing
        stored) if the database is busy."""
        fenced: frozenset[str] = frozenset()

        def store() -> None:
            nonlocal fenced
            fenced = fenced_ids(self._conn.execute, fences)
            keep = rows if not fenced else [r for r in rows if r[0] not in fenced]
            if keep:
                self._conn.executemany(_INSERT, keep)

        return fenced if self._immediate(store) else None

    def write(self, rows: list[Row]) -> bool:
        """Store ``rows`` in one transaction; ``False`` (nothing stored) if the database is busy."""
        conn = self._conn
        if len(rows) <= ONE_STATEMENT:
            try:
                # One statement: it stores every row or none.
                conn.execute(_VALUES[len(rows)], [v for row in rows for v in row])
            except sqlite3.OperationalError:
                return False  # busy (or worse: the store's way will say what)
            return True
        return self._immediate(lambda: conn.executemany(_INSERT, rows))

    def _immediate(self, body: Callable[[], object]) -> bool:
        """Run ``body`` in one write transaction; ``False`` (nothing done) if another connection
        holds the database."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False
        try:
            body()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return True

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


class _NotYet(Exception):
    """The journal's gate said that nothing may be written yet (a node unsure of its lease)."""


class _Held:
    """Sends held back until every row queued before them (and their own) is stored."""

    __slots__ = ("failed", "fence", "release", "row")

    def __init__(
        self,
        row: Row | None,
        release: Callable[[], None],
        failed: Callable[[bool], None] | None,
        fence: Fence | None = None,
    ) -> None:
        self.row, self.release, self.failed, self.fence = row, release, failed, fence


class Journal:
    """The server's group-commit writer; see the module docstring."""

    def __init__(
        self,
        store: RowStore,
        *,
        window: float = 0.0,
        direct: DirectWriter | FileLog | None = None,
        compact_every: int = 8192,
        keep_bytes: int = 256 << 20,
        leftover: FileLog | None = None,
    ) -> None:
        """A journal writing to ``store``; ``direct``: the fast way for a SQLite store, its own
        connection or a file (closed when :meth:`run` ends); ``compact_every``: rows written
        between compactions (a file: between seals); ``keep_bytes``: sealed segments of a file
        kept before the oldest is moved into the store; ``leftover``:
        a file this journal does not write, moved into the store and let go on start (one that a
        server alone on this database left, found by one that is a node of a cluster)."""
        self.store = store
        self.window = window
        self.direct = direct
        self.leftover = leftover
        self.compact_every = compact_every
        self.keep_bytes = keep_bytes
        if isinstance(direct, FileLog):
            store.on_match_end(direct.ended)
        self._queue: list[_Held] = []
        self._wake = trio.Event()
        self._writing = False  #: a batch is being written (what comes now waits behind it)
        self._writing_since = 0.0  #: trio time the batch being written was taken
        self._writing_wall = 0.0  #: :func:`real_time` when the batch being written was taken
        self._flushes = 0  #: batches taken to be written so far (the hang watch tells them apart)
        self._began = trio.Event()  #: set when a batch is taken to be written
        self._compact = trio.Event()
        self._since = 0  #: rows written since the last compaction was asked for
        self.batches = 0  #: transactions written
        self.rows = 0  #: rows written
        #: trio time since which a batch waits for the store (``None``: it is not stalled)
        self.stalled_since: float | None = None
        self.stalled_seconds = 0.0  #: how long the journal has stood stalled, in all
        self.stalls = 0  #: how many times it stalled
        self.stall_error = ""  #: why the batch it waits on could not be written
        #: told how long a stall lasted, once its batch is written (every match stood still)
        self.on_resume: Callable[[float], None] | None = None
        #: awaited before each batch is written (a node of a cluster makes sure of its lease)
        self.gate: Callable[[], Awaitable[None]] | None = None

    def append(
        self,
        row: Row,
        release: Callable[[], None],
        failed: Callable[[bool], None] | None = None,
        fence: Fence | None = None,
    ) -> None:
        """Store ``row``, then call ``release``; if it cannot be stored, ``failed(fenced)``
        instead: ``fenced``, the match is another node's now (``fence`` no longer holds);
        otherwise the batch was refused as wrong (a store that is away is waited for)."""
        self._queue.append(_Held(row, release, failed, fence))
        self._wake.set()

    def waiting(self, now: float) -> str | None:
        """Why the journal cannot write now (trio time ``now``), or ``None``: it is stalled, or a
        batch has waited for the store over half a second."""
        if self.stalled_since is not None:
            return self.stall_error
        if self._writing and now - self._writing_since > 0.5:
            return f"a batch has waited {now - self._writing_since:.1f} s for the store"
        return None

    def frozen(self, now: float) -> float:
        """The time that matches read at trio time ``now``: while the journal is stalled, the
        moment the stall began (their clocks stand still)."""
        since = self.stalled_since
        return now if since is None else since

    def after(self, release: Callable[[], None]) -> None:
        """Call ``release`` once every row queued so far is stored (at once if none is)."""
        if not self._queue and not self._writing:
            release()
            return
        # Behind the batch being written too (it may wait a long time for a store that blinks).
        self._queue.append(_Held(None, release, None))
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Whether nothing is waiting to be written."""
        return not self._queue and not self._writing

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write batches until cancelled; what is queued when cancelled is written first.
        With a file, what an earlier server left in it is in the store before this reports
        that it has started (a restart replays the store)."""
        try:
            if self.leftover is not None:
                await self._move_file(self.leftover, check=True)
            if isinstance(self.direct, FileLog):
                await self._move_file(self.direct, check=True)
        except BaseException:
            if self.direct is not None:
                self.direct.close()
            raise
        finally:
            if self.leftover is not None:
                self.leftover.close()
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._compactor)
                nursery.start_soon(self._hang_watch)
                while True:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    if self.window > 0:
                        await trio.sleep(self.window)
                    else:
                        await trio.lowlevel.checkpoint()
                    await self._flush()
        finally:
            # Bounded: a store that is away at shutdown keeps what waits (its matches resume
            # from what was written; their players were told nothing of the rest).
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await self._flush()
                await self._compact_all(stopping=True)
            if self.direct is not None:
                self.direct.close()

    async def _compactor(self) -> None:
        while True:
            await self._compact.wait()
            self._compact = trio.Event()
            await self._compact_all()

    async def _compact_all(self, stopping: bool = False) -> None:
        """Keep the log short (it is not needed for anything else: a failure is logged, and the
        next one tries again): a file is sealed, its segments whose matches have ended removed,
        and the oldest moved into the store while they hold more than ``keep_bytes``; a
        database log is moved a chunk per transaction. ``stopping``: all of a file, moved."""
        try:
            log = self.direct
            if isinstance(log, FileLog):
                if stopping:
                    await self._move_file(log)
                else:
                    log.seal()
                    gone = log.retire()
                    if gone:
                        await trio.to_thread.run_sync(_unlink_all, gone)
                    while log.kept_bytes > self.keep_bytes:
                        over = log.kept_bytes - self.keep_bytes
                        await self._move_oldest(log, min(over, MOVE_BYTES))
            while await self.store.compact_journal():
                pass
        except Exception:
            _log.exception("journal compaction failed")

    async def _move_file(self, log: FileLog, *, check: bool = False) -> None:
        """Seal the file and have the store move every segment, oldest first, up to
        ``MOVE_BYTES`` of them a transaction; ``check``: what an earlier server left, said if it
        was damaged."""
        log.seal()
        while log.segments():
            rows = await self._move_oldest(log, MOVE_BYTES)
            if check and rows:
                _log.info("journal file: %d rows an earlier server wrote moved to the store", rows)

    async def _move_oldest(self, log: FileLog, max_bytes: int) -> int:
        paths = log.oldest(max_bytes)
        moved = await self.store.import_journal_files(paths)
        for problem in moved.problems:
            _log.warning("journal file %s", problem)
        log.moved(paths, moved.running)
        return moved.rows

    async def _flush(self) -> None:
        batch, self._queue = self._queue, []
        if not batch:
            return
        self._writing = True
        self._writing_since = trio.current_time()
        self._writing_wall = real_time()
        self._flushes += 1
        self._began.set()
        try:
            await self._flush_batch(batch)
        finally:
            self._writing = False

    async def _flush_batch(self, batch: list[_Held]) -> None:
        backoff = 0.05
        while True:
            rows = [h.row for h in batch if h.row is not None]
            try:
                if self.gate is not None:
                    try:
                        await self.gate()
                    except Exception as err:  # not yet: the same as a store that is away
                        raise _NotYet(str(err)) from err
                fenced = await self._write(rows, batch) if rows else frozenset()
            except Exception as err:
                if not (transient(err) or isinstance(err, _NotYet)):
                    _log.exception("journal write failed: %d rows not stored", len(rows))
                    if self.stalled_since is not None:
                        self._resumed()  # the store answered: the other matches go on
                    for h in batch:
                        if h.failed is not None:
                            h.failed(False)
                    return
                self._stalled(err)
                await trio.sleep(backoff)
                backoff = min(2 * backoff, 1.0)
                # What was queued meanwhile goes behind the batch, in one transaction with it.
                batch += self._queue
                self._queue = []
                continue
            break
        if self.stalled_since is not None:
            self._resumed()
        self.batches += 1
        self.rows += len(rows)
        self._since += len(rows)
        if self._since >= self.compact_every:
            self._since = 0
            self._compact.set()
        with one_flight():  # what the batch makes a peer receive leaves in one write
            for h in batch:
                try:
                    if fenced and h.row is not None and h.row[0] in fenced:
                        if h.failed is not None:
                            h.failed(True)
                    else:
                        h.release()
                except Exception:  # one peer's failure must not hold back the others' sends
                    _log.exception("releasing journaled sends failed")

    async def _write(self, rows: list[Row], batch: list[_Held]) -> frozenset[str]:
        """Store ``rows`` the fastest way there is; the matches whose fence no longer holds."""
        fences = {h.row[0]: h.fence for h in batch if h.row is not None and h.fence is not None}
        direct = self.direct
        if isinstance(direct, DirectWriter) and fences:
            fenced = direct.write_fenced(rows, fences)
            if fenced is not None:
                return fenced
        elif direct is not None and direct.write(rows):
            return frozenset()
        return await self.store.append_journal(rows, fences or None)

    async def _hang_watch(self) -> None:
        """Count the journal as stalled once a batch's write has waited :data:`HANG_AFTER` for
        the store without an answer (a frozen store answers neither yes nor no), timed by trio's
        clock and by :func:`real_time` both."""
        while True:
            await self._began.wait()
            self._began = trio.Event()
            flush = self._flushes
            await trio.sleep_until(self._writing_since + HANG_AFTER)
            # Real time too: under a virtual clock (tests) trio's time jumps ahead while a write
            # waits on a worker thread, and that is no hang. (Half: the two clocks' readings
            # differ by a rounding.)
            hung = real_time() - self._writing_wall >= HANG_AFTER / 2
            if hung and self._writing and self._flushes == flush and self.stalled_since is None:
                why = f"the store has not answered for {HANG_AFTER:g} s"
                self._stalled(TimeoutError(why))

    def _stalled(self, err: Exception) -> None:
        self.stall_error = f"{type(err).__name__}: {' '.join(str(err).split())}"[:300]
        if self.stalled_since is None:
            self.stalled_since = trio.current_time()
            self.stalls += 1
            _log.warning(
                "journal stalled: the store cannot take its rows (%s); every match stands"
                " still until it can",
                self.stall_error,
            )

    def _resumed(self) -> None:
        assert self.stalled_since is not None
        stood = trio.current_time() - self.stalled_since
        self.stalled_since = None
        self.stall_error = ""
        self.stalled_seconds += stood
        _log.warning("journal written again after %.1f s; the matches go on", stood)
        if self.on_resume is not None:
            try:
                self.on_resume(stood)
            except Exception:
                _log.exception("resuming the matches after a stall failed")
