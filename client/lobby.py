"""The requests a client makes of the lobby: open, join or pair for a match, list the open ones
and the running ones, the ladder, a player's figures, a finished match's record, and watching a
match (spec 6.1 to 6.3, 6.9, 7.4).

Each is one request (:meth:`Lobby._request`: an id, the ``ok`` or ``error`` that answers it, a
rate limit waited out) and the answer's shape. :class:`~.api.Client` has them from
:class:`Lobby`, and the requests' machinery, the reader that answers them and the matches from
the client.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode

from .people import People
from .wire import RequestFailed

if TYPE_CHECKING:
    from .match import MatchHandle

__all__ = ["Lobby"]


class Lobby(People):
    """The lobby's requests, for :class:`~.api.Client`, which sends them and keeps the matches
    (who is online and challenges are :class:`~.people.People`'s)."""

    #: the channels of the matches being watched, by match id (the reader feeds them)
    _watchers: dict[bytes, trio.MemorySendChannel[m.Message]]

    async def _request(self, make: Callable[[int], m.Message]) -> dict[str, Any]:
        """Send ``make(id)`` and return the data of the ``ok`` that answers it; raises
        :class:`~.wire.RequestFailed` on an ``error``."""
        raise NotImplementedError

    def _handle_for(self, match_id: bytes) -> MatchHandle:
        """The handle of match ``match_id``, made on first use."""
        raise NotImplementedError

    async def create(
        self, rules: dict[str, Any] | None = None, mode: str = "blind", public: bool = True
    ) -> tuple[MatchHandle, str | None]:
        """Open a match; returns its handle and the private invitation code. For team rules
        (spec 6.8) the handle's ``team_invites`` are the invitations to each seat's team."""
        data = await self._request(
            lambda i: m.Create(i, rules or {"preset": "classic"}, mode, public)
        )
        h = self._handle_for(data["match"])
        teams = data.get("teams")
        if isinstance(teams, list) and len(teams) == 2 and all(isinstance(c, str) for c in teams):
            h.team_invites = (teams[0], teams[1])
        return h, data.get("invite")

    async def join(self, match: bytes | str) -> MatchHandle:
        """Take the free seat of a match: by id (bytes or 32 hex digits) or by invitation code
        (a team's invitation joins that team, spec 6.8; a team match answers once it is full)."""
        mid: bytes | None = None
        invite: str | None = None
        if isinstance(match, bytes):
            mid = match
        else:
            try:
                raw = bytes.fromhex(match)
            except ValueError:
                raw = b""
            if len(raw) == 16:
                mid = raw
            else:
                invite = match
        data = await self._request(lambda i: m.Join(i, mid, invite))
        return self._handle_for(data["match"])

    async def quick(self, rules: dict[str, Any] | None = None, mode: str = "blind") -> MatchHandle:
        """Pair with the next player asking for the same rules and mode (waits for one)."""
        data = await self._request(lambda i: m.Quick(i, rules or {"preset": "classic"}, mode))
        return self._handle_for(data["match"])

    async def list(self) -> builtins.list[dict[str, Any]]:
        """The open public matches."""
        data = await self._request(lambda i: m.ListMatches(i))
        return list(data.get("matches", []))

    async def ladder(self) -> builtins.list[dict[str, Any]]:
        """The rating ladder rows."""
        data = await self._request(lambda i: m.Ladder(i))
        return list(data.get("rows", []))

    async def running(self) -> builtins.list[dict[str, Any]]:
        """The running public matches (spec 6.9): ``match``, ``rules`` (its name), ``mode``,
        ``players``, ``names``, ``game`` (0 before the first) and ``spectators`` each."""
        data = await self._request(lambda i: m.Running(i))
        return list(data.get("matches", []))

    async def figures(self, who: str) -> dict[str, Any]:
        """A player's figures (spec 6.9), by player id or display name: ``player``, ``name``,
        ``rating``, ``rd``, ``games``, ``wins``, ``losses``, ``draws``, ``shots``, ``hits`` and
        ``history`` (rated matches, newest first); raises :class:`~.wire.RequestFailed`
        (``NO_SUCH_PLAYER``) for no such player, or a name more than one player has."""
        return await self._request(lambda i: m.PlayerFigures(i, who))

    async def get_record(self, match_id: bytes | str) -> dict[str, Any]:
        """The signed record of a finished match (verify it with ``protocol.record``)."""
        mid = bytes.fromhex(match_id) if isinstance(match_id, str) else match_id
        data = await self._request(lambda i: m.GetRecord(i, mid))
        rec = data["record"]
        if isinstance(rec, bytes):
            # A record nests deeper than a message may, so servers send its canonical bytes.
            from seabattle.protocol.record import RecordError, load_record

            try:
                # Canonical bytes only: decoded, others could pass for the record, but they are
                # not what was signed and stored (one signed record has one encoding, 11.2).
                rec = load_record(rec, canonical=True)
            except RecordError as e:
                raise RequestFailed(ErrorCode.RECORD_INVALID, f"the record: {e}") from None
        if not isinstance(rec, dict):
            raise RequestFailed(ErrorCode.RECORD_INVALID, "the record is neither bytes nor a map")
        return rec

    @asynccontextmanager
    async def watch(
        self, match_id: bytes | str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[m.Message]]:
        """Spectate: yields a channel of the snapshot, then the match's public events."""
        mid = bytes.fromhex(match_id) if isinstance(match_id, str) else match_id
        send, recv = trio.open_memory_channel[m.Message](math.inf)
        self._watchers[mid] = send
        try:
            await self._request(lambda i: m.Watch(i, mid))
            yield recv
        finally:
            self._watchers.pop(mid, None)
            send.close()
