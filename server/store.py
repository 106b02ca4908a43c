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

import json
import math
import os
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args

import trio
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.record import ROLES, dump_record, load_record

from .ladder import Rating, update
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
    check_signature,
    migrate,
)

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

MatchStatus = Literal["open", "playing", "finished", "aborted"]
"""Where a match is in its life: open (waiting for a second seat), playing, finished, aborted."""

RatingChange = tuple[Rating, Rating]
"""A player's rating before and after one rated match."""

_T = TypeVar("_T")

_MATCH_ID = re.compile(r"[0-9a-f]{32}")
_PLAYER_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PlayerRow:
    """One player as stored: identity, rating and game counts."""

    id: str
    name: str
    created: int
    rating: float
    rd: float
    vol: float
    games: int
    wins: int
    losses: int
    draws: int

    @property
    def glicko(self) -> Rating:
        """The player's rating state as a `Rating`."""
        return Rating(self.rating, self.rd, self.vol)


@dataclass(frozen=True)
class MatchRow:
    """One match as stored; ``rules`` is the canonical msgpack the caller gave, untouched."""

    id: str
    rules: bytes
    mode: str
    seat0: str
    seat1: str | None
    status: MatchStatus
    result: Any
    created: int
    finished: int | None


@dataclass(frozen=True)
class RecordRow:
    """One signed record; game 0 is the record of the whole match."""

    match_id: str
    game: int
    record: bytes
    signature: bytes
    created: int


_PLAYER_COLS = "id, name, created, rating, rd, vol, games, wins, losses, draws"
_MATCH_COLS = "id, rules, mode, seat0, seat1, status, result, created, finished"
_RECORD_COLS = "match_id, game, record, signature, created"
_HISTORY_COLS = (
    "a_id, b_id, score_a, a_old_rating, a_old_rd, a_old_vol, a_new_rating, a_new_rd, a_new_vol, "
    "b_old_rating, b_old_rd, b_old_vol, b_new_rating, b_new_rd, b_new_vol"
)


# psycopg returns bytea as memoryview; bytes() in the row builders makes both backends alike.


def _player(row: Sequence[Any]) -> PlayerRow:
    return PlayerRow(*row)


def _match(row: Sequence[Any]) -> MatchRow:
    mid, rules, mode, seat0, seat1, status, result, created, finished = row
    parsed = None if result is None else json.loads(result)
    return MatchRow(mid, bytes(rules), mode, seat0, seat1, status, parsed, created, finished)


def _record(row: Sequence[Any]) -> RecordRow:
    match_id, game, record, signature, created = row
    return RecordRow(match_id, game, bytes(record), bytes(signature), created)


def _json(value: Any) -> str:
    # Sorted and compact, so the same result is always the same text and compares equal.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _check_match_id(match_id: str) -> None:
    if not _MATCH_ID.fullmatch(match_id):
        raise ValueError(f"match id must be 32 lowercase hex digits, got {match_id!r}")


def _check_player_id(player_id: str) -> None:
    # Lowercase only: the same key spelled in two cases must not become two accounts.
    if not (_PLAYER_KEY.fullmatch(player_id) or player_id.startswith("guest:")):
        raise ValueError(
            f"player id must be 64 lowercase hex digits or start with 'guest:', got {player_id!r}"
        )


def _op_name(fn: Callable[..., Any]) -> str:
    """``upsert_player`` for ``Store.upsert_player.<locals>.run``: every method's blocking body
    is a local function of the method, so its qualified name names the method."""
    parts = str(getattr(fn, "__qualname__", "?")).split(".")
    # A shared private body (``_end_match``: finish and abort) is named without its underscore.
    return (parts[1] if len(parts) > 2 and parts[0] == "Store" else parts[-1]).lstrip("_")


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


