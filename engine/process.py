"""An engine that is a process: JSON lines on its stdin and stdout (spec/engine.md 3).

The shell writes one request a line and reads one answer a line, within the time allowed; what
the engine writes on stderr is drained into a small buffer, whose last lines go into the reason
a fault gives (an engine's own error message is the best explanation of its crash). An engine
that fails (it exits, hangs, writes garbage, calls an illegal cell) raises
:class:`~.base.EngineFault`; its process is then killed, and started again when the next game
begins, so that one bad game costs one game.

The process runs in a session of its own (``start_new_session``): an engine that is a shell
script running ``awk`` or ``node`` dies whole when it is killed, children included.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import trio
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat_events import IncomingShot, ShotResult

from . import lines
from .base import Engine, EngineFault, Hello, Move
from .side import Side

__all__ = ["QUIT_TIME", "START_TIME", "ProcessEngine", "answer_time"]

#: Seconds an engine has to say its hello after it is started (or its move time, if longer):
#: an interpreter or a JIT may take a while to load.
START_TIME = 10.0
#: Seconds a process has to exit after ``quit`` before it is killed.
QUIT_TIME = 1.0
#: Bytes of an engine's stderr kept for the reason of a fault (the last ones).
STDERR_KEPT = 4096

_T = TypeVar("_T")


def answer_time(move_time: float, clock: float | None) -> float:
    """The seconds an engine has for one answer: its move time, or less when the match's shot
    clock would run out first (a quarter of a second is kept for the shell to send the move)."""
    if clock is None:
        return move_time
    return max(0.05, min(move_time, clock - 0.25))


class _Dead(Exception):
    """The process's pipes closed under us: it exited (or is exiting)."""


