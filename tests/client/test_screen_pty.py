"""The game screen under a pseudo-terminal: keys in, the screen a terminal emulator draws out.

``seabattle host`` and ``seabattle play`` run as real processes on a pty of 100 x 40, as in a
person's terminal (or over ssh); :mod:`pyte` reads what they draw, as a terminal would show it.
The tests press keys as a person would (arrow keys, Tab, Space, typed lines, Up for the history)
and wait for what the screen shows. Every wait is bounded; the processes run in real time.

Each test saves screenshots of the screen as it was (``.txt`` and ``.svg``) under
``build/artefacts/screen/`` (``SEABATTLE_ARTEFACTS`` names another folder): the tests' artefacts.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import re
import sys
from pathlib import Path

import pytest
import trio
from helpers import quick_bot
from pty_process import COLS, ROWS, PtyProcess
from seabattle.bots.play import BotResult
from seabattle.bots.strategies import make_strategy
from seabattle.client.peer import BotPlayer, PeerResult, join

pyte = pytest.importorskip("pyte")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

UP, DOWN, RIGHT, LEFT = "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D"
TAB, ENTER, BACKSPACE = "\t", "\r", "\x7f"
_ANSI = re.compile(
    r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][A-Z0-9]|[=>78])"
)
_PYTE_COLOURS = {"brown": "yellow", "default": None}


def artefacts() -> Path:
    out = Path(os.environ.get("SEABATTLE_ARTEFACTS", "build/artefacts")) / "screen"
    out.mkdir(parents=True, exist_ok=True)
    return out


class Screen(PtyProcess):
    """A process on a pty, and the screen a terminal emulator makes of what it writes."""

    def __init__(self, proc: trio.Process, fd: int) -> None:
        super().__init__(proc, fd)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)

    def received(self, data: bytes) -> None:
        self.stream.feed(data)

    @property
    def text(self) -> str:
        """The screen as it stands, one line a row."""
        return "\n".join(line.rstrip() for line in self.screen.display)

    @property
    def output(self) -> str:
        """Everything written so far, without escape sequences: what stays after the screen."""
        return _ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    async def expect(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        """Wait (at most ``timeout`` s) until the screen shows ``pattern``."""
        with trio.move_on_after(timeout):
            while True:
                found = re.search(pattern, self.text)
                if found:
                    return found
                if self.closed:
                    break
                await self._read()
        raise AssertionError(f"no {pattern!r} on the screen:\n{self.text}")

    async def expect_output(
        self, pattern: str, since: int, timeout: float = 20
    ) -> re.Match[str] | None:
        """Wait until what was written after byte ``since`` shows ``pattern``; the match
        (``None`` if the terminal closed first)."""
        with trio.move_on_after(timeout):
            while True:
                found = re.search(pattern, _ANSI.sub("", self.raw[since:].decode(errors="replace")))
                if found is not None or self.closed:
                    return found
                await self._read()
        raise AssertionError(f"no {pattern!r} written; the screen:\n{self.text}")

    async def prompt(self, timeout: float = 20) -> str:
        """Wait for the prompt row to ask something; what it asks."""
        found = await self.expect(r"(?m)^ ((?:place|your shot)[^:\n]*): *$", timeout)
        return found.group(1)

    def press(self, *keys: str) -> None:
        """Press keys (a string is typed as it is)."""
        os.write(self.fd, "".join(keys).encode())

    def snap(self, name: str) -> None:
        """Save the screen as it stands: text, and an SVG with its colours."""
        from rich.console import Console
        from rich.style import Style
        from rich.text import Text

        out = artefacts()
        (out / f"{name}.txt").write_text(self.text + "\n")
        console = Console(record=True, width=COLS, file=io.StringIO(), force_terminal=True)
        for y in range(ROWS):
            line = Text()
            row = self.screen.buffer[y]
            run, key = "", None
            for x in range(COLS):  # one span per run of cells that look alike: a smaller SVG
                ch = row[x]
                look = (ch.fg, ch.bg, ch.bold, ch.reverse, ch.underscore)
                if look != key and run:
                    line.append(run, _style(row[x - 1], Style))
                    run = ""
                run, key = run + (ch.data or " "), look
            line.append(run, _style(row[COLS - 1], Style))
            console.print(line, no_wrap=True, overflow="crop")
        (out / f"{name}.svg").write_text(console.export_svg(title=f"seabattle: {name}"))


def _colour(name: str) -> str | None:
    if name in _PYTE_COLOURS:
        return _PYTE_COLOURS[name]
    return f"#{name}" if re.fullmatch(r"[0-9a-fA-F]{6}", name) else name


def _style(ch: object, style: type) -> object:
    fg, bg = _colour(ch.fg), _colour(ch.bg)  # type: ignore[attr-defined]
    try:
        return style(
            color=fg,
            bgcolor=bg,
            bold=ch.bold,  # type: ignore[attr-defined]
            reverse=ch.reverse,  # type: ignore[attr-defined]
            underline=ch.underscore,  # type: ignore[attr-defined]
        )
    except Exception:  # a colour name rich does not know: draw it plain
        return style()


def cells(rows: int, cols: int) -> list[str]:
    return [f"{chr(65 + c)}{r + 1}" for r in range(rows) for c in range(cols)]


def right_board_column(screen: str) -> int:
    """Where the right board's column labels start on the screen."""
    for line in screen.splitlines():
        found = [x.start() for x in re.finditer(r"A B C D E F", line)]
        if len(found) == 2:
            return found[1]
    raise AssertionError(f"no two boards side by side:\n{screen}")


