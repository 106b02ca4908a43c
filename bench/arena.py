"""``python -m bench.arena``: games per second of the arena, against the pure referee's own.

Theory of operation. Three figures, measured in one run, on one rule set, with the cheapest
engine (``random``, the built-in that reads only the cells still unknown):

1. *the referee alone*: :mod:`bench.core`'s loop (each frame body decoded, handed to the pure
   referee, every message it sends encoded; the players' own work outside the timed part) over
   whole matches, the end of each included (reveals, the signed record). The time of every
   timed part is summed, so the figure is a mean over whole games (``bench.core`` itself
   reports medians per shot, a little below the mean: both are printed);
2. *the in-process arena* (``seabattle arena``'s default): two ``random`` engines on the pure
   referee and two pure seats in memory, wall time for the games, records signed and co-signed
   (not written: the disk is not the arena's cost), with trusting seats (the default) and
   with checking seats (a mirror that checks every proof, the record checked before co-signing),
   and with 8 games at once (trio tasks: the engines here never wait, so this is the cost of
   interleaving);
3. *the arena through a local server* (``--server``): a ``seabattle serve`` process on this
   machine (SQLite in a temporary folder), every game a real match between two clients, at
   concurrency 1 and 8.

The bar (issue 38: the in-process arena within 2x of the referee) is judged on a ratio of its
own: 1 and 2 in short alternating rounds, each in CPU time, the median of the rounds' ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.engine.arena import Arena, Contender, paired
from seabattle.engine.builtin import BuiltinEngine
from seabattle.protocol.rules import preset

from .core import _answer, _end, _fire, _new_match, _reveals, _serve
from .figures import machine, machine_line

__all__ = ["arena_games", "referee_alone"]


def referee_alone(rules: str, mode: str, games: int, seed: int = 13) -> dict[str, Any]:
    """The pure referee's own time over ``games`` whole matches (see the module docstring)."""
    import random

    rs = preset(rules)
    rng = random.Random(seed)
    key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    total = cpu = 0
    per_shot: list[float] = []
    shots = 0
    wall, thread = time.perf_counter_ns, time.thread_time_ns
    for _ in range(games):
        match = _new_match(rs, mode, random.Random(rng.random()))
        while (fire := _fire(match)) is not None:
            t, c = wall(), thread()
            _serve(match.ref, *fire)
            took, used = wall() - t, thread() - c
            answer = _answer(match)
            if answer is not None:
                t, c = wall(), thread()
                _serve(match.ref, *answer)
                took, used = took + wall() - t, used + thread() - c
            total += took
            cpu += used
            per_shot.append(took / 1000)
            shots += 1
        reveals = _reveals(match)
        t, c = wall(), thread()
        assert _end(match, key, reveals)
        total += wall() - t
        cpu += thread() - c
    return {
        "games": games,
        "shots_per_game": shots / games,
        "games_per_s": games / (total / 1e9),
        "games_per_cpu_s": games / (cpu / 1e9),
        "us_per_shot_mean": statistics.fmean(per_shot),
        "us_per_shot_median": statistics.median(per_shot),
    }


