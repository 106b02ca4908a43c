"""The store: migrations, persistence across restarts, idempotent rating and the ladder order.

Every test of the store runs on both backends (the ``db`` fixture): a SQLite file, and a fresh
database on a PostgreSQL server (``postgres_db`` in conftest). A few are about one backend only:
the SQLite file itself, and what several PostgreSQL transactions at once must not break.
"""

from __future__ import annotations

import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from seabattle.server.ladder import Rating, update
from seabattle.server.schema import Connection
from seabattle.server.store import (
    MIGRATIONS,
    POSTGRES,
    SQLITE,
    Conflict,
    Dialect,
    NotFound,
    Store,
    StoreError,
)

ALICE = "a1" * 32
BOB = "b2" * 32
CAROL = "c3" * 32
GUEST = "guest:7f3a"
RULES = b"\x81\xa4grid\x0a"  # stands in for canonical msgpack; the store never decodes it
NOW = 1_700_000_000


def mid(n: int) -> str:
    return f"{n:032x}"


async def seed(store: Store, *players: str) -> None:
    for p in players:
        await store.upsert_player(p, p[:5], NOW)


async def played(store: Store, n: int, a: str, b: str) -> str:
    match_id = mid(n)
    await store.create_match(match_id, RULES, "classic", a, b, NOW + n, status="playing")
    return match_id