async def fire_until_over(term: Screen, labels: list[str], name: str) -> int:
    """Answer every shot prompt with the next of ``labels`` (typed) until the game is over."""
    shots = 0
    todo = itertools.cycle(labels)  # a line typed while nothing is asked is not taken
    label: str | None = None
    while True:
        found = await term.expect(r"(?m)^ your shot \([^)]*\): *$| GAME OVER( |$)", 20)
        if "GAME OVER" in found.group(0):
            return shots
        label = label or next(todo)
        since = len(term.raw)
        term.press(label, ENTER)
        shots += 1
        if shots == 6:
            term.snap(f"{name}-firing")
        # Its answer (or a refusal, which names the cell) before the next prompt: the prompt
        # shown may still be the old one. Typed while the last move was still on its way (a
        # loaded machine), the line is not taken ("not now"): it is typed again.
        said = await term.expect_output(
            rf"you fired: {label} |refused: [^\n]*\('?{label}'? (is|was) | GAME OVER"
            r"|not now: wait for your turn",
            since,
        )
        if said is None or "not now" not in said.group(0):
            label = None


@pytest.mark.slow
async def test_host_on_the_game_screen_against_a_bot() -> None:
    # A small board keeps the match short: 6 x 6, 12 ship cells, a hit shoots again.
    fleet = [["Battleship", 4], ["Cruiser", 3], ["Submarine", 3], ["Destroyer", 2]]
    rules = json.dumps(
        {"preset": "classic-8x8", "hit_again": True, "rows": 6, "cols": 6, "fleet": fleet}
    )
    term = await Screen.spawn("host", "--port", "0", "--rules", rules)
    try:
        with trio.fail_after(90):
            found = await term.expect(r"hosting (\S+) on ([\d.]+):(\d+)")
            box: list[PeerResult] = []
            async with trio.open_nursery() as nursery:

                async def joiner() -> None:
                    bot = BotPlayer(make_strategy("random"), random.Random(2))
                    box.append(await join(bot, found.group(2), int(found.group(3))))

                nursery.start_soon(joiner)
                # 004: the board names the ship it asks for and marks where it could start.
                await term.expect(r"place Battleship \(4\) across")
                starts = await term.expect(r"\+ (\d+) square\(s\) where it can start")
                assert int(starts.group(1)) == 3 * 6
                await term.expect(r"RULES: classic-8x8 \+ 2 house rule\(s\) +PLACE YOUR FLEET")
                term.snap("host-placing")
                # Turned at a word: the same ship now lies down.
                term.press("turn", ENTER)
                await term.expect(r"place Battleship \(4\) down")
                term.press("F1", ENTER)
                await term.expect(r"Battleship placed at F1 down")
                # A refusal in the rules' words; then Up brings the line back to be edited.
                term.press("E5", ENTER)
                await term.expect(r"refused: Cruiser leaves the board")
                term.press(UP)
                await term.expect(r"place Cruiser \(3\) down: E5")
                term.press(BACKSPACE)
                await term.expect(r"(?m)place Cruiser \(3\) down: E$")
                term.press("1", ENTER)
                await term.expect(r"Cruiser placed at E1 down")
                # Two ships that touch (E1-E3 beside F1-F4) read as two: each has its letter.
                await term.expect(r"(?m)^ +1 (\S ){4}B A *")
                await term.expect(r"(?m)^ +3 (\S ){4}B A *")
                # The cursor: Tab to the board, Space turns the ship, arrows move, Enter places.
                term.press(TAB)
                await term.expect(r"board: arrows move, Enter places, Space turns the ship")
                term.press(" ")
                await term.expect(r"place Submarine \(3\) across")
                # The line says it too (it said "down" under a board that said "across").
                await term.expect(r"(?m)^ place Submarine \(3\) across: *$")
                term.press(DOWN, DOWN, ENTER)
                await term.expect(r"Submarine placed at A3 across")
                term.press("random", ENTER)
                await term.expect(r"your fleet is placed and fixed")

                # The first shot aimed with the cursor (it starts mid-board, on D4).
                await term.prompt()
                # 003: the shoot-again badge beside the turn indicator (a house rule here).
                await term.expect(r"YOUR TURN +HOUSE RULE: a hit shoots again")
                term.press(TAB)
                await term.expect(r"board: arrows aim, Enter fires")
                term.press(ENTER)
                await term.expect(r"you fired: D4 ")
                await fire_until_over(term, ["Z9", *cells(6, 6)], "host")
                await term.expect(r"press any key to close the screen")
                # The message line and the log are drawn in separate frames: each is waited
                # for, not read off one snapshot (a loaded machine drew the prompt first).
                await term.expect(r"game 1 over: you (won|lost): your (opponent's )?fleet")
                # Both fleets in full once revealed, with every shot on them.
                await term.expect(r"your fleet +their fleet")
                await term.expect(r"ships afloat: \d of 4 +ships afloat: \d of 4")
                await term.expect(r"used \d")
                term.snap("host-over")
                term.press("q")
                status = await term.finish()
        assert status == 0
        out = term.output
        assert "refused: that is not a cell of this board (Z9 is off the board" in out
        # Once the screen is gone the terminal keeps the end of the game, and the record's check.
        assert re.search(r"game 1 over: you (won|lost)", out.rsplit("press any key", 1)[-1])
        assert "record signed by both seats: verifies" in out
        assert box[0].report.ok
    finally:
        term.close()


