"""One task per connection: the sans-IO :class:`Connection` over a trio stream.

Theory of operation. :meth:`Client.run` owns two tasks: the *reader* feeds received bytes to
``Connection(Role.SERVER)`` and handles each message in turn; the *writer* is the only task that
writes to the stream, draining a queue bounded in frames and in bytes that :meth:`Client.send`
fills without ever blocking (a peer whose queue is full is too slow to follow and is dropped, so a
slow spectator can never hold up a match). The reader also keeps the heartbeat: it waits for data
with a deadline, and when the peer has been quiet for ``ping_interval`` it pings it (and again
every ``ping_interval`` of further silence) and goes on waiting; a task per connection costs
memory, and this one only ever slept. Deadlines: the handshake must finish within
``handshake_timeout``, and a peer silent for ``idle_timeout`` is gone.

Frames are limited per direction: a client's at ``Limits.max_recv`` (64 KiB, what one peer can
make the server buffer), the server's own at ``Limits.max_send`` (16 MiB, a long match's record).

Errors (``spec/FLOW.md``): a message the protocol or the rules refuse is answered with
``error{code, msg, ref}`` and the session goes on; a framing error is answered and the connection
closed. A failure inside the server is logged and answered with ``INTERNAL_ERROR``: it never ends
another connection or match.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.codec import HEADER_SIZE, encode_frame
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, ProtocolError
from seabattle.protocol.session import Connection, Role, State, check_auth

from .config import ContextLog, Limits, TokenBucket
from .lobby import Lobby
from .metrics import Metrics
from .store import Store

__all__ = ["Client", "Identity", "TokenBucket"]

_log = logging.getLogger("seabattle.server.session")

#: The writer sends whatever is queued in one ``send_all``, up to this many frames ...
WRITE_BATCH_FRAMES = 64
#: ... or until the batch reaches this many bytes (a larger frame still goes, alone or last).
WRITE_BATCH_BYTES = 64 * 1024


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


class Client:
    """One connection from a client; it is the :class:`~.config.Peer` the lobby sees."""

    def __init__(self, ident: Identity, stream: trio.abc.Stream, peer: str) -> None:
        self.ident = ident
        self.stream = stream
        self.addr = peer
        self.limits = ident.limits
        self.metrics = ident.metrics
        self.conn = Connection(
            Role.SERVER, max_recv=self.limits.max_recv, max_send=self.limits.max_send
        )
        self._out, self._out_recv = trio.open_memory_channel[bytes](self.limits.send_queue)
        self.player = ""
        self.name = ""
        self.challenge = secrets.token_bytes(32)
        self.bucket = TokenBucket(self.limits.rate, self.limits.burst)
        self.last_rx = trio.current_time()
        self._scope = trio.CancelScope()  # the reader
        self._writer_scope = trio.CancelScope()
        self._closing = False
        self._gone = False  # run() has ended: the lobby has been told
        self._queued = 0  # bytes in the send queue
        self._pings = 0
        self.log = ContextLog(_log, {"peer": peer})

    @property
    def connected(self) -> bool:
        """Whether the connection is up: not closing, not closed, not dropped."""
        return not (self._closing or self._gone)

    @property
    def authed(self) -> bool:
        """Whether the handshake is complete."""
        return self.conn.state is State.READY

    # -- sending ----------------------------------------------------------------------------------

    def send(self, msg: m.Message) -> None:
        """Queue ``msg``; a peer whose queue is full is dropped rather than waited for."""
        if self._closing:
            return
        if isinstance(msg, m.Error):
            self.metrics.refused(msg.code)
        try:
            if self.conn.state is State.CLOSED and isinstance(msg, m.Error):
                # After a framing error the session refuses to send, but the peer is still owed
                # the reason (FLOW: framing errors -> error, then close).
                frame = encode_frame(m.encode(msg), max_frame=self.conn.max_send)
            else:
                frame = self.conn.send(msg)
        except LocalProtocolError as e:
            # Our own message cannot be framed (too large, too deep): a server bug, not the peer's.
            self.log.error("cannot send %s: %s", msg.TAG, e)
            if not isinstance(msg, m.Error):
                self.send(m.Error(int(ErrorCode.INTERNAL_ERROR), f"cannot send {msg.TAG}", None))
            return
        self._enqueue(frame)

    def send_frame(self, frame: bytes, msg: m.Message) -> None:
        """Queue ``frame``, already encoded from ``msg`` for many recipients (one encoding per
        event, not per peer). Outside the ready state, or past this connection's frame limit,
        ``msg`` goes through :meth:`send` instead, with its checks and errors."""
        if self._closing:
            return
        if (
            self.conn.state is not State.READY
            or len(frame) - HEADER_SIZE > self.conn.max_send
            or isinstance(msg, m.Error)
        ):
            self.send(msg)
            return
        self._enqueue(frame)

    def _enqueue(self, frame: bytes) -> None:
        if self._queued + len(frame) > self.limits.send_queue_bytes:
            # A few frames may be large (records): count bytes as well as frames, so a peer
            # that asks for records and never reads cannot make the server hoard them.
            self.log.warning("send queue over %d bytes: dropping", self.limits.send_queue_bytes)
            self.kill()
            return
        try:
            self._out.send_nowait(frame)
            self._queued += len(frame)
        except trio.WouldBlock:
            self.log.warning("send queue full: dropping the connection")
            self.kill()
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def error(self, code: ErrorCode, detail: str, ref: int | None = None) -> None:
        """Send ``error{code, msg, ref}``."""
        self.send(m.Error(int(code), detail[:500], ref))

    def close(self, reason: str) -> None:
        """Send ``bye{reason}``, then close once the queue has drained (or its deadline passed)."""
        if self._closing:
            return
        if self.conn.state is not State.CLOSED:
            self.send(m.Bye(reason))
        self._closing = True
        self._out.close()
        self._scope.cancel()
        self._writer_scope.deadline = min(
            self._writer_scope.deadline, trio.current_time() + self.limits.flush_timeout
        )

    async def goodbye(self, reason: str) -> None:
        """Write ``bye{reason}`` straight to the stream, bypassing the queue (last words only)."""
        if self._closing or self.conn.state is State.CLOSED:
            return
        self._closing = True
        with contextlib.suppress(
            trio.BusyResourceError, trio.BrokenResourceError, trio.ClosedResourceError
        ):
            frame = self.conn.send(m.Bye(reason))
            await self.stream.send_all(frame)
            self.metrics.messages_out += 1
            self.metrics.bytes_out += len(frame)

    def kill(self) -> None:
        """Close at once, without draining."""
        self._closing = True
        self._out.close()
        self._scope.cancel()
        self._writer_scope.cancel()

    # -- the tasks --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes; never raises (except for cancellation)."""
        self.log.info("connected")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                with self._scope:
                    await self._reader()
                # The reader ended (EOF, error, close()): let the writer drain, then stop.
                self.close("closed")
        except Exception:
            self.log.exception("connection failed")
        finally:
            cancelled = not self._closing
            self._gone = True
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
                await self.stream.aclose()
            self.log.info("closed")

    async def _writer(self) -> None:
        metrics = self.metrics
        with self._writer_scope:
            out = self._out_recv
            try:
                async for frame in out:
                    # Whatever else is queued goes in the same write: one handler usually queues
                    # several frames (custody: shot + verdict), and each send_all is a syscall and
                    # a trip through trio's scheduler.
                    size, count = len(frame), 1
                    batch: list[bytes] | None = None
                    # ``_queued`` counts the bytes still queued, this frame's included: more
                    # than ``size`` means another frame is waiting (no WouldBlock to raise).
                    while (
                        self._queued > size
                        and size < WRITE_BATCH_BYTES
                        and count < WRITE_BATCH_FRAMES
                    ):
                        try:
                            more = out.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        if batch is None:
                            batch = [frame]
                        batch.append(more)
                        size, count = size + len(more), count + 1
                    await self.stream.send_all(frame if batch is None else b"".join(batch))
                    self._queued -= size
                    metrics.messages_out += count
                    metrics.bytes_out += size
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.kill()
            except Exception:
                self.log.exception("writer failed")
                self.kill()

    async def _reader(self) -> None:
        every = self.limits.ping_interval
        handshake_deadline = trio.current_time() + self.limits.handshake_timeout
        # The heartbeat: ping once the peer has been quiet for ``every``, then every ``every`` of
        # further silence (only once authenticated); data from the peer starts the count again.
        ping_at = self.last_rx + every
        while True:
            if self.authed:
                deadline = self.last_rx + self.limits.idle_timeout
            else:
                deadline = handshake_deadline
            with trio.move_on_at(min(deadline, ping_at)) as cs:
                try:
                    data = await self.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if cs.cancelled_caught:
                now = trio.current_time()
                if now >= deadline:
                    what = "handshake" if not self.authed else "idle"
                    self.error(ErrorCode.TIMEOUT, f"{what} timeout")
                    self.close("timeout")
                    return
                if now >= ping_at:
                    if self.authed:
                        self._pings += 1
                        self.send(m.Ping(self._pings))
                    ping_at = now + every
                continue
            if not data:
                with contextlib.suppress(ProtocolError):
                    self.conn.receive_eof()
                return
            self.last_rx = trio.current_time()
            ping_at = self.last_rx + every
            self.metrics.bytes_in += len(data)
            try:
                items = self.conn.receive_data(bytes(data))
            except ProtocolError as e:
                # Framing is lost: the byte stream can no longer be trusted to be in step.
                self.error(e.code, e.detail)
                self.close("framing error")
                return
            self.metrics.messages_in += len(items)
            for item in items:
                if isinstance(item, ProtocolError):
                    if self.bucket.take():
                        self.error(item.code, item.detail)
                    continue
                await self._handle(item)
                if self._closing:
                    return
            # Time spent handling (a slow store) is not the peer's silence.
            self.last_rx = trio.current_time()
            ping_at = self.last_rx + every

    # -- messages ---------------------------------------------------------------------------------

    async def _handle(self, msg: m.Message) -> None:
        lobby = self.ident.lobby
        ref = lobby.errors_ref(msg)
        if not self.bucket.take():
            self.error(ErrorCode.RATE_LIMITED, "too many messages; slow down", ref)
            return
        try:
            if isinstance(msg, m.Hello):
                self._hello()
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
                self.error(ErrorCode.UNEXPECTED_MESSAGE, "the referee draws the lot", ref)
            else:
                await lobby.game_message(self, msg)
        except ProtocolError as e:
            self.error(e.code, e.detail, ref)
        except Exception:
            mid = getattr(msg, "match", None)
            ctx = {"match": mid.hex()} if isinstance(mid, bytes) else {}
            self.log.exception("handling %s failed", msg.TAG, extra=ctx)
            self.error(ErrorCode.INTERNAL_ERROR, f"the server failed to handle {msg.TAG}", ref)

    def _hello(self) -> None:
        self.send(m.Welcome(1, (), self.ident.public, self.challenge, self.ident.guests))

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
                if ident.tokens.get(msg.resume) != player:
                    raise ProtocolError(ErrorCode.BAD_RESUME_TOKEN, "unknown resume token")
                resume = True
        except ProtocolError:
            self.conn.fail_handshake()
            raise
        self.player, self.name = player, msg.name[:64]
        self.log = ContextLog(_log, {"peer": self.addr, "player": player})
        await ident.store.upsert_player(player, self.name, int(time.time()))
        token = ident.player_tokens.get(player)
        if token is None:
            token = secrets.token_bytes(24)
            ident.player_tokens[player] = token
            ident.tokens[token] = player
        self.send(m.Authed(player, token))
        self.log.info("authenticated%s", " (resume)" if resume else "")
        ident.lobby.authenticated(self, resume)
