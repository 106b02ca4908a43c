"""Fencing and a store that blinks: what a node that lost a match, or lost the store for a while,
may still do to it (``server/cluster.py``, ``server/journal.py``).

What an operator relies on: a node that stalled past its lease (SIGSTOP, a long pause) and wakes
after another node took its matches over writes nothing more into them - no journal row, no
abort, no record, no rating - whatever it still holds in memory; and a journal batch that the
store cannot take for a while is written again once it can, in order, nothing released before,
nothing given up, and the time it waited is told to the matches (their clocks stood still).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import SMALL, Bot, connect, pair, play_both, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.record import load_record, verify_record
from seabattle.server import journal as journal_module
from seabattle.server.journal import HANG_AFTER, DirectWriter, Journal, Row, entry
from seabattle.server.journal_file import FileLog, FileMoved
from seabattle.server.store import Fence, Fenced, Store
from test_store import ALICE, BOB, CAROL, NOW, RULES, seed

KEY = b"k" * 32
MS = 1000
MID = "ab" * 16


async def _two_nodes_and_a_match(store: Store) -> None:
    await seed(store, ALICE, BOB, CAROL)
    for name in ("a", "b"):
        await store.register_node(name, f"127.0.0.1:70{len(name)}", KEY, (NOW + 10) * MS, NOW * MS)
    row = await store.create_match(MID, RULES, "blind", ALICE, BOB, NOW, status="playing", node="a")
    assert (row.node, row.epoch) == ("a", 0)


async def test_a_node_whose_match_was_taken_over_writes_nothing_into_it(db: str) -> None:
    async with Store.open(db) as store:
        await _two_nodes_and_a_match(store)
        mine = Fence("a", 0)
        assert await store.append_journal([(MID, 0, b"e0")], {MID: mine}) == frozenset()
        # a stalls past its lease; b takes its match over, under the next epoch.
        await store.release_lease("a")
        ((dead, (row,)),) = await store.take_over("b", NOW * MS)
        assert (dead, row.node, row.epoch) == ("a", "b", 1)
        # a wakes and carries on with what it holds in memory: every write is refused.
        assert await store.append_journal([(MID, 1, b"stale")], {MID: mine}) == {MID}
        with pytest.raises(Fenced):
            await store.abort_match(MID, NOW, "journal failed", fence=mine)
        with pytest.raises(Fenced):
            await store.put_record(MID, 0, b"record", b"sig", NOW, fence=mine)
        with pytest.raises(Fenced):
            await store.finish_match(MID, {"winner": 0}, NOW, fence=mine)
        with pytest.raises(Fenced):
            await store.apply_result(MID, ALICE, BOB, 1.0, NOW, fence=mine)
        # b's own writes go through, and the journal is b's alone, without a hole.
        theirs = row.fence
        assert await store.append_journal([(MID, 1, b"e1")], {MID: theirs}) == frozenset()
        assert await store.journal(MID) == [b"e0", b"e1"]
        still = await store.get_match(MID)
        assert still is not None and still.status == "playing" and still.result is None
        await store.finish_match(MID, {"winner": 1}, NOW, fence=theirs)
        # Once it has ended nobody journals into it, its owner included.
        assert await store.append_journal([(MID, 2, b"late")], {MID: theirs}) == {MID}


async def test_a_restart_takes_its_own_matches_under_a_new_epoch(db: str) -> None:
    async with Store.open(db) as store:
        await _two_nodes_and_a_match(store)
        (row,) = await store.claim_running("a")
        assert (row.id, row.node, row.epoch) == (MID, "a", 1)
        # The process of a that ran before (stalled, not dead) is fenced off by the restart.
        assert await store.append_journal([(MID, 0, b"old")], {MID: Fence("a", 0)}) == {MID}
        assert await store.append_journal([(MID, 0, b"new")], {MID: row.fence}) == frozenset()
        assert await store.owned("a", {MID: 1}) == {MID}
        assert await store.owned("a", {MID: 0}) == set()
        assert await store.claim_running("b") == []


async def test_a_renewal_names_the_registration_it_renews(db: str) -> None:
    async with Store.open(db) as store:
        await store.register_node("a", "127.0.0.1:1", KEY, (NOW + 10) * MS, NOW * MS)
        assert await store.renew_lease("a", (NOW + 20) * MS, NOW * MS)
        await store.release_lease("a")
        await store.take_over("b", (NOW + 1) * MS)
        # Registered again (the same name, later): the old process's renewals fail.
        await store.register_node("a", "127.0.0.1:1", KEY, (NOW + 30) * MS, (NOW + 5) * MS)
        assert not await store.renew_lease("a", (NOW + 40) * MS, NOW * MS)
        assert await store.renew_lease("a", (NOW + 40) * MS, (NOW + 5) * MS)


async def test_the_direct_writer_of_a_sqlite_cluster_is_fenced_too(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with Store.open(db) as store:
        await _two_nodes_and_a_match(store)
        writer = DirectWriter(str(db))
        try:
            assert writer.write_fenced([(MID, 0, b"e0")], {MID: Fence("a", 0)}) == frozenset()
            await store.release_lease("a")
            await store.take_over("b", NOW * MS)
            assert writer.write_fenced([(MID, 1, b"x")], {MID: Fence("a", 0)}) == {MID}
            assert writer.write_fenced([(MID, 1, b"e1")], {MID: Fence("b", 1)}) == frozenset()
        finally:
            writer.close()
        assert await store.journal(MID) == [b"e0", b"e1"]


class _Blinking:
    """A journal's store that is away (``OSError``, as a full disk or a lost server says) for
    its first ``away`` writes, and keeps what it is given after that."""

    def __init__(self, away: int, error: Exception | None = None) -> None:
        self.away = away
        self.error = error or OSError(errno.ENOSPC, "No space left on device")
        self.rows: list[Row] = []
        self.tries = 0

    async def append_journal(
        self, rows: list[Row], fences: Mapping[str, Fence] | None = None
    ) -> frozenset[str]:
        self.tries += 1
        await trio.sleep(0.01)
        if self.tries <= self.away:
            raise self.error
        self.rows += rows
        return frozenset()

    async def compact_journal(self) -> bool:
        return False

    async def import_journal_files(self, paths: Sequence[str]) -> FileMoved:
        return FileMoved(0, [], frozenset())

    def on_match_end(self, callback: Callable[[str], None]) -> None:
        pass


async def test_a_store_that_blinks_holds_the_journal_back_and_loses_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    store = _Blinking(away=12, error=sqlite3.OperationalError("database or disk is full"))
    journal = Journal(store)
    stood: list[float] = []
    journal.on_resume = stood.append
    await nursery.start(journal.run)
    released: list[int] = []
    failed: list[bool] = []
    journal.append((MID, 0, entry("tick", 0.0)), lambda: released.append(0), failed.append)
    await trio.sleep(1)
    # Away: nothing stored, nothing released, the journal says it waits; what comes meanwhile
    # queues behind the batch (and behind sends that follow no row of their own).
    assert journal.stalled_since is not None and released == [] and store.rows == []
    assert journal.frozen(trio.current_time()) == journal.stalled_since
    journal.append((MID, 1, entry("tick", 1.0)), lambda: released.append(1), failed.append)
    journal.after(lambda: released.append(2))
    with trio.fail_after(30):
        while len(released) < 3:
            await trio.sleep(0.1)
    assert released == [0, 1, 2] and failed == []
    assert [n for _, n, _ in store.rows] == [0, 1]  # in order, each once: no hole
    assert journal.stalled_since is None and journal.stalls == 1
    (seconds,) = stood
    assert seconds > 1 and journal.stalled_seconds == seconds
    assert journal.frozen(trio.current_time()) == trio.current_time()


async def test_a_match_stands_still_while_its_moves_cannot_be_stored(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The disk fills up for two minutes, longer than the shot clock (10 s) and the answer clock
    # (60 s): the match stands still, its clocks with it, and goes on when space is back; nobody
    # is told "aborted", nobody loses on time, and the record holds every verdict told.
    disk: dict[str, bool] = {}
    write = FileLog.write

    def filling(self: FileLog, rows: Sequence[Row]) -> bool:
        if disk.get("full"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, rows)

    monkeypatch.setattr(FileLog, "write", filling)
    await _two_minutes_of(nursery, tmp_path, lambda: disk.update(full=True), disk.clear)


async def _two_minutes_of(
    nursery: trio.Nursery, tmp_path: Path, begin: Callable[[], None], end: Callable[[], None]
) -> None:
    """A blind match with a shot clock of 10 s through a fault of the store: ``begin`` makes it
    the moment the first player has been told its second verdict (the player to move fires into
    it), ``end`` ends it two minutes later. The match stands still meanwhile: nobody is told
    "aborted", nobody loses on time, and the record holds every verdict told."""
    addr, _ = await start_server(nursery, tmp_path)
    rules = {**SMALL, "clocks": {"shot": 10}}
    a, b, mid = await pair(addr, nursery, rules, "blind")
    began = trio.Event()

    def fault() -> None:
        begin()
        began.set()

    ba, bb = _Watching(a, "blind", 1, after=2, then=fault), _Watching(b, "blind", 2)
    async with trio.open_nursery() as n:
        n.start_soon(play_both, ba, bb)
        await began.wait()
        await trio.sleep(120)
        end()
    assert ba.result is not None and bb.result is not None
    assert not [e for e in ba.errors + bb.errors if "aborted" in e.msg]
    reasons = [o["reason"] for o in ba.outcomes]
    assert reasons and "shot_timeouts" not in reasons and "no_answer" not in reasons
    c = await connect(addr, nursery)
    ok = await c.request(m.GetRecord(1, mid))
    assert isinstance(ok, m.Ok)
    signed = load_record(ok.data["record"])
    assert verify_record(signed).ok
    assert ba.lost == bb.lost == []  # no shot was lost on time while the match stood still


class _Frozen(_Blinking):
    """A store that is frozen (SIGSTOP, a paused VM) while ``frozen`` is set: a write neither
    succeeds nor fails, it waits."""

    def __init__(self) -> None:
        super().__init__(away=0)
        self.frozen = False
        self.thawed = trio.Event()

    async def append_journal(
        self, rows: list[Row], fences: Mapping[str, Fence] | None = None
    ) -> frozenset[str]:
        if self.frozen:
            await self.thawed.wait()
        return await super().append_journal(rows, fences)

    def thaw(self) -> None:
        self.frozen = False
        self.thawed.set()


async def test_a_store_that_freezes_stalls_the_journal_as_one_that_is_away(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "real_time", trio.current_time)
    store = _Frozen()
    journal = Journal(store)
    stood: list[float] = []
    journal.on_resume = stood.append
    await nursery.start(journal.run)
    released: list[int] = []
    store.frozen = True
    journal.append((MID, 0, entry("tick", 0.0)), lambda: released.append(0), None)
    await trio.sleep(HANG_AFTER / 2)
    assert journal.stalled_since is None  # a write may take a moment
    await trio.sleep(HANG_AFTER)
    # No answer for HANG_AFTER: the matches stand still from then on, as when the store is away.
    assert journal.stalled_since is not None and "not answered" in journal.stall_error
    assert journal.frozen(trio.current_time()) == journal.stalled_since
    journal.append((MID, 1, entry("tick", 1.0)), lambda: released.append(1), None)
    await trio.sleep(60)
    assert released == [] and store.rows == []
    store.thaw()
    with trio.fail_after(5):
        while len(released) < 2:
            await trio.sleep(0.1)
    assert released == [0, 1] and [n for _, n, _ in store.rows] == [0, 1]
    assert journal.stalled_since is None and journal.stalls == 1
    assert stood == [pytest.approx(60 + HANG_AFTER / 2, abs=0.1)]


async def test_a_match_stands_still_while_its_store_is_frozen(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The store freezes for two minutes in the middle of play, longer than the shot clock
    # (10 s) and the answer clock (60 s): a player held back from being told that it is its
    # turn, or that it must answer, must not lose on time for it.
    monkeypatch.setattr(journal_module, "real_time", trio.current_time)
    thawed = trio.Event()
    frozen: dict[str, bool] = {}
    write = Journal._write

    async def freezing(self: Journal, rows: list[Row], batch: list[Any]) -> frozenset[str]:
        if frozen.get("on") and not thawed.is_set():
            await thawed.wait()
        return await write(self, rows, batch)

    monkeypatch.setattr(Journal, "_write", freezing)
    await _two_minutes_of(nursery, tmp_path, lambda: frozen.update(on=True), thawed.set)


class _Watching(Bot):
    """A bot that remembers the shots it saw lost (their clock ran out), and calls ``then`` once
    it has been told ``after`` verdicts."""

    def __init__(
        self,
        c: Any,
        mode: str,
        seed: int = 0,
        *,
        after: int = 0,
        then: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(c, mode, seed)
        self.lost: list[m.ShotLost] = []
        self.verdicts, self.after, self.then = 0, after, then

    async def on(self, msg: Any) -> None:
        if isinstance(msg, m.ShotLost):
            self.lost.append(msg)
        if isinstance(msg, m.VerdictMsg):
            self.verdicts += 1
            if self.verdicts == self.after and self.then is not None:
                self.then()
        await super().on(msg)
