"""``seabattle arena`` as a user runs it, a separate process: the table at the end, a crashing
engine process that loses its games and says why, records that ``seabattle verify`` accepts, the
HTML report, the same seed the same table, and an SPRT that resolves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]

#: An engine that says hello, leaves its fleet to the shell, and dies at its first move.
CRASHER = dedent(
    """
    import json, sys
    for line in sys.stdin:
        req = json.loads(line)
        if req["type"] == "engine":
            print(json.dumps({"type": "hello", "name": "crasher", "rules": []}), flush=True)
        elif req["type"] == "place":
            print(json.dumps({"type": "fleet", "ships": "random"}), flush=True)
        elif req["type"] == "move":
            sys.exit(3)
    """
)


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_a_round_robin_with_a_crashing_engine_finishes_and_verifies(tmp_path: Path) -> None:
    crasher = tmp_path / "crasher.py"
    crasher.write_text(CRASHER)
    records, page = tmp_path / "records", tmp_path / "report.html"
    r = _run(
        "arena", "random", "hunt", f"{sys.executable} {crasher}", "--games", "2", "--seed", "1",
        "--records", str(records), "--html", str(page), "--move-time", "10",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Arena: 6 games on russian, seed 1" in r.stdout
    assert "crasher: lost 4 game(s) by a fault: crashed" in r.stdout
    files = sorted(records.glob("*.rec"))
    assert len(files) == 6
    key = (records / "referee.pub").read_text().strip()
    v = _run("verify", "--referee-key", key, *map(str, files))
    assert v.returncode == 0, v.stdout + v.stderr
    assert v.stdout.count("OK") == 6
    html = page.read_text()
    assert html.count("<svg") == 3 and "crashed" in html


@pytest.mark.slow
def test_the_same_seed_gives_the_same_table(tmp_path: Path) -> None:
    args = ["arena", "random", "hunt", "density", "--games", "4", "--seed", "11", "--json"]
    one, two = _run(*args), _run(*args, "--concurrency", "3")
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout
    table = json.loads(one.stdout)
    assert table["games"] == 12 and table["seed"] == 11
    assert sum(e["wins"] for e in table["engines"]) == 12
    other = _run("arena", "random", "hunt", "density", "--games", "4", "--seed", "12", "--json")
    assert json.loads(other.stdout)["engines"] != table["engines"]


def test_an_sprt_resolves_for_the_stronger_engine() -> None:
    r = _run("arena", "hunt", "random", "--sprt", "--elo0", "0", "--elo1", "50", "--seed", "4")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("SPRT"))
    assert line.startswith("SPRT [0, 50] alpha 0.05 beta 0.05: LLR ") and line.endswith(
        "H1 accepted"
    )
    llr = float(line.split("LLR ")[1].split()[0])
    assert llr >= 2.94


def test_usage_errors_are_plain() -> None:
    r = _run("arena", "random")
    assert r.returncode == 2 and "two engines at least" in r.stderr
    r = _run("arena", "random", "hunt", "best", "--sprt")
    assert r.returncode == 2 and "--sprt plays two engines" in r.stderr
    r = _run("arena", "random", "hunt", "--sprt", "--elo0", "5", "--elo1", "5")
    assert r.returncode == 2 and "elo0 must be less than elo1" in r.stderr
