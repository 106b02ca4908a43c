"""``seabattle watch``: a board view that starts from the snapshot and follows the events.

The spectator's state is pure (:class:`~seabattle.cli.render.Spectator`, tested with messages
made here); the command runs as a real process on a pty against a server on port 0, joining a
match whose first shots were fired before it came.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
import trio
from helpers import SMALL, Bot, pair, play_both, play_some, start_server
from pty_process import COLS, ROWS, PtyProcess
from rich.console import Console
from seabattle.cli.render import Spectator
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Reveal
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import rules_from_dict

pyte = pytest.importorskip("pyte")

MID = bytes(range(16))
RULES = rules_from_dict(SMALL)  # 5 x 5: a Boat (2) and a Raft (1)


def text(spectator: Spectator, now: float = 0.0) -> str:
    console = Console(file=io.StringIO(), width=COLS, color_system=None)
    with console.capture() as cap:
        console.print(spectator.view(now, COLS))
    return cap.get()


def rows(screen: str, label: int) -> list[list[str]]:
    """Both grids' cells on row ``label`` (``[left, right]``), as the screen shows them."""
    for line in screen.splitlines():
        found = re.findall(rf"(?:^|\s){label} ((?:\S ){{{RULES.cols - 1}}}\S)", line)
        if len(found) == 2:
            return [cells.split() for cells in found]
    raise AssertionError(f"no row {label} of two grids:\n{screen}")


def snapshot(**view: object) -> m.Snapshot:
    base: dict[str, object] = {
        "rules": RULES.to_dict(),
        "mode": "blind",
        "players": ["a" * 64, "b" * 64],
        "names": ["alice", "bob"],
        "game": 1,
        "phase": "firing",
        "turn": 1,
        "shots": 3,
        "wins": [0, 0],
        "scores": [0, 0],
        "over": False,
        # Fired before the spectator came: A1 missed and B2 hit on alice's grid, C3 on bob's.
        "boards": [
            {"fired": [[0, "miss"], [6, "hit"]], "sunk": [], "crossed": [], "hits": 1},
            {"fired": [[12, "miss"]], "sunk": [], "crossed": [], "hits": 0},
        ],
        "clock": {"kind": "shot", "left": 30},
    }
    base.update(view)
    return m.Snapshot(MID, None, base)


def test_the_board_view_starts_from_the_snapshots_shots() -> None:
    s = Spectator()
    line = s.feed(snapshot(), now=100.0)
    assert "alice against bob" in line and "3 shot(s) so far" in line
    screen = text(s, now=110.0)
    assert re.search(r"alice +bob +TO MOVE", screen), screen  # bob's turn: his grid's title
    assert rows(screen, 1)[0][0] == "."  # A1 on alice's grid, a miss
    assert rows(screen, 2)[0][1] == "X"  # B2, a hit
    assert rows(screen, 3)[1][2] == "."  # C3 on bob's grid
    assert "shot clock 20 s" in screen  # 30 s at 100, read at 110
    assert "LIVE: bob to move" in screen


def test_a_revealed_fleet_is_drawn_ship_by_ship_and_the_end_named() -> None:
    s = Spectator()
    s.feed(snapshot(), now=0.0)
    fleet = Fleet.of(("D1", "down"), ("C1", "across"))  # alice's Boat on D1-D2, Raft on C1
    reveal = Reveal(fleet, bytes(32)).to_dict()
    assert s.feed(m.Revealed(MID, 1, 0, reveal, None), 0.0) == (
        "game 1: alice revealed a fleet, checked"
    )
    said = s.feed(m.GameOver(MID, 1, {"winner": 1, "reason": "fleet_sunk", "detail": ""}), 0.0)
    assert said == "game 1: over: bob won (fleet sunk)"
    result = {"games": 1, "scores": [0, 1], "wins": [0, 1], "over": True, "winner": 1}
    said = s.feed(m.MatchOver(MID, result, None, b"", b""), 0.0)
    assert said.startswith("match over: bob won 0-1 (record: seabattle record fetch ")
    screen = text(s)
    # Ships that touch, told apart: the Raft (the fleet's second: B) beside the Boat (A).
    assert rows(screen, 1)[0] == [".", "~", "B", "A", "~"]
    assert rows(screen, 2)[0] == ["~", "X", "~", "A", "~"]
    assert "MATCH OVER: bob won" in screen
    assert s.finished


pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


class Screen(PtyProcess):
    def __init__(self, proc: trio.Process, fd: int) -> None:
        super().__init__(proc, fd)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)

    def received(self, data: bytes) -> None:
        self.stream.feed(data)

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def expect(self, pattern: str, timeout: float = 30) -> str:
        with trio.move_on_after(timeout):
            while not re.search(pattern, self.text):
                if self.closed:
                    break
                await self._read()
            else:
                return self.text
        raise AssertionError(f"no {pattern!r} on the screen:\n{self.text}")


def marks(screen: str) -> int:
    """Cells fired at on both grids: what is neither water nor a row's number."""
    n = 0
    for r in range(1, RULES.rows + 1):
        for cells in rows(screen, r):
            n += sum(c != "~" for c in cells)
    return n


async def test_watch_on_a_terminal_draws_the_shots_fired_before_it_came(tmp_path: Path) -> None:
    pytest.importorskip("seabattle.server.app")
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        a, b, mid = await pair(addr, nursery, SMALL, "blind")
        alice, bob = Bot(a, "blind", 1), Bot(b, "blind", 2)
        await play_some(alice, bob, 4)  # four shots answered; then nobody fires
        term = await Screen.spawn("watch", mid.hex(), "--server", f"{addr[0]}:{addr[1]}")
        try:
            with trio.fail_after(60):
                # Drawn down to both grids' last row: a screen is read as it is being drawn.
                grid = rf"{RULES.rows} (?:\S ){{{RULES.cols - 1}}}\S"
                last = rf"\n *{grid} +{grid}"
                screen = await term.expect(r"TO MOVE[\s\S]*" + last)
                # The snapshot's four shots are on the boards before any event came.
                assert marks(screen) == 4, screen
                assert re.search(r"alice.*bob", screen)
                assert "seat 0" not in screen
                # Then the events: alice gives up, and the view follows to the match's end.
                await a.send(m.Resign(mid, 1))
                await play_both(alice, bob)
                screen = await term.expect(r"MATCH OVER: bob won")
                assert marks(screen) >= 4
                assert await term.finish() == 0
                assert re.search(r"match over: bob won 0-1", term.text)
        finally:
            term.close()
        nursery.cancel_scope.cancel()


def test_ships_shown_sunk_that_touch_read_as_two() -> None:
    # Under rules that show a sunk ship, bob's Boat (A1-B1) and Raft (C1) sank side by side:
    # each in its own letter, in lower case (sunk, without colour too); before, "# # #".
    sunk = {
        "fired": [[0, "hit"], [1, "sunk"], [2, "sunk"]],
        "sunk": [[0, [0, 1]], [1, [2]]],
        "crossed": [],
        "hits": 3,
    }
    s = Spectator()
    s.feed(snapshot(boards=[{"fired": [], "sunk": [], "crossed": [], "hits": 0}, sunk]), 0.0)
    screen = text(s)
    assert rows(screen, 1)[1] == ["a", "a", "b", "~", "~"], screen
    assert "ships afloat: 0 of 2" in screen


def test_a_snapshot_taken_while_a_shot_waits_for_its_answer() -> None:
    # Bob called; alice owes the answer: the turn is still bob's, the answer clock alice's.
    s = Spectator()
    s.feed(snapshot(phase="answer", clock={"kind": "answer", "left": 31}), 0.0)
    screen = text(s)
    assert re.search(r"alice +bob +TO MOVE", screen), screen
    assert re.search(r"answer clock 31 s +no clock running", screen), screen
