"""What the bench reports and how it reads a process: the figures and bars of a report, and
the CPU and memory figures read from ``/proc``.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio
from seabattle.common.latency import current

__all__ = [
    "BARS",
    "FIGURES",
    "GENERATOR_LIMIT_PCT",
    "HUMAN_BAR_MATCHES",
    "MODES",
    "gap_option",
    "machine",
    "machine_line",
    "percentile",
]

MODES = ("blind", "custody")
#: Figures of one run, in report order: (key, label, unit, better).
FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("shots_per_s", "shots per second", "/s", "higher"),
    ("rtt_p50_ms", "shot round trip p50", "ms", "lower"),
    ("rtt_p99_ms", "shot round trip p99", "ms", "lower"),
    ("server_cpu_pct", "server CPU", "% core", "lower"),
    ("server_cpu_us_per_shot", "server CPU per shot", "us", "lower"),
    ("server_kb_per_conn", "server memory per connection", "KB", "lower"),
    ("client_cpu_pct", "load generator CPU", "% core", "lower"),
    ("server_reads_per_shot", "server read syscalls per shot", "", "lower"),
    ("server_writes_per_shot", "server write syscalls per shot", "", "lower"),
)
#: The performance bars (BENCHMARKS.md): (name, what it is measured on, limit, comparison).
BARS: dict[str, tuple[str, float, str]] = {
    "blind_rtt_ratio": ("blind RTT p50 / bare relay RTT p50 (200 human-paced matches)", 1.3, "<="),
    "custody_rtt_ratio": ("custody RTT p50 / bare echo RTT p50 (200 human-paced)", 1.3, "<="),
    "bot_throughput_ratio": (
        "bot-speed blind shots/s / bare relay round trips/s (most matches)",
        0.7,
        ">=",
    ),
    "blind_p99_ms": ("blind human-pace RTT p99, ms (5,000 matches)", 10.0, "<="),
    "custody_p99_ms": ("custody human-pace RTT p99, ms (5,000 matches)", 10.0, "<="),
    "server_kb_per_conn": ("server memory per connection, KB", 20.0, "<="),
    "verify_ms_per_game": ("verify_record, ms per game", 5.0, "<="),
}
HUMAN_BAR_MATCHES = 5000  #: the human-pace p99 bars are set for this many matches
HUMAN_RTT_MATCHES = 200  #: the RTT ratio bars are set for this many human-paced matches
#: A run whose load generator used more of its core than this is flagged: past it, the generator
#: queues shots itself, and the figures are partly its own.
GENERATOR_LIMIT_PCT = 85.0


def _cpu_seconds(pid: int | list[int] | None) -> float | None:
    """utime + stime of ``pid`` (all its threads; of every process of a list), in seconds;
    ``None`` if unreadable."""
    if isinstance(pid, list):
        each = [_cpu_seconds(p) for p in pid]
        return None if not each or None in each else sum(x or 0.0 for x in each)
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    # Fields 14 and 15 of proc(5), counted after the ")" that ends the command name.
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _syscalls(pid: int | list[int] | None) -> tuple[int, int] | None:
    """Read and write system calls ``pid`` (every thread; the sum over a list) has made, from
    ``/proc/PID/io`` (``syscr``, ``syscw``: ``readv`` and ``write`` on sockets, and SQLite's
    ``pread``/``pwrite``); ``None`` if unreadable."""
    if isinstance(pid, list):
        each = [_syscalls(p) for p in pid]
        if not each or any(x is None for x in each):
            return None
        return sum(x[0] for x in each if x), sum(x[1] for x in each if x)
    if pid is None:
        return None
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines()
        )
        return int(fields["syscr"]), int(fields["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def _cpus(pid: int | list[int] | None) -> list[int] | None:
    """The cores ``pid`` (every process of a list) may run on, sorted; ``None`` if unknown."""
    if pid is None or not hasattr(os, "sched_getaffinity"):
        return None
    cores: set[int] = set()
    try:
        for p in pid if isinstance(pid, list) else [pid]:
            cores |= os.sched_getaffinity(p)
    except OSError:  # gone, or not a process of this machine's
        return None
    return sorted(cores)


def _rss_kb(pid: int | list[int] | None) -> int | None:
    """VmRSS of ``pid`` (the sum over a list) in KB; ``None`` if unreadable."""
    if isinstance(pid, list):
        each = [_rss_kb(p) for p in pid]
        return None if not each or None in each else sum(x or 0 for x in each)
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy (``/proc/stat``), all processes."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: everything but idle and iowait.
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def _raise_nofile() -> int:
    """Raise the soft file-descriptor limit to the hard one; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count() or 1,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()}",
        "trio": trio.__version__,
        # Read when the report is made: with other_cpu_pct, how busy the machine was.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        # How quickly an idle CPU wakes decides a human-paced round trip (BENCHMARKS.md,
        # session 12): the cpuidle driver, and the wake-up latency every CPU is held to (None:
        # not readable; the kernel's "no limit" is 2000000000).
        "cpuidle": _read("/sys/devices/system/cpu/cpuidle/current_driver"),
        "cpu_latency_us": _held_latency(),
        "core_speeds": core_speeds(),
    }


