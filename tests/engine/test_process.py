"""Process engines (engine/process.py) against real processes: each way an engine fails is an
:class:`EngineFault` with its reason and a detail that says what happened, the process is gone
afterwards, and the next game starts it again."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio
from seabattle.engine.base import EngineFault
from seabattle.engine.process import ProcessEngine
from seabattle.engine.side import Side
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import preset
from seabattle.protocol.seat_events import YourTurn

FAULTY = str(Path(__file__).with_name("faulty_engine.py"))
ROOT = Path(__file__).resolve().parents[2]
RUSSIAN = preset("russian")


def faulty(mode: str, *args: str, move_time: float = 5.0) -> ProcessEngine:
    return ProcessEngine([sys.executable, FAULTY, mode, *args], move_time=move_time)


def turn(side: Side, count: int = 1) -> Side:
    side.feed(YourTurn(side.game, count, False))
    return side


async def fault_of(engine: ProcessEngine, *, moves: int = 1) -> EngineFault:
    """Play game 1 with ``engine`` up to ``moves`` moves; the fault it raises."""
    await engine.start()
    side = Side(RUSSIAN, 0, 1)
    try:
        await engine.new_game(RUSSIAN, 0, 1)
        await engine.place(RUSSIAN)
        for _ in range(moves):
            move = await engine.move(turn(side))
            side.fired.update(move.cells)  # as a verdict would
            side.turn = None
    except EngineFault as e:
        return e
    finally:
        await engine.close()
    raise AssertionError("no fault")


async def test_a_good_engine_says_hello_places_and_moves() -> None:
    engine = ProcessEngine(["node", str(ROOT / "examples" / "engine.js")])
    hello = await engine.start()
    assert (hello.name, hello.author, engine.name) == ("hunt.js", "seabattle examples", "hunt.js")
    await engine.new_game(RUSSIAN, 1, 1)
    fleet = await engine.place(RUSSIAN)
    assert fleet is not None
    fleet.validate(RUSSIAN)
    move = await engine.move(turn(Side(RUSSIAN, 1, 1)))
    assert len(move.cells) == 1 and move.cells[0].on(10, 10) and move.radar is None
    await engine.close()


async def test_a_crash_is_crashed_with_the_exit_status_and_the_engine_s_own_words() -> None:
    e = await fault_of(faulty("crash"))
    assert e.reason == "crashed"
    assert "status 3" in e.detail and "out of cheese" in e.detail


async def test_a_hang_is_timeout_within_the_move_time() -> None:
    t0 = trio.current_time()
    e = await fault_of(faulty("hang", move_time=0.5))
    assert e.reason == "timeout" and "no answer to 'move' in 0.5 s" in e.detail
    assert trio.current_time() - t0 < 5


async def test_garbage_is_garbage_quoting_what_it_wrote() -> None:
    e = await fault_of(faulty("garbage"))
    assert e.reason == "garbage" and "fire at will!" in e.detail


@pytest.mark.parametrize(
    ("mode", "moves", "why"),
    [
        ("repeat", 2, "was fired at already"),
        ("off", 1, "Z99 is off the 10 x 10 grid"),
        ("count", 1, "this shot calls 1 cell(s), got 2"),
    ],
)
async def test_an_illegal_call_is_illegal_move(mode: str, moves: int, why: str) -> None:
    e = await fault_of(faulty(mode), moves=moves)
    assert e.reason == "illegal_move" and why in e.detail


async def test_an_engine_that_does_not_play_the_rules_is_wrong_rules() -> None:
    e = await fault_of(faulty("fine", "--rules", "classic"))
    assert e.reason == "wrong_rules" and "plays classic, not russian" in e.detail
    e = await fault_of(faulty("decline"))
    assert e.reason == "wrong_rules" and "Tuesdays" in e.detail


async def test_an_engine_lying_that_it_plays_the_rules_places_an_illegal_fleet() -> None:
    e = await fault_of(faulty("classic-fleet", "--rules", "russian"))
    assert e.reason == "illegal_fleet" and "ships placed; the fleet has 10" in e.detail


async def test_a_command_that_cannot_run_is_crashed() -> None:
    engine = ProcessEngine(["/nonexistent/engine"])
    with pytest.raises(EngineFault) as e:
        await engine.start()
    assert e.value.reason == "crashed" and "cannot run /nonexistent/engine" in e.value.detail


async def test_the_hello_may_take_longer_than_a_move() -> None:
    # An interpreter takes a while to load: the hello has START_TIME (10 s), not the move time.
    engine = faulty("fine", "--slow", "0.5", move_time=0.1)
    hello = await engine.start()
    assert hello.name == "faulty-fine"
    await engine.close()


async def test_after_a_fault_the_next_game_starts_the_engine_again() -> None:
    engine = faulty("crash")  # crashes in game 1 only
    await engine.start()
    await engine.new_game(RUSSIAN, 0, 1)
    with pytest.raises(EngineFault):
        await engine.move(turn(Side(RUSSIAN, 0, 1)))
    await engine.new_game(RUSSIAN, 0, 2)
    move = await engine.move(turn(Side(RUSSIAN, 0, 2)))
    assert move.cells == (Cell(0, 0),)
    await engine.close()


async def test_an_engine_flooding_stderr_is_not_blocked() -> None:
    engine = faulty("flood")
    await engine.start()
    await engine.new_game(RUSSIAN, 0, 1)
    assert await engine.place(RUSSIAN) is None
    move = await engine.move(turn(Side(RUSSIAN, 0, 1)))
    assert move.cells == (Cell(0, 0),)
    await engine.close()


async def test_close_kills_a_hung_engine_and_its_children(tmp_path: Path) -> None:
    # A shell script engine whose child (sleep) would outlive a kill of the shell alone.
    script = tmp_path / "engine.sh"
    script.write_text(
        "#!/bin/sh\nsleep 3600 &\necho $! > child.pid\nread greeting\n"
        "echo '{\"type\":\"hello\",\"name\":\"sleepy\"}'\nwait\n"
    )
    engine = ProcessEngine(["sh", str(script)], move_time=0.3, cwd=tmp_path)
    await engine.start()
    await engine.new_game(RUSSIAN, 0, 1)
    with pytest.raises(EngineFault) as e:
        await engine.place(RUSSIAN)
    assert e.value.reason == "timeout"
    await engine.close()
    pid = int((tmp_path / "child.pid").read_text())
    # The kill went to the whole session: the child ends (its pidfd turns readable) at once.
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    try:
        with trio.fail_after(5):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def test_an_engine_argument_names_a_builtin_a_url_or_a_command() -> None:
    import click
    from seabattle.cli.engine import engine_from_spec
    from seabattle.engine.builtin import BuiltinEngine
    from seabattle.engine.http import HttpEngine

    assert isinstance(engine_from_spec("density", move_time=1), BuiltinEngine)
    http = engine_from_spec("https://bots.example:8443/v1/", move_time=2)
    assert isinstance(http, HttpEngine)
    assert (http.host, http.port, http.path, http.tls) == ("bots.example", 8443, "/v1", True)
    proc = engine_from_spec("node 'my engine.js' --depth 3", move_time=3)
    assert isinstance(proc, ProcessEngine)
    assert proc.argv == ["node", "my engine.js", "--depth", "3"] and proc.move_time == 3
    for bad in ("", "   ", "node 'unclosed"):
        with pytest.raises(click.BadParameter):
            engine_from_spec(bad, move_time=1)