class Store:
    """The server's database: players, matches, records and the ladder (async, trio).

    Open it with ``async with Store.open(path) as store``; the connection closes when the block
    ends. All methods may be called from any number of tasks at once.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        dialect: Dialect,
        limiter: trio.CapacityLimiter,
        on_call: Callable[[str, float], None] | None = None,
    ) -> None:
        """Wrap an open, migrated connection; use `Store.open` rather than calling this."""
        self._conn = conn
        self._dialect = dialect
        self._limiter = limiter
        self._closed = False
        self._on_call = on_call

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

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise trio.ClosedResourceError("the store is closed")
        if self._on_call is None:
            return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        # Wall time, not trio's clock: the cost is in a thread, which a test's virtual clock
        # does not see (and may jump across while it waits).
        start = time.perf_counter()
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        finally:
            self._on_call(_op_name(fn), time.perf_counter() - start)

    # Blocking helpers; they only ever run inside _run, one at a time.

    def _exec(self, cur: sqlite3.Cursor, query: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return cur.execute(self._dialect.sql(query), params)

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
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        cur = self._conn.cursor()
        try:
            cur.execute(self._dialect.begin_write)
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                # A failed COMMIT (e.g. busy) leaves the transaction open; end it either way.
                if self._conn.in_transaction:
                    cur.execute("ROLLBACK")
                raise
        finally:
            cur.close()

    # Players

    async def upsert_player(self, player_id: str, name: str, now: int) -> PlayerRow:
        """Create the player with a default rating, or rename an existing one; return the row."""
        _check_player_id(player_id)
        default = Rating()

        def run() -> PlayerRow:
            with self._transaction() as cur:
                self._exec(
                    cur,
                    "INSERT INTO players (id, name, created, rating, rd, vol)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET name = excluded.name",
                    (player_id, name, now, default.rating, default.rd, default.vol),
                )
                row = self._exec(
                    cur, f"SELECT {_PLAYER_COLS} FROM players WHERE id = ?", (player_id,)
                ).fetchone()
            return _player(row)

        return await self._run(run)

    async def get_player(self, player_id: str) -> PlayerRow | None:
        """Return the player, or None if there is no such player."""

        def run() -> PlayerRow | None:
            row = self._one(f"SELECT {_PLAYER_COLS} FROM players WHERE id = ?", (player_id,))
            return None if row is None else _player(row)

        return await self._run(run)

    async def ladder(self, limit: int = 50, *, min_games: int = 1) -> list[PlayerRow]:
        """Return up to ``limit`` players by rating, best first (ties by id).

        Players with fewer than ``min_games`` rated games are left out, so that accounts that
        never played do not sit at the default rating above everyone who lost a game.
        """

        def run() -> list[PlayerRow]:
            rows = self._all(
                f"SELECT {_PLAYER_COLS} FROM players WHERE games >= ?"
                " ORDER BY rating DESC, id LIMIT ?",
                (min_games, limit),
            )
            return [_player(r) for r in rows]

        return await self._run(run)

    # Matches

    async def create_match(
        self,
        match_id: str,
        rules: bytes,
        mode: str,
        seat0: str,
        seat1: str | None,
        now: int,
        *,
        status: MatchStatus = "open",
    ) -> MatchRow:
        """Store a new match; its seats must be known players. Raises `Conflict` on a reused id."""
        _check_match_id(match_id)
        if status not in ("open", "playing"):
            raise ValueError(f"a new match is open or playing, not {status!r}")
        if seat1 is not None and seat1 == seat0:
            raise ValueError("a player cannot take both seats")

        def run() -> MatchRow:
            with self._transaction() as cur:
                self._require_players(cur, [p for p in (seat0, seat1) if p is not None])
                inserted = self._exec(
                    cur,
                    "INSERT INTO matches (id, rules, mode, seat0, seat1, status, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (match_id, bytes(rules), mode, seat0, seat1, status, now),
                ).rowcount
                if not inserted:
                    raise Conflict(f"match {match_id} already exists")
                row = self._exec(
                    cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                ).fetchone()
            return _match(row)

        return await self._run(run)

    def _require_players(self, cur: sqlite3.Cursor, ids: Sequence[str]) -> None:
        for player_id in ids:
            if (
                self._exec(cur, "SELECT 1 FROM players WHERE id = ?", (player_id,)).fetchone()
                is None
            ):
                raise NotFound(f"no player {player_id!r}")

    async def start_match(self, match_id: str, seat1: str | None = None) -> MatchRow:
        """Move an open match to playing, filling the second seat if ``seat1`` is given."""

        def run() -> MatchRow:
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id)
                if match.status != "open":
                    raise Conflict(f"match {match_id} is {match.status}, not open")
                if seat1 is not None:
                    if match.seat1 is not None:
                        raise Conflict(f"match {match_id} already has a second seat")
                    if seat1 == match.seat0:
                        raise ValueError("a player cannot take both seats")
                    self._require_players(cur, [seat1])
                new_seat1 = match.seat1 if seat1 is None else seat1
                if new_seat1 is None:
                    raise Conflict(f"match {match_id} cannot start with an empty seat")
                self._exec(
                    cur,
                    "UPDATE matches SET status = 'playing', seat1 = ? WHERE id = ?",
                    (new_seat1, match_id),
                )
                row = self._exec(
                    cur, f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,)
                ).fetchone()
            return _match(row)

        return await self._run(run)

    def _match_for_update(self, cur: sqlite3.Cursor, match_id: str) -> MatchRow:
        row = self._exec(
            cur,
            f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?{self._dialect.lock_rows}",
            (match_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no match {match_id!r}")
        return _match(row)

    async def finish_match(self, match_id: str, result: Any, now: int) -> None:
        """Mark the match finished with ``result`` (any JSON value).

        Finishing again with the same result does nothing, so a retry after a crash is safe; a
        different result, or finishing an aborted match, raises `Conflict`.
        """
        await self._end_match(match_id, "finished", _json(result), now)

    async def abort_match(self, match_id: str, now: int) -> None:
        """Mark an open or playing match aborted (no result, not rated); repeating is harmless."""
        await self._end_match(match_id, "aborted", None, now)

    async def _end_match(
        self, match_id: str, status: MatchStatus, result: str | None, now: int
    ) -> None:
        def run() -> None:
            with self._transaction() as cur:
                match = self._match_for_update(cur, match_id)
                if match.status in ("open", "playing"):
                    self._exec(
                        cur,
                        "UPDATE matches SET status = ?, result = ?, finished = ? WHERE id = ?",
                        (status, result, now, match_id),
                    )
                    return
                # Compare canonical texts: JSON null and "no result" are different things.
                old = _json(match.result) if match.status == "finished" else None
                if match.status != status or old != result:
                    raise Conflict(f"match {match_id} is already {match.status}")

        await self._run(run)

    async def get_match(self, match_id: str) -> MatchRow | None:
        """Return the match, or None if there is no such match."""

        def run() -> MatchRow | None:
            row = self._one(f"SELECT {_MATCH_COLS} FROM matches WHERE id = ?", (match_id,))
            return None if row is None else _match(row)

        return await self._run(run)

    async def list_matches(
        self, status: MatchStatus | None = None, limit: int = 100
    ) -> list[MatchRow]:
        """Return up to ``limit`` matches with the given status (any if None), oldest first."""
        if status is not None and status not in get_args(MatchStatus):
            raise ValueError(f"unknown match status {status!r}")

        def run() -> list[MatchRow]:
            if status is None:
                rows = self._all(
                    f"SELECT {_MATCH_COLS} FROM matches ORDER BY created, id LIMIT ?", (limit,)
                )
            else:
                rows = self._all(
                    f"SELECT {_MATCH_COLS} FROM matches WHERE status = ?"
                    " ORDER BY created, id LIMIT ?",
                    (status, limit),
                )
            return [_match(r) for r in rows]

        return await self._run(run)

    # Records

    async def put_record(
        self, match_id: str, game: int, record: bytes, signature: bytes, now: int
    ) -> None:
        """Store a signed record for game ``game`` of a match (0 = the whole match).

        Storing the same bytes again does nothing; different bytes for a stored record raise
        `Conflict`, because a signed record, once published, must never change.
        """
        if game < 0:
            raise ValueError(f"game number must be 0 or more, got {game}")
        record, signature = bytes(record), bytes(signature)

        def run() -> None:
            with self._transaction() as cur:
                self._match_for_update(cur, match_id)
                inserted = self._exec(
                    cur,
                    "INSERT INTO records (match_id, game, record, signature, created)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (match_id, game) DO NOTHING",
                    (match_id, game, record, signature, now),
                ).rowcount
                if inserted:
                    return
                old = self._exec(
                    cur,
                    "SELECT record, signature FROM records WHERE match_id = ? AND game = ?",
                    (match_id, game),
                ).fetchone()
                if (bytes(old[0]), bytes(old[1])) != (record, signature):
                    raise Conflict(f"match {match_id} game {game} already has another record")

        await self._run(run)

    async def add_signature(
        self, match_id: str, game: int, role: str, key: bytes, sig: bytes, now: int
    ) -> bool:
        """Add a ``role`` signature (``seat0``, ``seat1``, ...) to a stored signed record.

        The signature must be by the key the record names for ``role`` and verify against the
        record's head, or `BadSignature` is raised; the record itself is never rewritten. Adding
        the same signature again does nothing and returns False (True when it was added); another
        signature for a role already signed raises `Conflict`. `NotFound` if there is no record.
        """
        key, sig = bytes(key), bytes(sig)

        def run() -> bool:
            with self._transaction() as cur:
                row = self._exec(
                    cur,
                    "SELECT record FROM records WHERE match_id = ? AND game = ?",
                    (match_id, game),
                ).fetchone()
                if row is None:
                    raise NotFound(f"no record for match {match_id!r} game {game}")
                try:
                    signed = load_record(bytes(row[0]))
                    inline = {s["role"]: (s["key"], s["sig"]) for s in signed["sigs"]}
                except (ProtocolError, KeyError, TypeError) as e:
                    raise BadSignature(f"the stored record cannot be co-signed: {e}") from None
                if role in inline:
                    if inline[role] == (key, sig):
                        return False
                    raise Conflict(f"the record already carries a {role} signature")
                old = self._exec(
                    cur,
                    "SELECT key, sig FROM record_sigs WHERE match_id = ? AND game = ? AND role = ?",
                    (match_id, game, role),
                ).fetchone()
                if old is not None:
                    if (bytes(old[0]), bytes(old[1])) == (key, sig):
                        return False
                    raise Conflict(f"the record already carries a {role} signature")
                check_signature(signed, role, key, sig)
                self._exec(
                    cur,
                    "INSERT INTO record_sigs (match_id, game, role, key, sig, created)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (match_id, game, role, key, sig, now),
                )
            return True

        return await self._run(run)

    def _with_sigs(self, cur: sqlite3.Cursor, row: Sequence[Any]) -> RecordRow:
        """The record row with its added signatures appended to the signed record's ``sigs``."""
        record = _record(row)
        extra = self._exec(
            cur,
            "SELECT role, key, sig FROM record_sigs WHERE match_id = ? AND game = ?",
            (record.match_id, record.game),
        ).fetchall()
        if not extra:
            return record
        signed = load_record(record.record)
        # In role order, so the bytes do not depend on who co-signed first.
        extra.sort(key=lambda r: ROLES.index(r[0]))
        sigs = [
            *signed["sigs"],
            *({"key": bytes(k), "sig": bytes(g), "role": r} for r, k, g in extra),
        ]
        merged = dump_record({"record": signed["record"], "sigs": sigs})
        return RecordRow(record.match_id, record.game, merged, record.signature, record.created)

    async def get_record(self, match_id: str, game: int = 0) -> RecordRow | None:
        """Return the record of game ``game`` of the match (0 = whole match), or None.

        The signed record comes back with every signature added by `add_signature`.
        """

        def run() -> RecordRow | None:
            cur = self._conn.cursor()
            try:
                row = self._exec(
                    cur,
                    f"SELECT {_RECORD_COLS} FROM records WHERE match_id = ? AND game = ?",
                    (match_id, game),
                ).fetchone()
                return None if row is None else self._with_sigs(cur, row)
            finally:
                cur.close()

        return await self._run(run)

    async def records_for_player(
        self, player_id: str, limit: int = 50, *, game: int | None = None
    ) -> list[RecordRow]:
        """Return up to ``limit`` records of matches the player sat in, newest first.

        ``game=0`` keeps only whole-match records; None returns every game's record. Each comes
        with its added signatures, as from `get_record`.
        """

        def run() -> list[RecordRow]:
            query = (
                "SELECT r.match_id, r.game, r.record, r.signature, r.created"
                " FROM records r JOIN matches m ON m.id = r.match_id"
                " WHERE (m.seat0 = ? OR m.seat1 = ?)"
            )
            params: list[Any] = [player_id, player_id]
            if game is not None:
                query += " AND r.game = ?"
                params.append(game)
            query += " ORDER BY r.created DESC, r.match_id, r.game LIMIT ?"
            params.append(limit)
            cur = self._conn.cursor()
            try:
                rows = self._exec(cur, query, params).fetchall()
                return [self._with_sigs(cur, r) for r in rows]
            finally:
                cur.close()

        return await self._run(run)

    # Ratings

    async def apply_result(
        self, match_id: str, a_id: str, b_id: str, score_a: float, now: int
    ) -> tuple[RatingChange, RatingChange]:
        """Rate one match: update both players and log the change, all in one transaction.

        ``score_a`` is 1 (a won, or b forfeited), 0.5 (draw) or 0. Returns ``((old_a, new_a),
        (old_b, new_b))``. Applying a match that was already applied changes nothing and returns
        the stored change (in the order asked for, if a and b are swapped); applying it with a
        different outcome raises `Conflict`.
        """
        if score_a not in (0.0, 0.5, 1.0):
            raise ValueError(f"score must be 0, 0.5 or 1, got {score_a!r}")
        if a_id == b_id:
            raise ValueError("a player cannot be rated against themselves")

        def run() -> tuple[RatingChange, RatingChange]:
            with self._transaction() as cur:
                # Lock (on PostgreSQL) the players before looking for the history row: a
                # concurrent apply of the same match then waits here and sees its row below.
                # Sorted ids keep two nodes from locking the same pair in opposite orders.
                rows = self._exec(
                    cur,
                    "SELECT id, rating, rd, vol FROM players WHERE id IN (?, ?)"
                    f" ORDER BY id{self._dialect.lock_rows}",
                    (a_id, b_id),
                ).fetchall()
                found = {r[0]: Rating(r[1], r[2], r[3]) for r in rows}
                for player_id in (a_id, b_id):
                    if player_id not in found:
                        raise NotFound(f"no player {player_id!r}")
                match = self._match_for_update(cur, match_id)
                if match.status == "aborted":
                    raise Conflict(f"match {match_id} was aborted and is not rated")
                if {match.seat0, match.seat1} != {a_id, b_id}:
                    raise Conflict(f"match {match_id} was not played by {a_id} and {b_id}")

                stored = self._exec(
                    cur,
                    f"SELECT {_HISTORY_COLS} FROM rating_history WHERE match_id = ?",
                    (match_id,),
                ).fetchone()
                if stored is not None:
                    return _stored_change(match_id, stored, a_id, b_id, score_a)

                old_a, old_b = found[a_id], found[b_id]
                new_a, new_b = update(old_a, old_b, score_a)
                self._write_rating(cur, a_id, new_a, score_a)
                self._write_rating(cur, b_id, new_b, 1.0 - score_a)
                self._exec(
                    cur,
                    f"INSERT INTO rating_history (match_id, {_HISTORY_COLS}, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        match_id,
                        a_id,
                        b_id,
                        score_a,
                        *_fields(old_a),
                        *_fields(new_a),
                        *_fields(old_b),
                        *_fields(new_b),
                        now,
                    ),
                )
            return (old_a, new_a), (old_b, new_b)

        return await self._run(run)

    def _write_rating(self, cur: sqlite3.Cursor, player_id: str, new: Rating, score: float) -> None:
        win, draw = int(score == 1.0), int(score == 0.5)
        self._exec(
            cur,
            "UPDATE players SET rating = ?, rd = ?, vol = ?, games = games + 1,"
            " wins = wins + ?, losses = losses + ?, draws = draws + ? WHERE id = ?",
            (*_fields(new), win, int(score == 0.0), draw, player_id),
        )


def _fields(r: Rating) -> tuple[float, float, float]:
    return (r.rating, r.rd, r.vol)


def _stored_change(
    match_id: str, row: Sequence[Any], a_id: str, b_id: str, score_a: float
) -> tuple[RatingChange, RatingChange]:
    s_a, s_b, s_score = row[0], row[1], row[2]
    nums = cast(Sequence[float], row[3:])
    a_change = (Rating(*nums[0:3]), Rating(*nums[3:6]))
    b_change = (Rating(*nums[6:9]), Rating(*nums[9:12]))
    if (s_a, s_b) == (a_id, b_id) and math.isclose(s_score, score_a):
        return a_change, b_change
    if (s_a, s_b) == (b_id, a_id) and math.isclose(s_score, 1.0 - score_a):
        return b_change, a_change
    raise Conflict(f"match {match_id} was already rated with another outcome")