class ProcessEngine(Engine):
    """The engine run by the command line ``argv`` (no shell: ``["node", "engine.js"]``).

    ``move_time``: seconds for each answer. ``name``: the name tables show (default: the
    hello's). ``cwd`` and ``env``: where and with what environment the process runs.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        move_time: float = 5.0,
        name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("an engine's command line is empty")
        self.argv = list(argv)
        self.move_time = move_time
        self.cwd = cwd
        self.env = env
        self._given_name = name
        self.name = name or os.path.basename(self.argv[0])
        self.hello: Hello | None = None
        self._proc: trio.Process | None = None
        self._out = bytearray()  # stdout read but not yet taken as lines
        self._err = bytearray()  # the last STDERR_KEPT bytes of stderr
        self._game = (0, 1)  # (seat, game) of the game being played
        self._rules: RuleSet | None = None
        #: Set when the process must be started again before it plays on.
        self._broken = False
        #: A notification's failure, raised at the next request of the game.
        self._later: EngineFault | None = None

    # -- the Engine interface ------------------------------------------------------------------

    async def start(self) -> Hello:
        """Run the process, greet it and read its hello."""
        await self._stop(polite=False)
        self._out.clear()
        self._err.clear()
        self._broken = True  # until the hello is read
        try:
            self._proc = await trio.lowlevel.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as e:
            raise EngineFault("crashed", f"cannot run {self.argv[0]}: {e.strerror or e}") from None
        answer = await self._ask(
            lines.greeting(), max(START_TIME, self.move_time), starting=True
        )
        hello = await self._checked(lambda: lines.parse_hello(answer))
        self._broken = False
        self.hello = hello
        self.name = self._given_name or hello.name
        return hello

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        """Tell the engine a game begins (started again first if it failed before);
        ``wrong_rules`` if its hello says it does not play ``rules``."""
        if self._proc is None or self._broken:
            await self.start()
        assert self.hello is not None
        lines.check_rules(self.hello, rules)
        self._game = (seat, game)
        self._rules = rules
        await self._tell(lines.new_game(rules, seat, game))

    async def place(self, rules: RuleSet) -> Fleet | None:
        """Ask for the fleet: ``None`` when the engine asks for a uniformly random one."""
        seat, game = self._game
        answer = await self._ask(lines.place(rules, seat, game, self.move_time), self.move_time)
        return await self._checked(lambda: lines.parse_fleet(answer, rules))

    async def move(self, side: Side) -> Move:
        """Ask for the next call, with everything ``side`` knows; held to the rules."""
        seconds = answer_time(self.move_time, side.clock)
        answer = await self._ask(side.request(move_time=seconds, clock=side.clock), seconds)
        return await self._checked(lambda: lines.parse_move(answer, side))

    async def told(self, event: ShotResult | IncomingShot) -> None:
        """Tell the engine a verdict. A notification never raises: a process that died is found
        out at the next request."""
        if self._rules is not None:
            await self._notify(lines.result(self._rules, event))

    async def game_over(self, won: bool | None, reason: str) -> None:
        """Tell the engine the game's end (no answer)."""
        await self._notify(lines.game_over(self._game[1], won, reason))

    async def close(self) -> None:
        """Tell the engine ``quit``, give it a moment to exit, then kill it."""
        await self._stop(polite=True)

    # -- the process -----------------------------------------------------------------------------

    async def _checked(self, parse: Callable[[], _T]) -> _T:
        """An answer's reading: a fault in it breaks the process, which is killed (a half-read
        answer or a state the engine believes in and the shell refused would spoil the next
        game)."""
        try:
            return parse()
        except EngineFault:
            await self._stop(polite=False)
            raise

    async def _tell(self, msg: dict[str, Any]) -> None:
        """Send a line the engine does not answer, within the move time."""
        with trio.move_on_after(self.move_time) as scope:
            try:
                await self._send(msg)
            except _Dead:
                raise await self._fault_crashed() from None
        if scope.cancelled_caught:
            await self._stop(polite=False)
            raise EngineFault("timeout", f"it read no input for {self.move_time:g} s")

    async def _notify(self, msg: dict[str, Any]) -> None:
        """As :meth:`_tell`, but a failure is raised at the next request, not here."""
        if self._proc is None or self._broken:
            return
        try:
            await self._tell(msg)
        except EngineFault as e:
            self._later = e

    async def _ask(
        self, msg: dict[str, Any], seconds: float, *, starting: bool = False
    ) -> dict[str, Any]:
        """Send a request and read its answer, both within ``seconds``."""
        later, self._later = self._later, None
        if later is not None and not starting:
            raise later
        if self._proc is None or (self._broken and not starting):
            raise EngineFault("crashed", "it is not running: " + self._stderr_tail(default="gone"))
        line: bytes | None = None
        with trio.move_on_after(seconds):
            try:
                await self._send(msg)
                line = await self._line()
            except _Dead:
                raise await self._fault_crashed() from None
            except EngineFault:
                await self._stop(polite=False)
                raise
        if line is None:
            await self._stop(polite=False)
            raise EngineFault(
                "timeout", f"no answer to {msg['type']!r} in {seconds:g} s" + self._stderr_said()
            )
        try:
            return lines.decode(line)
        except EngineFault:
            await self._stop(polite=False)
            raise

    async def _send(self, msg: dict[str, Any]) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            await proc.stdin.send_all(lines.encode(msg))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise _Dead from None

    async def _line(self) -> bytes:
        """The next non-blank line of stdout (stderr drained meanwhile)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        while True:
            i = self._out.find(b"\n")
            if i >= 0:
                line = bytes(self._out[:i])
                del self._out[: i + 1]
                if line.strip():
                    return line
                continue
            if len(self._out) > lines.MAX_ANSWER:
                raise EngineFault("garbage", f"a line of more than {lines.MAX_ANSWER} bytes")
            data = await self._receive(proc.stdout)
            if not data:
                raise _Dead
            self._out += data

    async def _receive(self, stream: trio.abc.ReceiveStream) -> bytes:
        """Read stdout while stderr is drained too: an engine blocked on a full stderr pipe
        would otherwise look hung."""
        got: list[bytes] = []
        proc = self._proc
        assert proc is not None
        async with trio.open_nursery() as nursery:

            async def out() -> None:
                try:
                    got.append(bytes(await stream.receive_some(65536)))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    got.append(b"")
                nursery.cancel_scope.cancel()

            nursery.start_soon(out)
            if proc.stderr is not None:
                nursery.start_soon(self._drain, proc.stderr)
        return got[0] if got else b""

    async def _drain(self, stream: trio.abc.ReceiveStream) -> None:
        while True:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                await trio.sleep_forever()  # stderr closed: stdout decides
            self._err += data
            del self._err[:-STDERR_KEPT]

    def _stderr_tail(self, default: str = "") -> str:
        text = self._err.decode("utf-8", "replace").strip()
        if not text:
            return default
        last = text.splitlines()[-3:]
        out = " | ".join(line.strip() for line in last)
        return out if len(out) <= 300 else "..." + out[-297:]

    def _stderr_said(self) -> str:
        tail = self._stderr_tail()
        return f"; its stderr: {tail}" if tail else ""

    async def _fault_crashed(self) -> EngineFault:
        """The process closed its pipes: wait briefly for its exit status, then say why."""
        proc = self._proc
        code: int | None = None
        if proc is not None:
            if proc.stderr is not None:
                with trio.move_on_after(0.5):
                    await self._drain_rest(proc.stderr)
            with trio.move_on_after(QUIT_TIME):
                code = await proc.wait()
        await self._stop(polite=False)
        if code is None:
            how = "it closed its output"
        elif code < 0:
            how = f"it was killed by signal {-code}"
        else:
            how = f"it exited with status {code}"
        return EngineFault("crashed", how + self._stderr_said())

    async def _drain_rest(self, stream: trio.abc.ReceiveStream) -> None:
        while True:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            self._err += data
            del self._err[:-STDERR_KEPT]

    async def _stop(self, *, polite: bool) -> None:
        """End the process: ``quit`` first when ``polite``, then the kill of its session."""
        proc, self._proc = self._proc, None
        self._broken = True
        if proc is None:
            return
        with trio.CancelScope(shield=True):
            if polite and proc.returncode is None:
                with trio.move_on_after(QUIT_TIME):
                    try:
                        assert proc.stdin is not None
                        await proc.stdin.send_all(lines.encode(lines.quit_msg()))
                        await proc.stdin.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    await proc.wait()
            # The whole session: a script's children (awk, node) too, even once it exited.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                if proc.returncode is None:
                    proc.kill()
            await proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    await pipe.aclose()
