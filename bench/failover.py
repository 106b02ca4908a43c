"""``python -m bench.failover --db postgresql://...``: three server nodes on one
PostgreSQL; kill one with SIGKILL, again and again, and judge what the players lived through:
nothing acknowledged lost, no match decided by a kill, every player back at its match soon.

Theory of operation. Three ``seabattle serve --node nI`` processes share the database and one key,
with a short lease (``--workers N`` instead: one ``seabattle serve --workers N`` on a SQLite file,
its workers the nodes, one of them killed each time and started again by its supervisor). Each
pair of players (blind and custody) has its two players on two different nodes and pairs them by
invitation or by quick match, in turn, so every match begins with a redirect (spec 4.10: the match
runs on the second player's node and the first is sent there). Each player is one task that plays
on until its match is over. The players are this harness's own (:class:`~.crash.Player`), made to
do what the reference client does once its connection is cut: go to a node it knows, which seats
it (it referees the match now), redirects it (another node does), or says nothing yet (the dead
node's lease still runs); a redirect whose node cannot be reached, or a node with nothing to say
within ``_SILENCE``, sends it back to the nodes it knows to ask again, with a backoff of 0.2 s
doubling to 1 s. Nobody is parked: a player is only ever waiting for an answer it will get, or
asking again. A pair whose match ended is checked and starts a new one. Every ``interval``
seconds a random node is killed (one that players are connected to: a kill that cuts nobody off
tests nothing); once its lease has run out (and its matches moved) it is started again under the
same name, empty.

What is judged, and from where:

* **Nothing acknowledged lost.** Every record is fetched, verified, and must hold every verdict a
  player was told, in its place (:func:`~.crash.check_record`).
* **Matches decided by a kill.** This harness's bots play every game to a sunk fleet: they never
  resign, never leave, never miss a clock on their own. So a match counts as decided by a kill
  when anything else ended it, as the store holds it (``matches.status`` ``aborted``, or no
  record), as its record holds it (a game's outcome other than ``fleet_sunk``: ``abandoned``,
  ``both_at_fault``, ``resigned``, a clock), or as a player saw it (a ``game_over`` other than
  ``fleet_sunk``, "the match was aborted", or giving up on a match it could not get back to).
* **Players back at their match.** A player whose connection the kill cut (it led to the killed
  node when the node was killed) is *away* from the moment of the kill until it is seated again:
  a ``start`` or ``snapshot`` of its match, on the node that referees it now (or, had its match
  ended meanwhile, the answer that its record is there). The median and the p99 of those times
  (nearest rank) are judged against the bar ``lease + 5`` seconds; a player never back (it gave
  up after ``give_up`` seconds, or the run ended first) counts as infinitely late.

It prints one line per kill and per match decided by a kill, then a JSON summary; the exit
status is 0 only if every check held and the bars were met (``--no-bars``: the bars are reported,
not judged).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import click
import trio
from seabattle.common.keys import load_or_create_key
from seabattle.protocol import messages as m
from seabattle.protocol.errors import RemoteProtocolError
from seabattle.protocol.ticket import open_ticket

from .crash import (
    _SERVE,
    RULES,
    Aborted,
    Moved,
    Player,
    Server,
    _fetch_record,
    _Gone,
    _Link,
    _pair,
    check_record,
)

__all__ = ["BACK_MARGIN", "failover_run", "judge", "main", "match_statuses"]

Addr = tuple[str, int]

_SILENCE = 1.5  #: seconds a reconnected player waits to hear of its match before asking again
_BACKOFF = (0.2, 1.0)  #: a seeking player's first and longest pause between two asks
_LOOK = 5.0  #: seconds between a seeking player's looks at the store (is its match aborted?)
_IDLE = 20.0  #: seconds of silence on a seated player's connection before it asks again
BACK_MARGIN = 5.0  #: the bar: every player back at its match within lease + this (p99)
_SUNK = "fleet_sunk"  #: the one way this harness's bots end a game by themselves


class _Nodes(Protocol):
    """The servers under test, however they run."""

    def live(self) -> list[Addr]:
        """The addresses of the nodes that run now."""
        ...

    def known(self) -> list[Addr]:
        """The addresses a client knows: every node's, the dead ones' too."""
        ...

    async def start(self) -> None:
        """Start every node."""
        ...

    async def kill(self, rng: random.Random, busy: set[Addr]) -> tuple[str, Addr, float]:
        """SIGKILL a random node, one of those at ``busy`` if any runs: its name, its address,
        when (``time.monotonic``)."""
        ...

    async def revive(self, name: str) -> None:
        """Return once the node killed last runs again."""
        ...

    async def stop(self) -> None:
        """Stop every node."""
        ...


class _Cluster:
    """The nodes: child processes on one database and one key."""

    def __init__(
        self, folder: Path, db: str, nodes: int, lease: float, back_after: float | None
    ) -> None:
        # By default after its lease has run out and a sweep has seen it (its matches moved);
        # sooner, as a service manager restarts it, it comes back while its lease still runs.
        self.back_after = lease + 1.5 if back_after is None else back_after
        self.servers = [
            Server(folder, db, ("--node", f"n{i}", "--cluster", "--lease", str(lease)))
            for i in range(nodes)
        ]

    def live(self) -> list[Addr]:
        return [s.addr for s in self.servers if s.alive]

    def known(self) -> list[Addr]:
        return [s.addr for s in self.servers]

    async def start(self) -> None:
        for s in self.servers:
            await trio.to_thread.run_sync(s.start)

    async def kill(self, rng: random.Random, busy: set[Addr]) -> tuple[str, Addr, float]:
        up = [s for s in self.servers if s.alive]
        victim = rng.choice([s for s in up if s.addr in busy] or up)
        at = time.monotonic()
        await trio.to_thread.run_sync(victim.kill)
        return victim.extra[1], victim.addr, at

    async def revive(self, name: str) -> None:
        await trio.sleep(self.back_after)
        for s in self.servers:
            if s.extra[1] == name:
                await trio.to_thread.run_sync(s.start)

    async def stop(self) -> None:
        for s in self.servers:
            await trio.to_thread.run_sync(s.stop)


class _Workers:
    """``seabattle serve --workers N`` on one store: the workers are the nodes, each reached at
    its own address (the shared port would hide which worker a connection landed on); a killed
    worker is started again by its supervisor, on a new address found in ``/proc``."""

    def __init__(self, folder: Path, db: str, workers: int, lease: float) -> None:
        key = folder / "server.key"
        self.args = [*_SERVE, "--port", "0", "--db", db, "--key", str(key), "--json"]
        self.args += ["--workers", str(workers), "--lease", str(lease)]
        self.folder = folder
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0  #: the shared port
        self.own: dict[str, Addr] = {}  #: each worker's own address, by node name
        self.pid: dict[str, int] = {}
        self.down: set[str] = set()

    def live(self) -> list[Addr]:
        return [a for n, a in self.own.items() if n not in self.down]

    def known(self) -> list[Addr]:
        return list(self.own.values())

    def _start(self) -> None:
        with open(self.folder / "server.log", "a") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        status = json.loads(self.proc.stdout.readline())
        self.port = status["port"]
        for w in status["workers"]:
            host, port = w["own"].rsplit(":", 1)
            self.own[w["node"]] = (host, int(port))
            self.pid[w["node"]] = w["pid"]

    async def start(self) -> None:
        await trio.to_thread.run_sync(self._start)

    async def kill(self, rng: random.Random, busy: set[Addr]) -> tuple[str, Addr, float]:
        name = rng.choice(sorted(n for n, a in self.own.items() if a in busy) or sorted(self.own))
        at = time.monotonic()
        os.kill(self.pid[name], signal.SIGKILL)
        self.down.add(name)
        return name, self.own[name], at

    async def revive(self, name: str) -> None:
        assert self.proc is not None
        with trio.fail_after(60):
            while True:
                await trio.sleep(0.2)
                old = set(self.pid.values())
                for pid in _children(self.proc.pid):
                    if pid in old:
                        continue
                    ports = [p for p in _listening(pid) if p[1] != self.port]
                    if ports:
                        self.own[name] = (self.own[name][0], ports[0][1])
                        self.pid[name] = pid
                        self.down.discard(name)
                        return

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await trio.to_thread.run_sync(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            await trio.to_thread.run_sync(proc.wait)
        self.proc = None


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux: ``/proc/PID/task/*/children``)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _listening(pid: int) -> list[Addr]:
    """The TCP addresses process ``pid`` listens on (its socket inodes in ``/proc/PID/fd``
    matched to the listening sockets of ``/proc/net/tcp``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out: list[Addr] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                out.append(("", int(cols[1].rsplit(":", 1)[1], 16)))
    return out


def match_statuses(db: str, ids: list[str]) -> dict[str, tuple[str, Any]]:
    """What the store holds of each match in ``ids`` (hex): its status and its result, read
    straight from the ``matches`` table (SQLite file or PostgreSQL URL)."""
    if not ids:
        return {}
    marks = ",".join(["?"] * len(ids))
    query = f"SELECT id, status, result FROM matches WHERE id IN ({marks})"
    rows: list[Any]
    if db.startswith(("postgresql:", "postgres:")):
        import psycopg

        with psycopg.connect(db, connect_timeout=10) as conn:
            rows = conn.execute(query.replace("?", "%s"), ids).fetchall()
    else:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as lite:
            rows = lite.execute(query, ids).fetchall()
    out: dict[str, tuple[str, Any]] = {}
    for mid, status, result in rows:
        try:
            out[mid] = (status, json.loads(result) if result else None)
        except (TypeError, ValueError):
            out[mid] = (status, result)
    return out


@dataclass
class _Run:
    """What the players of a run share: the nodes, the kills, and what is measured."""

    nodes: _Nodes
    db: str
    rng: random.Random
    give_up: float
    public: bytes
    log: Any
    killed_at: dict[Addr, float] = field(default_factory=dict)
    #: the connection each player is on now, by name (a kill cuts those that lead to its node)
    links: dict[str, _Link] = field(default_factory=dict)
    #: since when each player cut off by a kill has been away, by name
    away: dict[str, float] = field(default_factory=dict)
    back: list[float] = field(default_factory=list)
    not_back: list[str] = field(default_factory=list)
    gave_up: set[str] = field(default_factory=set)  #: players who stopped seeking their match

    def cut(self, addr: Addr, at: float) -> int:
        """The node at ``addr`` was killed at ``at``: its players are away from then on.
        Returns how many."""
        self.killed_at[addr] = at
        n = 0
        for name, link in self.links.items():
            if link.addr == addr and name not in self.away:
                self.away[name] = at
                n += 1
        return n

    def seated(self, p: Player) -> None:
        """``p`` is back at its match."""
        since = self.away.pop(p.name, None)
        if since is not None:
            self.back.append(time.monotonic() - since)

    def lost(self, p: Player, why: str) -> None:
        """``p`` gives up on its match: never back (infinitely late, if a kill cut it off)."""
        if self.away.pop(p.name, None) is not None:
            self.back.append(math.inf)
        self.not_back.append(f"{p.name} ({p.match.hex()[:12]}): {why}")
        self.gave_up.add(p.name)

    async def status(self, p: Player) -> str | None:
        """The store's status of ``p``'s match (``None``: it could not be read)."""
        try:
            rows = await trio.to_thread.run_sync(match_statuses, self.db, [p.match.hex()])
        except Exception:  # a store that cannot answer now: look again later
            return None
        row = rows.get(p.match.hex())
        return row[0] if row else None


async def _seek(run: _Run, p: Player, to: m.Redirect | None) -> _Link | None:
    """Connect ``p`` where its match runs: the node a redirect names, else a node it knows, until
    one seats it, tells it its match is over, or sends it on; ``None``: the match is gone (the
    store says aborted) or ``p`` gave up on it after ``run.give_up`` seconds."""
    pause = _BACKOFF[0]
    began = time.monotonic()
    look = began + _LOOK
    failed: Addr | None = None
    while True:
        now = time.monotonic()
        if now - began > run.give_up:
            run.lost(p, f"not seated after {run.give_up:.0f} s")
            p.over = True
            return None
        if now >= look:
            look = now + _LOOK
            if await run.status(p) == "aborted":
                run.lost(p, "the store holds its match as aborted")
                p.over = True
                return None
        addr = None
        if to is not None:
            try:
                addr = open_ticket(run.public, to.ticket, to.sig, time.time()).host_port()
            except RemoteProtocolError:
                to = None
        if addr is None:
            # Any node it knows but the one that just failed it: the reference client's
            # "back to the nodes it knows", not the harness's knowledge of which are alive.
            known = [a for a in run.nodes.known() if a != failed] or run.nodes.known()
            addr = run.rng.choice(known)
        redirected = None
        try:
            link = await p.connect(addr, caps=("redirect",))
            run.links[p.name] = link
            if to is not None:
                await link.send(m.Redeem(78, to.ticket, to.sig))
                to = None
            if not p.match:
                return link  # a new pair: it opens its match itself
            with trio.move_on_after(_SILENCE):
                while True:
                    msg = await link.recv()
                    if isinstance(msg, m.Ping):
                        await link.send(m.Pong(msg.n))
                    elif isinstance(msg, m.Redirect):
                        redirected = msg
                        break
                    elif (isinstance(msg, m.Start | m.Snapshot) and msg.match == p.match) or (
                        isinstance(msg, m.Ok) and msg.ref == 77  # the probe: its match is over
                    ):
                        link.queue.insert(0, msg)
                        run.seated(p)
                        return link
                    elif isinstance(msg, m.Error) and msg.ref is None and "aborted" in msg.msg:
                        p.told_aborted += 1
            await link.stream.aclose()
            failed = None if redirected else addr
        except _Gone:
            to, failed = None, addr
        if redirected is not None:
            to = redirected  # on at once: the node named where the match runs
            continue
        await trio.sleep(pause * (0.75 + run.rng.random() / 2))
        pause = min(_BACKOFF[1], pause * 2)


async def _player(run: _Run, p: Player, link: _Link | None) -> None:
    """Play ``p``'s match to its end, across every kill and redirect."""
    try:
        while link is not None and not p.over:
            run.links[p.name] = link
            try:
                await p.play(link)
            except (_Gone, Aborted):
                await link.stream.aclose()
                link = await _seek(run, p, None)
            except Moved as moved:
                await link.stream.aclose()
                link = await _seek(run, p, moved.redirect)
    finally:
        run.links.pop(p.name, None)
        if link is not None:
            await link.stream.aclose()


async def _open(
    pair: list[Player], nodes: _Nodes, rng: random.Random, slot: int, quick: bool
) -> list[_Link]:
    """The pair's match, its players on two different live nodes (a redirect begins it): a
    quick match (under rules of this slot's own, so that pairs do not mix), or an invitation."""
    rules = {**RULES, "clocks": {"grace": 60 + slot}}
    while True:
        live = nodes.live()
        if len(live) < 2:
            await trio.sleep(0.2)
            continue
        ha, ga = rng.sample(live, 2)
        try:
            with trio.fail_after(10):
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
                while not isinstance(ok := await guest.recv(), m.Ok | m.Error):
                    pass
            if isinstance(ok, m.Error):
                raise _Gone
            pair[0].match = pair[1].match = ok.data["match"]
            return [host, guest]
        except (_Gone, trio.TooSlowError):
            await trio.sleep(0.2)


@dataclass
class _Ended:
    """One match as the players left it: its record's outcomes (``None``: no record)."""

    pair: list[Player]
    signed: dict[str, Any] | None  #: the record (``None``: there is none)
    why: str = ""  #: why there is no record

    @property
    def outcomes(self) -> list[str] | None:
        """The reason each game of the record ended."""
        if self.signed is None:
            return None
        games = self.signed["record"]["games"]
        return [(g.get("outcome") or {}).get("reason", "none") for g in games]


async def _record_of(run: _Run, pair: list[Player]) -> _Ended:
    """Fetch the record of ``pair``'s match from any live node (one may be killed meanwhile)."""
    deadline = time.monotonic() + 60
    why = "no node answered"
    while time.monotonic() < deadline:
        live = run.nodes.live()
        if live:
            try:
                with trio.fail_after(10):
                    signed = await _fetch_record(pair[0], run.rng.choice(live))
            except (_Gone, trio.TooSlowError):
                pass
            except RuntimeError as e:  # no record: asking again will not make one
                why = str(e)
                break
            else:
                return _Ended(pair, signed)
        await trio.sleep(0.2)
    return _Ended(pair, None, why)


def judge(
    ended: list[_Ended],
    stored: dict[str, tuple[str, Any]],
    run: _Run,
    problems: list[str],
    log: Any,
    what: str,
) -> tuple[int, dict[str, list[str]]]:
    """Judge each match that ended against its record and the store: (the verdicts players were
    told that its record holds, the matches the fault decided with why); what is missing goes to
    ``problems``, each match the fault decided to ``log`` as ``what``."""
    acknowledged = 0
    decided: dict[str, list[str]] = {}
    for e in ended:
        mid = e.pair[0].match.hex()
        if e.signed is not None:
            acknowledged += check_record(e.pair, e.signed, problems)
        else:
            status = stored.get(mid, ("missing", None))[0]
            problems.append(f"{mid}: no record ({e.why}; the store says {status})")
        why = _decided(e, stored.get(mid), run)
        if why:
            decided[mid] = why
            log(f"match {mid[:12]}: {what} ({', '.join(why)})")
    return acknowledged, decided


def _decided(ended: _Ended, stored: tuple[str, Any] | None, run: _Run) -> list[str]:
    """Why ``ended``'s match counts as decided by a kill (empty: it was played out)."""
    why: set[str] = set()
    if stored is not None and stored[0] == "aborted":
        why.add("aborted")
    if ended.outcomes is None:
        why.add("no_record")
    else:
        why.update(r for r in ended.outcomes if r != _SUNK)
    for p in ended.pair:
        why.update(f"shown_{o.get('reason')}" for o in p.outcomes if o.get("reason") != _SUNK)
        if p.told_aborted:
            why.add("told_aborted")
        if p.name in run.gave_up:
            why.add("player_gave_up")
    return sorted(why)


def _rank(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (``inf`` among them allowed)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _seconds(x: float) -> float | None:
    return None if math.isinf(x) else round(x, 2)


async def failover_run(
    db: str,
    kills: int,
    *,
    nodes: int = 3,
    workers: int = 0,
    pairs: int = 5,
    lease: float = 2.0,
    interval: float = 3.0,
    back_after: float | None = None,
    give_up: float = 90.0,
    bars: bool = True,
    seed: int = 0,
    log: Any = print,
) -> dict[str, Any]:
    """Kill a random one of ``nodes`` nodes ``kills`` times, every ``interval`` seconds, under
    ``pairs`` blind and ``pairs`` custody matches, and judge what the players lived through.

    ``workers``: instead of ``nodes`` cluster nodes, one ``serve --workers N`` on ``db`` (a
    SQLite file, or PostgreSQL), whose killed worker its supervisor starts again.
    ``back_after``: seconds before a killed cluster node is started again (default: once its
    lease has run out, ``lease`` + 1.5). ``bars``:
    whether the bars (no match decided by a kill, players back within ``lease`` + 5 s at the
    p99) decide ``ok``, or are only reported."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="seabattle-failover-"))
    under: _Nodes = (
        _Workers(folder, db, workers, lease)
        if workers
        else _Cluster(folder, db, nodes, lease, back_after)
    )
    public = load_or_create_key(folder / "server.key").public_key().public_bytes_raw()
    run = _Run(under, db, rng, give_up, public, log)
    problems: list[str] = []
    ended: list[_Ended] = []
    started = time.monotonic()
    done = trio.Event()
    opened = {"quick": 0, "invite": 0}

    async def pair_task(slot: int, mode: str) -> None:
        n = 0
        while True:
            pair = _pair(mode, rng, slot * 1000 + n)
            for p in pair:
                p.leave_aborted, p.idle = True, _IDLE
            n += 1
            quick = n % 2 == 1
            links = await _open(pair, under, rng, slot, quick=quick)
            opened["quick" if quick else "invite"] += 1
            async with trio.open_nursery() as play:
                for p, link in zip(pair, links, strict=True):
                    play.start_soon(_player, run, p, link)
            ended.append(await _record_of(run, pair))
            if done.is_set():
                return

    await under.start()
    try:
        async with trio.open_nursery() as nursery:
            for slot, mode in enumerate(["blind", "custody"] * pairs):
                nursery.start_soon(pair_task, slot, mode)
            for k in range(kills):
                await trio.sleep(interval * (0.5 + rng.random()))
                # A node with players on it: a kill that cuts nobody off tests nothing.
                busy = {link.addr for link in run.links.values()}
                name, addr, at = await under.kill(rng, busy)
                cut = run.cut(addr, at)
                log(f"kill {k + 1}/{kills}: node {name} ({cut} players cut off)")
                await under.revive(name)
            done.set()
        for name in run.away:  # cut off and never seated again
            run.not_back.append(f"{name}: not back when the run ended")
            run.back.append(math.inf)
        ids = [e.pair[0].match.hex() for e in ended]
        stored = await trio.to_thread.run_sync(match_statuses, db, ids)
    finally:
        await under.stop()
    acknowledged, decided = judge(ended, stored, run, problems, log, "decided by a kill")
    waits = run.back
    seated = [w for w in waits if not math.isinf(w)]
    by_reason: dict[str, int] = {}
    for why in decided.values():
        for r in why:
            by_reason[r] = by_reason.get(r, 0) + 1
    bar = lease + BACK_MARGIN
    median = _rank(waits, 0.5) if waits else 0.0
    p99 = _rank(waits, 0.99) if waits else 0.0
    met = {"no_match_decided_by_a_kill": not decided, "back_p99_within_bar": p99 <= bar}
    refused: dict[str, int] = {}
    for e in ended:
        for p in e.pair:
            for msg, count in p.refused.items():
                refused[msg] = refused.get(msg, 0) + count
    statuses: dict[str, int] = {}
    for status, _ in stored.values():
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "store": "workers" if workers else "cluster",
        "nodes": workers or nodes,
        "kills": kills,
        "lease": lease,
        "back_after": None if workers else back_after,
        "matches": len(ended),
        "opened": opened,
        "verdicts_acknowledged": acknowledged,
        "store_statuses": statuses,
        "decided_by_kill": len(decided),
        "decided_by_reason": by_reason,
        "decided": decided,
        "players_told_aborted": sum(p.told_aborted > 0 for e in ended for p in e.pair),
        "refusals": refused,
        "back": {
            "players": len(waits),
            "median": _seconds(median),
            "p99": _seconds(p99),
            "max": _seconds(max(waits)) if waits else None,
            # Of those who did get back: how the return itself went, apart from the lost.
            "p99_of_seated": _seconds(_rank(seated, 0.99)) if seated else None,
            "bar": bar,
            "not_back": run.not_back,
        },
        "bars": met,
        "seconds": round(time.monotonic() - started, 1),
        "ok": not problems and (all(met.values()) or not bars),
        "problems": problems,
        "folder": str(folder),
    }


@click.command()
@click.option(
    "--db",
    default=None,
    help="The PostgreSQL URL the nodes share (a fresh database); with --workers, a SQLite file"
    " (default: a new one in the run's folder) or PostgreSQL.",
)
@click.option("--kills", type=int, default=20, show_default=True, help="SIGKILLs in a row.")
@click.option("--nodes", type=int, default=3, show_default=True)
@click.option(
    "--workers",
    type=int,
    default=0,
    help="Run one `serve --workers N` instead of cluster nodes, and kill its workers.",
)
@click.option(
    "--pairs", type=int, default=5, show_default=True, help="Matches per trust mode (5: 10 pairs)."
)
@click.option("--lease", type=float, default=2.0, show_default=True, help="Nodes' lease, seconds.")
@click.option(
    "--back-after",
    type=float,
    default=None,
    help="Seconds before a killed node is started again [default: lease + 1.5].",
)
@click.option(
    "--give-up",
    type=float,
    default=90.0,
    show_default=True,
    help="Seconds a player seeks its match before it gives up on it.",
)
@click.option("--no-bars", is_flag=True, help="Report the bars without failing on them.")
@click.option("--seed", type=int, default=0, show_default=True)
def main(
    db: str | None,
    kills: int,
    nodes: int,
    workers: int,
    pairs: int,
    lease: float,
    back_after: float | None,
    give_up: float,
    no_bars: bool,
    seed: int,
) -> None:
    """Kill cluster nodes again and again under running matches; judge what the players saw."""
    if db is None:
        if not workers:
            raise click.UsageError("--db postgresql://... is needed (or --workers N)")
        db = str(Path(tempfile.mkdtemp(prefix="seabattle-workers-")) / "db.sqlite")
    url = db
    summary = trio.run(
        lambda: failover_run(
            url,
            kills,
            nodes=nodes,
            workers=workers,
            pairs=pairs,
            lease=lease,
            back_after=back_after,
            give_up=give_up,
            bars=not no_bars,
            seed=seed,
        )
    )
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
