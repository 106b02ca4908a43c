"""``python -m bench.soak --minutes 30``: a long run of bot matches at full speed
against ``seabattle serve`` as shipped, watching the server's memory and file descriptors.

Theory of operation. ``seabattle serve`` runs on a store in a temporary folder (SQLite, the
journal on, default limits); ``seabattle bench --server ... --no-baseline`` runs custody and blind
bot matches against it for the whole time, in a child process of its own. Every ``every`` seconds
this samples the server's RSS (``/proc/PID/status``, ``VmRSS``) and open descriptors
(``/proc/PID/fd``). The verdict compares the last ``window`` minutes: RSS growth below 5 % and no
more descriptors at the end than at the start of the window (issue 10's soak bar). It prints one
line per sample and a JSON summary; the exit status is 0 only if both held.

Linux only (``/proc``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from .crash import Server
from .figures import machine

__all__ = ["main", "soak_run"]

_BENCH = [sys.executable, "-c", "from seabattle.cli.main import main; main()", "bench"]


def _sample(pid: int) -> tuple[float, int]:
    """(RSS in MB, open descriptors) of process ``pid``."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def soak_run(
    minutes: float, *, window: float = 20.0, every: float = 15.0, matches: int = 8, log: Any = print
) -> dict[str, Any]:
    """Soak a server for ``minutes``; judge the last ``window`` minutes (see the module doc)."""
    folder = Path(tempfile.mkdtemp(prefix="seabattle-soak-"))
    server = Server(folder)
    host, port = server.start()
    assert server.proc is not None
    pid = server.proc.pid
    seconds = minutes * 60
    load = subprocess.Popen(
        [
            *_BENCH,
            "--server",
            f"{host}:{port}",
            "--server-pid",
            str(pid),
            "--matches",
            str(matches),
            "--mode",
            "both",
            "--duration",
            str(seconds / 2),  # both modes, one after the other
            "--no-baseline",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    samples: list[tuple[float, float, int]] = []
    started = time.monotonic()
    try:
        while load.poll() is None:
            rss, fds = _sample(pid)
            at = time.monotonic() - started
            samples.append((at, rss, fds))
            log(f"{at / 60:6.1f} min  rss {rss:7.1f} MB  fds {fds}")
            time.sleep(every)
        report = json.loads(load.stdout.read() if load.stdout else "{}")
    finally:
        if load.poll() is None:
            load.kill()
        server.stop()
    end = samples[-1][0]
    judged = [s for s in samples if s[0] >= end - window * 60] or samples
    growth = (judged[-1][1] - judged[0][1]) / judged[0][1] * 100
    return {
        "minutes": round(end / 60, 1),
        "rss_mb_start": round(samples[0][1], 1),
        "rss_mb_window_start": round(judged[0][1], 1),
        "rss_mb_end": round(judged[-1][1], 1),
        "rss_growth_pct_window": round(growth, 2),
        "fds_window_start": judged[0][2],
        "fds_end": judged[-1][2],
        "ok": growth < 5 and judged[-1][2] <= judged[0][2],
        "load": report,
        "machine": machine(),
    }


@click.command()
@click.option("--minutes", type=float, default=30.0, show_default=True)
@click.option("--window", type=float, default=20.0, show_default=True, help="Minutes judged.")
@click.option("--matches", type=int, default=8, show_default=True, help="Concurrent matches.")
def main(minutes: float, window: float, matches: int) -> None:
    """Soak the server at full bot speed; check its memory and descriptors stay flat."""
    summary = soak_run(minutes, window=window, matches=matches)
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
