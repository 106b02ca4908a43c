"""The terminal player driven in-process: typed lines in, the screen's text out, whole games.

Each test types into a :class:`~seabattle.cli.tui.TerminalUI` through a scripted line reader and
reads what a person would see from a ``Console(file=StringIO(), force_terminal=True, width=100)``,
against a bot over real TCP (peer play) or through the real server (refereed play).
"""

from __future__ import annotations

import io
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from helpers import peer_match, quick_bot
from rich.console import Console
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.cli.human import ConsolePlayer, play_server
from seabattle.cli.tui import Quit, TerminalUI
from seabattle.client.match import RunningClock
from seabattle.client.peer import BotPlayer, PeerResult
from seabattle.protocol.game import Game
from seabattle.protocol.rules import PRESETS, rules_from_dict

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100), out


def screen(out: io.StringIO) -> str:
    """What the terminal shows, without colour codes."""
    return _ANSI.sub("", out.getvalue())


class Typist:
    """Types placement commands, then shots: some given first, then every cell in turn."""

    def __init__(self, rows: int, cols: int, placing: list[str], shots: list[str]) -> None:
        self.placing = iter(placing)
        sweep = (f"{chr(65 + c)}{r + 1}" for r in range(rows) for c in range(cols))
        self.shots: Iterator[str] = iter([*shots, *sweep])
        self.prompts: list[str] = []

    async def __call__(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        if prompt.startswith("place"):
            return next(self.placing, "random")
        return next(self.shots)


def final_grids(text: str) -> tuple[list[str], list[str]]:
    """The rows of both grids on the end screen: (ours, theirs)."""
    block = text[text.rindex("your fleet") :].splitlines()
    rows = [line for line in block[2:] if re.match(r"\s*\d+ ", line)]
    half = [re.split(r"\s{3,}(?=\s*\d+ )", r, maxsplit=1) for r in rows]
    return [h[0] for h in half], [h[1] for h in half]


def ship_cells(rows: list[str]) -> int:
    # A ship's letter (in lower case once sunk; never O, X: they read as a ship, a hit), X, #.
    return sum(len(re.findall(r"(?<= )[A-NP-Za-np-wyz#](?= |$)", r)) for r in rows)


# ================================================================================================
# Peer play
# ================================================================================================


async def peer_game(
    rules: Any, typist: Typist, con: Console, human_hosts: bool
) -> tuple[PeerResult, PeerResult]:
    """Play a peer match, the human on one side; returns (the human's result, the bot's)."""
    human = ConsolePlayer(ui=TerminalUI(con, typist, rng=random.Random(3)))
    bot = BotPlayer(make_strategy("random"), random.Random(4))
    hosting, joining = (human, bot) if human_hosts else (bot, human)
    with trio.fail_after(15):
        hosted, joined = await peer_match(rules, hosting, joining, name="joiner")
    return (hosted, joined) if human_hosts else (joined, hosted)


@pytest.mark.parametrize("human_hosts", [True, False], ids=["host", "join"])
async def test_a_peer_game_by_hand_shows_rules_refusals_and_both_fleets(human_hosts: bool) -> None:
    rules = rules_from_dict({"preset": "classic-8x8", "hit_again": True, "hit_again_shown": True})
    typist = Typist(
        8,
        8,
        ["A1", "G1 across", "A1 across", "A1 down", "move Battleship", "B2 down", "random"],
        ["Z9", "A1 A2", "help", "A1", "A1"],
    )
    con, out = console()
    mine, theirs = await peer_game(rules, typist, con, human_hosts)
    text = screen(out)
    assert mine.report.ok and mine.signed == theirs.signed
    # The rules, with the house rule listed and 003's badge.
    assert "Rules: classic-8x8 with house rules" in text
    assert "house rules: a hit shoots again: yes" in text
    assert "HOUSE RULE: a hit shoots again" in text
    assert "not enforced" not in text  # no clocks in these rules: nothing to warn of
    # Placement refusals carry the rules' own reasons.
    assert "refused: which way does Battleship (4) lie from A1?" in text
    assert "refused: Battleship leaves the board at I1" in text
    assert "refused: Cruiser overlaps Battleship at A1" in text
    assert "Battleship picked up: place it again" in text
    assert "your fleet is placed and fixed for this game" in text
    # Move refusals: parsing, salvo size, and the repeat our own referee refuses.
    assert "refused: that is not a cell of this board (Z9 is off the board (A1-H8))" in text
    assert "refused: this turn calls 1 cell(s)" in text
    assert "refused: you have fired at that cell already; call another (A1 was" in text
    # The end: the reason, then both fleets in full with every shot on them.
    outcome = "you won" if mine.won else "you lost"
    assert re.search(rf"game 1 over: {outcome}: .*fleet was sunk", text)
    assert "reason: fleet_sunk" in text
    ours, target = final_grids(text)
    assert ship_cells(ours) == ship_cells(target) == rules.fleet_cells
    assert re.search(r"your fleet +their fleet", text)


async def test_random_under_evasive_places_the_rest_around_the_ships_down() -> None:
    # evasive's random plays simulated games (in a thread); the game then goes on as any other.
    rules = PRESETS["classic-8x8"]
    typist = Typist(8, 8, ["A1 across", "random"], [])
    con, out = console()
    human = ConsolePlayer(ui=TerminalUI(con, typist, rng=random.Random(3), placement="evasive"))
    with trio.fail_after(15):
        mine, theirs = await peer_match(
            rules, human, BotPlayer(make_strategy("random"), random.Random(4)), name="joiner"
        )
    text = screen(out)
    assert mine.report.ok and mine.signed == theirs.signed
    assert f"{rules.fleet[0].name} placed at A1 across" in text
    assert "the rest of the fleet is placed at random" in text
    ours, _ = final_grids(text)
    assert ship_cells(ours) == rules.fleet_cells


async def test_end_of_input_leaves_the_game() -> None:
    async def nothing(prompt: str) -> str | None:
        return None

    con, out = console()
    ui = TerminalUI(con, nothing)
    with pytest.raises(Quit):
        await ui.place(PRESETS["classic"], 1)
    assert "place Carrier (5): " in screen(out)


# ================================================================================================
# The clock
# ================================================================================================


async def test_the_shot_clock_counts_down_while_the_player_thinks(autojump_clock: Any) -> None:
    rules = PRESETS["classic"]
    game = Game(rules, bytes(16), 1)
    clocks: list[RunningClock | None] = [RunningClock(1, "shot", 30, 0, trio.current_time())]

    async def slow(prompt: str) -> str | None:
        await trio.sleep(27)
        return "E5"

    con, out = console()
    move = await TerminalUI(con, slow).move(game, 0, None, lambda: clocks[0])
    text = screen(out)
    assert move == ("fire", [rules_cell("E5")])
    assert "your shot (a cell, e.g. E5) [30 s left]: " in text
    for left in (20, 10, 5):
        assert f"[clock] {left} s left to call your shot" in text
        # The prompt printed again under the notice shows the time left then, not at first.
        assert f"your shot (a cell, e.g. E5) [{left} s left]: " in text
    assert "[clock] 30 s left" not in text  # a clock is not announced above its own length

    # A clock that starts while the prompt is open is announced when it appears.
    clocks[0] = None

    async def starts_late(prompt: str) -> str | None:
        await trio.sleep(1)
        clocks[0] = RunningClock(1, "shot", 15, 0, trio.current_time())
        await trio.sleep(1)
        return "A1"

    con, out = console()
    await TerminalUI(con, starts_late).move(game, 0, None, lambda: clocks[0])
    assert "[clock] 15 s to call your shot" in screen(out)


def rules_cell(text: str) -> Any:
    from seabattle.protocol.grid import parse_cell

    return parse_cell(text, 10, 10)


# ================================================================================================
# Refereed play
# ================================================================================================

app = pytest.importorskip("seabattle.server.app")


async def refereed(
    addr: tuple[str, int], rules: dict[str, Any], mode: str, read: Any, con: Console
) -> tuple[bool | None, BotResult]:
    box: list[Any] = []

    async def bot() -> None:
        box.append(await quick_bot(addr, rules, mode, random.Random(1)))

    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bot)
            won = await play_server(
                *addr, rules=rules, mode=mode, key=None, name="me", console=con, read=read
            )
    return won, box[0]


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_a_refereed_game_by_hand(server: tuple[str, int], mode: str) -> None:
    typist = Typist(10, 10, ["Ship-2 A1 across", "A1 across", "random"], ["A1", "A1"])
    con, out = console()
    won, bot = await refereed(server, {"preset": "sea-battle"}, mode, typist, con)
    text = screen(out)
    assert won is (not bot.won)
    assert bot.seat is not None
    assert re.search(rf"you are me( \(\d+\))?, against bot( \(\d+\))?, {mode} mode", text)
    assert "Rules: sea-battle" in text and "setup 120s, shot 30s" in text
    # 004: ships in fleet order, with the setup clock shown in the prompt.
    assert "refused: these rules place the ships in fleet order: next is Ship-5 (5)" in text
    assert re.search(r"place Ship-5 \(5\) \[1[12]\d s left\]: ", text)
    assert re.search(r"your shot \(a cell, e\.g\. E5, or resign\) \[[23]\d s left\]: ", text)
    # The server's own refusal of a repeated call, explained.
    assert "refused: you have fired at that cell already; call another" in text
    assert re.search(r"game 1 over: you (won|lost): your (opponent's )?fleet was sunk", text)
    ours, target = final_grids(text)
    assert ship_cells(ours) == ship_cells(target) == 17
    assert "match over: " in text and "signed record: match " in text


