"""Run the fuzz targets under atheris: ``python -m fuzz.run --target all --runs 1000000``.

Each target runs in a process of its own (libFuzzer ends the process it fuzzes in), from the
seeds of :mod:`fuzz.corpus`, with the protocol code instrumented for coverage. This prints, per
target, the executions libFuzzer reports, the time, and the outcome: ``ok`` when every execution
raised nothing but the protocol errors the target allows, else the crash, its traceback and the
file holding the input that caused it (replay it with ``--replay FILE``). Exits 1 on a crash.

``--max-seconds`` bounds each target's time as well (libFuzzer stops at whichever comes first,
and the executions are then fewer than ``--runs``). ``--workers N`` fuzzes each target in N
processes at once, each with a seed of its own and its share of ``--runs``, over one corpus (each
reads what the others add to it, as libFuzzer's own ``-jobs`` do); the executions are their sum.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["Outcome", "fuzz", "main"]

_NAMES = ("frames", "handshake", "referee")
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second", re.M)
_COV = re.compile(r"cov: (\d+) ft: (\d+)")
# The longest input per target: a referee run of this many bytes plays a whole game or two, and
# longer ones only cost time.
_MAX_LEN = {"frames": 1024, "handshake": 512, "referee": 384}


class Outcome:
    """What one target's run came to."""

    def __init__(
        self,
        target: str,
        runs: int,
        seconds: float,
        crash: str | None,
        coverage: tuple[int, int] = (0, 0),
    ) -> None:
        self.target = target
        self.runs = runs  #: executions, as libFuzzer counted them (summed over the workers)
        self.seconds = seconds
        self.crash = crash  #: libFuzzer's report of the crash, or ``None``
        #: libFuzzer's last edges and features (the most any worker reached)
        self.coverage = coverage

    @property
    def ok(self) -> bool:
        """Whether the run ended without a crash."""
        return self.crash is None

    def line(self) -> str:
        """One line for a person: target, executions, time, outcome."""
        rate = self.runs / self.seconds if self.seconds else 0.0
        what = "ok" if self.ok else "CRASH"
        edges, features = self.coverage
        return (
            f"{self.target}: {self.runs:,} executions in {self.seconds:.0f} s "
            f"({rate:,.0f}/s), cov {edges:,} ft {features:,}: {what}"
        )


def fuzz(
    target: str,
    runs: int,
    *,
    seed: int = 1,
    workdir: Path,
    max_seconds: int = 0,
    seeded: bool = True,
    workers: int = 1,
) -> Outcome:
    """Fuzz ``target`` for ``runs`` executions (or ``max_seconds``, if sooner) in ``workers``
    child processes, from its seeds unless ``seeded`` is false; the corpus, libFuzzer's logs
    (``TARGET.log``, then ``TARGET-1.log``, ...: to follow a long run) and any crash input go
    to ``workdir``."""
    corpus = workdir / f"corpus-{target}"
    corpus.mkdir(parents=True, exist_ok=True)
    if seeded:
        _write_seeds(target, corpus)
    share = -(-runs // workers)
    logs = [workdir / (f"{target}-{i}.log" if i else f"{target}.log") for i in range(workers)]
    start = time.monotonic()
    procs = []
    for i, log_path in enumerate(logs):
        cmd = [
            sys.executable, "-m", "fuzz.run", "--child", target,
            f"-runs={min(share, runs - i * share)}", f"-seed={seed + i}",
            f"-max_len={_MAX_LEN.get(target, 1024)}", f"-max_total_time={max_seconds}",
            f"-artifact_prefix={workdir}/{target}-", "-print_final_stats=1", str(corpus),
        ]  # fmt: skip
        with log_path.open("w") as log_file:
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=Path(__file__).resolve().parent.parent,
                    stdout=log_file,
                    stderr=log_file,
                )
            )
    codes = [proc.wait() for proc in procs]
    seconds = time.monotonic() - start
    count, crash, coverage = 0, None, (0, 0)
    for code, log_path in zip(codes, logs, strict=True):
        log = log_path.read_text(errors="replace")
        done = _DONE.search(log)
        count += int(done.group(1)) if done else _executed(log)
        if crash is None and not (code == 0 and done):
            crash = _tail(log)
        covered = _COV.findall(log)
        if covered:
            coverage = max(coverage, (int(covered[-1][0]), int(covered[-1][1])))
    return Outcome(target, count, seconds, crash, coverage)


def _write_seeds(target: str, corpus: Path) -> None:
    from .corpus import seeds

    for i, s in enumerate(seeds(target)):
        (corpus / f"seed-{i:03d}").write_bytes(s)


def _executed(log: str) -> int:
    """The last execution count libFuzzer printed (``#N``), for a run that did not finish."""
    counts = re.findall(r"^#(\d+)", log, re.M)
    return int(counts[-1]) if counts else 0


def _tail(log: str, lines: int = 40) -> str:
    start = log.find("=== Uncaught Python exception")
    text = log[start:] if start >= 0 else log
    return "\n".join(text.splitlines()[:lines])


def _child(target: str, args: list[str]) -> None:
    """Fuzz ``target`` in this process, with the protocol code instrumented (never returns)."""
    import atheris

    # The code under test only: instrumenting the driver would slow every run for no coverage.
    with atheris.instrument_imports(include=["seabattle.protocol"]):
        from .targets import TARGETS, mixed
    atheris.Setup([sys.argv[0], *args], mixed if target == "mixed" else TARGETS[target])
    atheris.Fuzz()


def _replay(target: str, path: Path) -> None:
    from .targets import TARGETS

    TARGETS[target](path.read_bytes())
    print(f"{target}: {path} raised nothing")


def main(argv: list[str] | None = None) -> int:
    """The command line; see the module docstring."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[2:])
    p = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__)
    p.add_argument(
        "--target",
        default="all",
        choices=("all", *_NAMES, "mixed"),
        help="all: each target in turn; mixed: all three as one target, in one process",
    )
    p.add_argument("--runs", type=int, default=100_000, help="executions per target")
    p.add_argument("--max-seconds", type=int, default=0, help="stop each target after this")
    p.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    p.add_argument("--workers", type=int, default=1, help="processes per target, at once")
    p.add_argument("--workdir", type=Path, help="where corpora and crash inputs go")
    p.add_argument("--replay", type=Path, help="run the target once on this input file")
    p.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    a = p.parse_args(argv)
    names = _NAMES if a.target == "all" else (a.target,)
    if a.replay is not None:
        for name in names:
            _replay(name, a.replay)
        return 0
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="seabattle-fuzz-"))
    outcomes = []
    for name in names:
        o = fuzz(
            name,
            a.runs,
            seed=a.seed,
            workdir=workdir,
            max_seconds=a.max_seconds,
            workers=a.workers,
        )
        outcomes.append(o)
        print(o.line(), flush=True)
        if o.crash is not None:
            print(o.crash, flush=True)
    total = sum(o.runs for o in outcomes)
    if a.json:
        print(json.dumps([vars(o) for o in outcomes]))
    print(f"all: {total:,} executions, {sum(not o.ok for o in outcomes)} crashed; in {workdir}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