@contextmanager
def raw(db: str) -> Iterator[tuple[Connection, Dialect]]:
    """A plain connection to the store's database (each statement commits), and its dialect."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            yield conn, POSTGRES
    else:
        with closing(sqlite3.connect(db, isolation_level=None)) as lite:
            yield lite, SQLITE


def schema_versions(db: str) -> list[int]:
    with raw(db) as (conn, _):
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    return [v for (v,) in rows]


# Migrations and the file


def test_migrations_are_numbered_in_order() -> None:
    versions = [v for v, _ in MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))


async def test_migrations_apply_once_and_reopen_is_idempotent(db: str) -> None:
    for _ in range(3):
        async with Store.open(db):
            pass
    assert schema_versions(db) == [v for v, _ in MIGRATIONS]


async def test_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with Store.open(path):
        pass
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_new_file_is_owner_only(tmp_path: Path) -> None:
    # It holds custody fleets and the secrets of running matches; the WAL holds them too.
    path = tmp_path / "s.db"
    async with Store.open(path) as store:
        await seed(store, ALICE)
        made = [path, *(Path(f"{path}{end}") for end in ("-wal", "-shm"))]
        assert {stat.S_IMODE(p.stat().st_mode) for p in made if p.exists()} == {0o600}


async def test_a_file_that_cannot_be_opened_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="there is no folder") as missing:
        async with Store.open(tmp_path / "nowhere" / "s.db"):
            pass
    (tmp_path / "junk.db").write_bytes(b"not a database, " * 100)
    with pytest.raises(StoreError, match=r"junk\.db: file is not a database") as junk:
        async with Store.open(tmp_path / "junk.db"):
            pass
    for refused in (missing, junk):
        assert "\n" not in str(refused.value)
    assert not (tmp_path / "nowhere").exists()


async def test_newer_schema_is_refused(db: str) -> None:
    async with Store.open(db):
        pass
    with raw(db) as (conn, dialect):
        conn.execute(dialect.sql("INSERT INTO schema_version VALUES (?)"), (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match="newer") as refused:
        async with Store.open(db):
            pass
    assert "\n" not in str(refused.value)
    assert schema_versions(db)[-1] == len(MIGRATIONS) + 1  # and it left the database alone


async def test_closed_store_refuses_calls(db: str) -> None:
    async with Store.open(db) as store:
        pass
    with pytest.raises(trio.ClosedResourceError):
        await store.get_player(ALICE)


async def test_everything_survives_a_restart(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        await store.finish_match(m, {"winner": 0, "score": [2, 1]}, NOW + 60)
        await store.put_record(m, 0, b"whole", b"sig0", NOW + 60)
        await store.put_record(m, 1, b"game1", b"sig1", NOW + 30)
        changes = await store.apply_result(m, ALICE, BOB, 1.0, NOW + 60)
        before = (await store.get_player(ALICE), await store.get_match(m), await store.ladder())

    async with Store.open(db) as store:
        after = (await store.get_player(ALICE), await store.get_match(m), await store.ladder())
        assert after == before
        match = after[1]
        assert match is not None
        assert match.rules == RULES
        assert match.status == "finished" and match.finished == NOW + 60
        assert match.result == {"winner": 0, "score": [2, 1]}
        record = await store.get_record(m, 0)
        assert record is not None and (record.record, record.signature) == (b"whole", b"sig0")
        # Replaying after a restart is still a no-op that returns the first answer.
        assert await store.apply_result(m, ALICE, BOB, 1.0, NOW + 999) == changes


# Players


async def test_upsert_creates_with_default_rating_then_only_renames(db: str) -> None:
    async with Store.open(db) as store:
        created = await store.upsert_player(ALICE, "alice", NOW)
        assert created.glicko == Rating()
        assert (created.games, created.created) == (0, NOW)
        renamed = await store.upsert_player(ALICE, "alice2", NOW + 5)
        assert renamed.name == "alice2" and renamed.created == NOW
        assert await store.get_player(BOB) is None


@pytest.mark.parametrize("bad", ["A1" * 32, "a1" * 31, "alice", ""])
async def test_player_ids_are_keys_or_guests(bad: str, db: str) -> None:
    async with Store.open(db) as store:
        await store.upsert_player(GUEST, "guest", NOW)
        with pytest.raises(ValueError):
            await store.upsert_player(bad, "x", NOW)


# Matches


async def test_match_lifecycle_and_listing(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        await store.create_match(mid(1), RULES, "classic", ALICE, None, NOW)
        await store.create_match(mid(2), RULES, "salvo", BOB, None, NOW + 1)
        assert [m.id for m in await store.list_matches("open")] == [mid(1), mid(2)]

        started = await store.start_match(mid(1), CAROL)
        assert (started.status, started.seat1) == ("playing", CAROL)
        await store.abort_match(mid(2), NOW + 2)
        await store.abort_match(mid(2), NOW + 3)  # repeating is harmless
        assert await store.list_matches("open") == []
        assert [m.id for m in await store.list_matches("aborted")] == [mid(2)]

        await store.finish_match(mid(1), {"winner": 1}, NOW + 10)
        await store.finish_match(mid(1), {"winner": 1}, NOW + 11)  # a retry is harmless
        match = await store.get_match(mid(1))
        assert match is not None and match.finished == NOW + 10
        with pytest.raises(Conflict):
            await store.finish_match(mid(1), {"winner": 0}, NOW + 12)
        with pytest.raises(Conflict):
            await store.finish_match(mid(2), {"winner": 0}, NOW + 12)
        assert len(await store.list_matches()) == 2


async def test_match_refusals(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        await store.create_match(mid(1), RULES, "classic", ALICE, BOB, NOW)
        with pytest.raises(Conflict):
            await store.create_match(mid(1), RULES, "classic", ALICE, BOB, NOW)
        with pytest.raises(NotFound):
            await store.create_match(mid(2), RULES, "classic", ALICE, CAROL, NOW)
        with pytest.raises(ValueError):
            await store.create_match("xyz", RULES, "classic", ALICE, BOB, NOW)
        with pytest.raises(NotFound):
            await store.finish_match(mid(9), None, NOW)
        with pytest.raises(Conflict):
            await store.start_match(mid(1), ALICE)  # seat already taken
        assert await store.get_match(mid(2)) is None


# Records


async def test_records_are_write_once(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        await store.put_record(m, 0, b"rec", b"sig", NOW)
        await store.put_record(m, 0, b"rec", b"sig", NOW + 1)
        with pytest.raises(Conflict):
            await store.put_record(m, 0, b"other", b"sig", NOW)
        with pytest.raises(NotFound):
            await store.put_record(mid(9), 0, b"rec", b"sig", NOW)
        record = await store.get_record(m)
        assert record is not None and record.created == NOW
        assert await store.get_record(m, 1) is None


async def test_records_for_player_newest_first(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        for n, (a, b) in enumerate([(ALICE, BOB), (CAROL, ALICE), (BOB, CAROL)], start=1):
            await played(store, n, a, b)
            await store.put_record(mid(n), 1, b"g", b"s", NOW + 10 * n)
            await store.put_record(mid(n), 0, b"m", b"s", NOW + 10 * n + 1)

        mine = await store.records_for_player(ALICE)
        assert [(r.match_id, r.game) for r in mine] == [
            (mid(2), 0),
            (mid(2), 1),
            (mid(1), 0),
            (mid(1), 1),
        ]
        whole = await store.records_for_player(ALICE, 1, game=0)
        assert [(r.match_id, r.game) for r in whole] == [(mid(2), 0)]


# Ratings and the ladder


async def test_apply_result_rates_both_and_counts_games(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        (old_a, new_a), (old_b, new_b) = await store.apply_result(m, ALICE, BOB, 0.0, NOW)
        assert (old_a, old_b) == (Rating(), Rating())
        assert (new_a, new_b) == update(Rating(), Rating(), 0.0)
        alice, bob = await store.get_player(ALICE), await store.get_player(BOB)
        assert alice is not None and bob is not None
        assert alice.glicko == new_a and bob.glicko == new_b
        assert (alice.games, alice.wins, alice.losses, alice.draws) == (1, 0, 1, 0)
        assert (bob.games, bob.wins, bob.losses, bob.draws) == (1, 1, 0, 0)


async def test_apply_result_is_idempotent_per_match(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        first = await store.apply_result(m, ALICE, BOB, 0.5, NOW)
        players = (await store.get_player(ALICE), await store.get_player(BOB))

        assert await store.apply_result(m, ALICE, BOB, 0.5, NOW + 1) == first
        # The same outcome told from the other seat is the same match, not a new one.
        assert await store.apply_result(m, BOB, ALICE, 0.5, NOW + 2) == first[::-1]
        assert (await store.get_player(ALICE), await store.get_player(BOB)) == players

        with pytest.raises(Conflict):
            await store.apply_result(m, ALICE, BOB, 1.0, NOW + 3)
        assert (await store.get_player(ALICE), await store.get_player(BOB)) == players


async def test_apply_result_refusals_change_nothing(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL)
        m = await played(store, 1, ALICE, BOB)
        with pytest.raises(Conflict):
            await store.apply_result(m, ALICE, CAROL, 1.0, NOW)  # not the match's players
        with pytest.raises(NotFound):
            await store.apply_result(mid(9), ALICE, BOB, 1.0, NOW)
        with pytest.raises(ValueError):
            await store.apply_result(m, ALICE, BOB, 0.7, NOW)
        await store.abort_match(m, NOW)
        with pytest.raises(Conflict):
            await store.apply_result(m, ALICE, BOB, 1.0, NOW)
        for p in (ALICE, BOB, CAROL):
            player = await store.get_player(p)
            assert player is not None and player.games == 0 and player.glicko == Rating()


async def test_concurrent_results_are_all_applied(db: str) -> None:
    # Many tasks at once: on SQLite the limiter serialises them on one connection; on PostgreSQL
    # they run side by side on the pool's connections, and the row locks must lose no update.
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        ids = [await played(store, n, ALICE, BOB) for n in range(1, 21)]
        async with trio.open_nursery() as nursery:
            for m in ids:
                nursery.start_soon(store.apply_result, m, ALICE, BOB, 1.0, NOW)
                nursery.start_soon(store.apply_result, m, ALICE, BOB, 1.0, NOW)
        alice = await store.get_player(ALICE)
        assert alice is not None and (alice.games, alice.wins) == (20, 20)


async def test_ladder_is_ordered_by_rating_and_skips_unplayed(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB, CAROL, GUEST)
        # Alice beats Bob twice, Bob beats Carol once; the guest never plays.
        await store.apply_result(await played(store, 1, ALICE, BOB), ALICE, BOB, 1.0, NOW)
        await store.apply_result(await played(store, 2, ALICE, BOB), ALICE, BOB, 1.0, NOW)
        await store.apply_result(await played(store, 3, BOB, CAROL), BOB, CAROL, 1.0, NOW)

        board = await store.ladder()
        assert [p.id for p in board] == [ALICE, BOB, CAROL]
        assert [p.rating for p in board] == sorted((p.rating for p in board), reverse=True)
        assert [p.id for p in await store.ladder(2)] == [ALICE, BOB]
        assert GUEST in [p.id for p in await store.ladder(min_games=0)]


# Dialects


def test_dialects_differ_only_where_engines_do() -> None:
    query = "SELECT x FROM t WHERE a = ? AND b LIKE 'p%'"
    assert SQLITE.sql(query) == query
    assert POSTGRES.sql(query) == "SELECT x FROM t WHERE a = %s AND b LIKE 'p%%'"
    # Data steps are functions; only the DDL templates have dialect holes.
    ddl = [
        POSTGRES.ddl(t) for _, statements in MIGRATIONS for t in statements if isinstance(t, str)
    ]
    assert not any("{" in s or "AUTOINCREMENT" in s or "BLOB" in s for s in ddl)
    assert any("GENERATED ALWAYS AS IDENTITY" in s for s in ddl)


async def test_finishing_with_a_null_result_can_be_retried(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        await store.finish_match(m, None, NOW)
        await store.finish_match(m, None, NOW + 1)
        match = await store.get_match(m)
        assert match is not None and (match.status, match.result) == ("finished", None)


async def test_two_stores_on_one_database_migrate_once(db: str) -> None:
    # Another process (a second server, an admin tool) may open the database at the same moment.
    async with Store.open(db) as one, Store.open(db) as two:
        await seed(one, ALICE)
        assert await two.get_player(ALICE) is not None
    assert schema_versions(db) == [v for v, _ in MIGRATIONS]


async def test_stores_opening_at_the_same_moment_migrate_once(db: str) -> None:
    # Nodes starting together on an empty database: one migrates, the others wait and find
    # nothing left to do (PostgreSQL: the advisory lock; SQLite: BEGIN IMMEDIATE).
    opened: list[Store] = []
    done = trio.Event()

    async def node() -> None:
        async with Store.open(db) as store:
            opened.append(store)
            await done.wait()

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(node)
        with trio.fail_after(30):
            while len(opened) < 3:
                await trio.sleep(0.01)
        await seed(opened[0], ALICE)
        assert await opened[2].get_player(ALICE) is not None
        done.set()
    assert schema_versions(db) == [v for v, _ in MIGRATIONS]


# Signatures added to a stored record


def _signed_record(n: int) -> tuple[dict[str, object], list[object]]:
    """A referee-signed record of a real (one-game, unplayed) match, and the three keys."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from seabattle.protocol.match import Match
    from seabattle.protocol.record import build_record, sign_as
    from seabattle.protocol.rules import preset

    ref, k0, k1 = (Ed25519PrivateKey.generate() for _ in range(3))
    pubs = [k.public_key().public_bytes_raw() for k in (k0, k1)]
    record = build_record(Match(preset("classic"), bytes.fromhex(mid(n))), pubs, ref.public_key())
    return {"record": record, "sigs": [sign_as(record, ref, "referee")]}, [ref, k0, k1]


