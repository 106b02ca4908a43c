"""The client's side of people (spec 6.9): challenges, who is online, and a match's chat.

The session is its player's event stream (spec 6.9.3): the reader hands this module every
``challenged`` and ``challenge_gone`` (:meth:`People._account`), and tells it of every match
that starts, whatever the script is doing. :meth:`People.events` yields them as typed account
events (:class:`ChallengeReceived`, :class:`ChallengeEnded`, :class:`MatchStarted`), and
:attr:`People.incoming` keeps the challenges pending to us. :meth:`People.challenge` waits for
its answer and returns the match's handle; :meth:`People.accept` returns the handle of the match
it starts. A match's chat is :meth:`~.match.MatchHandle.say` and the :class:`~.events.Said`
event.
"""

from __future__ import annotations

import builtins
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol import messages as m

if TYPE_CHECKING:
    from .match import MatchHandle

__all__ = [
    "AccountEvent",
    "ChallengeEnded",
    "ChallengeFailed",
    "ChallengeReceived",
    "MatchStarted",
    "People",
]

#: Account events kept for :meth:`People.events` while nobody reads them; older ones are dropped
#: (:attr:`People.incoming` still holds every challenge pending).
EVENTS_KEPT = 256
ENDED_KEPT = 64  #: challenges whose end is remembered (see ``People._ended``)


