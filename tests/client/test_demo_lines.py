"""``seabattle demo`` as a person reads it in an 80-column terminal: lines that fit, and who won
said as a sentence that names each bot once."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]


@pytest.mark.parametrize("args", [["--peer"], []])
def test_demo_lines_fit_80_columns_and_say_who_won(args: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    r = subprocess.run(
        [*CLI, "demo", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # Each line as written: the console wrapped the first at 80 ("... 62 " / "shots").
    assert all(len(line) <= 80 for line in lines), lines
    assert not any(re.fullmatch(r"\s*shots", line) for line in lines), lines
    won = [line for line in lines if re.search(r"\b(best|density) won in \d+ shots against", line)]
    assert len(won) == 1, lines
    # Each bot named once in the sentence, no "bot (seat 0)".
    assert won[0].count("best") == 1 and won[0].count("density") == 1, won[0]
    assert "seat" not in r.stdout and "winner:" not in r.stdout
    assert re.match(r"seabattle demo: the best bot plays the density bot, ", lines[0])
    assert "the signed record verifies" in r.stdout
