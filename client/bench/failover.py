"""``python -m seabattle.client.bench.failover --db postgresql://...``: three server nodes on one
PostgreSQL; kill one with SIGKILL, again and again, and check that another node finishes its
matches with nothing acknowledged lost.

Theory of operation. Three ``seabattle serve --node nI`` processes share the database and one key,
with a short lease. Each pair of players (blind and custody) has its two players on two different
nodes and pairs them by invitation or by quick match, in turn, so every match begins with a
redirect (spec 4.10: the match runs on the second player's node and the first is sent there).
Each player is one task that plays on until its match is over: when its connection drops it
reconnects to a random live node, which seats it (it referees the match now), redirects it
(another node does), or says nothing yet (the dead node's lease still runs) - then the player
tries again shortly. A pair whose match ended is
checked and starts a new one. Every ``interval`` seconds a random node is killed; once its lease
has run out (and its matches moved) it is started again under the same name, empty.

At the end every record is fetched, verified, and must hold every verdict a player was told, in
its place (:func:`~.crash._check`). It prints one line per kill and a JSON summary; the exit
status is 0 only if every check held.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import trio
from seabattle.common.keys import load_or_create_key
from seabattle.protocol import messages as m
from seabattle.protocol.errors import RemoteProtocolError
from seabattle.protocol.ticket import open_ticket

from .crash import RULES, Moved, Player, Server, _check, _Gone, _Link, _pair

__all__ = ["failover_run", "main"]

_SILENCE = 1.5  #: seconds a reconnected player waits to hear of its match before trying again


class _Cluster:
    """The nodes: child processes on one database and one key."""

    def __init__(self, folder: Path, db: str, nodes: int, lease: float) -> None:
        self.servers = [
            Server(folder, db, ("--node", f"n{i}", "--cluster", "--lease", str(lease)))
            for i in range(nodes)
        ]
        key = load_or_create_key(folder / "server.key")
        self.public = key.public_key().public_bytes_raw()

    def live(self) -> list[tuple[str, int]]:
        return [s.addr for s in self.servers if s.alive]


async def _seek(p: Player, cluster: _Cluster, rng: random.Random, to: m.Redirect | None) -> _Link:
    """Connect ``p`` where its match runs: the node a redirect names, else any live node, until
    one seats it or sends it on."""
    while True:
        addr = None
        if to is not None:
            try:
                ticket = open_ticket(cluster.public, to.ticket, to.sig, time.time())
                addr = ticket.host_port()
            except RemoteProtocolError:
                to = None
        live = cluster.live()
        if addr is None and live:
            addr = rng.choice(live)
        if addr is None:
            await trio.sleep(0.2)
            continue
        try:
            link = await p.connect(addr, caps=("redirect",))
            if to is not None:
                await link.send(m.Redeem(78, to.ticket, to.sig))
                to = None
            if not p.match:
                return link  # a new pair: it opens its match itself
            with trio.move_on_after(_SILENCE):
                while True:
                    msg = await link.recv()
                    if isinstance(msg, m.Redirect):
                        to = msg
                        break
                    if isinstance(msg, m.Start | m.Snapshot) or (
                        isinstance(msg, m.Ok) and msg.ref == 77  # the probe: its match is over
                    ):
                        link.queue.insert(0, msg)
                        return link
            await link.stream.aclose()
        except _Gone:
            to = None
            await trio.sleep(0.2)


async def _player(p: Player, cluster: _Cluster, rng: random.Random, link: _Link) -> None:
    """Play ``p``'s match to its end, across every kill and redirect."""
    while not p.over:
        try:
            await p.play(link)
        except _Gone:
            link = await _seek(p, cluster, rng, None)
        except Moved as moved:
            await link.stream.aclose()
            link = await _seek(p, cluster, rng, moved.redirect)


