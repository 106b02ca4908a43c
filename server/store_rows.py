"""The store's row types, its column lists and the converters from SQL rows, and the checks on
the ids it is given (`Store` is in ``store``, whose docstring tells how it works).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .ladder import Rating

__all__ = [
    "Fence",
    "MatchRow",
    "MatchStatus",
    "PlayerRow",
    "RatingChange",
    "RecordRow",
    "as_player_id",
]

MatchStatus = Literal["open", "playing", "finished", "aborted"]
"""Where a match is in its life: open (waiting for a second seat), playing, finished, aborted."""

RatingChange = tuple[Rating, Rating]
"""A player's rating before and after one rated match."""

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
    node: str | None = None  #: the node that referees it (or hosts it while it is open)
    epoch: int = 0  #: its ownership epoch (:class:`Fence`)
    public: bool = True  #: listed, and open to spectators

    @property
    def fence(self) -> Fence:
        """What its node's writes for it are checked against (``node`` must be set)."""
        assert self.node is not None
        return Fence(self.node, self.epoch)


@dataclass(frozen=True, slots=True)
class Fence:
    """Who may write for a running match: the node that referees it and the ownership epoch it
    took the match at. Every takeover increments the epoch, so a node that lost the match holds
    a fence the store no longer matches (`~.schema.Fenced`)."""

    node: str
    epoch: int


@dataclass(frozen=True)
class RecordRow:
    """One signed record; game 0 is the record of the whole match."""

    match_id: str
    game: int
    record: bytes
    signature: bytes
    created: int


_PLAYER_COLS = "id, name, created, rating, rd, vol, games, wins, losses, draws"
_MATCH_COLS = (
    "id, rules, mode, seat0, seat1, status, result, created, finished, node, epoch,"
    " COALESCE(public, 1)"
)
_RECORD_COLS = "match_id, game, record, signature, created"
_HISTORY_COLS = (
    "a_id, b_id, score_a, a_old_rating, a_old_rd, a_old_vol, a_new_rating, a_new_rd, a_new_vol, "
    "b_old_rating, b_old_rd, b_old_vol, b_new_rating, b_new_rd, b_new_vol"
)


# psycopg returns bytea as memoryview; bytes() in the row builders makes both backends alike.


def _player(row: Sequence[Any]) -> PlayerRow:
    return PlayerRow(*row)


def _match(row: Sequence[Any]) -> MatchRow:
    mid, rules, mode, seat0, seat1, status, result, created, finished, node, epoch, public = row
    parsed = None if result is None else json.loads(result)
    return MatchRow(
        mid,
        bytes(rules),
        mode,
        seat0,
        seat1,
        status,
        parsed,
        created,
        finished,
        node,
        int(epoch),
        bool(public),
    )


def _record(row: Sequence[Any]) -> RecordRow:
    match_id, game, record, signature, created = row
    return RecordRow(match_id, game, bytes(record), bytes(signature), created)


def _json(value: Any) -> str:
    # Sorted and compact, so the same result is always the same text and compares equal.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _check_match_id(match_id: str) -> None:
    if not _MATCH_ID.fullmatch(match_id):
        raise ValueError(f"match id must be 32 lowercase hex digits, got {match_id!r}")


def as_player_id(text: str) -> str | None:
    """The player id ``text`` spells (64 hex digits, either case; spec 2.4), in the lower case
    the store keeps, or ``None`` when it spells none (a display name, say)."""
    low = text.lower()
    return low if _PLAYER_KEY.fullmatch(low) else None


def _check_player_id(player_id: str) -> None:
    # Lowercase only: the same key spelled in two cases must not become two accounts.
    if not (_PLAYER_KEY.fullmatch(player_id) or player_id.startswith("guest:")):
        raise ValueError(
            f"player id must be 64 lowercase hex digits or start with 'guest:', got {player_id!r}"
        )