class AccountEvent:
    """Base of the events of the player's account (spec 6.9.3), as :meth:`People.events`
    yields them."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ChallengeReceived(AccountEvent):
    """``player`` (display ``name``) challenges us to a match under ``rules`` (in full) and
    ``mode``: :meth:`People.accept` or :meth:`People.decline` it (by itself or its ``id``)."""

    id: bytes
    player: str
    name: str
    rules: dict[str, Any]
    mode: str


@dataclass(frozen=True, slots=True)
class ChallengeEnded(AccountEvent):
    """Challenge ``id`` (ours or to us) is over: ``reason`` is ``accepted`` (``match``: its
    id), ``declined`` (``detail``: the reason given, if any), ``cancelled``, ``expired`` or
    ``offline``."""

    id: bytes
    reason: str
    detail: str | None
    match: bytes | None


@dataclass(frozen=True, slots=True)
class MatchStarted(AccountEvent):
    """A match of ours started (``start``): from a challenge, or any other way."""

    match: MatchHandle


class ChallengeFailed(Exception):
    """A challenge of ours ended without a match: ``reason`` is ``declined`` (``detail``: the
    reason the other player gave), ``cancelled``, ``expired`` or ``offline``."""

    def __init__(self, challenge: bytes, reason: str, detail: str | None = None) -> None:
        said = f": {detail}" if detail else ""
        super().__init__(f"the challenge was {reason}{said}")
        self.challenge = challenge
        self.reason = reason
        self.detail = detail


class People:
    """Who is online, challenges and the account's events, for :class:`~.api.Client` (through
    :class:`~.lobby.Lobby`); its reader calls :meth:`_account` with every message."""

    _request: Callable[..., Any]
    _handle_for: Callable[[bytes], MatchHandle]
    matches: dict[bytes, MatchHandle]

    #: the challenges pending to us, oldest first, by id (spec 6.9.2)
    _incoming: dict[bytes, ChallengeReceived]
    #: our own challenges waiting for their end: id -> (woken when it ends, how it ended)
    _outgoing: dict[bytes, tuple[trio.Event, list[ChallengeEnded]]]
    #: how the latest challenges ended, by id: the end of one of ours may be read before its
    #: maker has registered to wait for it (right behind the ok that names it)
    _ended: OrderedDict[bytes, ChallengeEnded]
    _events: deque[AccountEvent]
    _events_ready: trio.Event

    def _people_init(self) -> None:
        self._incoming = {}
        self._outgoing = {}
        self._ended = OrderedDict()
        self._events = deque(maxlen=EVENTS_KEPT)
        self._events_ready = trio.Event()

    # -- the account's events -------------------------------------------------------------------

    @property
    def incoming(self) -> builtins.list[ChallengeReceived]:
        """The challenges pending to us now, oldest first."""
        return list(self._incoming.values())

    async def pending(self) -> builtins.list[ChallengeReceived]:
        """The challenges pending to us, once the server has surely told us of every one that
        was pending when this session began (spec 6.9.3: before the answer to a request)."""
        await self.online()
        return self.incoming

    async def events(self) -> AsyncIterator[AccountEvent]:
        """The account's events as they come, for as long as the connection lasts: challenges
        to us and how challenges end (:class:`ChallengeReceived`, :class:`ChallengeEnded`), and
        every match of ours that starts (:class:`MatchStarted`). One reader at a time."""
        while True:
            while self._events:
                yield self._events.popleft()
            if getattr(self, "_gone", False):
                return
            self._events_ready = trio.Event()
            await self._events_ready.wait()

    def _emit_account(self, ev: AccountEvent) -> None:
        self._events.append(ev)
        self._events_ready.set()

    def _account(self, msg: m.Message) -> bool:
        """The reader's: take ``msg`` if it is an account event (``True``: nothing else is to
        be done with it); note a match that starts."""
        if isinstance(msg, m.Challenged):
            ev = ChallengeReceived(msg.challenge, msg.player, msg.name, dict(msg.rules), msg.mode)
            self._incoming[ev.id] = ev
            self._emit_account(ev)
            return True
        if isinstance(msg, m.ChallengeGone):
            ended = ChallengeEnded(msg.challenge, msg.reason, msg.detail, msg.match)
            self._incoming.pop(ended.id, None)
            self._ended[ended.id] = ended
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
            waiting = self._outgoing.get(ended.id)
            if waiting is not None:
                waiting[1].append(ended)
                waiting[0].set()
            self._emit_account(ended)
            return True
        if isinstance(msg, m.Start):
            h = self._handle_for(msg.match)
            if not h._started.is_set():  # its first start, not one after a resume
                self._emit_account(MatchStarted(h))
        return False

    def _account_closed(self) -> None:
        """The connection is gone for good: wake whoever waits for an account event."""
        self._events_ready.set()
        for done, _ in self._outgoing.values():
            done.set()

    # -- requests -------------------------------------------------------------------------------

    async def online(self) -> builtins.list[dict[str, Any]]:
        """Who is online (spec 6.9.1): ``{player, name, rating, playing}`` rows, at most 100."""
        data = await self._request(lambda i: m.Online(i))
        return list(data.get("players", []))

    async def challenge(
        self,
        player: str,
        rules: dict[str, Any] | None = None,
        mode: str = "blind",
        *,
        made: Callable[[bytes], None] | None = None,
    ) -> MatchHandle:
        """Challenge ``player`` (its id, or a display name only one player online has) and wait
        for the answer: the match's handle once accepted, or :class:`ChallengeFailed`. ``made``
        is called with the challenge's id as soon as the server has it. Cancelling the wait
        cancels the challenge."""
        done = trio.Event()
        box: list[ChallengeEnded] = []
        data = await self._request(
            lambda i: m.Challenge(i, player, rules or {"preset": "classic"}, mode)
        )
        cid = data["challenge"]
        self._outgoing[cid] = (done, box)
        ended_early = self._ended.get(cid)
        if ended_early is not None:
            box.append(ended_early)
            done.set()
        try:
            if made is not None:
                made(cid)
            await done.wait()
        except BaseException:
            if not box:
                # Gone already, or the connection is: nothing to withdraw then.
                with trio.CancelScope(shield=True), trio.move_on_after(2), suppress(Exception):
                    await self.cancel(cid)
            raise
        finally:
            self._outgoing.pop(cid, None)
        if not box:
            from .wire import ConnectionClosed

            raise ConnectionClosed("the connection closed before the challenge was answered")
        ended = box[0]
        if ended.reason != "accepted" or ended.match is None:
            raise ChallengeFailed(cid, ended.reason, ended.detail)
        return self._handle_for(ended.match)

    async def accept(self, challenge: ChallengeReceived | bytes) -> MatchHandle:
        """Accept a challenge to us: the handle of the match it starts."""
        cid = challenge.id if isinstance(challenge, ChallengeReceived) else challenge
        data = await self._request(lambda i: m.Accept(i, cid))
        return self._handle_for(data["match"])

    async def decline(
        self, challenge: ChallengeReceived | bytes, reason: str | None = None
    ) -> None:
        """Decline a challenge to us, saying why (``reason``, at most 200 characters) or not."""
        cid = challenge.id if isinstance(challenge, ChallengeReceived) else challenge
        await self._request(lambda i: m.Decline(i, cid, reason))
        self._incoming.pop(cid, None)

    async def cancel(self, challenge: bytes) -> None:
        """Withdraw a challenge of ours."""
        await self._request(lambda i: m.Cancel(i, challenge))