async def test_signatures_grow_while_the_record_stays(db: str) -> None:
    from seabattle.protocol.record import dump_record, load_record, record_head, verify_record
    from seabattle.server.store import BadSignature

    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        signed, (_, k0, k1) = _signed_record(1)
        body = dump_record(signed)
        await store.put_record(m, 0, body, signed["sigs"][0]["sig"], NOW)  # type: ignore[index]
        head = record_head(signed["record"])
        key1 = k1.public_key().public_bytes_raw()  # type: ignore[attr-defined]
        key0 = k0.public_key().public_bytes_raw()  # type: ignore[attr-defined]
        sig1, sig0 = k1.sign(head), k0.sign(head)  # type: ignore[attr-defined]

        assert await store.add_signature(m, 0, "seat1", key1, sig1, NOW) is True
        assert await store.add_signature(m, 0, "seat1", key1, sig1, NOW) is False  # idempotent
        with pytest.raises(BadSignature):  # seat 1's key signing for seat 0
            await store.add_signature(m, 0, "seat0", key1, sig1, NOW)
        with pytest.raises(BadSignature):  # not a signature of this head
            await store.add_signature(m, 0, "seat0", key0, k0.sign(b"x"), NOW)  # type: ignore[attr-defined]
        with pytest.raises(BadSignature):
            await store.add_signature(m, 0, "judge", key0, sig0, NOW)
        with pytest.raises(Conflict):  # the referee's signature is part of the stored body
            await store.add_signature(m, 0, "referee", key0, sig0, NOW)
        with pytest.raises(NotFound):
            await store.add_signature(m, 1, "seat0", key0, sig0, NOW)
        assert await store.add_signature(m, 0, "seat0", key0, sig0, NOW) is True

        row = await store.get_record(m)
        assert row is not None
        got = load_record(row.record)
        assert got["record"] == signed["record"]
        # In role order whatever the order of co-signing.
        assert [s["role"] for s in got["sigs"]] == ["referee", "seat0", "seat1"]
        report = verify_record(got)
        assert report.ok, report.reason
        # The stored body never changed, and put_record still refuses another one.
        with pytest.raises(Conflict):
            await store.put_record(m, 0, row.record, row.signature, NOW)
        await store.put_record(m, 0, body, row.signature, NOW)
        (listed,) = await store.records_for_player(ALICE, game=0)
        assert listed.record == row.record


