"""``python -m bench.diskfull``: fill the disk under a single SQLite node's
running matches, keep it full, free it, and judge what the players lived through.

Theory of operation. A small tmpfs (``mount -t tmpfs -o size=16m``; root, Linux) holds the
server's SQLite database and its journal files; its key and log live elsewhere, so that only the
store feels the full disk. ``seabattle serve`` runs on it; ``matches`` pairs of players (half
blind, half custody; :class:`~.crash.Player`) play by invitation, and a pair whose match ended is
checked and starts a new one, so that matches are running when the disk fills and when it
empties. The players behave as in :mod:`.failover`: a cut connection, a node that says nothing,
or "the match was aborted" sends them back to the server to ask where their match stands, with
backoff.

Once play is under way, a filler file is written until the filesystem refuses it (ENOSPC: 1 MiB
blocks, then 4 KiB ones), kept so for ``full`` seconds (topped up every half second, in case the
server frees something), then deleted. Measured from that moment: the first verdict any player is
shown, and for each match that was running then, its first verdict (or its end). A match that
shows nothing within ``resume_within`` seconds did not resume by itself: the server is then
restarted (SIGTERM, on the same files), so that its matches can be played out and checked, and
the run fails.

The bars: no match aborted (the store's ``matches.status``, the records' outcomes, what players
were shown: any end but a sunk fleet counts, as in :mod:`.failover`), no player told "the match
was aborted", play back by itself within ``resume_within`` seconds of space coming back, every
record verifies and holds every verdict a player was told. It prints a line per step and a JSON
summary; the exit status is 0 only if every bar held (2: the small filesystem could not be made).
"""

from __future__ import annotations

import contextlib
import errno
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import trio
from seabattle.common.keys import load_or_create_key
from seabattle.protocol import messages as m

from .crash import RULES, Player, Server, _Gone, _Link, _pair
from .failover import _IDLE, _Ended, _player, _record_of, _Run, judge, match_statuses

__all__ = ["DiskUnavailable", "diskfull_run", "main", "small_disk"]

_CHUNK = 1 << 20  #: the filler's first blocks; then 4 KiB ones, down to the last free page


class DiskUnavailable(RuntimeError):
    """The small filesystem could not be made (not root, no tmpfs, no ``mount``)."""


@contextlib.contextmanager
def small_disk(size_mb: int) -> Any:
    """A tmpfs of ``size_mb`` MiB mounted on a new folder, yielded as a :class:`Path`; unmounted
    and removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="seabattle-disk-"))
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
    except OSError as e:
        where.rmdir()
        raise DiskUnavailable(f"cannot run mount: {e}") from None
    if done.returncode:
        where.rmdir()
        why = (done.stderr or done.stdout).strip()
        raise DiskUnavailable(
            f"cannot mount a {size_mb} MiB tmpfs on {where} (this needs root on Linux): {why}"
        )
    try:
        yield where
    finally:
        # Lazily if busy: a server that outlived its stop still holds its files open.
        if subprocess.run(["umount", str(where)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
        with contextlib.suppress(OSError):
            where.rmdir()


def fill(path: Path) -> int:
    """Append to ``path`` until the filesystem is full (ENOSPC); returns the bytes written."""
    written = 0
    with open(path, "ab", buffering=0) as f:
        for size in (_CHUNK, 4096):
            block = b"\0" * size
            while True:
                try:
                    written += f.write(block) or 0
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return written


class _Single:
    """One ``seabattle serve`` as :mod:`.failover`'s nodes: known, live, never killed."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def live(self) -> list[tuple[str, int]]:
        return [self.server.addr] if self.server.alive else []

    def known(self) -> list[tuple[str, int]]:
        return [self.server.addr]

    async def start(self) -> None:
        await trio.to_thread.run_sync(self.server.start)

    async def kill(
        self, rng: random.Random, busy: set[tuple[str, int]]
    ) -> tuple[str, tuple[str, int], float]:
        raise NotImplementedError  # a full disk is this harness's fault, not a kill

    async def revive(self, name: str) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        await trio.to_thread.run_sync(self.server.stop)


async def _open(pair: list[Player], single: _Single, refused: list[int]) -> list[_Link]:
    """The pair's match by invitation on the one server (asked again while it refuses: a full
    disk may refuse a new match, which is no harm to anyone's game)."""
    while True:
        live = single.live()
        if not live:
            await trio.sleep(0.2)
            continue
        links: list[_Link] = []
        try:
            with trio.fail_after(10):
                links = [await p.connect(live[0]) for p in pair]
                host, guest = links
                await host.send(m.Create(1, RULES, pair[0].mode, False))
                while not isinstance(ok := await host.recv(), m.Ok | m.Error):
                    pass
                if isinstance(ok, m.Ok):
                    await guest.send(m.Join(1, None, ok.data["invite"]))
                    while not isinstance(ok := await guest.recv(), m.Ok | m.Error):
                        pass
            if isinstance(ok, m.Ok):
                pair[0].match = pair[1].match = ok.data["match"]
                return links
            refused[0] += 1
        except (_Gone, trio.TooSlowError):
            pass
        for link in links:
            await link.stream.aclose()
        await trio.sleep(0.5)


