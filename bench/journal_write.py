"""``python -m bench.journal_write``: what storing one journal batch costs, each
way the server has, at bot speed and at human pace.

Theory of operation. The journal stores every accepted input before anything it caused is sent
(``server/journal.py``), so the cost of one batch is on every shot's critical path. The server
has two ways from the event loop: the append-only file of a server alone on its SQLite database
(``journal_file.FileLog``: one ``write``) and a SQLite connection of its own
(``journal.DirectWriter``: one commit in WAL mode, ``synchronous=NORMAL``), used by the nodes of a
cluster (``SQLite, fenced``: as a node writes it, in a transaction that first checks that the
node still referees the match). This writes ``--rows`` one-row batches each way into a fresh
folder, back to back (``--gap 0``: bot speed, everything hot) and ``--gap`` seconds apart (human
pace: code and data go cold between inputs, which is what a human-paced server pays), and prints
the median and p90 per batch next to the baseline measured in the same run: a bare ``os.write``
of the same bytes. ``--db URL`` adds the store's way on that database (a worker thread and one
transaction, as a node on PostgreSQL writes), plain and fenced, timed against each other.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import trio

from .figures import gap_option, machine, machine_line

__all__ = ["measure"]

#: A blind ``fire`` entry's size, near enough (match id, seat, message, time).
_ENTRY = bytes(60)


def _ways(folder: Path) -> tuple[dict[str, Callable[[int], object]], Callable[[], None]]:
    """Each way to store one row, by name, and what closes them all."""
    from seabattle.server.journal import DirectWriter
    from seabattle.server.journal_file import SUFFIX, FileLog
    from seabattle.server.store import Fence, Store

    db = folder / "bench.sqlite"
    fenced = "f" * 32

    async def create() -> None:
        async with Store.open(db) as store:  # the server's own schema and settings
            # A running match of node n0, for the fenced way (a node of a cluster checks that
            # it still referees the match in the transaction that writes its rows).
            for p in ("a", "b"):
                await store.upsert_player(p * 64, p, 0)
            await store.create_match(
                fenced, b"", "blind", "a" * 64, "b" * 64, 0, status="playing", node="n0"
            )

    trio.run(create)
    log = FileLog(str(db) + SUFFIX)
    direct = DirectWriter(str(db))
    bare = os.open(folder / "bare", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    mid = bytes(16).hex()

    def close() -> None:
        log.close()
        direct.close()
        os.close(bare)

    ways: dict[str, Callable[[int], object]] = {
        "os.write (baseline)": lambda n: os.write(bare, _ENTRY + n.to_bytes(4, "little")),
        "journal file": lambda n: log.write([(mid, n, _ENTRY)]),
        "SQLite commit": lambda n: direct.write([(mid, n, _ENTRY)]),
        "SQLite, fenced": lambda n: direct.write_fenced(
            [(fenced, n, _ENTRY)], {fenced: Fence("n0", 0)}
        ),
    }
    return ways, close


def measure_store(db: str, rows: int, gaps: list[float]) -> list[dict[str, Any]]:
    """Microseconds per one-row batch the store's way (a worker thread, one transaction: what a
    node on PostgreSQL pays), plain and fenced, interleaved, on the database ``db``."""
    from seabattle.server.store import Fence, Store

    out: list[dict[str, Any]] = []

    async def run() -> None:
        async with Store.open(db) as store:
            tag = os.urandom(4).hex()
            ids = {way: f"{tag}{i:024x}" for i, way in enumerate(("store", "store, fenced"))}
            for p in ("a", "b"):
                await store.upsert_player(tag * 7 + p * 8, p, 0)
            for mid in ids.values():
                await store.create_match(
                    mid,
                    b"",
                    "blind",
                    tag * 7 + "a" * 8,
                    tag * 7 + "b" * 8,
                    0,
                    status="playing",
                    node="n0",
                )
            fence = {ids["store, fenced"]: Fence("n0", 0)}
            n = 0
            for gap in gaps:
                took: dict[str, list[float]] = {way: [] for way in ids}
                for _ in range(rows):
                    n += 1
                    for way, mid in ids.items():
                        if gap:
                            await trio.sleep(gap)
                        t = time.perf_counter_ns()
                        await store.append_journal(
                            [(mid, n, _ENTRY)], fence if "," in way else None
                        )
                        took[way].append((time.perf_counter_ns() - t) / 1000)
                for way, us in took.items():
                    us.sort()
                    out.append(
                        {
                            "gap_s": gap,
                            "way": way,
                            "median_us": statistics.median(us),
                            "p90_us": us[int(0.9 * (len(us) - 1))],
                        }
                    )
            for mid in ids.values():
                await store.finish_match(mid, {}, 0)

    trio.run(run)
    return out


def measure(rows: int, gaps: list[float]) -> dict[str, Any]:
    """Microseconds per one-row batch (median, p90), each way, for each gap between batches."""
    out: dict[str, Any] = {"machine": machine(), "rows": rows, "runs": []}
    with tempfile.TemporaryDirectory(prefix="seabattle-jw-") as tmp:
        ways, close = _ways(Path(tmp))
        try:
            for gap in gaps:
                took: dict[str, list[float]] = {name: [] for name in ways}
                for n in range(rows):
                    # Interleaved, so that the machine's drift falls on every way alike.
                    for name, write in ways.items():
                        if gap:
                            time.sleep(gap)
                        t = time.perf_counter_ns()
                        write(n)
                        took[name].append((time.perf_counter_ns() - t) / 1000)
                for name, us in took.items():
                    us.sort()
                    out["runs"].append(
                        {
                            "gap_s": gap,
                            "way": name,
                            "median_us": statistics.median(us),
                            "p90_us": us[int(0.9 * (len(us) - 1))],
                        }
                    )
        finally:
            close()
    return out


@click.command()
@click.option("--rows", default=400, show_default=True, help="One-row batches each way, per gap.")
@gap_option((0.0, 0.005), "batch")
@click.option(
    "--db",
    default=None,
    help="Also time the store's way (plain and fenced) on this database (a PostgreSQL URL).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def main(rows: int, gaps: tuple[float, ...], db: str | None, as_json: bool) -> None:
    """Time one journal batch each way the server stores it, against a bare write."""
    report = measure(rows, list(gaps))
    if db is not None:
        report["runs"] += measure_store(db, rows, list(gaps))
    if as_json:
        click.echo(json.dumps(report))
        return
    m = report["machine"]
    click.echo(machine_line(m))
    for run in report["runs"]:
        click.echo(
            f"gap {run['gap_s'] * 1000:4.1f} ms  {run['way']:<20} median {run['median_us']:7.1f} µs"
            f"  p90 {run['p90_us']:7.1f} µs"
        )


if __name__ == "__main__":
    main()