def arena_games(
    rules: str,
    mode: str,
    games: int,
    *,
    checking: bool = False,
    server: tuple[str, int] | None = None,
    concurrency: int = 1,
) -> dict[str, Any]:
    """Wall-clock games per second of the arena, two ``random`` engines."""
    contenders = [Contender(n, lambda: BuiltinEngine("random")) for n in ("a", "b")]
    arena = Arena(
        contenders,
        preset(rules),
        seed=1,
        mode=mode,
        checking=checking,
        server=server,
        concurrency=concurrency,
    )
    arena.board(0)  # the uniform sampler's tables are built once a rule set: not a game's cost
    t, c = time.perf_counter(), time.process_time()
    results = trio.run(arena.play, paired(2, range((games + 1) // 2)))
    took, used = time.perf_counter() - t, time.process_time() - c
    return {
        "games": len(results),
        "shots_per_game": statistics.fmean(sum(r.shots) for r in results),
        "games_per_s": len(results) / took,
        "games_per_cpu_s": len(results) / used,
        "faults": sum(r.fault is not None for r in results),
    }


def _serve_process(folder: Path) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from seabattle.cli.main import main; main()",
            "serve",
            "--port",
            "0",
            "--db",
            str(folder / "db.sqlite"),
            "--key",
            str(folder / "server.key"),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    start = json.loads(line)
    port = start["port"]
    return proc, ("127.0.0.1", int(port))


@click.command()
@click.option("--rules", default="russian", show_default=True)
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind", show_default=True)
@click.option("--games", default=200, show_default=True, help="Games a figure (in process).")
@click.option("--server-games", default=40, show_default=True, help="Games through the server.")
@click.option("--runs", default=3, show_default=True, help="Runs of each figure: the median.")
@click.option(
    "--rounds", default=20, show_default=True, help="Alternating rounds for the bar's ratio."
)
@click.option("--json", "as_json", is_flag=True)
def main(
    rules: str, mode: str, games: int, server_games: int, runs: int, rounds: int, as_json: bool
) -> None:
    """Games per second: the pure referee alone, the in-process arena, the arena on a server."""
    report: dict[str, Any] = {"machine": machine(), "rules": rules, "mode": mode}
    # The bar's ratio: short rounds of each, alternating, in CPU time. On a shared machine the
    # speed of a core drifts by tens of per cent within a minute; a ratio of long runs taken
    # one after the other measures that drift as much as the arena.
    chunk = max(2, games // 10)
    bar = []
    for i in range(rounds):
        r = referee_alone(rules, mode, chunk, seed=13 + i)
        a = arena_games(rules, mode, chunk)
        bar.append(r["games_per_cpu_s"] / a["games_per_cpu_s"])
    report["bar"] = {
        "rounds": rounds,
        "games_a_round": chunk,
        "ratio_cpu_median": statistics.median(bar),
        "ratio_cpu_range": [min(bar), max(bar)],
    }
    ref, trusting, checking, c8 = [], [], [], []
    for _ in range(runs):  # interleaved, so that a change of load hits every figure alike
        ref.append(referee_alone(rules, mode, games))
        trusting.append(arena_games(rules, mode, games))
        checking.append(arena_games(rules, mode, games, checking=True))
        c8.append(arena_games(rules, mode, games, concurrency=8))
    with tempfile.TemporaryDirectory() as tmp:
        proc, addr = _serve_process(Path(tmp))
        try:
            server1 = [arena_games(rules, mode, server_games, server=addr) for _ in range(runs)]
            server8 = [
                arena_games(rules, mode, server_games, server=addr, concurrency=8)
                for _ in range(runs)
            ]
        finally:
            proc.terminate()
            proc.wait(timeout=20)

    def med(xs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(xs, key=lambda r: r["games_per_s"])[len(xs) // 2]

    report["referee"] = med(ref)
    report["arena"] = med(trusting)
    report["arena_checking"] = med(checking)
    report["arena_c8"] = med(c8)
    report["server_c1"] = med(server1)
    report["server_c8"] = med(server8)
    report["ratio"] = report["referee"]["games_per_s"] / report["arena"]["games_per_s"]
    report["machine"]["load_after"] = list(os.getloadavg())
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(machine_line(report["machine"]))
    r = report["referee"]
    click.echo(
        f"referee alone      {r['games_per_s']:7.1f} games/s  ({r['shots_per_game']:.0f} shots a "
        f"game; µs a shot: mean {r['us_per_shot_mean']:.1f}, median {r['us_per_shot_median']:.1f})"
    )
    for key, label in (
        ("arena", "arena, in process"),
        ("arena_checking", "  checking seats"),
        ("arena_c8", "  8 at once"),
        ("server_c1", "arena, server c=1"),
        ("server_c8", "arena, server c=8"),
    ):
        a = report[key]
        click.echo(
            f"{label:<18} {a['games_per_s']:7.1f} games/s  ({a['shots_per_game']:.0f} shots a "
            f"game, {a['games']} games, {a['faults']} faults)"
        )
    click.echo(f"referee alone / arena in process: {report['ratio']:.2f}x (runs: {runs}, medians)")
    b = report["bar"]
    lo, hi = b["ratio_cpu_range"]
    click.echo(
        f"the bar's ratio, CPU time, {b['rounds']} alternating rounds of {b['games_a_round']} "
        f"games: {b['ratio_cpu_median']:.2f}x median ({lo:.2f}-{hi:.2f})"
    )


if __name__ == "__main__":
    main()