async def test_migration_2_moves_cosigned_copies_into_record_sigs(db: str) -> None:
    from seabattle.protocol.record import cosign, dump_record, load_record, verify_record
    from seabattle.server.store import COSIGNED_SLOTS

    signed, (_, k0, k1) = _signed_record(1)
    both = cosign(cosign(signed, k0, "seat0"), k1, "seat1")  # type: ignore[arg-type]
    # A database left by the version-1 server: the co-signed copy in slot COSIGNED + 0b11.
    with raw(db) as (conn, dialect):

        def execute(query: str, params: tuple[Any, ...] = ()) -> None:
            conn.execute(dialect.sql(query), params)

        execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY)")
        for template in MIGRATIONS[0][1]:
            assert isinstance(template, str)
            execute(dialect.ddl(template))
        execute("INSERT INTO schema_version VALUES (1)")
        for p in (ALICE, BOB):
            execute(
                "INSERT INTO players (id, name, created, rating, rd, vol)"
                " VALUES (?, ?, 0, 1, 1, 1)",
                (p, p[:5]),
            )
        execute(
            "INSERT INTO matches (id, rules, mode, seat0, seat1, status, created)"
            " VALUES (?, ?, 'blind', ?, ?, 'finished', 0)",
            (mid(1), RULES, ALICE, BOB),
        )
        rows = [(0, dump_record(signed)), (COSIGNED_SLOTS + 3, dump_record(both))]
        for game, data in rows:
            execute("INSERT INTO records VALUES (?, ?, ?, ?, ?)", (mid(1), game, data, b"s", NOW))

    async with Store.open(db) as store:
        row = await store.get_record(mid(1))
        assert row is not None
        got = load_record(row.record)
        assert [s["role"] for s in got["sigs"]] == ["referee", "seat0", "seat1"]
        assert verify_record(got).ok
        assert await store.get_record(mid(1), COSIGNED_SLOTS + 3) is None
    assert schema_versions(db)[-1] == MIGRATIONS[-1][0]


