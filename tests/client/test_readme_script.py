"""README's scripting example, run as README prints it: a user copies it, points it at a server
and expects a whole match, best-of-3, played to its end (issue 34's first complaint: placing
once before the loop hung game 2 for ever).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import start_server
from seabattle.bots.play import play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api

README = Path(__file__).resolve().parents[2] / "README.md"


def _script(addr: tuple[str, int]) -> str:
    """The README's scripting example, pointed at ``addr``, without its ``trio.run``."""
    text = README.read_text(encoding="utf-8")
    code = text.split("## Scripting", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    pointed = code.replace('"127.0.0.1", 7010', f'"{addr[0]}", {addr[1]}')
    assert pointed != code and "trio.run(main)\n" in pointed
    return pointed.replace("trio.run(main)\n", "")


async def test_the_readme_script_plays_a_best_of_three_to_its_end(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    ns: dict[str, Any] = {}
    exec(compile(_script(addr), str(README), "exec"), ns)
    assert ns["RULES"]["match"]["games"] == 3

    async def bot() -> None:
        async with api.connect(*addr, name="bot") as c:
            match = await c.quick(ns["RULES"], "blind")
            await play_match(match, make_strategy("random"), random.Random(3))

    with trio.fail_after(600):
        async with trio.open_nursery() as n:
            n.start_soon(ns["main"])
            n.start_soon(bot)
    printed = capsys.readouterr().out.splitlines()
    games = [line for line in printed if "'reason'" in line]
    assert 2 <= len(games) <= 3  # the match was decided by a majority of three games
    assert "'over': True" in printed[-1]  # and the script saw its end
