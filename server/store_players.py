"""The players, the ladder and the ratings: the part of `Store` that changes a player's row."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .ladder import Rating, update
from .schema import Conflict, Cursor, NotFound
from .store_base import StoreBase
from .store_rows import (
    _HISTORY_COLS,
    _PLAYER_COLS,
    Fence,
    PlayerRow,
    RatingChange,
    _check_player_id,
    _player,
)

__all__ = ["HISTORY_MAX", "Figures", "PlayerStore", "RatedMatch"]

HISTORY_MAX = 100
"""The most rated matches a player's figures list (spec 2.4 bounds every list an answer holds)."""


@dataclass(frozen=True)
class RatedMatch:
    """One rated match in a player's history: the opponent, the player's score (1, 0.5 or 0)
    and its rating before and after."""

    match_id: str
    opponent: str
    score: float
    old: float
    new: float
    created: int


@dataclass(frozen=True)
class Figures:
    """A player's figures: the ladder's row, the shots and hits of its concluded one-on-one
    matches, and its rating history, newest first."""

    player: PlayerRow
    shots: int
    hits: int
    history: list[RatedMatch]


class PlayerStore(StoreBase):
    """Players and their ratings (a part of `Store`)."""

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

    async def players_named(self, name: str, limit: int = 2) -> list[tuple[str, int]]:
        """Up to ``limit`` players whose display name is ``name`` (exactly), as ``(id, rated
        games)``, the most games first (ties by id)."""

        def run() -> list[tuple[str, int]]:
            rows = self._all(
                "SELECT id, games FROM players WHERE name = ? ORDER BY games DESC, id LIMIT ?",
                (name, limit),
            )
            return [(r[0], int(r[1])) for r in rows]

        return await self._run(run)

    async def players(self, ids: Iterable[str]) -> dict[str, PlayerRow]:
        """The players ``ids`` that exist, by id, in one query."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}

        def run() -> dict[str, PlayerRow]:
            marks = ", ".join("?" * len(wanted))
            rows = self._all(f"SELECT {_PLAYER_COLS} FROM players WHERE id IN ({marks})", wanted)
            return {r[0]: _player(r) for r in rows}

        return await self._run(run)

    async def put_figures(
        self,
        match_id: str,
        seats: Sequence[tuple[str, int, int]],
        *,
        fence: Fence | None = None,
    ) -> None:
        """Store what each seat fired in the finished match ``match_id``: ``seats[s]`` is seat
        s's ``(player, shots, hits)``. Written once: storing them again changes nothing (a
        match concluded again counts once). ``fence``: as for `apply_result`."""

        def run() -> None:
            with self._transaction() as cur:
                self._match_for_update(cur, match_id, fence)
                for seat, (player, shots, hits) in enumerate(seats):
                    self._exec(
                        cur,
                        "INSERT INTO match_figures (match_id, seat, player, shots, hits)"
                        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (match_id, seat) DO NOTHING",
                        (match_id, seat, player, shots, hits),
                    )

        await self._run(run)

    async def figures(self, player_id: str, history: int = HISTORY_MAX) -> Figures | None:
        """The player's figures (its row, shots and hits summed over its concluded matches,
        and up to ``history`` rated matches, newest first), or None if there is no such
        player."""

        def run() -> Figures | None:
            row = self._one(f"SELECT {_PLAYER_COLS} FROM players WHERE id = ?", (player_id,))
            if row is None:
                return None
            shots, hits = self._one(
                "SELECT COALESCE(SUM(shots), 0), COALESCE(SUM(hits), 0) FROM match_figures"
                " WHERE player = ?",
                (player_id,),
            )
            rated = self._all(
                "SELECT match_id, a_id, b_id, score_a, a_old_rating, a_new_rating,"
                " b_old_rating, b_new_rating, created FROM rating_history"
                " WHERE a_id = ? OR b_id = ? ORDER BY id DESC LIMIT ?",
                (player_id, player_id, history),
            )
            return Figures(
                _player(row), int(shots), int(hits), [_rated(r, player_id) for r in rated]
            )

        return await self._run(run)

    # Ratings

    async def apply_result(
        self,
        match_id: str,
        a_id: str,
        b_id: str,
        score_a: float,
        now: int,
        *,
        fence: Fence | None = None,
    ) -> tuple[RatingChange, RatingChange]:
        """Rate one match: update both players and log the change, all in one transaction.

        ``score_a`` is 1 (a won, or b forfeited), 0.5 (draw) or 0. Returns ``((old_a, new_a),
        (old_b, new_b))``. Applying a match that was already applied changes nothing and returns
        the stored change (in the order asked for, if a and b are swapped); applying it with a
        different outcome raises `Conflict`. ``fence``: only if that node still referees the
        match under that epoch (`Fenced` otherwise).
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
                match = self._match_for_update(cur, match_id, fence)
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

    def _write_rating(self, cur: Cursor, player_id: str, new: Rating, score: float) -> None:
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


def _rated(row: Sequence[Any], player_id: str) -> RatedMatch:
    """A rating-history row as seen by ``player_id`` (its side a or b)."""
    match_id, a_id, b_id, score_a, a_old, a_new, b_old, b_new, created = row
    if a_id == player_id:
        return RatedMatch(match_id, b_id, score_a, a_old, a_new, created)
    return RatedMatch(match_id, a_id, 1.0 - score_a, b_old, b_new, created)