async def diskfull_run(
    *,
    matches: int = 4,
    full: float = 15.0,
    size_mb: int = 16,
    resume_within: float = 30.0,
    warmup: float = 3.0,
    give_up: float = 90.0,
    seed: int = 0,
    log: Any = print,
) -> dict[str, Any]:
    """Fill the disk under ``matches`` running matches for ``full`` seconds, free it, and judge
    (see the module's docstring); raises :class:`DiskUnavailable` if the small filesystem cannot
    be made."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="seabattle-diskfull-"))
    with small_disk(size_mb) as disk:
        db = str(disk / "db.sqlite")
        server = Server(folder, db)
        single = _Single(server)
        public = load_or_create_key(folder / "server.key").public_key().public_bytes_raw()
        run = _Run(single, db, rng, give_up, public, log)
        problems: list[str] = []
        ended: list[_Ended] = []
        current: list[list[Player]] = []
        refused = [0]
        done = trio.Event()
        started = time.monotonic()
        figures: dict[str, Any] = {}

        async def pair_task(slot: int, mode: str) -> None:
            n = 0
            while not done.is_set():
                pair = _pair(mode, rng, slot * 1000 + n)
                n += 1
                for p in pair:
                    p.leave_aborted, p.idle = True, _IDLE
                links = await _open(pair, single, refused)
                current[slot] = pair
                async with trio.open_nursery() as play:
                    for p, link in zip(pair, links, strict=True):
                        play.start_soon(_player, run, p, link)
                ended.append(await _record_of(run, pair))

        def shown() -> int:
            return sum(len(p.told) for pair in current for p in pair)

        modes = ["blind", "custody"] * ((matches + 1) // 2)
        await single.start()
        try:
            async with trio.open_nursery() as nursery:
                current.extend([] for _ in range(matches))
                for slot in range(matches):
                    nursery.start_soon(pair_task, slot, modes[slot])
                with trio.move_on_after(60) as slow:
                    while shown() < 20 * matches:
                        await trio.sleep(0.05)
                if slow.cancelled_caught:
                    problems.append(f"play never got going: {shown()} verdicts in 60 s")
                await trio.sleep(warmup * rng.random())
                filler = disk / "filler"
                written = await trio.to_thread.run_sync(fill, filler)
                log(f"disk full: {written / 2**20:.1f} MiB of filler, {shown()} verdicts shown")
                until = time.monotonic() + full
                while time.monotonic() < until:
                    await trio.sleep(0.5)
                    await trio.to_thread.run_sync(fill, filler)  # whatever was freed, taken
                running = [pair for pair in current if pair and not pair[0].over]
                filler.unlink()
                freed = time.monotonic()
                log(f"space back after {full:.0f} s: {len(running)} matches running")
                figures.update(await _resumed(running, freed, resume_within))
                if figures["stalled"]:
                    log(
                        f"play did not resume within {resume_within:.0f} s in"
                        f" {figures['stalled']} matches: restarting the server"
                    )
                    await single.stop()
                    await single.start()
                else:
                    log(f"play resumed {figures['resume_all_seconds']} s after space came back")
                done.set()
        finally:
            await single.stop()
        ids = [e.pair[0].match.hex() for e in ended]
        stored = await trio.to_thread.run_sync(match_statuses, db, ids)
    acknowledged, decided = judge(ended, stored, run, problems, log, "ended by the full disk")
    aborted = sum(1 for s, _ in stored.values() if s == "aborted")
    told = sum(p.told_aborted > 0 for e in ended for p in e.pair)
    bars = {
        # Told "aborted" is a bar of its own: a match can be told so and still end well.
        "no_match_aborted": aborted == 0
        and not any(set(why) - {"told_aborted"} for why in decided.values()),
        "nobody_told_aborted": told == 0,
        "resumed_by_itself": not figures.get("stalled", 1),
    }
    statuses: dict[str, int] = {}
    for status, _ in stored.values():
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "matches": len(ended),
        "running_at_fill": matches,
        "full_seconds": full,
        "disk_mb": size_mb,
        "verdicts_acknowledged": acknowledged,
        "store_statuses": statuses,
        "aborted": aborted,
        "decided_by_fault": len(decided),
        "decided": decided,
        "players_told_aborted": told,
        "opens_refused": refused[0],
        **figures,
        "bars": bars,
        "seconds": round(time.monotonic() - started, 1),
        "ok": not problems and all(bars.values()),
        "problems": problems,
        "folder": str(folder),
    }


async def _resumed(running: list[list[Player]], freed: float, within: float) -> dict[str, Any]:
    """Wait up to ``within`` seconds for each of ``running`` to show a verdict after ``freed``
    (or to end); the first verdict's delay, the slowest match's, and how many showed none."""

    def first_after(pair: list[Player]) -> float | None:
        after = [t for p in pair for t in p.told_at if t > freed]
        return min(after) if after else None

    def waiting() -> list[list[Player]]:
        return [
            pair
            for pair in running
            if first_after(pair) is None and not (pair[0].over and pair[1].over)
        ]

    with trio.move_on_after(within):
        while waiting():
            await trio.sleep(0.05)
    firsts = [t for t in map(first_after, running) if t is not None]
    return {
        "resume_seconds": round(min(firsts) - freed, 2) if firsts else None,
        "resume_all_seconds": round(max(firsts) - freed, 2) if firsts else None,
        "stalled": len(waiting()),
    }


@click.command()
@click.option("--matches", type=int, default=4, show_default=True, help="Matches running.")
@click.option("--full", type=float, default=15.0, show_default=True, help="Seconds kept full.")
@click.option("--size-mb", type=int, default=16, show_default=True, help="The tmpfs's size.")
@click.option(
    "--resume-within",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds after space is back by which every match must show a verdict.",
)
@click.option("--seed", type=int, default=0, show_default=True)
def main(matches: int, full: float, size_mb: int, resume_within: float, seed: int) -> None:
    """Fill the disk under a single node's matches, free it, and judge what the players saw."""
    try:
        summary = trio.run(
            lambda: diskfull_run(
                matches=matches, full=full, size_mb=size_mb, resume_within=resume_within, seed=seed
            )
        )
    except DiskUnavailable as e:
        click.echo(f"diskfull: {e}", err=True)
        raise SystemExit(2) from None
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
