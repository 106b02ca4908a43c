"""The game screen's keys, in-process: what a player presses on the board, and what it asks.

:class:`~seabattle.cli.screen.ScreenUI` runs as it does under the screen, on trio, with a
stand-in for the Textual app that keeps what it would draw and passes on keys as the app does.
The screen itself, through a real terminal, is in test_screen_pty.py.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import parse_cell
from seabattle.protocol.rules import PRESETS, RuleSet, rules_from_dict

screen = pytest.importorskip("seabattle.cli.screen")


class FakeApp:
    """What ScreenUI asks of the app: draw (kept, the last view wins), log, and a sink."""

    def __init__(self) -> None:
        self.sink: Callable[[tuple[str, str]], None] | None = None
        self.views: list[Any] = []
        self.log: list[Any] = []

    def call_later(self, fn: Callable[..., None], *args: Any) -> None:
        fn(*args)

    def show(self, view: Any) -> None:
        self.views.append(view)

    def log_line(self, renderable: Any) -> None:
        self.log.append(renderable)

    def press(self, *events: tuple[str, str]) -> None:
        assert self.sink is not None
        for ev in events:
            self.sink(ev)


def keys(*names: str) -> list[tuple[str, str]]:
    return [("key", k) for k in names]


async def on_screen(
    ask: Callable[[Any], Awaitable[Any]], *events: tuple[str, str]
) -> tuple[Any, FakeApp]:
    """Run ``ask(ui)`` as the screen runs it, pressing ``events`` once it waits; its answer."""
    app = FakeApp()
    ui = screen.ScreenUI(app)  # type: ignore[arg-type]
    box: list[Any] = []

    async def main(ui: Any) -> None:
        async with trio.open_nursery() as nursery:

            async def press() -> None:
                await trio.testing.wait_all_tasks_blocked()
                app.press(*events)

            nursery.start_soon(press)
            box.append(await ask(ui))

    with trio.fail_after(5):
        await ui._main(main, [])
    return box[0], app


def firing_game(rules: RuleSet) -> tuple[Game, Fleet]:
    fleet = Fleet.of(*((f"A{2 * k + 1}", "across") for k in range(len(rules.fleet))))
    mid = bytes(16)
    g = Game(rules, mid, 1)
    for seat in (0, 1):
        g.commit(seat, Committed(rules, fleet, bytes([seat]) * 32, mid, 1, seat).commitment)
    g.set_first(0)
    return g, fleet


async def test_a_salvo_is_marked_with_space_and_fired_with_enter() -> None:
    rules = rules_from_dict({"preset": "classic", "shots": "salvo-fixed", "salvo_size": 3})
    game, fleet = firing_game(rules)
    presses = [
        *keys("space", "right", "space", "space"),  # A1 marked; B1 marked, then unmarked
        *keys("down", "enter"),  # B2 marked by Enter: two of three, nothing fired yet
        *keys("right", "enter"),  # C2: the third, and the salvo goes
    ]
    move, app = await on_screen(lambda ui: ui.move(game, 0, fleet), *presses)
    assert move == ("fire", [parse_cell(c, 10, 10) for c in ("A1", "B2", "C2")])
    asking = [v for v in app.views if v.prompt]
    assert asking and all("YOUR TURN" in v.header.plain for v in asking)
    assert asking[0].prompt == "your shot (3 cells): "
    assert "Space marks a salvo's cells" in asking[0].hint


async def test_a_typed_line_and_the_cursor_call_the_same_shot() -> None:
    game, fleet = firing_game(PRESETS["classic"])
    typed, _ = await on_screen(lambda ui: ui.move(game, 0, fleet), ("line", "e5"))
    aimed, _ = await on_screen(
        lambda ui: ui.move(game, 0, fleet), *keys(*["down"] * 4, *["right"] * 4, "enter")
    )
    assert typed == aimed == ("fire", [parse_cell("E5", 10, 10)])


async def test_placing_by_cursor_turn_and_a_cell_typed_alone() -> None:
    rules = rules_from_dict(
        {"preset": "classic-8x8", "fleet": [["Battleship", 4], ["Cruiser", 3], ["Destroyer", 2]]}
    )
    presses = [
        *keys("space", "enter"),  # Battleship turned down, placed at the cursor: A1 down
        ("line", "turn"),  # the Cruiser turned back across, by the word
        ("line", "C1"),  # a cell alone: the Cruiser lies the way it is turned
        ("line", "H1"),  # the Destroyer across from H1 leaves the board: refused
        ("line", "Destroyer G8"),
    ]
    fleet, app = await on_screen(lambda ui: ui.place(rules, 1), *presses)
    assert [p.cells(1)[0].label() for p in fleet.placements] == ["A1", "C1", "G8"]
    assert [p.vertical for p in fleet.placements] == [True, False, False]
    said = [getattr(r, "plain", "") for r in app.log]
    assert "Battleship placed at A1 down" in said
    assert "Cruiser placed at C1 across" in said
    assert any(line.startswith("refused: Destroyer leaves the board") for line in said)


class Player(FakeApp):
    """A stand-in app that answers every prompt the screen shows, as a person would type."""

    def __init__(self, rules: RuleSet) -> None:
        super().__init__()
        self.cells = itertools.cycle(
            f"{chr(65 + c)}{r + 1}" for r in range(rules.rows) for c in range(rules.cols)
        )
        self.answered = ""

    def show(self, view: Any) -> None:
        super().show(view)
        if view.prompt and view.prompt != self.answered and self.sink is not None:
            self.answered = view.prompt
            self.sink(("line", "random" if view.prompt.startswith("place") else next(self.cells)))
        elif not view.prompt:
            self.answered = ""


async def test_a_peer_match_of_three_games_on_the_screen() -> None:
    from helpers import peer_match
    from seabattle.bots.strategies import make_strategy
    from seabattle.cli.human import ConsolePlayer
    from seabattle.client.peer import BotPlayer

    rules = rules_from_dict(
        {"preset": "classic-8x8", "hit_again": True, "match": {"kind": "best-of", "games": 3}}
    )
    app = Player(rules)
    ui = screen.ScreenUI(app)  # type: ignore[arg-type]
    box: list[Any] = []

    async def main(ui: Any) -> None:
        bot = BotPlayer(make_strategy("random"), random.Random(4))
        box.append(await peer_match(rules, ConsolePlayer(ui=ui), bot))

    with trio.fail_after(30):
        await ui._main(main, [])
    mine, theirs = box[0]
    assert mine.report.ok and mine.signed == theirs.signed
    games = mine.match.to_dict()["games"]
    said = [getattr(r, "plain", "") for r in app.log]
    overs = [line for line in said if line.startswith("game ") and " over: " in line]
    assert len(overs) == games >= 2
    # Each game begins on fresh boards, and the last one's end stays drawn: both fleets in
    # full, the turn indicator saying so.
    placing = [v for v in app.views if v.prompt.startswith("place")]
    assert placing and all("GAME OVER" not in v.header.plain for v in placing)
    first_shots = {}
    for v in app.views:
        if v.prompt.startswith("your shot"):
            first_shots.setdefault(v.header.plain.split("\n")[0], v)
    assert len(first_shots) == games
    for v in first_shots.values():  # our first shot of a game: nothing on the target grid yet
        assert not set("X#.") & set(v.right.plain.split("\n", 1)[1])
    end = app.views[-1]
    assert "GAME OVER" in end.header.plain and f"game {games}" in end.header.plain
    assert "their fleet" in end.right.plain
    assert all("HOUSE RULE: a hit shoots again" in v.header.plain for v in app.views if v.prompt)
