"""The ``seabattle`` command's line mode (``--line``) under a pseudo-terminal: typed lines in, the
terminal's text out (the game screen's own pty tests are in test_screen_pty.py).

The command runs as a real process on the slave side of a pty (standard input, output and error),
exactly as in a person's terminal; the test reads the master side, waits for prompts, types, and
checks what the screen says. Every wait is bounded (``trio.fail_after``); the process runs in real
time, so these are the only tests here that wait on the wall clock.
"""

from __future__ import annotations

import os
import random
import re
import sys

import pytest
import trio
from helpers import quick_bot
from pty_process import PtyProcess
from seabattle.bots.play import BotResult
from seabattle.bots.strategies import make_strategy
from seabattle.client.peer import BotPlayer, PeerResult, join

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

_ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|[()][A-Z0-9])")


class Terminal(PtyProcess):
    """A process on a pty of 100 x 40: read its screen, type lines."""

    def __init__(self, proc: trio.Process, fd: int) -> None:
        super().__init__(proc, fd)
        self.pos = 0  # how far :meth:`expect` has consumed the screen

    @property
    def screen(self) -> str:
        """Everything shown so far, without escape sequences and carriage returns."""
        return _ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    async def expect(self, pattern: str, timeout: float = 10) -> re.Match[str]:
        """Wait (at most ``timeout`` s) for ``pattern`` in what was shown since the last match."""
        with trio.fail_after(timeout):
            while True:
                found = re.compile(pattern).search(self.screen, self.pos)
                if found:
                    self.pos = found.end()
                    return found
                if self.closed:
                    raise AssertionError(f"ended before {pattern!r}:\n{self.screen[-3000:]}")
                await self._read()

    def type(self, line: str) -> None:
        """Type ``line`` and Enter."""
        os.write(self.fd, line.encode() + b"\r")


async def shoot_until_the_end(term: Terminal, rows: int, cols: int, first: list[str]) -> str:
    """Answer every shot prompt (``first``, then each cell in turn) until the game is over."""
    cells = iter([*first, *(f"{chr(65 + c)}{r + 1}" for r in range(rows) for c in range(cols))])
    while True:
        found = await term.expect(r"your shot \([^)]*\)(?: \[\d+ s left\])?: |game 1 over: [^\n]*")
        if found.group(0).startswith("game 1 over"):
            return found.group(0)
        term.type(next(cells))


async def test_host_by_hand_in_a_terminal_against_a_bot() -> None:
    term = await Terminal.spawn("host", "--port", "0", "--rules", "classic-8x8", "--line")
    try:
        with trio.fail_after(20):
            found = await term.expect(r"hosting classic-8x8 on ([\d.]+):(\d+)")
            box: list[PeerResult] = []
            async with trio.open_nursery() as nursery:

                async def joiner() -> None:
                    bot = BotPlayer(make_strategy("random"), random.Random(2))
                    box.append(await join(bot, found.group(1), int(found.group(2))))

                nursery.start_soon(joiner)
                await term.expect(r"Rules: classic-8x8")
                await term.expect(r"place Battleship \(4\): ")
                term.type("G1 across")
                await term.expect(r"refused: Battleship leaves the board at I1")
                await term.expect(r"place Battleship \(4\): ")
                term.type("A1 across")
                await term.expect(r"place Cruiser \(3\): ")
                term.type("A1 down")
                await term.expect(r"refused: Cruiser overlaps Battleship at A1")
                await term.expect(r"place Cruiser \(3\): ")
                term.type("move battleship")
                await term.expect(r"place Battleship \(4\): ")
                term.type("B2 down")
                await term.expect(r"place Cruiser \(3\): ")
                term.type("random")
                await term.expect(r"your fleet is placed and fixed")
                end = await shoot_until_the_end(term, 8, 8, ["Z9"])
                assert re.search(r"you (won|lost): your (opponent's )?fleet was sunk", end)
                await term.expect(r"your fleet +their fleet")
                await term.expect(r"record signed by both seats: verifies")
                status = await term.finish()
        assert status == 0
        assert "refused: that is not a cell of this board (Z9 is off the board" in term.screen
        assert box[0].report.ok
    finally:
        term.close()


app = pytest.importorskip("seabattle.server.app")


async def test_play_on_a_server_by_hand_in_a_terminal(server: tuple[str, int]) -> None:
    host, port = server
    box: list[BotResult] = []
    term = await Terminal.spawn(
        "play", "--server", f"{host}:{port}", "--rules", "sea-battle", "--line"
    )
    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:

                async def bot() -> None:
                    rules = {"preset": "sea-battle"}
                    box.append(await quick_bot(server, rules, "blind", random.Random(3)))

                nursery.start_soon(bot)
                await term.expect(r"Rules: sea-battle")
                prompt = r"place Ship-5 \(5\) \[\d+ s left\]: "
                await term.expect(prompt)
                term.type("Ship-2 A1 across")
                await term.expect(r"refused: these rules place the ships in fleet order")
                await term.expect(prompt)
                term.type("A1 across")
                await term.expect(r"place Ship-4 \(4\) \[\d+ s left\]: ")
                term.type("random")
                await term.expect(r"your fleet is placed and fixed")
                end = await shoot_until_the_end(term, 10, 10, ["A1", "A1"])
                assert re.search(r"you (won|lost): your (opponent's )?fleet was sunk", end)
                await term.expect(r"match over: ")
                status = await term.finish()
        assert status == 0
        screen = term.screen
        assert "refused: you have fired at that cell already; call another" in screen
        assert re.search(r"your fleet +their fleet", screen)
        assert box[0].won is not None
    finally:
        term.close()
