"""The store's schema: the SQL dialects, the migrations and the runner that applies them.

What differs between SQLite and PostgreSQL is held in one `Dialect` value (placeholders, the
auto-numbered key, the binary type, how a write transaction starts and locks rows); migrations are
DDL templates filled in from it, or functions that move data. The schema version lives in
``schema_version``; `migrate` applies `MIGRATIONS` in order when the store opens, each in its own
transaction (on PostgreSQL all of them in one, under an advisory lock, so that nodes starting
together do not both migrate), and refuses a database newer than this code.

The store's errors live here too, because the runner and migration 2 raise them; ``store``
re-exports them as part of its API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.record import ROLES, load_record, record_head

__all__ = [
    "COSIGNED_SLOTS",
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "BadSignature",
    "Conflict",
    "Connection",
    "Cursor",
    "Dialect",
    "Fenced",
    "MigrationStep",
    "NotFound",
    "StoreError",
    "check_signature",
    "migrate",
]

COSIGNED_SLOTS = 1 << 20
"""Game numbers from here on held co-signed copies of a match record before schema version 2
(a workaround for write-once records); migration 2 moves their signatures to ``record_sigs``."""


class StoreError(Exception):
    """Base class of the errors the store raises on purpose."""


class NotFound(StoreError, LookupError):
    """A player or match that the operation needs does not exist."""


class Conflict(StoreError):
    """The operation contradicts what is already stored (a different record, result or state)."""


class Fenced(Conflict):
    """A write for a match that the writer no longer referees: another node took it over (its
    ownership epoch moved on), or it ended. Nothing was written."""


class BadSignature(StoreError, ValueError):
    """A signature that is not by the key the record names for its role, or does not verify."""


class Cursor(Protocol):
    """What the store uses of a DB-API cursor (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, query: str, params: Iterable[Sequence[Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """What the store uses of a connection (``sqlite3.Connection``, ``psycopg.Connection`` in
    autocommit mode): the store issues BEGIN and COMMIT itself."""

    def cursor(self) -> Cursor: ...

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Cursor: ...


@dataclass(frozen=True)
class Dialect:
    """Everything in the SQL that differs between database engines, in one place.

    Queries are written with ``?`` placeholders and passed through `sql`; DDL templates use
    ``{serial_pk}`` and ``{blob}``, filled in by `ddl`.
    """

    name: str
    paramstyle: Literal["qmark", "format"]
    serial_pk: str
    blob: str
    begin_write: str
    lock_rows: str
    migrate_lock: str
    #: appended to a SELECT that claims rows other nodes may be claiming at the same moment
    #: (the shared quick-match queue): each takes rows nobody holds, none waits
    claim_rows: str
    #: the first statement of a transaction that looks for a quick-match partner and, finding
    #: none, queues its player: two such transactions run one after the other, or two players
    #: asking on two nodes at once would both queue and wait for ever
    queue_lock: str
    #: appended to a SELECT of the match rows whose ownership a journal batch checks: a takeover
    #: (which updates them) waits until the batch is committed, so it replays what was written
    share_rows: str

    def sql(self, query: str) -> str:
        """Return ``query`` (written with ``?`` placeholders) in this dialect's paramstyle."""
        if self.paramstyle == "qmark":
            return query
        # With the format paramstyle a literal % must be doubled; no query here contains a ?
        # other than a placeholder, so a plain replacement is safe.
        return query.replace("%", "%%").replace("?", "%s")

    def ddl(self, template: str) -> str:
        """Return a DDL template with this dialect's column types filled in."""
        return template.format(serial_pk=self.serial_pk, blob=self.blob)


SQLITE = Dialect(
    name="sqlite",
    paramstyle="qmark",
    serial_pk="INTEGER PRIMARY KEY AUTOINCREMENT",
    blob="BLOB",
    # IMMEDIATE takes the write lock at once, so two writers cannot both read and then
    # deadlock upgrading to write (another process may share the file).
    begin_write="BEGIN IMMEDIATE",
    lock_rows="",
    # BEGIN IMMEDIATE already excludes other writers; each migration has its own transaction.
    migrate_lock="",
    # BEGIN IMMEDIATE: one writer at a time, so a row read is a row claimed.
    claim_rows="",
    queue_lock="",  # BEGIN IMMEDIATE serialises them already
    share_rows="",  # and a takeover is a write: it waits for the batch
)
"""The embedded default backend."""

POSTGRES = Dialect(
    name="postgresql",
    paramstyle="format",
    serial_pk="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    blob="BYTEA",
    begin_write="BEGIN",
    # Under READ COMMITTED two nodes rating the same player at once would lose an update
    # unless the player rows are locked before they are read. NO KEY: the rows locked are only
    # ever updated in columns no foreign key points at, so inserting a row that references one
    # (a match seating the player, a record of the match) need not wait for the lock.
    lock_rows=" FOR NO KEY UPDATE",
    # All pending migrations run in one transaction that first takes this lock, so two nodes
    # starting at once migrate one after the other (the second finds nothing left to do).
    migrate_lock="SELECT pg_advisory_xact_lock(25414227742)",
    claim_rows=" FOR UPDATE SKIP LOCKED",
    queue_lock="SELECT pg_advisory_xact_lock(25414227743)",
    share_rows=" FOR SHARE",
)
"""The shared backend for several server nodes (psycopg 3, a connection pool)."""


MigrationStep = str | Callable[[Connection, Dialect], None]
"""A DDL template, or a function that moves data (run inside the migration's transaction)."""


def check_signature(signed: Any, role: str, key: bytes, sig: bytes) -> None:
    """Raise `BadSignature` unless ``sig`` by ``key`` signs ``signed``'s record in ``role``."""
    if role not in ROLES:
        raise BadSignature(f"role {role!r}: one of {', '.join(ROLES)}")
    try:
        rec = signed["record"]
        named = rec["referee"] if role == "referee" else rec["players"][int(role[-1])]
        head = record_head(rec)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise BadSignature(f"the stored record cannot be signed: {e}") from None
    if not isinstance(named, bytes) or named != key:
        raise BadSignature(f"the record names another key for {role}")
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(sig, head)
    except (InvalidSignature, ValueError):
        raise BadSignature(f"the {role} signature does not verify") from None


def _move_cosigned_copies(conn: Connection, dialect: Dialect) -> None:
    """Migration 2: turn the co-signed copies kept in slots past `COSIGNED_SLOTS` into rows of
    ``record_sigs`` on the match record (game 0), then drop the copies.

    A copy whose record differs from the stored one, or whose extra signature does not verify,
    is left where it was: it was never returned as the record, and deleting it would lose data.
    """
    copies = conn.execute(
        dialect.sql("SELECT match_id, game, record, created FROM records WHERE game >= ?"),
        (COSIGNED_SLOTS,),
    ).fetchall()
    for match_id, game, data, created in copies:
        base = conn.execute(
            dialect.sql("SELECT record FROM records WHERE match_id = ? AND game = 0"), (match_id,)
        ).fetchone()
        if base is None:
            continue
        try:
            copy, stored = load_record(bytes(data)), load_record(bytes(base[0]))
            if record_head(copy["record"]) != record_head(stored["record"]):
                continue
            have = {s["role"] for s in stored["sigs"]}
            extra = [s for s in copy["sigs"] if s["role"] not in have]
            for s in extra:
                check_signature(stored, s["role"], s["key"], s["sig"])
        except (ProtocolError, BadSignature, KeyError, TypeError, ValueError):
            continue
        for s in extra:
            conn.execute(
                dialect.sql(
                    "INSERT INTO record_sigs (match_id, game, role, key, sig, created)"
                    " VALUES (?, 0, ?, ?, ?, ?) ON CONFLICT (match_id, game, role) DO NOTHING"
                ),
                (match_id, s["role"], s["key"], s["sig"], created),
            )
        conn.execute(
            dialect.sql("DELETE FROM records WHERE match_id = ? AND game = ?"), (match_id, game)
        )


def _journal_log(conn: Connection, dialect: Dialect) -> None:
    """Migration 6: ``journal_log``, where a SQLite store's journal rows land first.

    Inserting into ``journal`` touches its ``(match_id, n)`` index at one page per match in the
    batch, on every batch; a table keyed by the row number alone takes every row at its end. The
    store moves the rows of running matches into ``journal`` in bulk, sorted, and forgets the
    rest (``store_journal.JournalStore.compact_journal``). On SQLite the key is a plain row number
    (no ``AUTOINCREMENT``, whose counter is one more page per write). PostgreSQL writes straight to
    ``journal`` (its row numbers are not in commit order) and leaves this table empty.
    """
    key = "INTEGER PRIMARY KEY" if dialect.name == "sqlite" else dialect.serial_pk
    conn.execute(
        f"CREATE TABLE journal_log (id {key}, match_id TEXT NOT NULL, n INTEGER NOT NULL,"
        f" entry {dialect.blob} NOT NULL)"
    )


MIGRATIONS: Sequence[tuple[int, Sequence[MigrationStep]]] = (
    (
        1,
        (
            """CREATE TABLE players (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                created BIGINT NOT NULL,
                rating DOUBLE PRECISION NOT NULL,
                rd DOUBLE PRECISION NOT NULL,
                vol DOUBLE PRECISION NOT NULL,
                games INTEGER NOT NULL DEFAULT 0,
                wins INTEGER NOT NULL DEFAULT 0,
                losses INTEGER NOT NULL DEFAULT 0,
                draws INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX players_by_rating ON players (rating DESC, id)",
            """CREATE TABLE matches (
                id TEXT PRIMARY KEY,
                rules {blob} NOT NULL,
                mode TEXT NOT NULL,
                seat0 TEXT NOT NULL REFERENCES players (id),
                seat1 TEXT REFERENCES players (id),
                status TEXT NOT NULL
                    CHECK (status IN ('open', 'playing', 'finished', 'aborted')),
                result TEXT,
                created BIGINT NOT NULL,
                finished BIGINT
            )""",
            "CREATE INDEX matches_by_status ON matches (status, created)",
            "CREATE INDEX matches_by_seat0 ON matches (seat0)",
            "CREATE INDEX matches_by_seat1 ON matches (seat1)",
            """CREATE TABLE records (
                match_id TEXT NOT NULL REFERENCES matches (id),
                game INTEGER NOT NULL CHECK (game >= 0),
                record {blob} NOT NULL,
                signature {blob} NOT NULL,
                created BIGINT NOT NULL,
                PRIMARY KEY (match_id, game)
            )""",
            """CREATE TABLE rating_history (
                id {serial_pk},
                match_id TEXT NOT NULL UNIQUE REFERENCES matches (id),
                a_id TEXT NOT NULL REFERENCES players (id),
                b_id TEXT NOT NULL REFERENCES players (id),
                score_a DOUBLE PRECISION NOT NULL,
                a_old_rating DOUBLE PRECISION NOT NULL,
                a_old_rd DOUBLE PRECISION NOT NULL,
                a_old_vol DOUBLE PRECISION NOT NULL,
                a_new_rating DOUBLE PRECISION NOT NULL,
                a_new_rd DOUBLE PRECISION NOT NULL,
                a_new_vol DOUBLE PRECISION NOT NULL,
                b_old_rating DOUBLE PRECISION NOT NULL,
                b_old_rd DOUBLE PRECISION NOT NULL,
                b_old_vol DOUBLE PRECISION NOT NULL,
                b_new_rating DOUBLE PRECISION NOT NULL,
                b_new_rd DOUBLE PRECISION NOT NULL,
                b_new_vol DOUBLE PRECISION NOT NULL,
                created BIGINT NOT NULL
            )""",
            "CREATE INDEX rating_history_by_a ON rating_history (a_id, id)",
            "CREATE INDEX rating_history_by_b ON rating_history (b_id, id)",
        ),
    ),
    (
        2,
        (
            """CREATE TABLE record_sigs (
                match_id TEXT NOT NULL,
                game INTEGER NOT NULL,
                role TEXT NOT NULL CHECK (role IN ('referee', 'seat0', 'seat1')),
                key {blob} NOT NULL,
                sig {blob} NOT NULL,
                created BIGINT NOT NULL,
                PRIMARY KEY (match_id, game, role),
                FOREIGN KEY (match_id, game) REFERENCES records (match_id, game)
            )""",
            _move_cosigned_copies,
        ),
    ),
    (
        3,
        (
            # Every input a running match accepted (server/journal.py), kept until it ends.
            """CREATE TABLE journal (
                match_id TEXT NOT NULL REFERENCES matches (id),
                n INTEGER NOT NULL CHECK (n >= 0),
                entry {blob} NOT NULL,
                PRIMARY KEY (match_id, n)
            )""",
            # Resume tokens outlive the process that issued them; only their hashes are kept.
            """CREATE TABLE resume_tokens (
                hash {blob} PRIMARY KEY,
                player TEXT NOT NULL UNIQUE REFERENCES players (id),
                created BIGINT NOT NULL
            )""",
        ),
    ),
    (
        4,
        (
            # The server node that referees a match: a restart takes up its own matches only, so
            # that nodes sharing one database never referee one match twice.
            "ALTER TABLE matches ADD COLUMN node TEXT",
            "CREATE INDEX matches_by_node ON matches (status, node)",
        ),
    ),
    (
        5,
        (
            # The nodes that share this store (server/cluster.py): where players are sent to
            # reach one, the key all of them sign with, and the lease (wall-clock milliseconds)
            # that another node may take its matches over after.
            """CREATE TABLE nodes (
                name TEXT PRIMARY KEY,
                addr TEXT NOT NULL,
                key {blob} NOT NULL,
                lease_until BIGINT NOT NULL,
                started BIGINT NOT NULL
            )""",
            # Quick-match requests waiting on one node, that a player of another may be paired
            # with (its rule set's digest and the mode are the key).
            """CREATE TABLE quick_queue (
                id {serial_pk},
                node TEXT NOT NULL,
                player TEXT NOT NULL REFERENCES players (id),
                digest {blob} NOT NULL,
                mode TEXT NOT NULL,
                created BIGINT NOT NULL
            )""",
            "CREATE INDEX quick_queue_by_rules ON quick_queue (digest, mode, id)",
            # A player waiting on ``node`` was paired (its quick entry, or its open match) into a
            # match another node referees: ``node`` sends it there.
            """CREATE TABLE handoffs (
                id {serial_pk},
                node TEXT NOT NULL,
                player TEXT NOT NULL,
                match_id TEXT NOT NULL REFERENCES matches (id),
                entry BIGINT,
                created BIGINT NOT NULL
            )""",
            "CREATE INDEX handoffs_by_node ON handoffs (node, id)",
            # Open matches are joined from any node: the invitation and the listing live here.
            "ALTER TABLE matches ADD COLUMN invite TEXT",
            "ALTER TABLE matches ADD COLUMN public INTEGER",
            # Whether the host follows redirects (capability ``redirect``): only then may a
            # player of another node join, since the match then runs there.
            "ALTER TABLE matches ADD COLUMN movable INTEGER",
            "CREATE UNIQUE INDEX matches_by_invite ON matches (invite)",
        ),
    ),
    (
        6,
        (
            # The journal's tail (server/journal.py, store_journal.py): rows in the order they
            # were stored, no index but the row number, moved into ``journal`` in bulk.
            _journal_log,
        ),
    ),
    (
        7,
        (
            # The ownership epoch of a match: a fencing token that every takeover (a failover,
            # a restart taking up its own matches) increments. A write for a running match
            # succeeds only for the node that referees it under the epoch it took it at, checked
            # in the write's own transaction, so a node that stalled past its lease and woke
            # cannot write into a match another node took over (server/cluster.py).
            "ALTER TABLE matches ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    (
        8,
        (
            # What each seat's player fired in a finished one-on-one match, over all its games
            # (server/records.py, when the match is concluded): a player's accuracy (spec 6.9,
            # ``player``) is the sum of its hits over the sum of its shots. A row a match, a
            # seat, written once, so that concluding a match again counts nothing twice.
            """CREATE TABLE match_figures (
                match_id TEXT NOT NULL REFERENCES matches (id),
                seat INTEGER NOT NULL CHECK (seat IN (0, 1)),
                player TEXT NOT NULL REFERENCES players (id),
                shots INTEGER NOT NULL,
                hits INTEGER NOT NULL,
                PRIMARY KEY (match_id, seat)
            )""",
            "CREATE INDEX match_figures_by_player ON match_figures (player)",
            # A player asked for by display name (``player``), and the list's host names.
            "CREATE INDEX players_by_name ON players (name)",
        ),
    ),
    (
        9,
        (
            # Team play on a cluster (spec 6.8, 4.10): every member of a team match, so that a
            # member who joins on one node is counted by the node that hosts the match, and a
            # member who comes back after a failover is found and sent where the match went
            # (``matches`` names the captains only). ``member``: the order the team was joined
            # in (the host is member 0 of team 0); ``node``: where the member waited to start.
            """CREATE TABLE team_members (
                match_id TEXT NOT NULL REFERENCES matches (id),
                player TEXT NOT NULL REFERENCES players (id),
                team INTEGER NOT NULL CHECK (team IN (0, 1)),
                member INTEGER NOT NULL,
                node TEXT,
                PRIMARY KEY (match_id, player)
            )""",
            "CREATE INDEX team_members_by_player ON team_members (player)",
            # Each team's invitation, joined from any node.
            """CREATE TABLE team_invites (
                code TEXT PRIMARY KEY,
                match_id TEXT NOT NULL REFERENCES matches (id),
                team INTEGER NOT NULL CHECK (team IN (0, 1))
            )""",
        ),
    ),
)
"""Schema migrations as (version, DDL templates), applied in order; append, never edit."""


def migrate(conn: Connection, dialect: Dialect) -> None:
    """Bring the database on ``conn`` up to the latest schema version (see the module docstring)."""
    latest = MIGRATIONS[-1][0] if MIGRATIONS else 0
    if dialect.migrate_lock:
        with _write(conn, dialect):
            conn.execute(dialect.migrate_lock)
            conn.execute(_VERSION_TABLE)
            current = _current(conn, latest)
            for version, statements in MIGRATIONS:
                if version > current:
                    _apply(conn, dialect, version, statements)
        return
    conn.execute(_VERSION_TABLE)
    current = _current(conn, latest)
    for version, statements in MIGRATIONS:
        if version <= current:
            continue
        with _write(conn, dialect):
            # Read again under the write lock: another process may have migrated meanwhile.
            if version > _current(conn, latest):
                _apply(conn, dialect, version, statements)


_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)"


def _current(conn: Connection, latest: int) -> int:
    """The database's schema version; `StoreError` if it is newer than ``latest``."""
    (current,) = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
    if current > latest:
        raise StoreError(
            f"database schema version {current} is newer than this server knows ({latest});"
            " run a newer seabattle"
        )
    return int(current)


def _apply(
    conn: Connection, dialect: Dialect, version: int, steps: Sequence[MigrationStep]
) -> None:
    for step in steps:
        if isinstance(step, str):
            conn.execute(dialect.ddl(step))
        else:
            step(conn, dialect)
    conn.execute(dialect.sql("INSERT INTO schema_version (version) VALUES (?)"), (version,))


@contextlib.contextmanager
def _write(conn: Connection, dialect: Dialect) -> Iterator[None]:
    """One write transaction: committed if the block ends normally, else rolled back."""
    conn.execute(dialect.begin_write)
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # After a failed COMMIT SQLite may still be in the transaction; a connection that broke
        # cannot roll back, and the error that broke it is the one to see.
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise
