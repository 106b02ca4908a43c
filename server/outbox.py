"""How a connection sends (:class:`Outbox`, the sending half of :class:`~.session.Client`):
each frame written to the socket at once, what the kernel will not take kept in a bounded
backlog that a writer task drains, corking, and close and kill. The theory of operation is in
``session``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from seabattle.common.netio import direct
from seabattle.protocol import messages as m
from seabattle.protocol.codec import HEADER_SIZE, encode_frame
from seabattle.protocol.errors import ErrorCode, LocalProtocolError
from seabattle.protocol.session import Connection, Role, State

from .config import ContextLog

if TYPE_CHECKING:
    from .session import Identity

__all__ = ["WRITE_BATCH_BYTES", "Outbox", "one_flight"]

# A connection's log is the session's, whichever half writes to it.
_log = logging.getLogger("seabattle.server.session")

#: The writer sends the backlog in writes of at most this many bytes (a larger frame goes alone).
WRITE_BATCH_BYTES = 256 * 1024


#: The connections corked by the flight in progress (:func:`one_flight`), in the order corked.
_flight: list[Outbox] | None = None


@contextlib.contextmanager
def one_flight() -> Iterator[None]:
    """Every connection written to inside the block (which must not await) gets one write, at
    its end, for all it was sent in it.

    The journal releases a batch of inputs' sends in one: with ``lean`` players a defender sends
    its ``answer`` and its next ``fire`` together, and the shooter then gets the verdict and the
    next shot in one write instead of two. A referee's own cork (one input) nests inside it."""
    global _flight
    if _flight is not None:
        yield
        return
    held: list[Outbox] = []
    _flight = held
    try:
        yield
    finally:
        _flight = None
        for box in held:
            box.uncork()


