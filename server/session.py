"""One task per connection: the sans-IO :class:`Connection` over a trio stream.

Theory of operation. :meth:`Client.run` is the connection's only task while the peer keeps up:
it feeds received bytes to ``Connection(Role.SERVER)`` and handles each message in turn. A plain
TCP socket is read and written directly (:mod:`seabattle.common.netio`), below trio's streams.
:meth:`Client.send` never blocks and never waits for a task: it writes the frame to the socket
at once (the socket is non-blocking; this is what trio's ``send_all`` does first, without its
two trips through the scheduler). Only what the kernel will not take now - a peer that reads
slowly, a large record - is kept in a backlog, and a writer task is started (in the server's
nursery) to drain it; it ends when the backlog is empty. Other streams (TLS) always go through
the writer. While a referee applies one input, it corks the connections it tells (:meth:`cork`),
so each gets one write for all the input made it receive.
The backlog is bounded in frames and in bytes: a peer that falls that far behind is too slow to
follow and is dropped, so a slow spectator can never hold up a match.

Timers do not cost a task or a cancel scope per read either. One :class:`Heartbeat` task per
server keeps a heap with one entry per connection: when an entry comes due it looks at when the
peer was last heard from, and pings it (quiet for ``ping_interval``, and again every
``ping_interval`` of further silence), closes it (``handshake_timeout`` before authentication,
``idle_timeout`` of silence after), or puts the entry back for later. Data from the peer only
updates a timestamp. The same heap holds the alarms of sleeping matches (``Referee._play``).
Nor is there a cancel scope per connection: close() and kill() stop a plain-socket reader by
waking its wait on the socket (``trio.lowlevel.notify_closing``; it checks ``_closing`` before
every read), and only once a draining writer is done with the socket.

Frames are limited per direction: a client's at ``Limits.max_recv`` (64 KiB, what one peer can
make the server buffer), the server's own at ``Limits.max_send`` (16 MiB, a long match's record).

Errors (``spec/protocol.md`` 2 and 4): a message the protocol or the rules refuse is answered
with ``error{code, msg, ref}`` and the session goes on; a framing error is answered and the
connection closed. A failure inside the server is logged and answered with ``INTERNAL_ERROR``:
it never ends another connection or match.

Rate (spec 2.5): one token bucket per connection (``Limits.rate``, ``burst``). A message over it
that carries an ``id`` or a ``seq`` is refused ``RATE_LIMITED`` with that ``ref`` and dropped, so
the client knows what to send again. Nothing else is ever dropped for rate: such a message is
handled on credit (``rate_credit``), and a peer that spends all of it fails its session.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from dataclasses import dataclass, field

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.common.netio import RECV_SIZE
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError, RemoteProtocolError
from seabattle.protocol.session import (
    LEAN,
    PEOPLE,
    REDIRECT,
    SUPPORTED_VERSIONS,
    TEAMS,
    State,
    check_auth,
)

from .config import Limits, TokenBucket
from .lobby import Lobby
from .metrics import Metrics
from .outbox import WRITE_BATCH_BYTES as WRITE_BATCH_BYTES
from .outbox import Outbox
from .referee import GAME_MESSAGES
from .store import Store, transient
from .timers import Heartbeat

__all__ = ["Client", "Heartbeat", "Identity", "TokenBucket"]

#: Moves and co-signatures: routed to their match's referee (``Lobby.game_message``).
_MOVES = frozenset({*GAME_MESSAGES, m.CoSign})

#: Messages that carry an ``id`` or a ``seq``: only these may be dropped for rate, since only
#: their refusal can say what it dropped (spec 2.5). The rest (the handshake, heartbeats, and the
#: game inputs that the game admits once per phase) are handled on credit, or the session fails.
_DROPPABLE = frozenset(
    cls for cls in m.MESSAGES.values() if {"id", "seq"} & set(cls.__dataclass_fields__)
)


@dataclass(slots=True)
class Identity:
    """What every connection needs from the server: keys, store, lobby, policy."""

    key: Ed25519PrivateKey
    public: bytes
    store: Store
    lobby: Lobby
    limits: Limits
    guests: bool
    tokens: dict[bytes, str]  #: resume token -> player id
    player_tokens: dict[str, bytes]  #: player id -> its resume token
    metrics: Metrics = field(default_factory=Metrics)
    #: the connections' timers; :func:`~.app.serve` runs its task (without it, none fire)
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    #: where a connection starts a writer task when its peer falls behind (``None``: frames
    #: that the socket does not take at once wait until the connection closes)
    nursery: trio.Nursery | None = None


class Client(Outbox):
    """One connection from a client; it is the :class:`~.config.Peer` the lobby sees."""

    # Thousands are alive at once: slots, not a dict per connection (the rest are Outbox's).
    __slots__ = (
        "_handling",
        "_handshake_by",
        "_parked",
        "_pinged_at",
        "_pings",
        "bucket",
        "challenge",
        "follows",
        "last_rx",
        "lean",
        "people",
        "teams",
    )

    def __init__(self, ident: Identity, stream: trio.abc.Stream, peer: str) -> None:
        super().__init__(ident, stream, peer)
        self.challenge = secrets.token_bytes(32)
        limits = self.limits
        self.bucket = TokenBucket(limits.rate, limits.burst, limits.rate_credit)
        self.last_rx = trio.current_time()
        self._pings = 0
        self._pinged_at = -math.inf
        self._handling = False  # the reader is handling a message (it may await the store)
        self._parked = False  # the heartbeat left this connection to the reader, see tick()
        self._handshake_by = self.last_rx + self.limits.handshake_timeout
        #: the session agreed ``redirect`` (spec 4.10): this node may send it to another
        self.follows = False
        #: the session agreed ``teams`` (spec 6.8): it may play a member of a team
        self.teams = False
        #: the session agreed ``lean`` (spec 4.2): it is sent no copy of its own moves
        self.lean = False
        #: the session agreed ``people`` (spec 6.9): it is sent ``seated`` after ``start``
        self.people = False

    @property
    def authed(self) -> bool:
        """Whether the handshake is complete."""
        return self.conn.state is State.READY

    # -- the tasks --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes; never raises (except for cancellation)."""
        self._note("connected")
        self.ident.heartbeat.add(self, self._handshake_by)
        try:
            if self._scope is not None:
                with self._scope:
                    await self._reader()
            else:
                await self._reader()
            # The reader ended (EOF, error, close()): a writer, if any, drains, then stops.
            self.close("closed")
            if self._writer_done is not None:
                # Bounded: close() gave the writer until flush_timeout.
                await self._writer_done.wait()
        except Exception:
            self.log.exception("connection failed")
        finally:
            cancelled = not self._closing
            self._gone = True
            if self._writer_scope is not None:
                self._writer_scope.cancel()  # cancelled from outside: stop writing too
            if self.player:
                self.ident.lobby.disconnected(self)
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(1),
                contextlib.suppress(Exception),
            ):
                if cancelled:
                    # Cancelled from outside (the server is going down without a graceful
                    # phase): still tell the peer, so it knows this is no network failure.
                    await self.goodbye("shutdown")
                self._closing = True
                # The descriptor number is free for reuse once the stream closes.
                self._direct = None
                await self.stream.aclose()
            self.log.info("closed")

    def _note(self, event: str) -> None:
        # Logged from a plain function: logging materialises the frame that calls it, and this
        # connection's run() frame would keep that object (~0.25 KB) for as long as it lives.
        self.log.info(event)

    def tick(self, now: float) -> float | None:
        """The heartbeat's visit at trio time ``now``: ping or time out a quiet peer. Returns
        when to look again, or ``None`` once the connection is gone."""
        if self._closing or self._gone:
            return None
        if self._handling:
            # Time spent handling (a slow store) is not the peer's silence: the reader hands
            # the connection back when it is done (as it is then, a timeout may be due at once).
            self._parked = True
            return None
        if not self.authed:
            if now >= self._handshake_by:
                self.error(ErrorCode.TIMEOUT, "handshake timeout")
                self.close("timeout")
                return None
            return self._handshake_by
        limits = self.limits
        idle_at = self.last_rx + limits.idle_timeout
        if now >= idle_at:
            self.error(ErrorCode.TIMEOUT, "idle timeout")
            self.close("timeout")
            return None
        # Ping once the peer has been quiet for ping_interval, then every ping_interval of
        # further silence; anything it sends starts the count again.
        ping_at = max(self.last_rx, self._pinged_at) + limits.ping_interval
        if now >= ping_at:
            self._pings += 1
            self.send(m.Ping(self._pings))
            self._pinged_at = now
            ping_at = now + limits.ping_interval
        return min(idle_at, ping_at)

    async def _reader(self) -> None:
        conn, metrics, sock = self.conn, self.metrics, self._direct
        while not self._closing:
            # A plain socket is read directly (:mod:`seabattle.common.netio`); its view must be
            # consumed before the next await. Awaited here, not in a helper: every idle connection
            # keeps the frames of this chain of awaits suspended.
            try:
                data = await (
                    sock.receive() if sock is not None else self.stream.receive_some(RECV_SIZE)
                )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                with contextlib.suppress(ProtocolError):
                    conn.receive_eof()
                return
            self.last_rx = trio.current_time()
            metrics.bytes_in += len(data)
            try:
                items = conn.receive_data(data)
            except ProtocolError as e:
                # Framing is lost: the byte stream can no longer be trusted to be in step.
                self.error(e.code, e.detail)
                self.close("framing error")
                return
            metrics.messages_in += len(items)
            if not await self._handle_all(items):
                return
            # Time spent handling (a slow store) is not the peer's silence.
            self.last_rx = trio.current_time()
            if self._parked:
                self._parked = False
                self.ident.heartbeat.add(self, self.last_rx)
            # This frame waits here until the peer's next bytes, maybe for minutes: it must not
            # keep what it handled alive (a commit is a hundred objects).
            del items, data

    async def _handle_all(self, items: list[m.Message | RemoteProtocolError]) -> bool:
        """Handle what one read completed, in order; ``False`` once the connection closes."""
        self._handling = True
        try:
            for item in items:
                if self._closing:
                    return False  # closed from elsewhere while this read was in hand
                if isinstance(item, ProtocolError):
                    if self.bucket.take():
                        self.error(item.code, item.detail)
                    continue
                await self._handle(item)
                if self._closing:
                    return False
        finally:
            self._handling = False
        return True

    # -- messages ---------------------------------------------------------------------------------

    async def _handle(self, msg: m.Message) -> None:
        lobby = self.ident.lobby
        droppable = type(msg) in _DROPPABLE
        if not self.bucket.take(lend=not droppable):
            if droppable:
                ref = lobby.errors_ref(msg)
                self.error(
                    ErrorCode.RATE_LIMITED,
                    f"rate limit: {msg.TAG} {ref} dropped; send it again",
                    ref,
                )
            else:
                # Never dropped (a client could not tell what was lost): fail the session.
                self.error(
                    ErrorCode.RATE_LIMITED,
                    f"rate limit: {msg.TAG} past the limit and its credit; session failed",
                )
                self.close("rate limit")
            return
        try:
            if type(msg) in _MOVES:  # first: nearly every message a server handles is one
                await lobby.game_message(self, msg)
            elif isinstance(msg, m.Hello):
                self._hello(msg)
            elif isinstance(msg, m.Auth):
                await self._auth(msg)
            elif isinstance(msg, m.Ping):
                self.send(m.Pong(msg.n))
            elif isinstance(msg, m.Pong):
                pass
            elif isinstance(msg, m.Bye):
                self.close("bye")
            elif isinstance(msg, m.Error):
                # %r: the text is the peer's, and must not forge lines in a text log.
                self.log.info("peer reports error %d: %r", msg.code, msg.msg)
            elif lobby.is_request(msg):
                await lobby.request(self, msg)
            elif isinstance(msg, m.Coin):
                self.error(
                    ErrorCode.UNEXPECTED_MESSAGE, "the referee draws the lot", lobby.errors_ref(msg)
                )
            else:
                await lobby.game_message(self, msg)
        except ProtocolError as e:
            self.error(e.code, e.detail, lobby.errors_ref(msg))
        except Exception as e:
            mid = getattr(msg, "match", None)
            ctx = {"match": mid.hex()} if isinstance(mid, bytes) else {}
            if transient(e):
                # The store is away for a while (server/cluster.py): no server bug, and the
                # same request may succeed in a moment.
                self.log.warning("%s waits for the store: %s", msg.TAG, e, extra=ctx)
                detail = f"the server's store is unavailable; send {msg.TAG} again shortly"
            else:
                self.log.exception("handling %s failed", msg.TAG, extra=ctx)
                detail = f"the server failed to handle {msg.TAG}"
            self.error(ErrorCode.INTERNAL_ERROR, detail, lobby.errors_ref(msg))

    def _hello(self, msg: m.Hello) -> None:
        # A node of a cluster may send a client elsewhere, if the client can follow (4.10).
        self.follows = self.ident.lobby.cluster is not None and REDIRECT in msg.caps
        self.teams = TEAMS in msg.caps
        self.lean = LEAN in msg.caps
        self.people = PEOPLE in msg.caps
        agreed_caps = (
            (REDIRECT, self.follows),
            (TEAMS, self.teams),
            (LEAN, self.lean),
            (PEOPLE, self.people),
        )
        caps = tuple(c for c, agreed in agreed_caps if agreed)
        # The highest version both speak (4.2; the connection refused hello without one).
        version = max(set(msg.versions) & set(SUPPORTED_VERSIONS))
        self.send(m.Welcome(version, caps, self.ident.public, self.challenge, self.ident.guests))

    async def _auth(self, msg: m.Auth) -> None:
        ident = self.ident
        try:
            check_auth(msg, self.challenge, ident.public)
            player = msg.key.hex()
            if not ident.guests and await ident.store.get_player(player) is None:
                raise ProtocolError(
                    ErrorCode.AUTH_FAILED, "this server admits registered keys only"
                )
            resume = False
            if msg.resume is not None:
                owner = ident.tokens.get(msg.resume)
                if owner is None:
                    # Issued before a restart: the store keeps (the hashes of) every token.
                    owner = await ident.store.resume_player(msg.resume)
                    if owner is not None:
                        ident.tokens[msg.resume], ident.player_tokens[owner] = owner, msg.resume
                if owner != player:
                    raise ProtocolError(ErrorCode.BAD_RESUME_TOKEN, "unknown resume token")
                resume = True
        except ProtocolError:
            self.conn.fail_handshake()
            raise
        self.player, self.name = player, msg.name[:64]
        self.challenge = b""  # spent: the handshake is over
        now = int(time.time())
        await ident.store.upsert_player(player, self.name, now)
        token = ident.player_tokens.get(player)
        if token is None:
            token = secrets.token_bytes(24)
            await ident.store.put_resume_token(player, token, now)
            ident.player_tokens[player] = token
            ident.tokens[token] = player
        self.send(m.Authed(player, token))
        self.log.info("authenticated%s", " (resume)" if resume else "")
        ident.lobby.authenticated(self, resume)
