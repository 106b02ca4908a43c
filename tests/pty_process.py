"""A ``seabattle`` command as a real process on a pseudo-terminal of 100 x 40, for the pty tests.

The process has the slave side for its standard input, output and error, exactly as in a
person's terminal (or over ssh); a test reads the master side and types into it. The tests built
on it wait on the wall clock, each wait bounded.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
import termios
from typing import Self

import trio

COLS, ROWS = 100, 40


class PtyProcess:
    """The process and the master side of its pty: everything it wrote so far in ``raw``."""

    def __init__(self, proc: trio.Process, fd: int) -> None:
        self.proc = proc
        self.fd = fd
        self.raw = b""
        self.closed = False

    @classmethod
    async def spawn(cls, *args: str) -> Self:
        """Start ``seabattle ARGS...`` on a new pty."""
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
        env.pop("NO_COLOR", None)
        argv = [sys.executable, "-c", "from seabattle.cli.main import main; main()", *args]
        proc = await trio.lowlevel.open_process(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env
        )
        os.close(slave)
        os.set_blocking(master, False)
        return cls(proc, master)

    def received(self, data: bytes) -> None:
        """A hook for what the process wrote (``raw`` has it already)."""

    async def _read(self) -> None:
        await trio.lowlevel.wait_readable(self.fd)
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: every process on the slave side has gone
            data = b""
        if not data:
            self.closed = True
        self.raw += data
        self.received(data)

    async def finish(self, timeout: float = 10) -> int:
        """Read to the end of output and wait for the process; its exit status."""
        with trio.fail_after(timeout):
            while not self.closed:
                await self._read()
            return await self.proc.wait()

    def close(self) -> None:
        """Kill the process if it still runs, and close the pty."""
        if self.proc.returncode is None:
            self.proc.kill()
        os.close(self.fd)