class Outbox:
    """The sending half of a connection, and what both halves share: its stream, its sans-IO
    :class:`Connection`, who the peer is, and whether it is closing; see the module docstring."""

    # Thousands are alive at once: slots, not a dict per connection.
    __slots__ = (
        "__weakref__",
        "_backlog",
        "_closing",
        "_cork",
        "_direct",
        "_gone",
        "_queued",
        "_scope",
        "_writer_done",
        "_writer_scope",
        "addr",
        "conn",
        "ident",
        "limits",
        "metrics",
        "name",
        "player",
        "stream",
    )

    def __init__(self, ident: Identity, stream: trio.abc.Stream, peer: str) -> None:
        self.ident = ident
        self.stream = stream
        self.addr = peer
        self.limits = ident.limits
        self.metrics = ident.metrics
        self.conn = Connection(
            Role.SERVER, max_recv=self.limits.max_recv, max_send=self.limits.max_send
        )
        self.player = ""
        self.name = ""
        self._direct = direct(stream)  # None: every frame goes through the writer task
        # What stops the reader: on a plain socket, waking its wait (see _stop_reading), which
        # costs no per-connection cancel scope (~0.6 KB); on another stream, a scope.
        self._scope: trio.CancelScope | None = (
            None if self._direct is not None else trio.CancelScope()
        )
        self._backlog: list[bytes] = []  # frames the socket would not take yet, in order
        self._queued = 0  # bytes in the backlog
        self._writer_scope: trio.CancelScope | None = None  # set while a writer task runs
        self._cork: list[bytes] | None = None  # frames held back by cork(), in order
        self._writer_done: trio.Event | None = None  # set when the running writer task ends
        self._closing = False
        self._gone = False  # run() has ended: the lobby has been told

    @property
    def log(self) -> ContextLog:
        """This connection's logger, with its peer and player as context (made when used:
        most connections log a handful of lines in their life, and there are thousands)."""
        ctx = {"peer": self.addr, "player": self.player} if self.player else {"peer": self.addr}
        return ContextLog(_log, ctx)

    @property
    def connected(self) -> bool:
        """Whether the connection is up: not closing, not closed, not dropped."""
        return not (self._closing or self._gone)

    # -- sending ----------------------------------------------------------------------------------

    def send(self, msg: m.Message) -> None:
        """Send or queue ``msg``; a peer that falls too far behind is dropped, never waited for."""
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
        self._write(frame)

    def send_frame(self, frame: bytes, msg: m.Message) -> None:
        """Send ``frame``, already encoded from ``msg`` for many recipients (one encoding per
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
        self._write(frame)

    def cork(self) -> bool:
        """Hold this connection's frames back until :meth:`uncork`, which writes them at once.

        A referee corks its peers while it applies one input, so that what the input produced
        (custody: ``shot``, ``verdict`` and maybe a ``clock``) reaches each peer in one write:
        on a machine where a write that wakes a sleeping reader costs ~0.1 ms, that is both CPU
        and latency. Returns whether this call corked it (``False``: it already was, and
        whoever corked it first uncorks it).
        """
        if self._cork is not None:
            return False
        self._cork = []
        if _flight is not None:
            _flight.append(self)
            return False  # the flight uncorks it, after everything in it was sent
        return True

    def uncork(self) -> None:
        """Write what :meth:`cork` held back, in one write (a bye from close() included; kill()
        has dropped the lot)."""
        frames, self._cork = self._cork, None
        if frames:
            self._put(frames[0] if len(frames) == 1 else b"".join(frames))

    def _write(self, frame: bytes) -> None:
        metrics = self.metrics
        metrics.messages_out += 1
        metrics.bytes_out += len(frame)
        if self._cork is not None:
            self._cork.append(frame)
        else:
            self._put(frame)

    def _put(self, data: bytes) -> None:
        sock = self._direct
        if sock is not None and not self._backlog:
            try:
                sent = sock.try_send(data)
            except trio.BrokenResourceError:
                # The peer reset the connection: the reader sees it too and ends the session.
                self.kill()
                return
            if sent == len(data):
                return
            data = data[sent:]
        self._enqueue(data)

    def _enqueue(self, frame: bytes) -> None:
        limits = self.limits
        if len(self._backlog) >= limits.send_queue:
            self.log.warning("send queue full: dropping the connection")
            self.kill()
            return
        if self._queued + len(frame) > limits.send_queue_bytes:
            # A few frames may be large (records): count bytes as well as frames, so a peer
            # that asks for records and never reads cannot make the server hoard them.
            self.log.warning("send queue over %d bytes: dropping", limits.send_queue_bytes)
            self.kill()
            return
        self._backlog.append(frame)
        self._queued += len(frame)
        nursery = self.ident.nursery
        if self._writer_scope is None and nursery is not None and not self._gone:
            self._writer_scope = trio.CancelScope()
            self._writer_done = trio.Event()
            nursery.start_soon(self._writer, self._writer_scope, self._writer_done)

    def error(self, code: ErrorCode, detail: str, ref: int | None = None) -> None:
        """Send ``error{code, msg, ref}``."""
        self.send(m.Error(int(code), detail[:500], ref))

    def close(self, reason: str) -> None:
        """Send ``bye{reason}``, then close once the backlog has drained (or its deadline has
        passed)."""
        if self._closing:
            return
        if self.conn.state is not State.CLOSED:
            self.send(m.Bye(reason))
        self._closing = True
        if self._writer_scope is not None:
            self._writer_scope.deadline = min(
                self._writer_scope.deadline, trio.current_time() + self.limits.flush_timeout
            )
        else:
            # With a writer draining, the writer stops the reader when it is done: waking the
            # reader's wait on the socket would wake the writer's too.
            self._stop_reading()

    async def goodbye(self, reason: str) -> None:
        """Write ``bye{reason}`` straight to the stream, bypassing the backlog (last words only)."""
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
        self._cork = None
        self._backlog.clear()
        self._queued = 0
        if self._writer_scope is not None:
            self._writer_scope.cancel()
        self._stop_reading()

    def _stop_reading(self) -> None:
        """Make the reader stop: it checks ``_closing`` before every read, so only a wait in
        progress needs waking (with ``ClosedResourceError``, as for a closed socket; the socket
        is closed when run() ends, and nobody waits on it again before that)."""
        if self._scope is not None:
            self._scope.cancel()
        elif self._direct is not None and not self._gone:
            trio.lowlevel.notify_closing(self._direct.fd)

    # -- the writer task --------------------------------------------------------------------------

    async def _writer(self, scope: trio.CancelScope, done: trio.Event) -> None:
        backlog = self._backlog
        try:
            with scope:
                while backlog:
                    # Everything waiting leaves in one write (up to WRITE_BATCH_BYTES).
                    n, size = 0, 0
                    while n < len(backlog) and (
                        n == 0 or size + len(backlog[n]) <= WRITE_BATCH_BYTES
                    ):
                        size += len(backlog[n])
                        n += 1
                    data = backlog[0] if n == 1 else b"".join(backlog[:n])
                    await self.stream.send_all(data)
                    del backlog[:n]
                    self._queued -= size
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.kill()
        except Exception:
            self.log.exception("writer failed")
            self.kill()
        finally:
            self._writer_scope = None
            done.set()
            if self._closing:
                self._stop_reading()  # close() left it to the writer
