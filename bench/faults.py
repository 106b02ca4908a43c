"""``python -m bench.faults``: the faults an operator meets, injected for real
into a three-node cluster under running matches: a node paused past its lease and woken after
the takeover, the store stopped and started again, and the store frozen and thawed.

Theory of operation. The harness starts a PostgreSQL of its own (:mod:`.pg`) with
``log_statement=mod``, the application name in ``log_line_prefix`` and commit timestamps on, and
three ``seabattle serve --node nI --cluster --metrics-port 0`` processes on it, each connecting
with ``application_name=seabattle-nI`` (in its URL), so that every row and every logged
statement says which node wrote it. ``pairs`` pairs of players (blind and custody in turn) play
matches as :mod:`.failover`'s do, each pair's two players on two different nodes (quick match and
invitation in turn), a finished match checked and followed by a new one. Unlike there, every
player gives up on a connection silent for ``silence`` seconds and on a handshake that does not
finish, and goes to another node: a paused node holds its players' sockets open and answers
nothing, and a player must leave it for play to go on elsewhere. The harness stands in for a load
balancer's health check only in choosing nodes: a paused or dead node is not offered.

The faults, one after another, with ``settle`` seconds of play between them:

* **pause** (``pauses`` times): SIGSTOP the node that referees the most running matches, for at
  least three leases and until every one of those matches has been taken over by another node and
  play has gone on there (a player of one was told a new verdict), then SIGCONT, and watch the
  woken node for two leases.
* **outage** (``outages``: seconds each): stop PostgreSQL (fast shutdown), start it again on the
  same port after that long. Throughout, every node's ``/healthz/ready`` is polled four times a
  second; from ``ready_grace`` seconds into the outage until the store is back every answer must be
  503. After the store's return the cluster must serve again within ``recover`` seconds, with no
  operator: every node answers 200 to ``/healthz/ready``, and a quick match between two fresh
  players on two different nodes has its first shot answered (the probe, then played to its end).
* **freeze** (``freezes``: seconds each): SIGSTOP every PostgreSQL process (a paused VM, a storage
  stall), SIGCONT after that long, judged as an outage. The nodes' calls neither fail nor return
  meanwhile, and when it thaws every lease looks ended: no match may move or be aborted for it.

A node that exits by itself is a failure; the harness notes it and, once the fault has been
judged, starts it again (an operator would have to) so that the run can go on.

What is judged, from what the clients were told against the final store:

* every record is fetched and verified and holds every verdict a player was told, in its place
  (:func:`~.crash._check`); a match the store says ``aborted`` is a failure (the end of the run
  counts them all: ``SELECT status, result FROM matches``), and so is one still running when the
  players are done;
* **no stray writes**: a trigger the harness adds to every table holding a match's rows
  (``matches``, ``journal``, ``records``...; not the handoffs and co-signatures, which any node
  writes) records each row written with the application name and, through the writer's
  transaction id, its commit time. Replayed in commit order, each match's owner is the ``node`` its
  row was last given (a creation, a join or a takeover); a row of a match that is no longer open,
  written by a node other than its owner at that commit, is a stray row. This counts rows that
  were committed, which the log cannot: a fenced statement (``UPDATE ... WHERE epoch = $e``)
  that writes nothing is logged the same as one that writes;
* the PostgreSQL log: the data-modifying statements logged from the woken node's connections in
  the two leases after its SIGCONT whose text or parameters (psycopg 3 sends parameters with the
  extended protocol; the server logs them in a ``DETAIL: parameters: $1 = '...'`` line) name a
  match taken over from it; reported per pause, with how many of them failed (``ERROR``). These
  are attempts: once writes are fenced some will remain and write nothing, so the bar is the
  stray rows.

It prints one line per fault and a JSON summary; the exit status is 0 only if every check held.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click
import trio
from seabattle.common.keys import load_or_create_key
from seabattle.protocol import messages as m
from seabattle.protocol.errors import RemoteProtocolError
from seabattle.protocol.ticket import open_ticket

from .crash import RULES, Moved, Player, Server, _check, _Gone, _Link, _pair
from .pg import Postgres

__all__ = ["Attempt", "FaultNode", "Stray", "faults_run", "main", "read_log", "stray_rows"]

_APP = "seabattle-"  #: a node's application name is this and its name
_HARNESS_APP = "seabattle-faults-harness"
#: Tables of match rows that nodes other than the match's own legitimately write: a waiting
#: player's handoff is taken by its own node, a finished record co-signed wherever its player is.
_NOT_AUDITED = {"handoffs", "record_sigs", "fault_audit"}
_POLL = 0.25  #: seconds between two polls of the nodes' health and of the store
_PG_SETTINGS = {
    "log_statement": "mod",
    "log_line_prefix": "%m [%p] %a: ",
    "log_timezone": "UTC",
    # A match id (32 hex digits) is logged whole; journal entries are cut, keeping the log small.
    "log_parameter_max_length": "80",
    "track_commit_timestamp": "on",
    "max_connections": "200",
}

_AUDIT = """
CREATE TABLE IF NOT EXISTS fault_audit (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    app TEXT NOT NULL DEFAULT current_setting('application_name'),
    tbl TEXT NOT NULL,
    op TEXT NOT NULL,
    match_id TEXT,
    node TEXT,
    old_node TEXT,
    old_status TEXT,
    new_status TEXT
);

