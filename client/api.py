"""The scripting API: play, watch and fetch records from a seabattle server with ``async with``.

Theory of operation. :func:`connect` opens one TCP (or TLS) stream, runs the handshake of
``spec/protocol.md`` 5.6, step 1, and yields a :class:`Client`. Inside the ``async with`` one reader
task owns the receiving side of the stream; every send goes through one lock
(:class:`~.wire.Wire`), so the reader itself may send (automatic answers, reveals, co-signatures)
without racing the script.

The reader routes each message: ``ok``/``error`` with a ``ref`` wake the request that carries that
id; a refused move (``error`` whose ``ref`` is a move's ``seq``) goes to the match that sent the
move; everything naming a match goes to its :class:`~.match.MatchHandle`, which turns it into typed
events (:mod:`.events`) that :meth:`MatchHandle.events` drains.

The pieces live in their own modules (:mod:`.wire`: framing and keys; :mod:`.events`;
:mod:`.match`: one match, a shell over the pure seat; :mod:`.lobby` and :mod:`.rejoin`: the
lobby's requests and getting back in, which :class:`Client` inherits); this module re-exports
them, so ``from seabattle.client.api import connect, MatchHandle, YourTurn`` works.
Bots that play over it are :mod:`seabattle.bots.play`'s.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import LEAN, PEOPLE, REDIRECT, TEAMS, Role
from seabattle.protocol.targeting import feed_view

from .events import (
    GameEnded,
    GameStarted,
    IncomingShot,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    Reconnecting,
    Refused,
    Resumed,
    Said,
    ShotResult,
    YourTurn,
)
from .lobby import Lobby
from .match import MatchHandle, RunningClock, Tamper
from .rejoin import PING_AFTER, RECONNECT_FIRST, SILENCE, Rejoin
from .wire import (
    AGENT,
    HANDSHAKE_TIMEOUT,
    ConnectionClosed,
    ConnectionLost,
    HandshakeTimeout,
    KeyFileError,
    RequestFailed,
    Wire,
    client_handshake,
    load_key,
    public_key,
)

__all__ = [
    "AGENT",
    "HANDSHAKE_TIMEOUT",
    "PING_AFTER",
    "SILENCE",
    "Client",
    "ConnectionClosed",
    "ConnectionLost",
    "GameEnded",
    "GameStarted",
    "HandshakeTimeout",
    "IncomingShot",
    "Info",
    "KeyFileError",
    "LieDetected",
    "MatchEnded",
    "MatchEvent",
    "MatchHandle",
    "Reconnecting",
    "Refused",
    "RequestFailed",
    "Resumed",
    "RunningClock",
    "Said",
    "ShotResult",
    "Tamper",
    "Wire",
    "YourTurn",
    "client_handshake",
    "connect",
    "feed_view",
    "load_key",
    "public_key",
]


#: Pauses before a rate-limited request goes again: doubling from the first to the last (seconds).
_REQUEST_BACKOFF = 0.05
_MAX_REQUEST_BACKOFF = 3.2


class Client(Lobby, Rejoin):
    """An authenticated connection to a server. Made by :func:`connect`. Its requests of the
    lobby (``create``, ``join``, ``quick``, ``list``, ``ladder``, ``get_record``, ``watch``) are
    :class:`~.lobby.Lobby`'s, and getting back in after a drop or a redirect is
    :class:`~.rejoin.Rejoin`'s."""

    def __init__(
        self,
        wire: Wire,
        key: Ed25519PrivateKey,
        player: str,
        server_key: bytes,
        *,
        name: str = "bot",
        tls: bool = False,
        addr: tuple[str, int] | None = None,
        also: Sequence[tuple[str, int]] = (),
        reconnect_for: float = 0.0,
        caps: Sequence[str] = (TEAMS, LEAN),
        silence: float = SILENCE,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.wire = wire
        self.key = key
        self.player = player
        self.server_key = server_key
        self.name = name
        self._tls = tls
        #: where to reconnect: the address connected to, then the others given (a cluster's nodes)
        self._addrs: list[tuple[str, int]] = [addr, *also] if addr is not None else []
        self._at = addr  # the address of the node the current connection reached
        self._next_addr = 0  # where in ``_addrs`` the next attempt to get back in goes
        self._reconnect_for = reconnect_for
        self._silence = silence
        self._handshake_timeout = handshake_timeout
        #: The connection's number: every new connection (a reconnect, a redirect) adds one, so
        #: a match knows which of its messages the current connection has not carried yet.
        self.epoch = 0
        self._online = True  # the current connection is up (not between a drop and a resume)
        self._gone = False  # reconnecting was given up: moves raise ConnectionLost
        self._changed = trio.Event()  # set (and replaced) whenever one of the two above changes
        #: Since when the client has been out of its matches (``None``: seated, or never out);
        #: getting back in is bounded by ``reconnect_for`` from there, across redirects.
        self._lost_at: float | None = None
        self._retry = RECONNECT_FIRST  # the next pause before trying to get back in
        #: A redirect could not be followed: the client is on a node that does not hold its match.
        self._unseated = False
        self._silent = False  # the silence timeout ended the last connection
        self._pings = 0
        #: the capabilities offered on every connection (a reconnect's and a redirect's add
        #: ``redirect``); those agreed on the current one are in ``wire.caps``
        self.caps = tuple(caps)
        self._bye: str | None = None  # the reason of the last bye the server sent
        #: ``host:port`` of each node a redirect moved this client to, in order (spec 4.10)
        self.moves: builtins.list[str] = []
        self.matches: dict[bytes, MatchHandle] = {}
        #: The connection (:attr:`epoch`) each match of ours was made on or last given back on
        #: (``start``, ``snapshot``): after a reconnect its moves wait until it is given back.
        self._seated_on: dict[bytes, int] = {}
        self._watchers: dict[bytes, trio.MemorySendChannel[m.Message]] = {}
        self._pending: dict[int, tuple[trio.Event, list[m.Ok | m.Error]]] = {}
        self._ids = 0
        #: Which match sent the move with this ``seq`` (so that its refusal goes back there).
        self._moves: dict[int, MatchHandle] = {}
        self.errors: list[m.Error] = []
        self._nursery: trio.Nursery | None = None  # the reader's: runs delayed resends
        self._people_init()  # the account's events and challenges (spec 6.9)

    # -- requests --------------------------------------------------------------------------------

    def _next_id(self) -> int:
        # Request ids and move seqs come from one counter: a refusal's ``ref`` then names exactly
        # one thing, where per-match seqs could collide with each other and with request ids.
        self._ids += 1
        return self._ids

    def _move_seq(self, handle: MatchHandle) -> int:
        seq = self._next_id()
        self._moves[seq] = handle
        return seq

    async def _request(self, make: Callable[[int], m.Message]) -> dict[str, Any]:
        delay = _REQUEST_BACKOFF
        while True:
            if self._gone:
                raise ConnectionLost("the connection is lost and reconnecting gave up")
            rid = self._next_id()
            done = trio.Event()
            box: list[m.Ok | m.Error] = []
            self._pending[rid] = (done, box)
            try:
                await self.wire.send(make(rid))
                await done.wait()
            finally:
                self._pending.pop(rid, None)
            if not box:
                if self._gone:
                    raise ConnectionLost("the connection is lost and reconnecting gave up")
                raise ConnectionClosed("the connection closed before the answer")
            ans = box[0]
            if isinstance(ans, m.Error):
                if ans.code == ErrorCode.RATE_LIMITED and delay <= _MAX_REQUEST_BACKOFF:
                    # Dropped, not refused (spec 2.5): the same request may go again later.
                    await trio.sleep(delay)
                    delay *= 2
                    continue
                raise RequestFailed(ans.code, ans.msg)
            return dict(ans.data)

    async def _deliver(self, msg: m.Message, *, wait: bool) -> int | None:
        """Send a game message of ours on the current connection; the :attr:`epoch` it went out
        on, or ``None`` when it did not go out because the connection is down.

        Without ``wait`` a connection that is down raises :class:`ConnectionClosed` (the reader's
        own sends: it is the task that gets back in). With ``wait`` (the script's moves) it waits
        until the client is back in its match on a new connection (its ``start`` or
        ``snapshot``) and returns ``None``: the match's snapshot then says what is still owed,
        and the match sends it again (spec 4.7), so that a move is never sent twice on one
        connection. Raises :class:`ConnectionLost` once the client gave up getting back in.
        """
        if wait and self._online and self._unseated_match(msg):
            # Back on a connection is not yet back in the match: a node about to take it over
            # (a failover) would refuse the move, NO_SUCH_MATCH, and its snapshot would then
            # find the move carried, owe nothing, and the turn would stand still. Past
            # ``reconnect_for`` (the match ended meanwhile: nothing gives it back) it goes out.
            with trio.move_on_after(self._reconnect_for):
                while self._online and not self._gone and self._unseated_match(msg):
                    await self._changed.wait()
            if self._online and not self._gone and not self._unseated_match(msg):
                return None
        while True:
            if self._gone:
                raise ConnectionLost("the connection is lost and reconnecting gave up")
            epoch = self.epoch
            if self._online:
                try:
                    await self.wire.send(msg)
                    return epoch
                except ConnectionClosed:
                    if not wait:
                        raise
            elif not wait:
                raise ConnectionClosed("the connection is down")
            while not self._gone and (self.epoch == epoch or not self._online):
                await self._changed.wait()
            if not self._gone:
                return None

    def _unseated_match(self, msg: m.Message) -> bool:
        """Whether ``msg``'s match is one of ours that the current connection has not given
        back yet (after a reconnect or a redirect, until its ``start`` or ``snapshot``)."""
        mid = getattr(msg, "match", None)
        if not isinstance(mid, bytes):
            return False
        h = self.matches.get(mid)
        return h is not None and not h._done and self._seated_on.get(mid, self.epoch) != self.epoch

    def _notify(self) -> None:
        """Wake whoever waits for the connection to come back (or for the client to give up)."""
        ev, self._changed = self._changed, trio.Event()
        ev.set()

    def _swap(self, wire: Wire, at: tuple[str, int]) -> Wire:
        """Carry on over ``wire``, a new connection to ``at``; returns the old one, to close."""
        old, self.wire, self._at, self._bye = self.wire, wire, at, None
        self.epoch += 1
        self._online = True
        self._notify()
        return old

    def _live(self) -> builtins.list[MatchHandle]:
        return [h for h in self.matches.values() if not h._done]

    def _spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` beside the reader (a delayed resend), for as long as the connection."""
        if self._nursery is not None:
            self._nursery.start_soon(fn)

    def _handle_for(self, match_id: bytes) -> MatchHandle:
        h = self.matches.get(match_id)
        if h is None:
            h = self.matches[match_id] = MatchHandle(self, match_id)
            self._seated_on[match_id] = self.epoch
        return h

    # -- the reader ------------------------------------------------------------------------------

    async def _reader(self) -> None:
        try:
            while True:
                await self._read_wire()
                self._online = False
                self._notify()
                if not await self._reconnect():
                    return
        finally:
            self._gone, self._online = True, False
            self._notify()
            self._fail_pending()
            for h in self.matches.values():
                h._close()
            self._moves.clear()
            for w in self._watchers.values():
                w.close()
            self._account_closed()

    async def _read_wire(self) -> None:
        """Dispatch what the current connection brings, until it ends (or falls silent)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_silence)
            try:
                while True:
                    msg = await self.wire.recv()
                    if msg is None:
                        return
                    if isinstance(msg, RemoteProtocolError):
                        # A well-framed body that is no valid message: refused, and the session
                        # goes on (spec 2.5).
                        with suppress(ConnectionClosed):
                            await self.wire.send(m.Error(int(msg.code), msg.detail, None))
                        continue
                    await self._dispatch(msg)
            except (RemoteProtocolError, ConnectionClosed):
                return
            finally:
                nursery.cancel_scope.cancel()

    def _fail_pending(self) -> None:
        """Wake every request waiting for an answer: the connection that carried it is gone."""
        for done, _ in list(self._pending.values()):
            done.set()

    def _seated(self) -> None:
        """A node gave a match of ours back (``start``, ``snapshot``): the client is in again,
        and the next drop begins a fresh backoff and a fresh ``reconnect_for``."""
        self._lost_at, self._retry, self._unseated = None, RECONNECT_FIRST, False

    def _forget_moves(self, handle: MatchHandle) -> None:
        for seq in [k for k, h in self._moves.items() if h is handle]:
            del self._moves[seq]

    def _error_targets(self, msg: m.Error) -> builtins.list[MatchHandle]:
        """The matches an ``error`` that answers no pending request concerns."""
        live = [h for h in self.matches.values() if not h._done]
        if msg.ref is not None:
            # A refused move names its seq; any other ref is a late answer to a request whose
            # caller has gone (cancelled), which concerns no match.
            h = self._moves.get(msg.ref)
            return [h] if h is not None and not h._done else []
        # Version 1's error has no match field; take it when a server sends one anyway.
        mid = getattr(msg, "match", None)
        if isinstance(mid, bytes):
            h = self.matches.get(mid)
            return [h] if h is not None and not h._done else []
        # The one refusal with ref nil that a match causes is a refused placement (FLOW step 5):
        # it concerns the match still waiting for its ``committed``.
        placing = [h for h in live if h.awaiting_commit]
        if len(placing) == 1:
            return placing
        # Otherwise (an aborted match, or a rate limit that dropped an answer) every running match
        # hears of it: a spurious notice is better than a lost one.
        return live

    async def _dispatch(self, msg: m.Message) -> None:
        if isinstance(msg, m.Ok | m.Error) and msg.ref is not None and msg.ref in self._pending:
            done, box = self._pending[msg.ref]
            box.append(msg)
            done.set()
            return
        if isinstance(msg, m.Error):
            self.errors.append(msg)
            for h in self._error_targets(msg):
                if msg.code == ErrorCode.RATE_LIMITED:
                    h._rate_limited(msg.ref)  # sent again later: nothing for the script to do
                else:
                    h._emit(Refused(msg.code, msg.msg))
            return
        if isinstance(msg, m.Ping):
            await self.wire.send(m.Pong(msg.n))
            return
        if isinstance(msg, m.Redirect):
            await self._follow(msg)
            return
        if isinstance(msg, m.Bye):
            self._bye = msg.reason
            return
        if self._account(msg):  # challenges: the account's events (spec 6.9.3)
            return
        mid = getattr(msg, "match", None)
        if not isinstance(mid, bytes):
            return
        if isinstance(msg, m.Start | m.Snapshot) and mid in self.matches:
            self._seated()
            if self._seated_on.get(mid) != self.epoch:
                self._seated_on[mid] = self.epoch
                self._notify()  # its moves that wait go out with the snapshot (the seat's)
        w = self._watchers.get(mid)
        if w is not None and mid not in self.matches:
            w.send_nowait(msg)
            return
        h = self._handle_for(mid)
        await h._handle(msg)


@asynccontextmanager
async def connect(
    host: str,
    port: int,
    *,
    key: Ed25519PrivateKey | str | os.PathLike[str] | None = None,
    name: str = "bot",
    tls: bool = False,
    stream: trio.abc.Stream | None = None,
    follow: bool = True,
    reconnect_for: float = 120.0,
    also: Sequence[tuple[str, int]] = (),
    lean: bool = True,
    silence: float = SILENCE,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> AsyncIterator[Client]:
    """Connect, authenticate (a fresh guest key when ``key`` is ``None``) and yield a client.

    ``stream`` replaces the TCP connection (tests pass an in-memory stream). One reader task runs
    for as long as the ``async with`` body does. ``follow``: offer the capability ``redirect``,
    so that a server of several nodes may move this client to the node its match runs on (it
    does so by itself, :meth:`Client._follow`). ``lean``: offer the capability ``lean``, so that
    the server sends no copy of this client's own moves (the match follows the turn itself).

    A connection that drops while a match runs is opened again, with backoff, for up to
    ``reconnect_for`` seconds (0: never), at ``host:port`` and then at the addresses in ``also``
    (the other nodes of a cluster), resuming with the session's token: the match's handle says
    :class:`Reconnecting`, then :class:`Resumed` with the server's snapshot, and play goes on.
    A move made meanwhile (``fire``, ``radar``, ``place``, ``resign``) waits until a node gives
    the match back (a node about to take it over after a failover may take the connection
    first), and whatever the snapshot says is still owed goes out then, a shot with its ``seq``
    (spec 4.7). A redirect to a node that cannot be reached sends the client back
    through the addresses it knows until a node seats it. Once it gives up, the matches' events
    end and moves and requests raise :class:`ConnectionLost`. Requests waiting for an answer
    when the connection dropped fail with :class:`ConnectionClosed`.

    ``silence``: seconds without any frame from the server after which the connection counts
    as dropped (at least 60, spec 4.6; the client pings after :data:`PING_AFTER`).
    ``handshake_timeout``: seconds from opening a connection to ``authed``
    (:data:`HANDSHAKE_TIMEOUT` unless given), this one and every reconnect's; a server that
    does not take the connection in time, or takes it and never answers, raises
    :class:`HandshakeTimeout` (a ``TimeoutError``) here, and is passed over when reconnecting.
    A ``key`` file that holds no key, or whose folder does not exist, raises
    :class:`KeyFileError`.
    """
    if silence < SILENCE:
        raise ValueError(f"silence must be at least {SILENCE:g} seconds (spec 4.6), not {silence}")
    addr = (host, port) if stream is None else None
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    # The reference client plays team matches (spec 6.8), takes the people messages (6.9)
    # and, if asked, follows redirects.
    caps = (REDIRECT,) * follow + (TEAMS,) + (LEAN,) * lean + (PEOPLE,)
    wire: Wire | None = None
    client: Client | None = None
    try:
        with trio.move_on_after(handshake_timeout) as scope:
            if stream is None:
                if tls:
                    stream = await trio.open_ssl_over_tcp_stream(host, port)
                else:
                    stream = await trio.open_tcp_stream(host, port)
            wire = Wire(stream, role=Role.CLIENT)
            player, server_key = await client_handshake(wire, k, name, caps=caps)
        if scope.cancelled_caught:
            # Which of the two waits ran out tells the user where to look: nothing listening
            # (or a firewall dropping packets), or a process that took the connection and is
            # stopped, wedged, or no seabattle server.
            raise HandshakeTimeout(
                f"{host}:{port}", handshake_timeout, connected=stream is not None
            )
        assert wire is not None
        client = Client(
            wire,
            k,
            player,
            server_key,
            name=name,
            tls=tls,
            addr=addr,
            also=also,
            reconnect_for=reconnect_for,
            caps=caps,
            silence=silence,
            handshake_timeout=handshake_timeout,
        )
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            client._nursery = nursery
            nursery.start_soon(client._reader)
            try:
                yield client
            except Exception as e:
                # The script's own error: raised as itself once the reader has stopped, not
                # wrapped in the nursery's exception group.
                failure = e
            finally:
                # The client's wire now: a redirect may have moved it to another node.
                if not client.wire.closed:
                    with (
                        trio.move_on_after(1),
                        suppress(ConnectionClosed, trio.BrokenResourceError),
                    ):
                        await client.wire.send(m.Bye("done"))
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        with trio.CancelScope(shield=True):
            if wire is not None:
                await wire.aclose()
            elif stream is not None:
                await trio.aclose_forcefully(stream)
            if client is not None and client.wire is not wire:
                await client.wire.aclose()
