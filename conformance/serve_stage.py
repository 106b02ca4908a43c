"""The stage of one client case: a listener on 127.0.0.1 port 0, the client under test started
against it, and :class:`Remote`, the traced connection the client opens to it.

The suite plays the server's side of that connection (or the hosting peer's) itself, with raw
frames: it must be able to send what no conforming server would, and to judge every byte the
client sends with the strict rules of section 2.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder
from seabattle.protocol.session import MAX_C2S_FRAME

from .probe import Traced, describe
from .results import CaseFailed, Trace

__all__ = ["Launcher", "Remote", "Stage", "command_launcher"]

#: Starts the client under test against ``(host, port)`` and returns when it has ended; raises
#: when it crashed. Cancelling it stops the client.
Launcher = Callable[[str, int], Awaitable[None]]


class ClientCrashed(Exception):
    """The client under test ended abnormally (a non-zero exit with a traceback, or raised)."""


def command_launcher(argv: Sequence[str]) -> Launcher:
    """A launcher that runs ``argv`` as a subprocess, ``{host}`` and ``{port}`` substituted.

    A run that prints a Python traceback, or is killed by a signal, counts as a crash; any other
    exit status is the client's own business (a client that fails a session may exit non-zero).
    """

    async def launch(host: str, port: int) -> None:
        args = [a.replace("{host}", host).replace("{port}", str(port)) for a in argv]
        proc = await trio.run_process(
            args, check=False, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True
        )
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode < 0 or "Traceback (most recent call last)" in err:
            tail = " | ".join(err.strip().splitlines()[-3:])
            raise ClientCrashed(f"{shlex.join(args)} exited with {proc.returncode}: {tail}")

    return launch


class Remote(Traced):
    """The client under test's connection, seen from the server's side; every frame is traced."""

    other, cite = "the client", " (2.4)"

    def __init__(self, stream: trio.abc.Stream, trace: Trace, timeout: float) -> None:
        super().__init__(
            stream, trace, timeout, FrameDecoder(MAX_C2S_FRAME), sent_as="S", got_as="C"
        )
        self.peer = False  #: a peer session: game messages travel both ways (6.7)
        self.lean = False  #: the session agreed ``lean``: no copies of the client's moves (5.7)
        self.ids: set[int] = set()  #: request ids and shot seqs the client used (4.4)

    def _check(self, msg: m.Message) -> None:
        if msg.DIR is m.Dir.S2C and not (self.peer and msg.TAG == "start"):
            raise CaseFailed(f"the client sent {msg.TAG!r}, a server-to-client message (2.4)")
        rid = getattr(msg, "id", None) if msg.TAG != "ping" else None
        if rid is None and isinstance(msg, m.Fire | m.Radar) and not self.peer:
            rid = msg.seq
        if isinstance(rid, int):
            if rid in self.ids:
                raise CaseFailed(f"the client used id/seq {rid} twice (4.4: ids and seqs unique)")
            self.ids.add(rid)

    async def expect(self, *types: type[m.Message]) -> m.Message:
        """The client's next message other than ``pong``; it must be one of ``types``.

        A ``ping`` from the client is answered on the way, as the spec requires of every endpoint.
        """
        while True:
            msg = await self.recv()
            if msg is None:
                want = "/".join(t.TAG for t in types)
                raise CaseFailed(f"the client closed the connection while {want} was due")
            if isinstance(msg, m.Ping) and m.Ping not in types:
                await self.send(m.Pong(msg.n))
                continue
            if isinstance(msg, types):
                return msg
            if isinstance(msg, m.Pong):
                continue
            raise CaseFailed(f"expected {'/'.join(t.TAG for t in types)}, got {describe(msg)}")

    async def alive(self, n: int) -> list[m.Message]:
        """The client still answers ``ping{n}`` with ``pong{n}``; returns what came before it."""
        await self.send(m.Ping(n))
        before: list[m.Message] = []
        while True:
            msg = await self.recv()
            if msg is None:
                raise CaseFailed(f"the client closed the connection instead of answering ping{n}")
            if isinstance(msg, m.Pong) and msg.n == n:
                return before
            if isinstance(msg, m.Ping):
                await self.send(m.Pong(msg.n))
                continue
            before.append(msg)


@dataclass
class Stage:
    """One case's listener and the client under test; :meth:`accept` its connection."""

    launcher: Launcher
    trace: Trace
    timeout: float
    #: How long to wait, after a barrier ping, for what a client must not send (a ``cosign``)
    settle: float = 0.5
    host: str = "127.0.0.1"
    port: int = 0
    crashed: str | None = None
    ended: trio.Event = field(default_factory=trio.Event)
    _listener: trio.SocketListener | None = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Listen on port 0 and start the client under test against it."""
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self._listener = listeners[0]
        self.port = self._listener.socket.getsockname()[1]
        nursery.start_soon(self._run_client)

    async def _run_client(self) -> None:
        try:
            await self.launcher(self.host, self.port)
        except ClientCrashed as e:
            self.crashed = str(e)
        except Exception as e:  # an in-process client under test: anything it raises is a crash
            self.crashed = f"{type(e).__name__}: {e}"
        finally:
            self.ended.set()

    async def accept(self) -> Remote:
        """The client's connection (it must connect within the timeout)."""
        assert self._listener is not None
        with trio.move_on_after(self.timeout * 2):
            stream = await self._listener.accept()
            await self._listener.aclose()
            return Remote(stream, self.trace, self.timeout)
        raise CaseFailed(self.crashed or "the client did not connect")

    async def close(self) -> None:
        """Stop listening."""
        if self._listener is not None:
            await self._listener.aclose()

    def check_alive(self) -> None:
        """The client under test has not crashed."""
        if self.crashed is not None:
            raise CaseFailed(f"the client crashed: {self.crashed}")

    async def wait_end(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the client under test to end; whether it did."""
        with trio.move_on_after(within):
            await self.ended.wait()
        return self.ended.is_set()