CREATE OR REPLACE FUNCTION fault_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r jsonb := CASE WHEN TG_OP = 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END;
    o jsonb := CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END;
    is_match boolean := TG_TABLE_NAME = 'matches';
BEGIN
    INSERT INTO fault_audit (tbl, op, match_id, node, old_node, old_status, new_status)
    VALUES (
        TG_TABLE_NAME, TG_OP,
        CASE WHEN is_match THEN r->>'id' ELSE r->>'match_id' END,
        CASE WHEN is_match AND TG_OP <> 'DELETE' THEN r->>'node' END,
        CASE WHEN is_match THEN o->>'node' END,
        CASE WHEN is_match THEN o->>'status' END,
        CASE WHEN is_match AND TG_OP <> 'DELETE' THEN r->>'status' END
    );
    RETURN NULL;
END
$$;
"""


class FaultNode(Server):
    """One node of the cluster (:class:`~.crash.Server`) that can also be paused, that knows its
    metrics port (``/healthz/ready``), and whose exit on its own is noticed."""

    def __init__(self, folder: Path, db: str, name: str, lease: float) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        args = ("--node", name, "--cluster", "--lease", str(lease), "--metrics-port", "0")
        super().__init__(folder, db, args)
        self.name = name
        self.metrics: tuple[str, int] = ("", 0)
        self.paused = False

    def start(self) -> tuple[str, int]:
        """Start the node; its address (the metrics address is in ``metrics``)."""
        addr = super().start()
        self.metrics = (self.status["metrics_host"], int(self.status["metrics_port"]))
        self.paused = False
        return addr

    def pause(self) -> None:
        """SIGSTOP the node."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT the node."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def exited(self) -> int | None:
        """The exit status if the node has ended by itself since the last look (it is then no
        longer counted as alive), else ``None``."""
        if self.proc is None or self.proc.poll() is None:
            return None
        code = self.proc.returncode
        self.proc = None
        return code

    def stop(self) -> None:
        """Stop the node (SIGTERM; a paused node is woken first, or it could not act on it)."""
        if self.paused:
            self.resume()
        super().stop()


class _Cluster:
    """The three nodes, on one database and one key, and what the players may reach of them."""

    def __init__(self, folder: Path, pg: Postgres, nodes: int, lease: float) -> None:
        key = load_or_create_key(folder / "server.key")
        self.public = key.public_key().public_bytes_raw()
        self.nodes: list[FaultNode] = []
        for i in range(nodes):
            name = f"n{i}"
            # One folder per node, for a log of its own; the key is the cluster's one.
            sub = folder / name
            sub.mkdir()
            shutil.copy(folder / "server.key", sub / "server.key")
            url = pg.url("seabattle", application_name=_APP + name)
            self.nodes.append(FaultNode(sub, url, name, lease))

    def live(self) -> list[tuple[str, int]]:
        """The nodes a player is offered: running and not paused."""
        return [n.addr for n in self.nodes if n.alive and not n.paused]

    def by_addr(self, addr: tuple[str, int]) -> FaultNode | None:
        return next((n for n in self.nodes if n.addr == addr), None)


class _Watched(trio.abc.Stream):
    """A player's socket that gives up when the peer is silent for ``silence`` seconds, or does
    not take what is sent in that long (a paused node): as a real client would (spec 4.6)."""

    def __init__(self, stream: trio.SocketStream, silence: float) -> None:
        self.stream = stream
        self.silence = silence

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        with trio.move_on_after(self.silence):
            return bytes(await self.stream.receive_some(max_bytes))
        raise trio.BrokenResourceError("the server was silent")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        with trio.move_on_after(self.silence):
            await self.stream.send_all(data)
            return
        raise trio.BrokenResourceError("the server took nothing")

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


