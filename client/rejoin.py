"""Getting back in: noticing a server that fell silent (spec 4.6); after a dropped or silent
connection, connecting again at the addresses known and resuming with the session's token (4.7,
4.9); following a ``redirect`` to the node a match runs on (4.10), or, when that node cannot be
reached, asking again through the nodes known.

:class:`~.api.Client` has this from :class:`Rejoin`; the connection it swaps in, the matches it
takes back and the reader that calls :meth:`Rejoin._reconnect` are the client's.
"""

from __future__ import annotations

import builtins
import time
from contextlib import suppress

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import REDIRECT, Role
from seabattle.protocol.ticket import open_ticket

from .events import Reconnecting
from .match import MatchHandle
from .wire import ConnectionClosed, RequestFailed, Wire, client_handshake

__all__ = ["PING_AFTER", "RECONNECT_FIRST", "SILENCE", "Rejoin"]

#: Seconds of silence from the server after which the client sends ``ping`` (spec 4.6).
PING_AFTER = 20.0
#: Seconds without any frame from the server after which the connection counts as dropped, the
#: default of ``connect(silence=...)``; spec 4.6 allows no less.
SILENCE = 60.0
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
RECONNECT_FIRST = 0.1
_RECONNECT_MAX = 5.0
#: The longest pause while a redirect cannot be followed: the match is about to move (its node's
#: lease runs out, another node takes it over), and a player asking again soon after is seated
#: within a second or two of that (issue 33's target: lease + 5 s).
_REASK_MAX = 1.5
#: Seconds the graceful close of a connection left behind may take before it is closed at once.
CLOSE_WAIT = 2.0


class Rejoin:
    """Getting back in, for :class:`~.api.Client`, which owns the state named below."""

    wire: Wire
    key: Ed25519PrivateKey
    name: str
    player: str
    server_key: bytes
    caps: tuple[str, ...]
    moves: builtins.list[str]
    errors: builtins.list[m.Error]
    _tls: bool
    _addrs: builtins.list[tuple[str, int]]
    _at: tuple[str, int] | None
    _next_addr: int
    _reconnect_for: float
    _silence: float
    _handshake_timeout: float
    _lost_at: float | None
    _retry: float
    _unseated: bool
    _silent: bool
    _bye: str | None
    _pings: int

    def _live(self) -> builtins.list[MatchHandle]:
        raise NotImplementedError

    def _fail_pending(self) -> None:
        raise NotImplementedError

    def _swap(self, wire: Wire, at: tuple[str, int]) -> Wire:
        raise NotImplementedError

    def _next_id(self) -> int:
        raise NotImplementedError

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
            self._lost_at, self._retry = now, RECONNECT_FIRST
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
            # Bounded: a TLS close sends close_notify, which a stopped node's full buffers would
            # hold for ever; cancelled, ``aclose`` still closes the socket (trio's rule).
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_WAIT):
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
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_WAIT):
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
