"""The journal (server/journal.py) on a real store: group commit, ordering, failure, replay."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
import trio
from helpers import player_id, player_key
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.referee import Referee
from seabattle.protocol.rules import preset
from seabattle.protocol.verdict import Defender
from seabattle.server.journal import (
    ONE_STATEMENT,
    Clock,
    DirectWriter,
    Journal,
    ReplayError,
    entry,
    replay,
    started,
)
from seabattle.server.store import Store

MID = bytes(range(16))
PLAYERS = (player_id("a"), player_id("b"))


async def _seed(store: Store) -> None:
    for p in PLAYERS:
        await store.upsert_player(p, p[:1], 0)
    await store.create_match(MID.hex(), b"r", "blind", *PLAYERS, 0, status="playing")


async def test_rows_queued_in_one_pass_are_one_transaction_released_in_order(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    async with Store.open(tmp_path / "db.sqlite") as store:
        await _seed(store)
        journal = Journal(store)
        await nursery.start(journal.run)
        released: list[str] = []
        for n in range(3):
            row = (MID.hex(), n, entry("tick", float(n)))
            journal.append(row, lambda n=n: released.append(f"r{n}"))
        journal.after(lambda: released.append("after"))
        assert released == []  # nothing goes before it is stored
        while not journal.idle or len(released) < 4:
            await trio.sleep(0.001)
        assert released == ["r0", "r1", "r2", "after"]
        assert journal.batches == 1 and journal.rows == 3
        assert await store.journal(MID.hex()) == [entry("tick", float(n)) for n in range(3)]


async def test_what_cannot_be_stored_is_never_released(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    async with Store.open(tmp_path / "db.sqlite") as store:
        pass  # closed: every write fails
    journal = Journal(store)
    await nursery.start(journal.run)
    released: list[int] = []
    failed: list[bool] = []
    row = (MID.hex(), 0, entry("tick", 0.0))
    journal.append(row, lambda: released.append(0), failed.append)
    while not failed:
        await trio.sleep(0.001)
    assert released == [] and failed == [False]  # refused, not fenced


async def test_a_finished_match_drops_its_journal(tmp_path: Path) -> None:
    async with Store.open(tmp_path / "db.sqlite") as store:
        await _seed(store)
        await store.append_journal([(MID.hex(), 0, entry("tick", 0.0))])
        await store.finish_match(MID.hex(), {"winner": 0}, 1)
        assert await store.journal(MID.hex()) == []
        assert await store.running_matches() == []


def _played(clock: Clock, n_shots: int) -> tuple[Referee, list[bytes]]:
    """A blind match fed through a referee, its calls journaled as the server journals them."""
    rules = preset("classic")
    rng = random.Random(2)
    lot = rng.randbytes(32)
    ref = Referee(match_id=MID, rules=rules, mode="blind", players=PLAYERS, lot=lot)
    rows = [entry("start", lot, True, clock.wall(0.0))]
    ref.start(0.0)
    ds = []
    g = ref.game
    assert g is not None
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, seat)
        ds.append(c)
        sig = c.seat_sig(player_key("ab"[seat]))
        msg: m.Message = m.Commit(MID, 1, c.commitment.to_dict(), sig)
        ref.receive(seat, msg, 1.0)
        rows.append(entry("in", seat, m.encode(msg), clock.wall(1.0)))
    ref.seat_gone(1, 2.0)
    rows.append(entry("gone", 1, clock.wall(2.0)))
    defenders = [Defender(c) for c in ds]
    for seq, i in enumerate(range(n_shots), 1):
        s = g.turn
        assert s is not None
        label = "ABCDEFGHIJ"[i % 10] + str(1 + i // 10 % 10)
        fire = m.Fire(MID, 1, (label,), 0, seq)
        ref.receive(s, fire, 3.0 + i)
        rows.append(entry("in", s, m.encode(fire), clock.wall(3.0 + i)))
        assert g.pending is not None
        ans = m.Answer(MID, 1, defenders[1 - s].answer(g.pending).to_dict())
        ref.receive(1 - s, ans, 3.5 + i)
        rows.append(entry("in", 1 - s, m.encode(ans), clock.wall(3.5 + i)))
    return ref, rows


async def test_replaying_a_journal_gives_the_same_match() -> None:
    clock = Clock()
    ref, rows = _played(clock, 20)
    lot, public, _teams = started(rows[0])
    again = Referee(match_id=MID, rules=ref.rules, mode="blind", players=PLAYERS, lot=lot)
    replay(again, rows, clock)
    g, h = ref.game, again.game
    assert g is not None and h is not None and public
    assert list(h.transcript) == list(g.transcript)
    assert h.phase is g.phase and h.turn == g.turn
    assert again.wake_at == ref.wake_at  # the grace period of the seat that went runs on


async def test_a_replay_says_how_long_the_match_stood_still() -> None:
    # The store was away twice while the match ran (server/journal.py): a node that takes the
    # match up carries on with its clocks as far behind the wall clock as the stalls were long.
    clock = Clock()
    ref, rows = _played(clock, 6)
    rows.insert(5, entry("shift", 12.5, clock.wall(4.0)))
    rows.append(entry("shift", 0.25, clock.wall(9.0)))
    lot, _, _ = started(rows[0])
    again = Referee(match_id=MID, rules=ref.rules, mode="blind", players=PLAYERS, lot=lot)
    assert replay(again, rows, clock) == 12.75
    g, h = ref.game, again.game
    assert g is not None and h is not None and list(h.transcript) == list(g.transcript)


async def test_a_corrupted_entry_names_itself() -> None:
    clock = Clock()
    ref, rows = _played(clock, 3)
    rows[3] = b"\xc1garbage"
    again = Referee(match_id=MID, rules=ref.rules, mode="blind", players=PLAYERS, lot=bytes(32))
    with pytest.raises(ReplayError, match=r"^entry 3: "):
        replay(again, rows, clock)


def _in_table(path: Path, table: str) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute(f"SELECT match_id, n FROM {table} ORDER BY match_id, n"))


async def test_the_log_is_moved_into_the_journal_and_what_ended_is_dropped(tmp_path: Path) -> None:
    # SQLite: rows land in journal_log (no index to update) and are moved in bulk, sorted, into
    # journal; the rows of a match that ended are never copied.
    db = tmp_path / "db.sqlite"
    async with Store.open(db) as store:
        await _seed(store)
        other = bytes(16).hex()
        await store.create_match(other, b"r", "blind", *PLAYERS, 0, status="playing")
        writer = DirectWriter(str(db))
        assert writer.write([(MID.hex(), 0, b"a0"), (other, 0, b"b0")])
        await store.append_journal([(MID.hex(), 1, b"a1"), (other, 1, b"b1")])  # the store's way
        writer.close()
        assert len(_in_table(db, "journal_log")) == 4 and _in_table(db, "journal") == []
        await store.finish_match(other, {"winner": 0}, 1)
        # One chunk at a time: two rows, then the other two.
        assert await store.compact_journal(chunk=2) is True
        assert await store.compact_journal(chunk=2) is False
        assert _in_table(db, "journal_log") == []
        assert _in_table(db, "journal") == [(MID.hex(), 0), (MID.hex(), 1)]
        await store.append_journal([(MID.hex(), 2, b"a2")])
        # A read takes the log and the journal together, in order (the log is moved first).
        assert await store.journal(MID.hex()) == [b"a0", b"a1", b"a2"]
        assert await store.journal(other) == []
        assert await store.compact_journal() is False


async def test_the_journal_compacts_as_it_goes_and_when_it_stops(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    async with Store.open(db) as store:
        await _seed(store)
        journal = Journal(store, direct=DirectWriter(str(db)), compact_every=2)

        async def stored(n: int) -> None:
            done = trio.Event()
            journal.append((MID.hex(), n, entry("tick", float(n))), done.set)
            await done.wait()

        async with trio.open_nursery() as nursery:
            await nursery.start(journal.run)
            for n in range(3):
                await stored(n)
            while len(_in_table(db, "journal")) < 2:
                await trio.sleep(0.001)  # the first two rows asked for a compaction
            await stored(3)
            nursery.cancel_scope.cancel()
        # Stopping moved what was left.
        assert _in_table(db, "journal_log") == []
        assert _in_table(db, "journal") == [(MID.hex(), n) for n in range(4)]
        assert await store.journal(MID.hex()) == [entry("tick", float(n)) for n in range(4)]


@pytest.mark.parametrize("size", [1, ONE_STATEMENT, ONE_STATEMENT + 1])
async def test_the_direct_writer_stores_a_batch_whole_or_not_at_all(
    tmp_path: Path, size: int
) -> None:
    db = tmp_path / "db.sqlite"
    async with Store.open(db) as store:
        await _seed(store)
    rows = [(MID.hex(), n, entry("tick", float(n))) for n in range(size)]
    writer = DirectWriter(str(db))
    try:
        with sqlite3.connect(db, isolation_level=None) as other:
            other.execute("BEGIN IMMEDIATE")  # another writer holds the database
            assert writer.write(rows) is False
            other.execute("ROLLBACK")
        assert _in_table(db, "journal_log") == []
        assert writer.write(rows) is True
        assert _in_table(db, "journal_log") == [(MID.hex(), n) for n in range(size)]
    finally:
        writer.close()


async def test_a_team_match_replays_with_its_members_and_who_was_away() -> None:
    # Team play (spec 6.8): the start entry names the members, presence entries the member.
    clock = Clock()
    rules = preset("classic").replace(team_size=2)
    teams = ((PLAYERS[0], player_id("a2")), (PLAYERS[1], player_id("b2")))
    lot = bytes(32)
    ref = Referee(match_id=MID, rules=rules, mode="custody", players=PLAYERS, lot=lot, teams=teams)
    rows = [entry("start", lot, False, [list(t) for t in teams], clock.wall(0.0))]
    ref.start(0.0)
    rng = random.Random(4)
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, seat)
        msg = m.Place(
            MID, 1, tuple(c.fleet.to_list()), c.secret, c.seat_sig(player_key("ab"[seat]))
        )
        ref.receive(seat, msg, 1.0)
        rows.append(entry("in", seat, m.encode(msg), clock.wall(1.0)))
    g = ref.game
    assert g is not None and g.turn is not None
    ref.seat_gone(g.turn, 2.0, 0)
    rows.append(entry("gone", g.turn, 0, clock.wall(2.0)))
    for seq in range(1, 5):
        s = g.turn
        assert s is not None
        k = ref.caller(s)
        fire = m.Fire(MID, 1, (f"{'ABCD'[seq - 1]}1",), k, seq)
        ref.receive(s, fire, 3.0, k)
        rows.append(entry("in", s, m.encode(fire), clock.wall(3.0)))
    lot2, public, ids = started(rows[0])
    assert ids == [list(t) for t in teams] and not public
    again = Referee(
        match_id=MID,
        rules=rules,
        mode="custody",
        players=PLAYERS,
        lot=lot2,
        teams=(tuple(ids[0]), tuple(ids[1])),
    )
    replay(again, rows, clock)
    h = again.game
    assert h is not None
    assert list(h.transcript) == list(g.transcript)
    assert again.view(5.0) == ref.view(5.0)  # who is away, and so who calls, included