app = pytest.importorskip("seabattle.server.app")


@pytest.mark.slow
async def test_play_on_the_game_screen_with_both_clocks(server: tuple[str, int]) -> None:
    host, port = server
    box: list[BotResult] = []
    # 004's rules (ships in order, a setup and a shot clock) on a small board.
    rules = {"preset": "sea-battle", "rows": 6, "cols": 6, "fleet": [["Ship-3", 3], ["Ship-2", 2]]}
    term = await Screen.spawn("play", "--server", f"{host}:{port}", "--rules", json.dumps(rules))
    try:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:

                async def bot() -> None:
                    box.append(await quick_bot(server, rules, "blind", random.Random(3)))

                nursery.start_soon(bot)
                await term.expect(r"place Ship-3 \(3\) across")
                # The setup clock runs for both, and ticks on the screen by itself.
                first = await term.expect(r"you: setup clock (\d+) s")
                await term.expect(r"opponent: setup clock \d+ s")
                await term.expect(rf"you: setup clock (?!{first.group(1)} )\d+ s")
                term.snap("play-placing")
                term.press("Ship-2 A1", ENTER)
                await term.expect(r"refused: these rules place the ships in fleet order")
                term.press("random", ENTER)
                await term.expect(r"your fleet is placed and fixed")
                await term.prompt()
                await term.expect(r"you: shot clock \d+ s")
                # Names, not seats: over each side's clock, and in the header.
                await term.expect(r"(?m)^ player( \(\d+\))? +bot( \(\d+\))? *$")
                await term.expect(r"match [0-9a-f]{12} · player( \(\d+\))? vs bot")
                assert not re.search(r"\bseat [01]\b", term.text)
                firing = right_board_column(term.text)
                # A1 twice (the second is refused), then every other cell: a label typed a
                # third time would take the screen's repainted refusal of the second for its
                # own answer, and the next line would be typed too soon.
                await fire_until_over(term, ["A1", "A1", *cells(6, 6)[1:]], "play")
                await term.expect(r"match over: you (won|lost)")
                # The boards kept their place though the clocks stopped ("no clock": narrower).
                await term.expect(r"their fleet|target")
                assert right_board_column(term.text) == firing, term.text
                term.snap("play-over")
                await term.expect(r"press any key to close the screen")
                term.press(" ")
                status = await term.finish()
        assert status == 0
        out = term.output
        assert "refused: you have fired at that cell already; call another" in out
        assert re.search(r"you fired: A1 (hit|miss|sunk)", out)
        assert box[0].won is not None
    finally:
        term.close()