@dataclass
class _Run:
    """What a run shares between its tasks."""

    cluster: _Cluster
    pg: Postgres
    rng: random.Random
    silence: float
    problems: list[str] = field(default_factory=list)
    #: the store's view, polled: match id -> (status, node)
    matches: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: match id -> its two players, for every match the harness opened
    pairs: dict[str, list[Player]] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)
    acknowledged: int = 0
    aborted_seen: set[str] = field(default_factory=set)
    #: polls of every node's /healthz/ready: (wall time, {node: status, None: no answer})
    health: list[tuple[float, dict[str, int | None]]] = field(default_factory=list)
    #: nodes that exited by themselves: (wall time, node, status)
    exits: list[tuple[float, str, int]] = field(default_factory=list)
    stopping: bool = False
    active: int = 0  #: pair tasks and probes still playing

    def aborted(self) -> set[str]:
        """The matches the store holds as aborted (that had both players: played ones)."""
        return {mid for mid, (status, _) in self.matches.items() if status == "aborted"}

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the store as the harness (blocking: call in a thread)."""
        import psycopg

        url = self.pg.url("seabattle", application_name=_HARNESS_APP)
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return list(cur.fetchall()) if cur.description is not None else []

    async def aquery(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        """:meth:`query` from trio; ``None`` while the store does not answer."""
        import psycopg

        try:
            with trio.move_on_after(5):
                return await trio.to_thread.run_sync(
                    lambda: self.query(sql, params), abandon_on_cancel=True
                )
        except psycopg.Error:
            return None
        return None


# -- players --------------------------------------------------------------------------------------


async def _connect(run: _Run, p: Player, addr: tuple[str, int]) -> _Link:
    """``p.connect`` with the handshake bounded and the socket watched for silence."""
    with trio.move_on_after(run.silence):
        try:
            link = await p.connect(addr, caps=("redirect",))
        except (AssertionError, RemoteProtocolError):
            raise _Gone from None  # an error instead of welcome or authed: try elsewhere
        link.stream = cast(trio.SocketStream, _Watched(link.stream, run.silence))
        return link
    raise _Gone


async def _close(link: _Link) -> None:
    with contextlib.suppress(Exception):
        await link.stream.aclose()


async def _seek(run: _Run, p: Player, to: m.Redirect | None) -> _Link:
    """Connect ``p`` where its match runs: the node a redirect names, else any node offered,
    until one seats it or sends it on (as :mod:`.failover`'s players, with timeouts)."""
    while True:
        addr = None
        if to is not None:
            try:
                addr = open_ticket(run.cluster.public, to.ticket, to.sig, time.time()).host_port()
            except RemoteProtocolError:
                to = None
        live = run.cluster.live()
        if addr is None and live:
            addr = run.rng.choice(live)
        if addr is None:
            await trio.sleep(0.2)
            continue
        try:
            link = await _connect(run, p, addr)
            if to is not None:
                await link.send(m.Redeem(78, to.ticket, to.sig))
                to = None
            if not p.match:
                return link
            with trio.move_on_after(1.5):
                while True:
                    msg = await link.recv()
                    if isinstance(msg, m.Redirect):
                        to = msg
                        break
                    if isinstance(msg, m.Start | m.Snapshot) or (
                        isinstance(msg, m.Ok) and msg.ref == 77  # the probe: the match is over
                    ):
                        link.queue.insert(0, msg)
                        return link
            await _close(link)
        except _Gone:
            to = None
            await trio.sleep(0.2)


async def _player(run: _Run, p: Player, link: _Link) -> None:
    """Play ``p``'s match to its end, across every fault and redirect."""
    while not p.over:
        try:
            await p.play(link)
        except _Gone:
            await _close(link)
            link = await _seek(run, p, None)
        except Moved as moved:
            await _close(link)
            link = await _seek(run, p, moved.redirect)
    await _close(link)


async def _open(run: _Run, pair: list[Player], slot: int, quick: bool) -> list[_Link]:
    """The pair's match, its players on two different nodes (a redirect begins it): a quick
    match under rules of this slot's own (so that pairs do not mix), or an invitation. An
    attempt that does not finish in 10 s is dropped and tried again."""
    rules = {**RULES, "clocks": {"grace": 60 + slot}}
    while True:
        live = run.cluster.live()
        if len(live) < 2:
            await trio.sleep(0.2)
            continue
        ha, ga = run.rng.sample(live, 2)
        links: list[_Link] = []
        with trio.move_on_after(10):
            try:
                links.append(host := await _connect(run, pair[0], ha))
                links.append(guest := await _connect(run, pair[1], ga))
                if quick:
                    await host.send(m.Quick(1, rules, pair[0].mode))
                    await trio.sleep(0.1)  # the host waits first, in the shared queue
                    await guest.send(m.Quick(1, rules, pair[1].mode))
                else:
                    await host.send(m.Create(1, rules, pair[0].mode, False))
                    while not isinstance(ok := await host.recv(), m.Ok | m.Error):
                        pass
                    if isinstance(ok, m.Error):
                        raise _Gone
                    await guest.send(m.Join(1, None, ok.data["invite"]))
                while not isinstance(ok := await guest.recv(), m.Ok | m.Error):
                    pass
                if isinstance(ok, m.Ok):
                    pair[0].match = pair[1].match = ok.data["match"]
                    return links
            except _Gone:
                pass
        for link in links:
            await _close(link)
        await trio.sleep(0.3)


async def _play_match(run: _Run, pair: list[Player], links: list[_Link]) -> None:
    """Play the pair's match to its end, then check its record; a match the store aborts is
    a problem (its players would wait for it forever)."""
    match = pair[0].match.hex()
    run.pairs[match] = pair
    async with trio.open_nursery() as nursery:

        async def players() -> None:
            async with trio.open_nursery() as inner:
                for p, link in zip(pair, links, strict=True):
                    inner.start_soon(_player, run, p, link)
            nursery.cancel_scope.cancel()

        nursery.start_soon(players)
        while run.matches.get(match, ("", None))[0] != "aborted":
            await trio.sleep(_POLL)
        nursery.cancel_scope.cancel()
    if run.matches.get(match, ("", None))[0] == "aborted":
        run.aborted_seen.add(match)
        for link in links:
            await _close(link)
        return
    await _check_pair(run, pair)


async def _check_pair(run: _Run, pair: list[Player]) -> None:
    """Fetch and verify the record from any node that answers (:func:`~.crash._check`)."""
    match = pair[0].match.hex()
    for _ in range(30):
        live = run.cluster.live()
        if live:
            try:
                with trio.fail_after(10):
                    run.acknowledged += await _check(pair, run.rng.choice(live), run.problems)
                run.checked.append(match)
                return
            except RuntimeError as e:  # no record
                run.problems.append(f"{match}: {e}")
                return
            except (_Gone, AssertionError, trio.TooSlowError):
                pass
        await trio.sleep(0.5)
    run.problems.append(f"{match}: its record could not be fetched")


# -- watchers -------------------------------------------------------------------------------------


async def _ready(host: str, port: int) -> int | None:
    """The status ``/healthz/ready`` answers, or ``None`` (no answer in half a second)."""
    with trio.move_on_after(0.5):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:
            return None
        try:
            await stream.send_all(b"GET /healthz/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return None
                data += chunk
            return int(data.split(b" ", 2)[1])
        except (OSError, trio.BrokenResourceError, ValueError, IndexError):
            return None
        finally:
            await stream.aclose()
    return None


async def _watch(run: _Run) -> None:
    """Forever: poll every node's health and the store's matches, and notice nodes that exit."""

    async def poll_health() -> None:
        while True:
            codes: dict[str, int | None] = {}

            async def one(node: FaultNode, into: dict[str, int | None]) -> None:
                into[node.name] = await _ready(*node.metrics) if node.alive else None

            async with trio.open_nursery() as nursery:
                for node in run.cluster.nodes:
                    nursery.start_soon(one, node, codes)
            run.health.append((time.time(), codes))
            await trio.sleep(_POLL)

    async def poll_store() -> None:
        while True:
            rows = await run.aquery("SELECT id, status, node FROM matches")
            if rows is not None:
                run.matches = {r[0]: (r[1], r[2]) for r in rows}
            await trio.sleep(_POLL)

    async def poll_exits() -> None:
        while True:
            for node in run.cluster.nodes:
                code = None if run.stopping else node.exited()
                if code is not None:
                    run.exits.append((time.time(), node.name, code))
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll_health)
        nursery.start_soon(poll_store)
        nursery.start_soon(poll_exits)


# -- the checks that read the store and its log ---------------------------------------------------


def _install_audit(run: _Run) -> list[str]:
    """Add the audit trigger to every table of match rows; the tables audited."""
    tables = [
        r[0]
        for r in run.query(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND (column_name = 'match_id' OR (table_name = 'matches' AND column_name = 'id'))"
        )
        if r[0] not in _NOT_AUDITED
    ]
    statements = [*_AUDIT.split(";\n\n")] + [
        f'CREATE TRIGGER fault_audit AFTER INSERT OR UPDATE OR DELETE ON "{t}"'
        " FOR EACH ROW EXECUTE FUNCTION fault_audit()"
        for t in sorted(set(tables))
    ]
    for sql in statements:
        run.query(sql)
    return sorted(set(tables))


@dataclass
class Stray:
    """A row of a match written by a node that did not own it when the write committed."""

    at: float  #: commit time, Unix seconds
    writer: str
    owner: str | None
    table: str
    op: str
    match: str


def stray_rows(rows: Sequence[tuple[Any, ...]]) -> tuple[list[Stray], int]:
    """Replay the audit (``(commit time, app, table, op, match, node, old node, old status, new
    status)`` in commit order): the stray rows, and how many rows no node's name attributes
    (written under another application name: that node's writes cannot be judged)."""
    owner: dict[str, str | None] = {}
    status: dict[str, str | None] = {}
    strays: list[Stray] = []
    unattributed = 0
    for at, app, table, op, match, node, old_node, old_status, new_status in rows:
        writer = app[len(_APP) :] if app.startswith(_APP) and app != _HARNESS_APP else None
        if table == "matches" and op != "DELETE" and (op == "INSERT" or node != old_node):
            # A creation, a join or a takeover: whoever sets the node names the owner.
            owner[match], status[match] = node, new_status
            continue
        if table == "matches" and old_status is not None:
            status.setdefault(match, old_status)
        known = status.get(match)
        if known is not None and known != "open":
            if writer is None:
                unattributed += 1
            elif writer != owner.get(match):
                strays.append(Stray(at, writer, owner.get(match), table, op, match))
        if table == "matches" and op == "UPDATE":
            status[match] = new_status
    return strays, unattributed


def _audit_rows(run: _Run) -> list[tuple[Any, ...]]:
    return run.query(
        "SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8, app, tbl, op,"
        " match_id, node, old_node, old_status, new_status FROM fault_audit"
        " ORDER BY pg_xact_commit_timestamp(xmin), id"
    )


_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC \[(\d+)\] (.*?): ([A-Z]+):  (.*)$"
)


