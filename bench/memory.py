"""``python -m bench.memory``: where the server's memory per connection goes.

Starts the bench's server (:func:`.children._child_main`, the bench's limits) in a child process,
drives it with ``seabattle bench --server`` at human pace (a shot per match every 2 s), and
compares the server's state before the first connection with its state once every match is in
play (once the server's descriptor count has held at its peak for 4 s): RSS per connection (the
bench's own figure, ``VmRSS`` growth over connections), glibc's ``mallinfo2``, and with
:mod:`tracemalloc` the Python heap's growth per connection by line, file or traceback, and the
largest heap sampled during setup beside it (what setup holds for a while and then frees: memory
the process keeps). ``--pymalloc`` prints CPython's allocator table (blocks in use and free per
size class) from the server; ``--holders TYPE`` prints, while matches are set up, who keeps
objects of type ``TYPE`` alive; ``--experiment`` patches the core as a proposed change would, to
measure the change before it is made. tracemalloc slows the server down several times and costs
memory of its own: RSS is read with ``--no-trace``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import click

from .checkout import child_env

_ENV = "SEABATTLE_MEMORY"  # the child's settings, as JSON


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


_MALLINFO2 = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2]


def _state(fds: int) -> dict[str, Any]:
    """RSS, descriptors, the traced heap and glibc's count of what malloc holds."""
    info: dict[str, Any] = {
        "rss_kb": _rss_kb(),
        "fds": fds,
        "traced": tracemalloc.get_traced_memory()[0],
    }
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        mi = libc.mallinfo2()
        info |= {f"malloc_{k}": getattr(mi, k) for k in ("arena", "uordblks", "fordblks")}
    return info


def _where(tb: tracemalloc.Traceback) -> str:
    """One line: the allocating line (its source if alone), then its callers as file:line."""
    if len(tb) == 1:
        return f"{tb[0].filename.rsplit('/', 2)[-1]}:{tb[0].lineno}  {tb.format()[-1].strip()}"
    return " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in reversed(tb))


def _name(obj: Any) -> str:
    if type(obj).__name__ == "frame":
        return f"frame {obj.f_code.co_qualname}:{obj.f_lineno}"
    return type(obj).__qualname__


def _holders(type_name: str) -> None:
    """Print who keeps objects of the type ``type_name`` alive: each referrer's type, with what
    refers to that in turn, counted over up to 200 of them."""
    found = [o for o in gc.get_objects() if type(o).__name__ == type_name]
    if not found:
        return
    seen: dict[str, int] = {}
    for obj in found[:200]:
        for r in gc.get_referrers(obj):
            if r is not found:
                outer = {_name(x) for x in gc.get_referrers(r) if x is not found}
                what = f"{_name(r)} in {','.join(sorted(outer)[:4])}"
                seen[what] = seen.get(what, 0) + 1
    print(f"{len(found)} {type_name} alive; held by {seen}", file=sys.stderr)


def _snapshot(path: Path) -> None:
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(str(path))


def _watch(folder: Path, settings: dict[str, Any]) -> None:
    """In the server: the state now, then once ``connections`` more descriptors have been open
    for 4 s (every match set up and playing)."""
    time.sleep(1.0)
    fds0 = len(os.listdir("/proc/self/fd"))
    state = _state(fds0)
    _snapshot(folder / "before.snap")
    (folder / "before.json").write_text(json.dumps(state))  # last: the parent waits for it
    stable_since, peak = 0.0, 0
    while True:
        time.sleep(0.5)
        if tracemalloc.is_tracing() and tracemalloc.get_traced_memory()[0] > peak * 1.02:
            # The largest heap sampled so far: what setup holds for a while.
            peak = tracemalloc.get_traced_memory()[0]
            _snapshot(folder / "peak.snap")
        if settings["holders"]:
            _holders(settings["holders"])
        fds = len(os.listdir("/proc/self/fd"))
        if fds - fds0 < settings["connections"]:
            stable_since = 0.0
            continue
        stable_since = stable_since or time.monotonic()
        if time.monotonic() - stable_since >= 4.0:
            break
    state = _state(fds)
    _snapshot(folder / "during.snap")
    state["traced_now"], state["traced_peak"] = tracemalloc.get_traced_memory()
    # Cyclic garbage held at that moment (the server collects rarely: app._tune_gc).
    state["gc_collected"] = gc.collect()
    state["after_gc"] = _state(fds)
    if settings["pymalloc"]:
        sys._debugmallocstats()  # to stderr
    (folder / "during.json").write_text(json.dumps(state))


def _experiment(which: str) -> None:
    """Patch the core as a proposed change would (``out``, ``tail``, or both: ``out,tail``)."""
    from seabattle.protocol.referee import Referee
    from seabattle.protocol.transcript import Transcript

    if "out" in which:
        # The core lets go of the sends it returned (now it keeps them until the next input).
        done = Referee._done

        def _done(self: Any) -> Any:
            out = done(self)
            self._out = []
            return out

        Referee._done = _done  # type: ignore[method-assign]
    if "tail" in which:
        # An entry that can be rebuilt is stored at once, not kept as the tail's map.
        append = Transcript.append

        def _append(self: Any, entry: Any, rebuild: Any = None) -> None:
            append(self, entry, rebuild)
            if rebuild is not None and self._plain is None:
                self._tail = None
                self._store(entry, rebuild)

        Transcript.append = _append  # type: ignore[method-assign]