async def test_two_lines_typed_in_one_burst_are_two_commands(server: tuple[str, int]) -> None:
    # A fast typist or a script writes "A1<Enter>B1<Enter>" before the screen has drawn anything:
    # each Enter ends its own line (the input's binding used to run after the keys behind it had
    # reached the line, which sent "A1B1").
    host, port = server
    rules = {"preset": "sea-battle", "rows": 6, "cols": 6, "fleet": [["Ship-3", 3], ["Ship-2", 2]]}
    term = await Screen.spawn("play", "--server", f"{host}:{port}", "--rules", json.dumps(rules))
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:

                async def bot() -> None:
                    await quick_bot(server, rules, "blind", random.Random(3))

                nursery.start_soon(bot)
                await term.expect(r"place Ship-3 \(3\) across")
                term.press("random", ENTER)
                await term.expect(r"your fleet is placed and fixed")
                await term.expect(r"(?m)^ your shot \([^)]*\): *$")
                since = len(term.raw)
                term.press("A1", ENTER, "B1", ENTER)
                await term.expect_output(r"you fired: A1 ", since)
                said = await term.expect_output(
                    r"you fired: B1 |not now: wait for your turn|refused: [^\n]*B1", since
                )
                assert said is not None
                nursery.cancel_scope.cancel()
        assert "A1B1" not in term.output
    finally:
        term.close()


async def test_ctrl_c_on_the_screen_leaves_the_match_at_once(server: tuple[str, int]) -> None:
    box: list[BotResult] = []
    term = await Screen.spawn("play", "--server", "{}:{}".format(*server), "--rules", "classic")
    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:

                async def bot() -> None:
                    box.append(
                        await quick_bot(server, {"preset": "classic"}, "blind", random.Random(5))
                    )

                nursery.start_soon(bot)
                await term.prompt()
                term.press("\x03")
                status = await term.finish()
        # The game is given up (not left to the clock), and the terminal says so.
        assert status == 0
        assert "you left the match" in term.output.rsplit("PLACE YOUR FLEET", 1)[-1]
        assert box[0].won is True
    finally:
        term.close()


async def test_join_to_nobody_is_one_line_without_the_screen() -> None:
    # Reached before the screen starts: an unreachable host must not flash the screen up and
    # away before its one-line error.
    import socket

    with socket.socket() as held:  # bound, never listening: nothing answers on this port
        held.bind(("127.0.0.1", 0))
        term = await Screen.spawn("join", f"127.0.0.1:{held.getsockname()[1]}")
        try:
            status = await term.finish(30)
        finally:
            term.close()
    assert status != 0
    assert b"\x1b[?1049h" not in term.raw  # the alternate screen was never entered
    lines = [line for line in term.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot reach 127.0.0.1:" in lines[0], term.output