@dataclass
class Attempt:
    """A data-modifying statement in the PostgreSQL log."""

    at: float
    pid: int
    app: str
    sql: str
    params: str = ""
    failed: bool = False


def read_log(path: Path, offset: int = 0) -> list[Attempt]:
    """The data-modifying statements logged (``log_statement=mod``) from ``offset`` on, each
    with its parameters (the ``DETAIL`` line of an extended-protocol statement) and whether an
    ``ERROR`` of its backend followed it."""
    with path.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    attempts: list[Attempt] = []
    last: dict[int, Attempt] = {}
    current: Attempt | None = None  # continuation lines (a statement over several) go here
    for line in text.splitlines():
        hit = _LINE.match(line)
        if hit is None:
            if current is not None and line.startswith("\t"):
                current.sql += "\n" + line.strip()
            continue
        stamp, pid_text, app, level, message = hit.groups()
        pid = int(pid_text)
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
        current = None
        if level == "LOG" and (s := re.match(r"(?:statement|execute [^:]*): (.*)", message)):
            current = Attempt(at, pid, app, s.group(1))
            attempts.append(current)
            last[pid] = current
        elif level == "DETAIL" and message.startswith("parameters:") and pid in last:
            last[pid].params = message
        elif level == "ERROR" and pid in last:
            last[pid].failed = True
            del last[pid]
    return attempts


