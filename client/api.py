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
:mod:`.match`: one match and its mirror; :mod:`.lobby`: the lobby's requests, which
:class:`Client` inherits; :mod:`.targeting`: what is known of the opponent's grid); this module
re-exports them, so ``from seabattle.client.api import connect, MatchHandle, YourTurn`` works.
Bots that play over it are :mod:`seabattle.bots.play`'s.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import LEAN, REDIRECT, TEAMS, Role
from seabattle.protocol.ticket import open_ticket

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
    ShotResult,
    YourTurn,
)
from .lobby import Lobby
from .match import MatchHandle, RunningClock, Tamper
from .targeting import feed_view
from .wire import (
    AGENT,
    ConnectionClosed,
    ConnectionLost,
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
    "IncomingShot",
    "Info",
    "LieDetected",
    "MatchEnded",
    "MatchEvent",
    "MatchHandle",
    "Reconnecting",
    "Refused",
    "RequestFailed",
    "Resumed",
    "RunningClock",
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
#: What a node may do instead of taking the client in (after a redirect, or a reconnect).
_UNFOLLOWED: tuple[type[Exception], ...] = (
    RequestFailed,
    ConnectionClosed,
    RemoteProtocolError,
    trio.BrokenResourceError,
)
#: ... and what a node that cannot be reached at all does (a handshake that runs out of time
#: raises ``TimeoutError``, an ``OSError``).
_UNREACHED: tuple[type[Exception], ...] = (*_UNFOLLOWED, OSError)
#: Pauses between attempts to reconnect: doubling from the first to the longest (seconds).
_RECONNECT_FIRST = 0.1
_RECONNECT_MAX = 5.0
#: The longest pause while a redirect cannot be followed: the match is about to move (its node's
#: lease runs out, another node takes it over), and a player asking again soon after is seated
#: within a second or two of that (issue 33's target: lease + 5 s).
_REASK_MAX = 1.5

#: Seconds of silence from the server after which the client sends ``ping`` (spec 4.6).
PING_AFTER = 20.0
#: Seconds without any frame from the server after which the connection counts as dropped, the
#: default of ``connect(silence=...)``; spec 4.6 allows no less.
SILENCE = 60.0
#: Seconds a new connection may take, from opening it to ``authed``, the default of
#: ``connect(handshake_timeout=...)``: spec 4.1 gives a client 10 to complete the handshake.
HANDSHAKE_TIMEOUT = 10.0


class Client(Lobby):
    """An authenticated connection to a server. Made by :func:`connect`. Its requests of the
    lobby (``create``, ``join``, ``quick``, ``list``, ``ladder``, ``get_record``, ``watch``) are
    :class:`~.lobby.Lobby`'s."""

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
        self._retry = _RECONNECT_FIRST  # the next pause before trying to get back in
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
        self._watchers: dict[bytes, trio.MemorySendChannel[m.Message]] = {}
        self._pending: dict[int, tuple[trio.Event, list[m.Ok | m.Error]]] = {}
        self._ids = 0
        #: Which match sent the move with this ``seq`` (so that its refusal goes back there).
        self._moves: dict[int, MatchHandle] = {}
        self.errors: list[m.Error] = []
        self._nursery: trio.Nursery | None = None  # the reader's: runs delayed resends

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
        until the client is back in on a new connection and returns ``None``: the match's
        snapshot then says what is still owed, and the match sends it again (spec 4.7), so that a
        move is never sent twice on one connection. Raises :class:`ConnectionLost` once the
        client gave up getting back in.
        """
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

    async def _watch_silence(self) -> None:
        """Spec 4.6 from the client's side: ``ping`` after :data:`PING_AFTER` seconds without a
        frame, and after ``silence`` seconds the connection counts as dropped. A server that
        was stopped (SIGSTOP) or cut off by the network leaves the TCP connection open for ever;
        without this its players would wait as long as it stays away. The stream is closed, so
        the reader sees its end and gets back in as after any drop."""
        pinged: tuple[Wire, float] | None = None
        while True:
            wire = self.wire  # a redirect may have moved us: always the current connection
            quiet = trio.current_time() - wire.last_recv
            if quiet >= self._silence:
                self._silent = True
                await wire.abort()
                return
            if quiet >= PING_AFTER and pinged != (wire, wire.last_recv):
                pinged = (wire, wire.last_recv)
                self._pings += 1
                # Bounded: a send blocked by a peer that reads nothing must not hold the
                # timeout back (closing the stream also ends that send).
                with (
                    trio.move_on_after(self._silence - quiet),
                    suppress(ConnectionClosed, trio.BrokenResourceError),
                ):
                    await wire.send(m.Ping(self._pings))
                continue
            await trio.sleep((PING_AFTER if quiet < PING_AFTER else self._silence) - quiet)

    def _fail_pending(self) -> None:
        """Wake every request waiting for an answer: the connection that carried it is gone."""
        for done, _ in list(self._pending.values()):
            done.set()

    def _seated(self) -> None:
        """A node gave a match of ours back (``start``, ``snapshot``): the client is in again,
        and the next drop begins a fresh backoff and a fresh ``reconnect_for``."""
        self._lost_at, self._retry, self._unseated = None, _RECONNECT_FIRST, False

    async def _reconnect(self) -> bool:
        """The connection ended while matches run (dropped, silent, or closed because a redirect
        could not be followed): get back in, with backoff, at the addresses known (the one
        connected to, the others given, the nodes redirects led to), resuming with the token
        (spec 4.7, 4.9, 4.10). ``False`` when there is nothing to get back to, or no way back
        within ``reconnect_for`` of losing the seats."""
        live = self._live()
        if not live or not self._addrs or self._reconnect_for <= 0 or self._bye == "replaced":
            return False  # "replaced": another session of ours has the seats now
        if self._unseated:
            reason = "the node holding the match could not be reached"
        elif self._silent:
            reason = f"the server was silent for {self._silence:g} s"
        elif self._bye:
            reason = f"the server said bye ({self._bye})"
        else:
            reason = "the connection dropped"
        self._silent = False
        self._fail_pending()
        now = trio.current_time()
        if self._lost_at is None:
            self._lost_at, self._retry = now, _RECONNECT_FIRST
        deadline = self._lost_at + self._reconnect_for
        cap = _REASK_MAX if self._unseated else _RECONNECT_MAX
        attempt = 0
        while True:
            delay = min(self._retry, cap)
            if trio.current_time() + delay >= deadline:
                return False
            host, port = self._addrs[self._next_addr % len(self._addrs)]
            self._next_addr += 1
            attempt += 1
            for h in live:
                h._emit(Reconnecting(attempt, delay, f"{host}:{port}", reason))
            await trio.sleep(delay)
            self._retry = min(delay * 2, cap)
            try:
                wire = await self._open(host, port, resume=self.wire.resume)
            except _UNREACHED:
                continue
            old = self._swap(wire, (host, port))
            with trio.CancelScope(shield=True):
                await old.aclose()
            return True

    async def _open(self, host: str, port: int, *, resume: bytes | None) -> Wire:
        """A new authenticated connection of ours to ``host:port``, pinned to the server's key;
        a resume token the server no longer knows is dropped and the seats asked back without
        it (spec 4.7). Bounded by ``handshake_timeout`` (``TimeoutError``): a node that takes
        the connection and never answers (stopped, SIGSTOP) must not hold the client."""
        with trio.move_on_after(self._handshake_timeout) as scope:
            return await self._open_now(host, port, resume=resume)
        assert scope.cancelled_caught
        raise TimeoutError(
            f"{host}:{port} did not complete the handshake in {self._handshake_timeout:g} s"
        )

    async def _open_now(self, host: str, port: int, *, resume: bytes | None) -> Wire:
        for token in (resume, None) if resume is not None else (None,):
            stream: trio.abc.Stream = await (
                trio.open_ssl_over_tcp_stream(host, port)
                if self._tls
                else trio.open_tcp_stream(host, port)
            )
            wire = Wire(stream, role=Role.CLIENT)
            try:
                await client_handshake(
                    wire,
                    self.key,
                    self.name,
                    caps=(REDIRECT, *(c for c in self.caps if c != REDIRECT)),
                    resume=token,
                    expect_server=self.server_key,
                )
                return wire
            except BaseException as e:
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(wire.stream)
                bad_token = isinstance(e, RequestFailed) and e.code == ErrorCode.BAD_RESUME_TOKEN
                if not bad_token or token is None:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

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
        mid = getattr(msg, "match", None)
        if not isinstance(mid, bytes):
            return
        if isinstance(msg, m.Start | m.Snapshot) and mid in self.matches:
            self._seated()
        w = self._watchers.get(mid)
        if w is not None and mid not in self.matches:
            w.send_nowait(msg)
            return
        h = self._handle_for(mid)
        await h._handle(msg)

    async def _follow(self, msg: m.Redirect) -> None:
        """Move to the node a ``redirect`` names (spec 4.10): check the ticket, connect, take the
        seats back with the resume token, ``redeem``, and carry on over the new connection.

        The whole client moves: a script plays its matches through one connection. A bad ticket
        is recorded in ``errors`` and ignored. A node that cannot be reached is recorded too, and
        then the client does not stay where it is, seated nowhere: the node named has just died
        and its lease has not run out, so the match is about to move. It closes this connection
        and gets back in through the nodes it knows (this one among them), with backoff capped
        at :data:`_REASK_MAX`, until a node seats it or redirects it again (spec 4.10).
        """
        try:
            ticket = open_ticket(self.server_key, msg.ticket, msg.sig, time.time())
            if ticket.player != self.player:
                raise RemoteProtocolError(ErrorCode.BAD_TICKET, "the ticket is another player's")
            host, port = ticket.host_port()
        except (RemoteProtocolError, ValueError) as e:
            self._not_followed(e)
            return
        try:
            wire = await self._open(host, port, resume=self.wire.resume)
            await wire.send(m.Redeem(self._next_id(), msg.ticket, msg.sig))
        except _UNREACHED as e:
            self._not_followed(e)
            await self._reask()
            return
        old = self._swap(wire, (host, port))
        self.moves.append(ticket.addr)
        if (host, port) not in self._addrs:
            self._addrs.append((host, port))  # a node of the cluster: somewhere to come back to
        with trio.move_on_after(1), suppress(ConnectionClosed, trio.BrokenResourceError):
            await old.send(m.Bye("moved"))
        with trio.CancelScope(shield=True):
            await old.aclose()

    async def _reask(self) -> None:
        """After a redirect that could not be followed: leave this node, to ask again (the
        reader gets back in through the nodes known, :meth:`_reconnect`)."""
        if not self._live() or self._reconnect_for <= 0:
            return  # nothing to be seated in, or no going back: stay, as asked
        self._unseated = True
        if self._at is not None:
            if self._at not in self._addrs:
                self._addrs.append(self._at)
            # This node first: it knows where the match runs, and says so again.
            self._next_addr = self._addrs.index(self._at)
        with trio.CancelScope(shield=True):
            await self.wire.abort()

    def _not_followed(self, why: Exception) -> None:
        note = f"redirect not followed: {why}"
        self.errors.append(m.Error(int(ErrorCode.BAD_TICKET), note, None))


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
    A move made meanwhile (``fire``, ``radar``, ``place``, ``resign``) waits for the new
    connection, and whatever the snapshot says is still owed goes out then, a shot with its
    ``seq`` (spec 4.7). A redirect to a node that cannot be reached sends the client back
    through the addresses it knows until a node seats it. Once it gives up, the matches' events
    end and moves and requests raise :class:`ConnectionLost`. Requests waiting for an answer
    when the connection dropped fail with :class:`ConnectionClosed`.

    ``silence``: seconds without any frame from the server after which the connection counts
    as dropped (at least 60, spec 4.6; the client pings after :data:`PING_AFTER`).
    ``handshake_timeout``: seconds from opening a connection to ``authed``, this one and every
    reconnect's; a server that takes the connection and never answers raises
    ``TimeoutError`` here, and is passed over when reconnecting.
    """
    if silence < SILENCE:
        raise ValueError(f"silence must be at least {SILENCE:g} seconds (spec 4.6), not {silence}")
    addr = (host, port) if stream is None else None
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    # The reference client plays team matches (spec 6.8) and, if asked, follows redirects.
    caps = (REDIRECT,) * follow + (TEAMS,) + (LEAN,) * lean
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
            raise TimeoutError(
                f"{host}:{port} did not complete the handshake in {handshake_timeout:g} s"
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
