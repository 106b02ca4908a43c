"""The signed records and their added signatures: the part of `Store` that keeps them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.record import ROLES, dump_record, load_record

from .schema import BadSignature, Conflict, Cursor, NotFound, check_signature
from .store_base import StoreBase
from .store_rows import _RECORD_COLS, Fence, RecordRow, _record

__all__ = ["RecordStore"]


class RecordStore(StoreBase):
    """Signed records and their co-signatures (a part of `Store`)."""

    async def put_record(
        self,
        match_id: str,
        game: int,
        record: bytes,
        signature: bytes,
        now: int,
        *,
        fence: Fence | None = None,
    ) -> None:
        """Store a signed record for game ``game`` of a match (0 = the whole match).

        Storing the same bytes again does nothing; different bytes for a stored record raise
        `Conflict`, because a signed record, once published, must never change. ``fence``: only
        if that node still referees the match under that epoch (`Fenced` otherwise).
        """
        if game < 0:
            raise ValueError(f"game number must be 0 or more, got {game}")
        record, signature = bytes(record), bytes(signature)

        def run() -> None:
            with self._transaction() as cur:
                self._match_for_update(cur, match_id, fence)
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
                # Locked (on PostgreSQL): two nodes adding the same role at once take turns, and
                # the second finds the first's row below instead of failing on the primary key.
                row = self._exec(
                    cur,
                    "SELECT record FROM records WHERE match_id = ? AND game = ?"
                    f"{self._dialect.lock_rows}",
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

    def _with_sigs(self, cur: Cursor, row: Sequence[Any]) -> RecordRow:
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
