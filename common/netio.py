"""Reading and writing a plain TCP socket without trio's stream layers.

Why. trio's ``SocketStream.receive_some`` and ``send_all`` go through a conflict detector, an
error-translating context manager, the socket wrapper and its non-blocking helper (an async
context manager with two checkpoints) on every call, and an idle connection keeps that whole
chain of frames suspended. A server with thousands of connections pays for it on every frame
and in memory. The socket is non-blocking already, so :class:`DirectSocket` calls ``readv`` /
``write`` on its descriptor at once and waits with :func:`trio.lowlevel.wait_readable` only when
there is nothing to read, which is what trio does underneath, minus the layers. TLS streams have
no such shortcut: callers keep the stream for them.

The stream keeps owning the socket (options, closing); a :class:`DirectSocket` must not be used
once the stream is closed, since the descriptor number may then belong to another connection.
"""

from __future__ import annotations

import os
import threading

import trio

__all__ = ["RECV_SIZE", "DirectSocket", "direct"]

#: The most bytes one read takes.
RECV_SIZE = 65536

# Every read lands in its thread's buffer and the caller copies it out before it awaits anything
# (no await between the read and the copy), instead of each read allocating RECV_SIZE bytes and
# shrinking them: one buffer serves every connection of a trio run. Per thread, because two trio
# runs may live in one process (a server and a client, say), each in its own thread.
_local = threading.local()


def _buffer() -> tuple[bytearray, memoryview]:
    try:
        pair: tuple[bytearray, memoryview] = _local.pair
    except AttributeError:
        buf = bytearray(RECV_SIZE)
        pair = _local.pair = (buf, memoryview(buf))
    return pair


class DirectSocket:
    """Direct reads and writes on the descriptor of a plain :class:`trio.SocketStream`."""

    __slots__ = ("_drained", "_yield", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._yield = False  # the last read did not wait: the next one that does not either yields
        self._drained = False  # the last read took less than the buffer: the socket was empty

    async def receive(self) -> bytes | memoryview:
        """The next bytes from the peer (empty at EOF), usually as a view into a shared buffer
        that is only valid until the caller's next await. Raises ``BrokenResourceError`` on a
        reset."""
        buf, view = _buffer()
        if self._drained:
            # The last read emptied the socket, and the peer has usually sent nothing since (it
            # waits for our answer): a read now would find nothing, a syscall for an EAGAIN.
            # Wait first; bytes that came meanwhile make the wait return at once.
            self._drained = self._yield = False
            await trio.lowlevel.wait_readable(self.fd)  # a checkpoint
        while True:
            try:
                n = os.readv(self.fd, (buf,))
            except BlockingIOError:
                n = -1
            except OSError as e:
                raise trio.BrokenResourceError(str(e)) from e
            if n < 0:
                # Waited for outside the except clause: there the exception, its traceback and
                # this frame would stay alive for as long as the peer is quiet (~0.5 KB each).
                await trio.lowlevel.wait_readable(self.fd)  # a checkpoint
                self._yield = False
                continue
            self._drained = 0 < n < RECV_SIZE
            if self._yield:
                # Twice in a row data was waiting without a wait: let the other tasks run (and
                # cancellation in) now, as every trio read does; the bytes must outlive it.
                data = bytes(view[:n])
                await trio.lowlevel.checkpoint()
                self._yield = False
                return data
            # The common case checks in no extra time: the caller's next read usually finds
            # nothing and waits, which is a checkpoint.
            self._yield = True
            return view[:n]

    def try_send(self, data: bytes | bytearray | memoryview) -> int:
        """Write what the socket takes now, without waiting; returns how many bytes that was.
        Raises ``BrokenResourceError`` if the connection is gone."""
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0
        except OSError as e:
            raise trio.BrokenResourceError(str(e)) from e


def direct(stream: trio.abc.Stream) -> DirectSocket | None:
    """A :class:`DirectSocket` for ``stream`` if it is a plain TCP stream (``None``: TLS or
    anything else, which must be used through the stream itself)."""
    if type(stream) is trio.SocketStream:
        return DirectSocket(stream.socket.fileno())
    return None