async def test_say_at_the_shot_prompt_talks_to_the_opponent(server: tuple[str, int]) -> None:
    # The line goes through the server and comes back as the match's chat (spec 6.9.4), in
    # order with the game; the prompt goes on asking for the shot.
    typist = Typist(8, 8, ["random"], ["help", "say good [bold]luck", "say", "A1"])
    con, out = console()
    won, bot = await refereed(server, {"preset": "classic-8x8"}, "blind", typist, con)
    text = screen(out)
    assert won is (not bot.won)
    assert "'say TEXT' talks" in text  # in the help
    assert "you: good [bold]luck" in text  # the other player's text is never markup
    assert "say what? e.g. say good luck" in text
    shots = [p for p in typist.prompts if p.startswith("your shot")]
    assert len(shots) >= 4  # help, both says and the first shot were each asked for


async def test_leaving_resigns_the_game(server: tuple[str, int]) -> None:
    async def place_then_leave(prompt: str) -> str | None:
        return "random" if prompt.startswith("place") else None

    con, out = console()
    won, bot = await refereed(server, {"preset": "classic-8x8"}, "blind", place_then_leave, con)
    assert won is False and bot.won is True
    assert "you left the match" in screen(out)


async def test_a_setup_clock_that_runs_out_ends_the_game_and_says_why(
    server: tuple[str, int],
) -> None:
    async def never(prompt: str) -> str | None:
        await trio.sleep_forever()

    rules = {"preset": "classic-8x8", "clocks": {"setup": 1}}
    con, out = console()
    won, bot = await refereed(server, rules, "blind", never, con)
    text = screen(out)
    assert won is False and bot.won is True
    assert "game 1 over: you lost: you did not place a fleet in time" in text
    assert "reason: setup_timeout" in text
    assert "their fleet was not revealed in this game" in text


async def test_shot_clocks_that_run_out_lose_shots_then_the_game(server: tuple[str, int]) -> None:
    async def places_then_sleeps(prompt: str) -> str | None:
        if prompt.startswith("place"):
            return "random"
        await trio.sleep_forever()

    rules = {"preset": "classic-8x8", "clocks": {"shot": 1, "max_expiries": 2}}
    con, out = console()
    won, _bot = await refereed(server, rules, "blind", places_then_sleeps, con)
    text = screen(out)
    assert "your shot is lost: the shot clock ran out" in text
    assert won is False
    assert "you lost: you let too many shot clocks run out in a row" in text


async def test_a_team_match_by_hand_prints_the_team_invitations_and_names_who_calls(
    server: tuple[str, int],
) -> None:
    # Team play (spec 6.8): the person hosts; three bots join from the codes it prints.
    from seabattle.client.api import connect

    typist = Typist(8, 8, ["random"], [])
    con, out = console()
    rules = {"preset": "classic-8x8", "team_size": 2}
    results: list[BotResult] = []

    async def bot(code: str, seed: int) -> None:
        async with connect(*server, name=f"bot{seed}", reconnect_for=0) as c:
            match = await c.join(code)
            results.append(await play_match(match, make_strategy("hunt"), random.Random(seed)))

    async def joiners() -> None:
        while "team invitations:" not in screen(out):
            await trio.sleep(0.01)
        mine, theirs = re.findall(r"your team (\w+), the other team (\w+)", screen(out))[0]
        async with trio.open_nursery() as n:
            n.start_soon(bot, mine, 1)
            n.start_soon(bot, theirs, 2)
            n.start_soon(bot, theirs, 3)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(joiners)
            won = await play_server(
                *server,
                rules=rules,
                mode="custody",
                key=None,
                name="me",
                console=con,
                read=typist,
                create=True,
            )
    text = screen(out)
    assert "team play: you are its captain of seat 0's team" in text
    assert re.search(r"your teammate \w+ calls this turn", text)
    assert len(results) == 3 and all(r.ended for r in results)
    mate = next(r for r in results if r.seat == 0)
    assert won is mate.won
    # The person placed once (the captain does), and called every other turn of its team.
    assert sum(p.startswith("place") for p in typist.prompts) == 1


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_a_player_who_resigns_is_shown_the_opponents_fleet(
    server: tuple[str, int], mode: str
) -> None:
    # Spec 7.3 decision 20: a game that ends early (here: our resignation) shows both fleets,
    # as 000 does at every end: the custody referee sends them, a blind bot reveals its own.
    typist = Typist(8, 8, ["random"], ["resign"])
    con, out = console()
    won, bot = await refereed(server, {"preset": "classic-8x8"}, mode, typist, con)
    text = screen(out)
    assert won is False and bot.won is True
    assert "reason: resigned" in text
    # After the end screen, which could not show it yet, their fleet is drawn, then the match
    # ends.
    end = text.rindex("game 1 over")
    assert text.index("their fleet, revealed:", end) < text.index("match over: you lost", end)
    _ours, theirs = final_grids(text)
    assert ship_cells(theirs) == PRESETS["classic-8x8"].fleet_cells