def _server(workdir: str) -> None:
    """The child: the bench's server, with the watcher thread."""
    from .children import _child_main

    settings = json.loads(os.environ[_ENV])
    if settings["experiment"]:
        _experiment(settings["experiment"])
    if settings["frames"]:
        tracemalloc.start(settings["frames"])
    threading.Thread(target=_watch, args=(Path(workdir), settings), daemon=True).start()
    _child_main(["server", workdir])


def _report(folder: Path, matches: int, mode: str, by: str, top: int) -> None:
    before = json.loads((folder / "before.json").read_text())
    during = json.loads((folder / "during.json").read_text())
    after = during["after_gc"]
    conns: int = during["fds"] - before["fds"]

    def kb(state: dict[str, Any], key: str) -> float:
        grown: float = state.get(key, 0) - before.get(key, 0)
        return grown / conns / 1024

    rss, rss_after = kb(during, "rss_kb") * 1024, kb(after, "rss_kb") * 1024
    print(f"{conns} connections ({matches} {mode} matches): RSS {rss:.1f} KB each")
    arena, used, free = (kb(during, f"malloc_{k}") for k in ("arena", "uordblks", "fordblks"))
    print(
        f"  malloc: arena {arena:.1f}, in use {used:.1f}, free {free:.1f} KB each; after a "
        f"collection ({during['gc_collected']} objects) RSS {rss_after:.1f} KB each"
    )
    if not (folder / "during.snap").exists():
        return
    peak = (during["traced_peak"] - before["traced"]) / conns / 1024
    heap = kb(during, "traced")
    print(f"  Python heap {heap:.2f} KB each (the largest since the start: {peak:.1f})")
    s0 = tracemalloc.Snapshot.load(str(folder / "before.snap"))
    s1 = tracemalloc.Snapshot.load(str(folder / "during.snap"))

    def show(stats: list[tracemalloc.StatisticDiff]) -> None:
        for st in stats[:top]:
            size, count = st.size_diff / conns, st.count_diff / conns
            print(f"{size:8.0f} B {count:6.2f} objs  {_where(st.traceback)}")

    if (folder / "peak.snap").exists():
        print("At the largest heap sampled during setup, beyond the heap in play:")
        show(tracemalloc.Snapshot.load(str(folder / "peak.snap")).compare_to(s1, by))
    print("The heap in play, beyond the heap before the first connection, per connection:")
    show(s1.compare_to(s0, by))


@click.command()
@click.option("--matches", type=int, default=250, show_default=True)
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--top", type=int, default=25, show_default=True)
@click.option("--by", type=click.Choice(["lineno", "filename", "traceback"]), default="lineno")
@click.option("--frames", type=int, default=1, show_default=True, help="tracemalloc frames.")
@click.option("--no-trace", is_flag=True, help="tracemalloc off: RSS as the bench reads it.")
@click.option("--pymalloc", is_flag=True, help="Print the server's pymalloc table (stderr).")
@click.option("--holders", default="", help="A type name: who keeps its objects alive.")
@click.option("--experiment", default="", help="out, tail or out,tail: see _experiment.")
def main(
    matches: int,
    mode: str,
    top: int,
    by: str,
    frames: int,
    no_trace: bool,
    pymalloc: bool,
    holders: str,
    experiment: str,
) -> None:
    """The server's memory per connection with ``matches`` human-paced matches in play."""
    settings = {
        "connections": 2 * matches,
        "frames": 0 if no_trace else frames,
        "pymalloc": pymalloc,
        "holders": holders,
        "experiment": experiment,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        code = "from bench.memory import _server; import sys; _server(sys.argv[1])"
        env = child_env({**os.environ, _ENV: json.dumps(settings)})
        server = subprocess.Popen(
            [sys.executable, "-c", code, tmp], stdout=subprocess.PIPE, env=env
        )
        try:
            assert server.stdout is not None
            info = json.loads(server.stdout.readline())
            while not (folder / "before.json").exists():  # no connection before the first look
                time.sleep(0.1)
            cli = "from seabattle.cli.main import main; main()"
            bench = subprocess.Popen(
                [sys.executable, "-c", cli, "bench", "--server", info["listening"],
                 "--matches", str(matches), "--pace", "2", "--duration", "60", "--mode", mode,
                 "--no-baseline", "--json"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            while not (folder / "during.json").exists():
                if bench.poll() is not None:
                    raise click.ClickException("the bench ended before every match was in play")
                time.sleep(0.5)
            bench.terminate()
            bench.wait()
            _report(folder, matches, mode, by, top)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