#: Iterations of the loop that times a core: about 50 ms on this project's 2-vCPU machines.
CORE_LOOP = 1_000_000
#: How much slower one core may run than the fastest before a report says so.
CORE_SKEW_LIMIT = 1.2


def core_speeds(loop: int = CORE_LOOP) -> dict[int, float] | None:
    """Nanoseconds an iteration of a fixed Python loop takes on each core this process may use
    (best of 3), timed by moving the process onto each in turn; ``None`` where it cannot move.

    A virtual machine's cores need not run at one speed: the host's cores and its other guests
    decide. Session 19 found one vCPU 1.6 times slower than the other, and the bench pins the
    server to one and the generator to the other, so every ratio leaned by that much. A report
    records the speeds so that such a run can be told (:func:`core_skew`).
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    speeds: dict[int, float] = {}
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
            best = math.inf
            for _ in range(3):
                start = time.perf_counter()
                x = 0
                for i in range(loop):
                    x += i
                best = min(best, time.perf_counter() - start)
            speeds[cpu] = round(best / loop * 1e9, 2)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, allowed)
    return speeds


def core_skew(m: dict[str, Any]) -> tuple[int, float] | None:
    """The slowest core and how many times slower than the fastest it ran, when that is over
    :data:`CORE_SKEW_LIMIT`, in the timing before the runs or the one after, whichever is further
    apart (``None``: the cores ran alike, or were not timed)."""
    worst: tuple[int, float] | None = None
    for speeds in (m.get("core_speeds_before"), m.get("core_speeds")):
        if not speeds or len(speeds) < 2:
            continue
        slow = max(speeds, key=lambda c: speeds[c])
        times = speeds[slow] / min(speeds.values())
        if times > CORE_SKEW_LIMIT and (worst is None or times > worst[1]):
            worst = (int(slow), times)
    return worst


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _held_latency() -> int | None:
    try:
        return current()
    except OSError:
        return None


#: A click command function, as a decorator takes and gives it back.
F = TypeVar("F", bound=Callable[..., Any])


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of ``values`` (None for none)."""
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))
    return s[k]


def machine_line(m: dict[str, Any]) -> str:
    """The one line a bench prints first: the CPU, its cores, Python, the load average and how
    fast each core ran a fixed loop (:func:`core_speeds`)."""
    load = ", ".join(f"{x:.2f}" for x in m.get("load_average") or [])
    line = f"{m.get('cpu')} x{m.get('cores')}, Python {m.get('python')}, load {load}"
    speeds = m.get("core_speeds")
    if speeds:
        line += "; ns a loop step by core " + speeds_text(speeds)
    return line


def speeds_text(speeds: dict[Any, float]) -> str:
    """``"0: 35.0, 1: 41.2"``: :func:`core_speeds` as a report prints it."""
    return ", ".join(f"{c}: {v:.1f}" for c, v in speeds.items())


def gap_option(default: tuple[float, ...], what: str) -> Callable[[F], F]:
    """``--gap S`` (repeatable): seconds slept before each ``what`` (0: back to back), as the
    benches that time one step hot and at human pace take it."""
    return click.option(
        "--gap",
        "gaps",
        multiple=True,
        type=float,
        default=default,
        show_default=True,
        help=f"Seconds slept before each {what} (0: back to back); give it again for another run.",
    )
