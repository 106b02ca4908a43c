"""Measuring: one run of a scenario against one address (:func:`drive`), and the whole
benchmark (:func:`run_bench`): every scenario against the target and the baseline, repeated,
as medians and ratios, then the records verified and the bars judged.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import click
import trio
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from seabattle.protocol import messages as m
from seabattle.protocol.record import load_record
from seabattle.protocol.rules import RuleSet, ShotMode, preset

from .children import _child
from .figures import (
    FIGURES,
    GENERATOR_LIMIT_PCT,
    _cpu_seconds,
    _cpus,
    _machine_busy_seconds,
    _raise_nofile,
    _rss_kb,
    _syscalls,
    core_speeds,
    machine,
    percentile,
)
from .players import _LOST, Scenario, _make_run, _Pace, _Player, _Run, _setup_bare, _setup_match
from .records import local_record, time_verify_fresh
from .report import judge

__all__ = ["drive", "run_bench"]

_SETUP_CONCURRENCY = 64  # matches being set up at once


async def _fetch_records(addr: tuple[str, int], run: _Run, limit: int) -> list[dict[str, Any]]:
    ids = run.finished[:limit]
    if not ids:
        return []
    p = _Player(run, _Pace(), random.Random(0))
    await p.connect(addr, "bench-verifier")
    out = []
    try:
        for k, mid in enumerate(ids, 1):
            await p.send(m.GetRecord(k, mid))
            while True:
                msg = await p.recv_until(m.Ok)
                assert isinstance(msg, m.Ok)
                if msg.ref == k:
                    break
            out.append(load_record(msg.data["record"]))
    finally:
        assert p.stream is not None
        await p.stream.aclose()
    return out


# -- one run ---------------------------------------------------------------------------------------


async def drive(
    sc: Scenario,
    addr: tuple[str, int] | list[tuple[str, int]],
    pid: int | list[int] | None,
    *,
    bare: bool,
    rules: RuleSet,
    seed: int = 1,
    progress: Progress | None = None,
    verify_records: int = 0,
    defender_copy: bool = False,
) -> dict[str, Any]:
    """Run scenario ``sc`` against ``addr`` (process ``pid``, or processes, if local); return
    its figures. ``defender_copy``: the custody baseline is ``echo-copies`` (a defending
    connection beside each shooter's)."""
    run = _make_run(sc, rules, seed)
    run.defender_copy = defender_copy
    # Several addresses (the workers of one server): matches go round them.
    addrs = addr if isinstance(addr, list) else [addr]
    rss0 = _rss_kb(pid)
    setup = _setup_bare if bare else _setup_match
    conns = sc.matches * (1 if bare and sc.mode == "custody" and not defender_copy else 2)
    task = None
    if progress is not None:
        kind = "baseline" if bare else "target"
        task = progress.add_task(f"{sc.label} [{kind}]: setting up", total=sc.matches)
    t_setup = time.perf_counter()
    out: dict[str, Any] = {}
    collecting = gc.isenabled()
    try:
        async with trio.open_nursery() as nursery:
            run.nursery = nursery
            if sc.pace > 0:
                nursery.start_soon(run.pacer.run)
            limiter = trio.CapacityLimiter(_SETUP_CONCURRENCY)
            ready = 0

            async def one(i: int) -> None:
                nonlocal ready
                async with limiter:
                    try:
                        await setup(run, addrs[i % len(addrs)], i, nursery, seed * 100_003 + i)
                    except (*_LOST, click.ClickException) as e:
                        run.errors[f"setup failed ({type(e).__name__})"] += 1
                ready += 1
                if progress is not None and task is not None:
                    progress.update(task, completed=ready)

            async with trio.open_nursery() as setups:
                for i in range(sc.matches):
                    setups.start_soon(one, i)
            setup_s = time.perf_counter() - t_setup
            # The generator's own collector must not pause the measurement: everything set up so far
            # lives until the end of the run, so it is frozen out of collection, and nothing is
            # collected until the window ends (restored below). A young pass over what the window
            # allocates took ~200 ms at 5,000 matches, and every shot then in flight carried it.
            gc.collect()
            gc.freeze()
            gc.disable()
            run.start_firing()
            warmup = min(sc.pace, 2.0) if sc.pace > 0 else 0.5
            if sc.shots is not None:
                warmup = 0.0
            await trio.sleep(warmup)
            busy0 = _machine_busy_seconds()
            io0 = _syscalls(pid)
            cpu0, c0, t0 = _cpu_seconds(pid), time.process_time(), time.perf_counter()
            wall0 = time.time()
            run.measuring = True
            if progress is not None and task is not None:
                progress.update(
                    task,
                    description=f"{sc.label} [{'baseline' if bare else 'target'}]: measuring",
                    completed=0,
                    total=sc.duration,
                )
            deadline = t0 + sc.duration
            while time.perf_counter() < deadline:
                if sc.shots is not None and run.done_matches >= sc.matches:
                    break
                await trio.sleep(min(0.1, max(0.0, deadline - time.perf_counter())))
                if progress is not None and task is not None:
                    progress.update(task, completed=min(sc.duration, time.perf_counter() - t0))
            run.measuring = False
            run.stopping = True
            t1, c1, cpu1, rss1 = time.perf_counter(), time.process_time(), _cpu_seconds(pid), None
            rss1 = _rss_kb(pid)
            io1 = _syscalls(pid)
            server_cpus = _cpus(pid)
            busy1 = _machine_busy_seconds()
            window = t1 - t0
            records: list[dict[str, Any]] = []
            if verify_records and not bare:
                with trio.move_on_after(30):
                    records = await _fetch_records(addrs[0], run, verify_records)
            nursery.cancel_scope.cancel()
    finally:
        if collecting:
            gc.enable()
        gc.unfreeze()
    if progress is not None and task is not None:
        progress.update(task, completed=sc.duration, visible=False)
    cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    shots = run.shots
    client_cpu = 100 * (c1 - c0) / window if window > 0 else None
    # Whatever else kept the machine busy during the window: a noisy neighbour skews figures.
    other = None
    if busy0 is not None and busy1 is not None and window > 0:
        other = max(0.0, 100 * (busy1 - busy0 - (cpu or 0.0) - (c1 - c0)) / window)
    out = {
        "scenario": {
            "mode": sc.mode,
            "matches": sc.matches,
            "pace": sc.pace,
            "duration": sc.duration,
        },
        "kind": ("relay" if sc.mode == "blind" else "echo") if bare else "server",
        "connections": conns,
        "setup_s": setup_s,
        "window_s": window,
        "window_wall": [wall0, wall0 + window],  # epoch seconds: to line up with server logs
        "shots": shots,
        "shots_per_s": shots / window if window > 0 else None,
        "rtt_p50_ms": _ms(percentile(run.rtts, 0.50)),
        "rtt_p99_ms": _ms(percentile(run.rtts, 0.99)),
        "rtt_mean_ms": _ms(statistics.fmean(run.rtts)) if run.rtts else None,
        "server_cpu_pct": None if cpu is None else 100 * cpu / window,
        "server_cpu_us_per_shot": None if cpu is None or not shots else 1e6 * cpu / shots,
        "server_reads_per_shot": None
        if io0 is None or io1 is None or not shots
        else (io1[0] - io0[0]) / shots,
        "server_writes_per_shot": None
        if io0 is None or io1 is None or not shots
        else (io1[1] - io0[1]) / shots,
        "server_rss_kb": rss1,
        "server_kb_per_conn": None if rss0 is None or rss1 is None else (rss1 - rss0) / conns,
        "client_cpu_pct": client_cpu,
        # Where each side ran: the cores the server's processes and the generator may use.
        "server_cpus": server_cpus,
        "generator_cpus": _cpus(os.getpid()),
        "generator_bound": client_cpu is not None and client_cpu > GENERATOR_LIMIT_PCT,
        "pace_slots_skipped": run.skipped,
        "other_cpu_pct": other,
        "matches_finished": run.matches_done,
        "errors": dict(run.errors),
    }
    if records:
        out["records"] = records
    return out


def _log_summary(path: Path) -> dict[str, int]:
    """Warnings and errors the child logged, by message (numbers and ids blanked)."""
    out: Counter[str] = Counter()
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split(" ", 4)
            if len(parts) == 5 and parts[2] in ("WARNING", "ERROR", "CRITICAL"):
                text = re.sub(r"\[[^]]*\]\s*", "", parts[4])
                out[re.sub(r"[0-9a-f]{6,}|\d+", "N", text)[:100]] += 1
    return dict(out.most_common(8))


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1000


# ================================================================================================
# Whole benchmark
# ================================================================================================


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of repeated runs: the median of each."""
    out: dict[str, Any] = {}
    for key, *_ in FIGURES:
        vals = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(vals) if vals else None
    for key in (
        "shots",
        "connections",
        "setup_s",
        "rtt_mean_ms",
        "matches_finished",
        "other_cpu_pct",
        "pace_slots_skipped",
    ):
        vals = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(vals) if vals else None
    for key in ("server_cpus", "generator_cpus"):  # the same for every run of a scenario
        out[key] = runs[0].get(key) if runs else None
    # How many of the runs the generator was the bottleneck of (0: none, as it should be).
    out["generator_bound"] = sum(1 for r in runs if r.get("generator_bound"))
    errors: Counter[str] = Counter()
    for r in runs:
        errors.update(r.get("errors", {}))
    out["errors"] = dict(errors)
    logged: Counter[str] = Counter()
    for r in runs:
        logged.update(r.get("server_log", {}))
    out["server_log"] = dict(logged)
    out["windows_wall"] = [r["window_wall"] for r in runs if "window_wall" in r]
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def baseline_kind(sc: Scenario, copies: bool, durable: bool) -> str:
    """The bare server (:func:`~.children.bare_server`) that ``sc`` is measured against: the
    relay (blind) or the echo (custody); with ``copies`` it writes as many frames a shot as the
    server does (blind: a copy back to each sender only where the players do not agree
    ``lean``; custody: the verdict to the defender's connection too); ``durable`` adds the
    journal file."""
    if sc.mode == "blind":
        kind = "relay-copies" if copies and sc.echo else "relay"
    else:
        kind = "echo-copies" if copies else "echo"
    return kind + ("+journal" if durable else "")


def run_bench(
    scenarios: list[Scenario],
    *,
    server: tuple[str, int] | None = None,
    server_pid: int | None = None,
    baseline: bool = True,
    repeat: int = 1,
    rules: RuleSet | None = None,
    profile_dir: Path | None = None,
    console: Console | None = None,
    verify_records: int = 20,
    workers: int = 1,
    copies: bool = False,
    durable: bool = False,
) -> dict[str, Any]:
    """Run every scenario ``repeat`` times against the target and the baseline; the report.
    ``workers`` > 1: the started server is ``seabattle serve --workers`` (not pinned: its
    workers share the machine's cores with the generator). ``copies``: each baseline writes as
    many frames a shot as the server (:func:`baseline_kind`). ``durable``: the baselines also
    store each frame in a journal file before it goes on, as the journal does, and write as
    many frames as the server: the least a durable server could cost."""
    copies = copies or durable
    rules = rules or preset("classic")
    if rules.shots is not ShotMode.SINGLE or rules.radar or rules.team_size != 1:
        raise click.ClickException("the bench plays single-shot rules without radar or teams")
    _raise_nofile()
    cores = os.cpu_count() or 1
    pin = cores >= 2 and hasattr(os, "sched_setaffinity")
    # The cores' speeds drift within a sitting: timed before the runs, and after (machine()).
    speeds_before = core_speeds()
    old_affinity = os.sched_getaffinity(0) if pin else None
    if pin:
        os.sched_setaffinity(0, {1})
    console = console or Console(stderr=True)
    results: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="seabattle-bench-") as tmp,
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:.1f}/{task.total:.1f}"),
                TimeRemainingColumn(),
                console=console,
                transient=True,
            ) as progress,
        ):
            for n_sc, sc in enumerate(scenarios):
                target_runs: list[dict[str, Any]] = []
                base_runs: list[dict[str, Any]] = []
                for rep in range(repeat):
                    seed = 1 + rep + 1000 * n_sc
                    kinds: list[str] = ["server"]
                    if baseline:
                        kinds.append(baseline_kind(sc, copies, durable))
                    for kind in kinds:
                        work = Path(tmp) / f"{n_sc}-{rep}-{kind}"
                        work.mkdir()
                        bare = kind != "server"
                        want = verify_records if not bare and not records else 0
                        if not bare and server is not None:
                            res = trio.run(
                                partial(
                                    drive,
                                    sc,
                                    server,
                                    server_pid,
                                    bare=False,
                                    rules=rules,
                                    seed=seed,
                                    progress=progress,
                                    verify_records=want,
                                )
                            )
                        else:
                            prof = None
                            if profile_dir is not None and rep == 0:
                                profile_dir.mkdir(parents=True, exist_ok=True)
                                name = f"{sc.mode}-{sc.matches}-{sc.pace:g}-{kind}.pstats"
                                prof = str(profile_dir / name)
                            many = workers if kind == "server" else 1
                            cpu = 0 if pin and many == 1 else None
                            # Workers run on every core but the generator's where there are
                            # cores to spare for them, else on every core (they share it).
                            spread = None
                            if pin and many > 1 and old_affinity is not None:
                                allowed = set(old_affinity)
                                spare = allowed - {1} if cores > 2 else set()
                                spread = spare or allowed
                            with _child(
                                kind, work, cpu=cpu, profile=prof, workers=many, cpus=spread
                            ) as (addr, pid):
                                res = trio.run(
                                    partial(
                                        drive,
                                        sc,
                                        addr,
                                        pid,
                                        bare=bare,
                                        rules=rules,
                                        seed=seed,
                                        progress=progress,
                                        verify_records=want,
                                        defender_copy=kind.startswith("echo-copies"),
                                    )
                                )
                        records.extend(res.pop("records", []))
                        res["server_log"] = _log_summary(work / f"{kind}.log")
                        (base_runs if bare else target_runs).append(res)
                target = _median_of(target_runs)
                base = _median_of(base_runs) if base_runs else None
                ratios = {
                    key: _ratio(target.get(key), base.get(key)) if base else None
                    for key, *_ in FIGURES
                }
                results.append(
                    {
                        "label": sc.label,
                        "mode": sc.mode,
                        "matches": sc.matches,
                        "pace": sc.pace,
                        "duration": sc.duration,
                        "shots_per_match": sc.shots,
                        "repeat": repeat,
                        "target": target,
                        "baseline": base,
                        "ratios": ratios,
                        "baseline_kind": baseline_kind(sc, copies, durable) if baseline else None,
                        "runs": {"target": target_runs, "baseline": base_runs},
                    }
                )
    finally:
        if old_affinity is not None:
            os.sched_setaffinity(0, old_affinity)
    source = "server" if records else "local"
    if not records:
        records = [local_record(rules, 7000 + k) for k in range(5)]
    verify = time_verify_fresh(records)
    verify["source"] = source
    return {
        "machine": machine() | {"core_speeds_before": speeds_before},
        "rules": rules.name,
        "target": f"{server[0]}:{server[1]}"
        if server
        else "self-started server" + (f", {workers} workers" if workers > 1 else ""),
        "pinned": pin and workers == 1,
        "baseline_copies": copies,
        "baseline_journal": durable,
        "scenarios": results,
        "verify": verify,
        "bars": judge(results, verify),
    }
