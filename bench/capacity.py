"""``python -m bench.capacity --db postgresql://...``: what one PostgreSQL costs
per match, per input and per node, measured, for the capacity model in BENCHMARKS.md.

Theory of operation. For each cluster size asked for (``--nodes 1,3``), that many ``seabattle
serve --cluster`` processes run on the database (the journal on, as shipped), and ``pairs`` bot
pairs per node play classic matches (blind and custody in turn) on their node for ``seconds``,
each player paced at the crash harness's rate (a shot every 12 ms, under the default per-peer
rate limit). Around each run it reads PostgreSQL's own counters - commits, rows inserted into the
journal, WAL bytes - and the CPU time of every ``postgres`` process and of every node, from
``/proc``. It prints one JSON object per run: matches and inputs per second, journal rows, WAL
bytes and commits per match and per input, and the CPU seconds PostgreSQL and the nodes spent
per thousand inputs, with the machine; the extrapolation to many nodes is in BENCHMARKS.md. Then
it measures pairing across two nodes (:func:`pairing_run`): how long the waiting player takes to
hear of its pairing, which the handoff poll bounds, and what one empty poll costs.

Linux only (``/proc``); PostgreSQL on this machine (its processes' CPU is read here).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import click
import trio
from seabattle.protocol import messages as m

from .crash import Server, _Link, _pair, _play_until_gone, _setup
from .figures import machine

__all__ = ["capacity_run", "main"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used so far."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _pg_counters(db: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        commits = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        rows = conn.execute(
            "SELECT COALESCE(SUM(n_tup_ins), 0) FROM pg_stat_user_tables WHERE relname = 'journal'"
        ).fetchone()
        wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").fetchone()
    assert commits is not None and rows is not None and wal is not None
    return {"commits": int(commits[0]), "journal_rows": int(rows[0]), "wal_bytes": int(wal[0])}


async def _pairs_on(addr: tuple[str, int], slot: int, until: float, tally: dict[str, int]) -> None:
    """One pair of players on ``addr``, playing match after match until ``until``."""
    rng = random.Random(slot)
    n = 0
    while time.monotonic() < until:
        mode = ("blind", "custody")[n % 2]
        pair = _pair(mode, rng, slot * 1000 + n)
        n += 1
        links: list[_Link] = await _setup(pair, mode, addr)

        with trio.move_on_after(max(0.0, until - time.monotonic())):
            async with trio.open_nursery() as nursery:
                for p, link in zip(pair, links, strict=True):
                    nursery.start_soon(_play_until_gone, p, link)
        for link in links:
            await link.stream.aclose()
        # What the referee accepted: a blind shot is fire + answer, a custody one is fire. The
        # plain player of the pair is told every verdict (the lean one not those it gave).
        shots = max(len(p.told) for p in pair)
        tally["inputs"] += shots * (2 if mode == "blind" else 1)
        tally["matches"] += pair[0].over


async def capacity_run(db: str, nodes: int, *, pairs: int, seconds: float) -> dict[str, Any]:
    """One run: ``nodes`` nodes on ``db``, ``pairs`` pairs per node, for ``seconds``."""
    folder = Path(tempfile.mkdtemp(prefix="seabattle-capacity-"))
    servers = [Server(folder, db, ("--node", f"c{i}", "--cluster")) for i in range(nodes)]
    for s in servers:
        await trio.to_thread.run_sync(s.start)
    tally = {"inputs": 0, "matches": 0}
    try:
        node_pids = [s.proc.pid for s in servers if s.proc is not None]
        pg_before, pg_cpu0, node_cpu0 = _pg_counters(db), _cpu(_postgres_pids()), _cpu(node_pids)
        started = time.monotonic()
        until = started + seconds
        async with trio.open_nursery() as nursery:
            for i, s in enumerate(servers):
                for k in range(pairs):
                    nursery.start_soon(_pairs_on, s.addr, i * 100 + k, until, tally)
        elapsed = time.monotonic() - started
        pg_after, pg_cpu1, node_cpu1 = _pg_counters(db), _cpu(_postgres_pids()), _cpu(node_pids)
    finally:
        for s in servers:
            await trio.to_thread.run_sync(s.stop)
    inputs, matches = max(tally["inputs"], 1), max(tally["matches"], 1)
    delta = {k: pg_after[k] - pg_before[k] for k in pg_after}
    return {
        "nodes": nodes,
        "pairs_per_node": pairs,
        "seconds": round(elapsed, 1),
        "matches": tally["matches"],
        "inputs": tally["inputs"],
        "inputs_per_s": round(tally["inputs"] / elapsed),
        "pg_commits_per_s": round(delta["commits"] / elapsed),
        "journal_rows_per_match": round(delta["journal_rows"] / matches),
        "journal_rows_per_input": round(delta["journal_rows"] / inputs, 2),
        "commits_per_input": round(delta["commits"] / inputs, 2),
        "wal_bytes_per_match": round(delta["wal_bytes"] / matches),
        "wal_bytes_per_input": round(delta["wal_bytes"] / inputs),
        "pg_cpu_s_per_1k_inputs": round((pg_cpu1 - pg_cpu0) / inputs * 1000, 3),
        "node_cpu_s_per_1k_inputs": round((node_cpu1 - node_cpu0) / inputs * 1000, 3),
        "pg_cpu_pct": round((pg_cpu1 - pg_cpu0) / elapsed * 100),
        "nodes_cpu_pct": round((node_cpu1 - node_cpu0) / elapsed * 100),
        "machine": machine(),
    }


async def pairing_run(db: str, rounds: int = 20) -> dict[str, Any]:
    """Quick matches across two nodes, ``rounds`` times: how long the player who waited on one
    node takes to hear it was paired (its ``ok``, polled through the store) after the player on
    the other node was answered; and what one empty look for handoffs costs."""
    from seabattle.server.store import Store

    folder = Path(tempfile.mkdtemp(prefix="seabattle-pairing-"))
    servers = [Server(folder, db, ("--node", f"p{i}", "--cluster")) for i in range(2)]
    for s in servers:
        await trio.to_thread.run_sync(s.start)
    waits: list[float] = []
    try:
        rng = random.Random(1)
        for k in range(rounds):
            a, b = _pair("custody", rng, k)
            la = await a.connect(servers[0].addr, caps=("redirect",))
            lb = await b.connect(servers[1].addr, caps=("redirect",))
            rules = {"preset": "classic", "clocks": {"grace": 30 + k}}  # pairs never mix
            await la.send(m.Quick(1, rules, "custody"))
            await trio.sleep(0.2)  # a waits first, in the shared queue
            await lb.send(m.Quick(1, rules, "custody"))
            while not isinstance(await lb.recv(), m.Ok):
                pass
            answered = time.perf_counter()
            while not isinstance(await la.recv(), m.Ok):
                pass
            waits.append(time.perf_counter() - answered)
            for link in (la, lb):
                await link.stream.aclose()
        async with Store.open(db) as store:
            looks = []
            for _ in range(200):
                t = time.perf_counter()
                await store.take_handoffs("nobody")
                looks.append(time.perf_counter() - t)
    finally:
        for s in servers:
            await trio.to_thread.run_sync(s.stop)
    waits.sort()
    looks.sort()
    return {
        "pairings": rounds,
        "handoff_ms_p50": round(waits[len(waits) // 2] * 1000, 1),
        "handoff_ms_max": round(waits[-1] * 1000, 1),
        "empty_look_us_p50": round(looks[len(looks) // 2] * 1e6),
        "machine": machine(),
    }


@click.command()
@click.option("--db", required=True, help="A PostgreSQL URL (a fresh database) on this machine.")
@click.option("--nodes", default="1,3", show_default=True, help="Cluster sizes to run, in turn.")
@click.option("--pairs", type=int, default=4, show_default=True, help="Bot pairs per node.")
@click.option("--seconds", type=float, default=20.0, show_default=True, help="Per run.")
def main(db: str, nodes: str, pairs: int, seconds: float) -> None:
    """Measure what PostgreSQL spends per match and per input, for 1 and 3 nodes."""
    for n in (int(x) for x in nodes.split(",")):
        result = trio.run(partial(capacity_run, db, n, pairs=pairs, seconds=seconds))
        click.echo(json.dumps(result))
    click.echo(json.dumps(trio.run(pairing_run, db)))


if __name__ == "__main__":
    main()