# The journal of running matches and the resume tokens


async def test_journal_and_resume_tokens(db: str) -> None:
    async with Store.open(db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        await store.append_journal([(m, 0, b"e0"), (m, 1, b"e1")])
        await store.append_journal([(m, 2, b"e2")])
        assert await store.journal(m) == [b"e0", b"e1", b"e2"]
        assert [r.id for r in await store.running_matches()] == [m]
        await store.put_resume_token(ALICE, b"t1", NOW)
        await store.put_resume_token(ALICE, b"t2", NOW + 1)  # replaces the older one
        await store.put_resume_token(BOB, b"t3", NOW)
        assert [await store.resume_player(t) for t in (b"t1", b"t2", b"t3")] == [None, ALICE, BOB]
        await store.finish_match(m, {"winner": 0}, NOW + 5)
        assert await store.journal(m) == [] and await store.running_matches() == []


# PostgreSQL: transactions side by side, and the URLs that do not lead to a database


@asynccontextmanager
async def held(db: str, lock: str, waiters: int) -> AsyncIterator[None]:
    """Hold the rows ``lock`` locks while the block starts its calls; once ``waiters`` sessions
    wait for a lock (the calls are all in flight), let them go. Always let them go: a call that
    waits forever in its thread cannot be cancelled."""
    with raw(db) as (blocker, _), raw(db) as (watcher, _):
        blocker.execute("BEGIN")
        blocker.execute(lock)
        try:
            yield
            with trio.fail_after(10):
                while True:
                    # Its own transaction each time: a transaction sees one snapshot of the view.
                    (waiting,) = watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    ).fetchone()
                    if waiting >= waiters:
                        break
                    await trio.sleep(0.005)
        finally:
            blocker.execute("COMMIT")