# -- the faults -----------------------------------------------------------------------------------


@dataclass
class _Fault:
    kind: str
    start: float
    end: float = 0.0
    line: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


async def _restart_exited(run: _Run, fault: _Fault) -> None:
    """Start again every node that exited (what an operator would have to do): the run goes
    on, the fault has failed already."""
    for node in run.cluster.nodes:
        if not node.alive:
            await trio.to_thread.run_sync(node.start)
            fault.facts.setdefault("restarted_by_harness", []).append(node.name)


def _exits_since(run: _Run, since: float) -> list[str]:
    return [f"{name} (status {code})" for t, name, code in run.exits if t >= since]


async def _pause(run: _Run, k: int, pauses: int, lease: float, log: Callable[[str], Any]) -> _Fault:
    """Pause the busiest node past its lease until its matches have moved and play went on
    there, wake it, watch it for two leases."""
    fault = _Fault("pause", time.time())
    before = run.aborted()
    with trio.move_on_after(15):  # a node with running matches, if any
        while not any(s == "playing" and n for s, n in run.matches.values()):
            await trio.sleep(_POLL)
    load = Counter(n for s, n in run.matches.values() if s == "playing" and n)
    candidates = [n for n in run.cluster.nodes if n.alive]
    victim = max(candidates, key=lambda n: (load[n.name], run.rng.random()))
    owned = {mid for mid, (s, n) in run.matches.items() if s == "playing" and n == victim.name}

    def told() -> int:
        return sum(len(p.told) for mid in owned for p in run.pairs.get(mid, []))

    fault.start = time.time()
    victim.pause()
    # At least three leases; then until every match has moved (or ended) and one was played on.
    earliest, deadline = fault.start + 3 * lease, fault.start + 3 * lease + 60
    moved_at: float | None = None
    told_then = 0
    while time.time() < deadline:
        await trio.sleep(_POLL)
        still = [
            mid for mid in owned if run.matches.get(mid, ("", None)) == ("playing", victim.name)
        ]
        if moved_at is None and not still:
            moved_at, told_then = time.time(), told()
        ended = any(run.matches.get(mid, ("", None))[0] != "playing" for mid in owned)
        went_on = moved_at is not None and (told() > told_then or ended or not owned)
        if time.time() >= earliest and went_on:
            break
    taken = {mid for mid in owned if run.matches.get(mid, ("", None))[1] not in (victim.name, None)}
    # A takeover that never came is often a transaction the paused node left open: its row
    # locks hold up whoever needs them (e.g. a sweep that skips locked rows). Say which.
    held = await run.aquery(
        "SELECT pid, now() - xact_start, left(query, 120) FROM pg_stat_activity"
        " WHERE application_name = %s AND state LIKE 'idle in transaction%%'",
        (_APP + victim.name,),
    )
    woke = time.time()
    offset = run.pg.log.stat().st_size
    victim.resume()
    await trio.sleep(2 * lease)
    fault.end = time.time()

    attempts = [
        a
        for a in await trio.to_thread.run_sync(read_log, run.pg.log, offset)
        if a.app == _APP + victim.name
        and a.at >= woke
        and any(t in a.sql + a.params for t in taken)
    ]
    rows = await run.aquery(
        "SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8, app, tbl, op,"
        " match_id, node, old_node, old_status, new_status FROM fault_audit"
        " ORDER BY pg_xact_commit_timestamp(xmin), id"
    )
    strays, _ = stray_rows(rows or [])
    mine = [s for s in strays if s.writer == victim.name and s.at >= woke and s.match in taken]
    exits = _exits_since(run, fault.start)
    fault.facts = {
        "node": victim.name,
        "paused_s": round(woke - fault.start, 2),
        "matches_owned": len(owned),
        "taken_over": len(taken),
        "moved_after_s": round(moved_at - fault.start, 2) if moved_at else None,
        "open_transactions": len(held or []),
        "attempts_logged": len(attempts),
        "attempts_failed": sum(a.failed for a in attempts),
        "stray_rows": len(mine),
        "aborted": len(run.aborted() - before),
        "exited": exits,
    }
    problems = []
    if owned and moved_at is None:
        open_tx = "; ".join(f"pid {r[0]}, open {r[1]}: {r[2]}" for r in held or [])
        problems.append(
            f"the matches of {victim.name} were not taken over in 60 s (its transactions"
            f" left open: {open_tx or 'none'})"
        )
    if mine:
        kinds = Counter(f"{s.op} {s.table}" for s in mine)
        problems.append(
            f"{victim.name} wrote {len(mine)} rows of matches it no longer owned after waking"
            f" ({', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))})"
        )
    if fault.facts["aborted"]:
        problems.append(f"{fault.facts['aborted']} matches aborted")
    problems += [f"node {e} exited" for e in exits]
    run.problems += [f"pause {k}: {p}" for p in problems]
    await _restart_exited(run, fault)
    moved = "not moved" if moved_at is None else f"moved in {moved_at - fault.start:.1f} s"
    fault.line = (
        f"pause {k}/{pauses}: node {victim.name} stopped {woke - fault.start:.1f} s with"
        f" {len(owned)} matches ({len(taken)} taken over, {moved}); woken: {len(attempts)}"
        f" statements on them logged ({fault.facts['attempts_failed']} failed),"
        f" {len(mine)} stray rows; {fault.facts['aborted']} matches aborted;"
        f" exited: {', '.join(exits) or 'none'}"
    )
    log(fault.line)
    return fault