async def _open(
    pair: list[Player], cluster: _Cluster, rng: random.Random, slot: int, quick: bool
) -> list[_Link]:
    """The pair's match, its players on two different live nodes (a redirect begins it): a
    quick match (under rules of this slot's own, so that pairs do not mix), or an invitation."""
    rules = {**RULES, "clocks": {"grace": 60 + slot}}
    while True:
        live = cluster.live()
        if len(live) < 2:
            await trio.sleep(0.2)
            continue
        ha, ga = rng.sample(live, 2)
        try:
            host = await pair[0].connect(ha, caps=("redirect",))
            guest = await pair[1].connect(ga, caps=("redirect",))
            if quick:
                await host.send(m.Quick(1, rules, pair[0].mode))
                await trio.sleep(0.1)  # the host waits first, in the shared queue
                await guest.send(m.Quick(1, rules, pair[1].mode))
            else:
                await host.send(m.Create(1, rules, pair[0].mode, False))
                while not isinstance(ok := await host.recv(), m.Ok):
                    pass
                await guest.send(m.Join(1, None, ok.data["invite"]))
            with trio.fail_after(10):
                while not isinstance(ok := await guest.recv(), m.Ok | m.Error):
                    pass
            if isinstance(ok, m.Error):
                raise _Gone
            pair[0].match = pair[1].match = ok.data["match"]
            return [host, guest]
        except (_Gone, trio.TooSlowError):
            await trio.sleep(0.2)


async def failover_run(
    db: str,
    kills: int,
    *,
    nodes: int = 3,
    pairs: int = 2,
    lease: float = 2.0,
    interval: float = 3.0,
    seed: int = 0,
    log: Any = print,
) -> dict[str, Any]:
    """Kill a random one of ``nodes`` nodes ``kills`` times, every ``interval`` seconds, under
    ``pairs`` blind and ``pairs`` custody matches."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="seabattle-failover-"))
    cluster = _Cluster(folder, db, nodes, lease)
    problems: list[str] = []
    checked: list[str] = []
    acknowledged = 0
    started = time.monotonic()
    done = trio.Event()
    opened = {"quick": 0, "invite": 0}

    async def pair_task(slot: int, mode: str) -> None:
        nonlocal acknowledged
        n = 0
        while True:
            pair = _pair(mode, rng, slot * 1000 + n)
            n += 1
            quick = n % 2 == 1
            links = await _open(pair, cluster, rng, slot, quick=quick)
            opened["quick" if quick else "invite"] += 1
            async with trio.open_nursery() as play:
                for p, link in zip(pair, links, strict=True):
                    play.start_soon(_player, p, cluster, rng, link)
            while True:  # from any node that is up (one may be killed meanwhile)
                live = cluster.live()
                try:
                    if live:
                        acknowledged += await _check(pair, rng.choice(live), problems)
                        break
                except _Gone:
                    pass
                await trio.sleep(0.2)
            checked.append(pair[0].match.hex())
            if done.is_set():
                return

    for s in cluster.servers:
        await trio.to_thread.run_sync(s.start)
    try:
        async with trio.open_nursery() as nursery:
            for slot, mode in enumerate(["blind", "custody"] * pairs):
                nursery.start_soon(pair_task, slot, mode)
            for k in range(kills):
                await trio.sleep(interval * (0.5 + rng.random()))
                victim = rng.choice(cluster.servers)
                await trio.to_thread.run_sync(victim.kill)
                log(f"kill {k + 1}/{kills}: node {victim.extra[1]}")
                # Its matches move once its lease has run out and a sweep has seen it.
                await trio.sleep(lease + 1.5)
                await trio.to_thread.run_sync(victim.start)
            done.set()
    finally:
        for s in cluster.servers:
            await trio.to_thread.run_sync(s.stop)
    return {
        "nodes": nodes,
        "kills": kills,
        "matches": len(checked),
        "opened": opened,
        "verdicts_acknowledged": acknowledged,
        "seconds": round(time.monotonic() - started, 1),
        "ok": not problems,
        "problems": problems,
        "folder": str(folder),
    }


@click.command()
@click.option("--db", required=True, help="The PostgreSQL URL the nodes share (a fresh database).")
@click.option("--kills", type=int, default=20, show_default=True, help="SIGKILLs in a row.")
@click.option("--nodes", type=int, default=3, show_default=True)
@click.option("--pairs", type=int, default=2, show_default=True, help="Matches per trust mode.")
@click.option("--lease", type=float, default=2.0, show_default=True, help="Nodes' lease, seconds.")
@click.option("--seed", type=int, default=0, show_default=True)
def main(db: str, kills: int, nodes: int, pairs: int, lease: float, seed: int) -> None:
    """Kill cluster nodes again and again under running matches; check nothing is lost."""
    summary = trio.run(
        lambda: failover_run(db, kills, nodes=nodes, pairs=pairs, lease=lease, seed=seed)
    )
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