async def test_results_at_the_same_moment_all_apply(postgres_db: str) -> None:
    # Two nodes rate two matches of the same players at once, and a third reports one of them
    # again (from the other seat): both ratings apply in turn, the repeat changes nothing.
    async with Store.open(postgres_db) as store:
        await seed(store, ALICE, BOB)
        m1, m2 = await played(store, 1, ALICE, BOB), await played(store, 2, ALICE, BOB)
        answers: dict[str, Any] = {}

        async def rate(key: str, *args: Any) -> None:
            answers[key] = await store.apply_result(*args, NOW)

        lock = "SELECT id FROM players FOR UPDATE"
        async with trio.open_nursery() as nursery, held(postgres_db, lock, 3):
            nursery.start_soon(rate, "m1", m1, ALICE, BOB, 1.0)
            nursery.start_soon(rate, "m2", m2, BOB, ALICE, 0.0)
            nursery.start_soon(rate, "m1 again", m1, BOB, ALICE, 0.0)
        alice, bob = await store.get_player(ALICE), await store.get_player(BOB)
    assert alice is not None and bob is not None
    assert (alice.games, alice.wins, bob.games, bob.losses) == (2, 2, 2, 2)
    once = update(Rating(), Rating(), 1.0)
    assert (alice.glicko, bob.glicko) == update(*once, 1.0)  # neither update was lost
    assert answers["m1 again"] == answers["m1"][::-1]
    # Whichever went second started from what the first left.
    (a1_old, a1_new), _ = answers["m1"]
    (_, _), (a2_old, a2_new) = answers["m2"]
    assert a1_new == a2_old or a2_new == a1_old


async def test_the_same_signature_at_the_same_moment_is_kept_once(postgres_db: str) -> None:
    from seabattle.protocol.record import dump_record, record_head

    signed, (_, _, k1) = _signed_record(1)
    key1 = k1.public_key().public_bytes_raw()  # type: ignore[attr-defined]
    sig1 = k1.sign(record_head(signed["record"]))  # type: ignore[attr-defined, arg-type]
    async with Store.open(postgres_db) as store:
        await seed(store, ALICE, BOB)
        m = await played(store, 1, ALICE, BOB)
        await store.put_record(m, 0, dump_record(signed), b"s", NOW)
        added: list[bool] = []

        async def cosign() -> None:
            added.append(await store.add_signature(m, 0, "seat1", key1, sig1, NOW))

        lock = "SELECT 1 FROM records FOR UPDATE"
        async with trio.open_nursery() as nursery, held(postgres_db, lock, 2):
            for _ in range(2):
                nursery.start_soon(cosign)
    assert sorted(added) == [False, True]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_database_that_cannot_be_opened_is_one_clear_line(postgres_db: str) -> None:
    there = urlsplit(postgres_db)
    server = f"{there.hostname}:{there.port}" if there.port else str(there.hostname)
    bad = {
        "refused": f"postgresql://u:secret1@127.0.0.1:{_free_port()}/db",
        "no such database": there._replace(path="/seabattle_no_such_db").geturl(),
        "bad credentials": f"postgres://seabattle_no_such_user:secret2@{server}{there.path}",
        "not a URL option": f"{postgres_db}?no_such_option=1",
        "not a port": "postgresql://u:secret3@127.0.0.1:port/db",
        "not a host": "postgres://u:secret4@[::1/db",  # libpq quotes the URL it cannot parse
    }
    for why, url in bad.items():
        with pytest.raises(StoreError, match="cannot open the PostgreSQL database") as refused:
            async with Store.open(url):
                pass
        message = str(refused.value)
        assert "\n" not in message, why
        assert "secret" not in message and f":{there.password}@" not in message, why


def test_serve_on_a_database_it_cannot_open_says_one_line(db: str, tmp_path: Path) -> None:
    if db.startswith("postgresql://"):
        bad = urlsplit(db)._replace(path="/seabattle_no_such_db").geturl()
    else:
        bad = str(tmp_path / "nowhere" / "s.db")
    serve = "from seabattle.cli.main import main; main()"
    args = ["serve", "--port", "0", "--key", str(tmp_path / "k"), "--db", bad]
    done = subprocess.run(
        [sys.executable, "-c", serve, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert done.stderr.startswith("seabattle server: cannot open ") and done.stderr.count("\n") == 1
    assert "seabattle_no_such_db" in done.stderr or "there is no folder" in done.stderr
    password = urlsplit(bad).password
    assert not password or f":{password}@" not in done.stderr