def _takeovers(run: _Run) -> int:
    """How many times a node has found its lease taken so far (its log says so each time)."""
    return sum(
        (node.folder / "server.log").read_text(errors="replace").count("its lease is gone")
        for node in run.cluster.nodes
        if (node.folder / "server.log").exists()
    )


async def _outage(
    run: _Run,
    k: int,
    seconds: float,
    *,
    slot: int,
    grace: float,
    recover: float,
    play: trio.Nursery,
    log: Callable[[str], Any],
    freeze: bool = False,
) -> _Fault:
    """Stop the store for ``seconds`` (``freeze``: SIGSTOP it), start it again; judge the nodes'
    health during it and how soon the cluster serves again (a probe match's first shot)."""
    kind = "freeze" if freeze else "outage"
    fault = _Fault(kind, time.time())
    before = run.aborted()
    taken = _takeovers(run)
    if freeze:
        await trio.to_thread.run_sync(run.pg.freeze)
    else:
        await trio.to_thread.run_sync(run.pg.stop, "fast")
    stopped = time.time()
    await trio.sleep(seconds)
    await trio.to_thread.run_sync(run.pg.thaw if freeze else run.pg.start)
    back = time.time()

    first_shot = trio.Event()
    shot_at: list[float] = []

    async def probe() -> None:
        # Two fresh players on two different nodes, a quick match: served again once its
        # first shot is answered. Then it is played to its end and checked as any other.
        run.active += 1
        try:
            pair = _pair("custody", run.rng, (900_000 if not freeze else 950_000) + k)
            links = await _open(run, pair, slot, quick=True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(shot, pair)
                await _play_match(run, pair, links)
                nursery.cancel_scope.cancel()
        finally:
            run.active -= 1

    async def shot(pair: list[Player]) -> None:
        while not any(p.told for p in pair):
            await trio.sleep(0.02)
        shot_at.append(time.time())
        first_shot.set()

    play.start_soon(probe)

    def all_ready() -> float | None:
        for t, codes in run.health:
            if t >= back and codes and all(c == 200 for c in codes.values()):
                return t
        return None

    # Both measures are waited for past the bar, so that a slow return is measured, not cut.
    with trio.move_on_after(max(recover, 30)):
        while not (first_shot.is_set() and all_ready() is not None):
            await trio.sleep(_POLL)
    ready_at = all_ready()
    fault.end = time.time()

    during = [(t, c) for t, c in run.health if stopped + grace <= t < back]
    answered: dict[str, Counter[str]] = {n.name: Counter() for n in run.cluster.nodes}
    for _, codes in during:
        for name, code in codes.items():
            answered[name][str(code) if code is not None else "none"] += 1
    exits = _exits_since(run, fault.start)
    aborted = len(run.aborted() - before)
    moved = _takeovers(run) - taken
    shot_s = shot_at[0] - back if shot_at else None
    ready_s = ready_at - back if ready_at is not None else None
    fault.facts = {
        "seconds": seconds,
        "ready_during": {n: dict(c) for n, c in answered.items()},
        "first_shot_after_s": round(shot_s, 2) if shot_s is not None else None,
        "all_ready_after_s": round(ready_s, 2) if ready_s is not None else None,
        "aborted": aborted,
        "taken_over": moved,
        "exited": exits,
    }
    problems = []
    if moved:
        problems.append(f"{moved} takeovers of live nodes")
    for name, counts in answered.items():
        wrong = sum(n for code, n in counts.items() if code != "503")
        if wrong:
            problems.append(
                f"{name}'s /healthz/ready did not answer 503 to {wrong} of"
                f" {sum(counts.values())} polls during the outage ({dict(counts)})"
            )
    if shot_s is None or shot_s > recover:
        problems.append(
            f"no new match had its first shot within {recover:g} s of the store's return"
        )
    if ready_s is None or ready_s > recover:
        problems.append(f"not every node was ready within {recover:g} s of the store's return")
    if aborted:
        problems.append(f"{aborted} matches aborted")
    problems += [f"node {e} exited" for e in exits]
    run.problems += [f"{kind} {k}: {p}" for p in problems]
    await _restart_exited(run, fault)

    def fmt(v: float | None) -> str:
        return "never" if v is None else f"{v:.1f} s"

    polls = ", ".join(
        f"{name} {'/'.join(f'{n}x{code}' for code, n in sorted(c.items())) or '-'}"
        for name, c in answered.items()
    )
    fault.line = (
        f"{kind} {k}: store {'frozen' if freeze else 'stopped'} {back - stopped:.1f} s; ready"
        f" during it: {polls}; after its return: first shot {fmt(shot_s)}, all ready"
        f" {fmt(ready_s)}; {aborted} matches aborted; {moved} takeovers; exited:"
        f" {', '.join(exits) or 'none'}"
    )
    log(fault.line)
    return fault


# -- the run --------------------------------------------------------------------------------------


async def faults_run(
    *,
    pauses: int = 10,
    outages: Sequence[float] = (5.0, 6.0),
    freezes: Sequence[float] = (),
    pairs: int = 8,
    nodes: int = 3,
    lease: float = 2.0,
    settle: float = 3.0,
    silence: float = 2.0,
    ready_grace: float = 1.0,
    recover: float = 5.0,
    finish: float = 120.0,
    seed: int = 0,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Run the faults (``pauses`` pauses, then a store outage of each length in ``outages``, then
    a store freeze of each length in ``freezes``) under ``pairs`` matches on ``nodes`` nodes; the
    summary (``ok``: every check held)."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="seabattle-faults-"))
    started = time.monotonic()
    pg = Postgres(settings=_PG_SETTINGS)
    await trio.to_thread.run_sync(pg.start)
    ok = False
    try:
        await trio.to_thread.run_sync(pg.create_database, "seabattle")
        run = _Run(_Cluster(folder, pg, nodes, lease), pg, rng, silence)
        summary = await _run_all(
            run, pauses, outages, freezes, pairs, lease, settle, ready_grace, recover, finish, log
        )
        summary.update(
            seconds=round(time.monotonic() - started, 1), folder=str(folder), pg_log=str(pg.log)
        )
        ok = summary["ok"]
        return summary
    finally:
        await trio.to_thread.run_sync(lambda: pg.close(keep=not ok))
        if ok:
            shutil.rmtree(folder, ignore_errors=True)


async def _run_all(
    run: _Run,
    pauses: int,
    outages: Sequence[float],
    freezes: Sequence[float],
    pairs: int,
    lease: float,
    settle: float,
    ready_grace: float,
    recover: float,
    finish: float,
    log: Callable[[str], Any],
) -> dict[str, Any]:
    nodes = run.cluster.nodes
    await trio.to_thread.run_sync(nodes[0].start)  # it creates the schema the audit needs
    audited = await trio.to_thread.run_sync(_install_audit, run)
    for node in nodes[1:]:
        await trio.to_thread.run_sync(node.start)
    faults: list[_Fault] = []
    done = trio.Event()
    try:
        async with trio.open_nursery() as outer:
            outer.start_soon(_watch, run)

            async def pair_task(slot: int, mode: str) -> None:
                # Once the faults are over, the match running is played to its end, no other.
                run.active += 1
                try:
                    n = 0
                    while not done.is_set():
                        pair = _pair(mode, run.rng, slot * 1000 + n)
                        n += 1
                        links = await _open(run, pair, slot, quick=n % 2 == 1)
                        await _play_match(run, pair, links)
                finally:
                    run.active -= 1

            async with trio.open_nursery() as play:
                for slot in range(pairs):
                    play.start_soon(pair_task, slot, ("blind", "custody")[slot % 2])
                await trio.sleep(settle)
                for k in range(pauses):
                    faults.append(await _pause(run, k + 1, pauses, lease, log))
                    await trio.sleep(settle)
                stores = [(k, s, False) for k, s in enumerate(outages)]
                stores += [(k, s, True) for k, s in enumerate(freezes)]
                for i, (k, seconds, freeze) in enumerate(stores):
                    slot = 500 + i  # its own rules: the probe pairs with no one else
                    faults.append(
                        await _outage(
                            run,
                            k + 1,
                            seconds,
                            slot=slot,
                            grace=ready_grace,
                            recover=recover,
                            play=play,
                            log=log,
                            freeze=freeze,
                        )
                    )
                    await trio.sleep(settle)
                done.set()
                # Past ``finish`` seconds the matches still running are given up on: they
                # would have hung.
                with trio.move_on_after(finish):
                    while run.active:
                        await trio.sleep(_POLL)
                play.cancel_scope.cancel()
            outer.cancel_scope.cancel()
    finally:
        run.stopping = True
        for node in nodes:
            await trio.to_thread.run_sync(node.stop)
    unfinished = [
        mid
        for mid, ps in run.pairs.items()
        if not all(p.over for p in ps) and mid not in run.aborted_seen
    ]
    return await trio.to_thread.run_sync(
        lambda: _judge(run, faults, unfinished, audited, pauses, outages, freezes)
    )


def _judge(
    run: _Run,
    faults: list[_Fault],
    unfinished: list[str],
    audited: list[str],
    pauses: int,
    outages: Sequence[float],
    freezes: Sequence[float],
) -> dict[str, Any]:
    """The end of the run, read from the store: every match's status, every stray row."""
    problems = list(run.problems)
    statuses: Counter[str] = Counter()
    for mid, status, result in run.query(
        "SELECT id, status, result FROM matches WHERE seat1 IS NOT NULL"
    ):
        statuses[status] += 1
        if status == "aborted":
            problems.append(f"{mid}: aborted ({result})")
        elif status == "playing" and mid in run.pairs:
            problems.append(f"{mid}: still playing at the end")
    for mid in unfinished:
        problems.append(f"{mid}: not over when the run ended")
    strays, unattributed = stray_rows(_audit_rows(run))
    for s in strays[:20]:
        problems.append(
            f"{s.match}: {s.op} {s.table} by {s.writer} while {s.owner} owned it"
            f" ({datetime.fromtimestamp(s.at, UTC).strftime('%H:%M:%S.%f')[:-3]} UTC)"
        )
    if len(strays) > 20:
        problems.append(f"... {len(strays) - 20} more stray rows")
    problems += [f"node {name} exited by itself (status {code})" for _, name, code in run.exits]
    problems = list(dict.fromkeys(problems))  # one fault may be seen by two checks
    return {
        "nodes": len(run.cluster.nodes),
        "pauses": pauses,
        "outages": list(outages),
        "freezes": list(freezes),
        "faults": [{"kind": f.kind, **f.facts} for f in faults],
        "matches": len(run.checked),
        "statuses": dict(statuses),
        "verdicts_acknowledged": run.acknowledged,
        "stray_rows": len(strays),
        "unattributed_rows": unattributed,
        "audited_tables": audited,
        "node_exits": len(run.exits),
        "ok": not problems,
        "problems": problems,
    }


@click.command()
@click.option("--pauses", type=int, default=10, show_default=True, help="Pauses of a node.")
@click.option(
    "--outages",
    default="5,3L",
    show_default=True,
    help="Store outages, seconds each, comma-separated; NL is N leases.",
)
@click.option(
    "--freezes",
    default="5,3L",
    show_default=True,
    help="Store freezes (SIGSTOP), seconds each, as --outages.",
)
@click.option("--pairs", type=int, default=8, show_default=True, help="Matches played at once.")
@click.option("--nodes", type=int, default=3, show_default=True)
@click.option("--lease", type=float, default=2.0, show_default=True, help="Nodes' lease, seconds.")
@click.option(
    "--recover",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds after the store's return within which the cluster must serve.",
)
@click.option(
    "--ready-grace",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds into an outage after which every /healthz/ready must answer 503.",
)
@click.option("--seed", type=int, default=0, show_default=True)
def main(
    pauses: int,
    outages: str,
    freezes: str,
    pairs: int,
    nodes: int,
    lease: float,
    recover: float,
    ready_grace: float,
    seed: int,
) -> None:
    """Pause cluster nodes, stop and freeze their store under running matches; check nothing
    is lost, no woken node writes what it no longer owns, and the cluster comes back by itself."""

    def lengths(spec: str) -> list[float]:
        return [
            float(v[:-1]) * lease if v.endswith("L") else float(v)
            for v in (x.strip() for x in spec.split(","))
            if v
        ]

    summary = trio.run(
        lambda: faults_run(
            pauses=pauses,
            outages=lengths(outages),
            freezes=lengths(freezes),
            pairs=pairs,
            nodes=nodes,
            lease=lease,
            recover=recover,
            ready_grace=ready_grace,
            seed=seed,
        )
    )
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
