"""The ``seabattle bench`` command: options to scenarios, then the report as tables or JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from seabattle.cli.common import _hostport, address_arg
from seabattle.common.latency import CpuLatencyError, cpu_latency
from seabattle.protocol.rules import PRESETS, preset

from .children import DB_ENV, JOURNAL_ENV
from .figures import MODES
from .measure import run_bench
from .players import Scenario
from .plot import plot_report
from .report import _strip, print_report

__all__ = ["QUICK", "bench"]


def _ints(value: str) -> list[int]:
    try:
        out = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: a number or a list like 1,10,50") from None
    if not out or any(x < 1 for x in out):
        raise click.BadParameter("at least one match")
    return out


QUICK = (
    # (matches, pace, duration): one bot-speed and one human-paced scenario per mode.
    (10, 0.0, 2.0),
    (200, 2.0, 4.0),
)


@click.command("bench")
@click.option(
    "--server",
    "server",
    default=None,
    callback=address_arg,
    help="Target HOST:PORT (default: start one).",
)
@click.option("--server-pid", type=int, default=None, help="PID of --server, for CPU and memory.")
@click.option(
    "--matches", default="10", show_default=True, help="Concurrent matches: N or 1,10,50."
)
@click.option(
    "--pace",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds between shots of a match; 0 = bot speed.",
)
@click.option(
    "--mode",
    type=click.Choice(["blind", "custody", "both"]),
    default="both",
    show_default=True,
)
@click.option("--duration", type=float, default=10.0, show_default=True, help="Seconds measured.")
@click.option("--shots", type=int, default=None, help="Stop each match after N shots.")
@click.option("--quick", is_flag=True, help="A run of under a minute: every figure, both modes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--repeat", type=int, default=1, show_default=True, help="Runs; figures are medians.")
@click.option("--rules", default="classic", show_default=True, help="Preset (single shots).")
@click.option("--no-baseline", is_flag=True, help="Skip the bare baseline.")
@click.option(
    "--journal/--no-journal",
    default=True,
    show_default=True,
    help="Whether the started server journals every move (its matches survive a restart).",
)
@click.option(
    "--profile",
    "profile_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="cProfile each started server into this folder (slows it down).",
)
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Draw RTT p50/p99 and CPU per shot against matches into this file (.png, .svg; the"
    " [plot] extra: matplotlib).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="The started server runs this many processes (serve --workers).",
)
@click.option(
    "--db",
    default=None,
    help="With --workers: the database (default: a fresh SQLite file per run; a URL must name an"
    " empty database, one bench run per database).",
)
@click.option(
    "--copies",
    is_flag=True,
    help="Each baseline writes as many frames a shot as the server: the custody echo also copies"
    " each verdict to a second, defending connection (2 writes, the echo's 1); with --echo the"
    " blind relay also copies each frame back to its sender (4, the relay's 2).",
)
@click.option(
    "--durable",
    is_flag=True,
    help="The baselines also store each frame in a journal file before sending it on, as the"
    " server's journal does, and write as many frames as the server (--copies): the least a"
    " server that loses no move could cost.",
)
@click.option(
    "--echo",
    is_flag=True,
    help="The players do not offer the capability lean, so the server copies each player's own"
    " moves back to it (4 frames a blind shot instead of 2), as before protocol revision 4.",
)
@click.option(
    "--cpu-latency-us",
    type=click.IntRange(0, 2**31 - 1),
    default=None,
    metavar="US",
    help="Hold every CPU's idle wake-up latency at US microseconds for the whole run (Linux PM"
    " QoS, needs root; 0: idle CPUs poll), as serve --cpu-latency-us does: the server, the"
    " baselines and the generator alike.",
)
def bench(
    server: str | None,
    server_pid: int | None,
    matches: str,
    pace: float,
    mode: str,
    duration: float,
    shots: int | None,
    quick: bool,
    as_json: bool,
    repeat: int,
    rules: str,
    no_baseline: bool,
    journal: bool,
    profile_dir: Path | None,
    plot_file: Path | None,
    workers: int,
    db: str | None,
    copies: bool,
    durable: bool,
    echo: bool,
    cpu_latency_us: int | None,
) -> None:
    """Load-test a server with bot matches; every figure also as a ratio to a bare trio baseline."""
    if rules not in PRESETS:
        raise click.BadParameter(f"one of {', '.join(PRESETS)}", param_hint="--rules")
    modes = list(MODES) if mode == "both" else [mode]
    if quick:
        scenarios = [Scenario(md, n, p, d, echo=echo) for md in modes for n, p, d in QUICK]
    else:
        scenarios = [
            Scenario(md, n, max(0.0, pace), duration, shots, echo)
            for md in modes
            for n in _ints(matches)
        ]
    # The started server reads it (children.bench_limits); the environment reaches the child.
    os.environ[JOURNAL_ENV] = "1" if journal else "0"
    if db:
        os.environ[DB_ENV] = db
    console = Console(stderr=as_json, width=max(Console().width, 110))
    try:
        with cpu_latency(cpu_latency_us):
            report = run_bench(
                scenarios,
                server=_hostport(server) if server else None,
                server_pid=server_pid,
                baseline=not no_baseline,
                repeat=max(1, repeat),
                rules=preset(rules),
                profile_dir=profile_dir,
                console=Console(stderr=True),
                workers=workers,
                copies=copies,
                durable=durable,
            )
    except CpuLatencyError as e:
        raise click.ClickException(str(e.strerror)) from None
    if as_json:
        click.echo(json.dumps(_strip(report), indent=2))
    else:
        print_report(report, console)
    if plot_file is not None:
        plot_report(report, plot_file)
