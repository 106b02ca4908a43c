"""The server as a whole: listeners, the match nursery, graceful shutdown, and the CLI entry.

``serve`` is started with ``nursery.start(serve, host, port, ...)`` and reports its bound address
(bind port 0 in tests). Shutdown (hypercorn's order): stop accepting; refuse new lobby requests;
tell idle connections ``bye{reason: "shutdown"}``; give running matches ``shutdown_grace`` seconds
to finish; then tell everyone else and cancel. It happens when ``shutdown`` is set, and, in
:func:`main`, on SIGINT or SIGTERM (a second signal cancels at once). :func:`main` installs its
signal handler before it prints the address, so a signal sent as soon as the address is read
shuts down gracefully (exit 0). If ``serve`` is cancelled from outside, the goodbyes are still
sent (shielded, briefly) before it unwinds. Past ``max_clients`` connections, a new one is told
``bye{reason: "busy"}`` and closed.

Operations. ``serve(metrics=(host, port))`` also answers ``GET /metrics`` there (Prometheus text;
:mod:`.metrics`), ``/healthz`` and the live spectator pages ``/watch/MATCH`` (:mod:`.watch`);
the counters are kept whether or not anyone scrapes them, in the :class:`~.metrics.Metrics`
passed as ``stats`` (or a private one), and :func:`main` prints their totals on shutdown under
``--json``. :func:`main` logs as text or as JSON lines (:mod:`.logs`).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import logging
import os
import signal
import ssl
import sys
from functools import partial
from typing import Any

import trio
from seabattle.common.keys import load_or_create_key
from seabattle.common.latency import CpuLatencyError, cpu_latency

from .cluster import Cluster, ClusterConfig
from .config import Limits
from .journal import Clock, DirectWriter, Journal
from .journal_file import SUFFIX, FileLog, LogBusy
from .lobby import Lobby
from .logs import configure_logging
from .metrics import Metrics, serve_metrics
from .session import Client, Heartbeat, Identity
from .store import Store, StoreError, _is_postgres
from .watch import WatchSite
from .workers import shared_listener, supervise

__all__ = ["main", "serve"]

_log = logging.getLogger("seabattle.server")


def _peer_name(stream: trio.abc.Stream) -> str:
    s: Any = stream
    if isinstance(s, trio.SSLStream):
        s = s.transport_stream
    try:
        host, port = s.socket.getpeername()[:2]
        return f"{host}:{port}"
    except Exception:
        return "?"


def _journal(store: Store, limits: Limits, path: str, joins: bool) -> Journal:
    """The journal, and how its rows leave the event loop: a file of this server's own beside a
    SQLite database (journal_file), its own SQLite connection when the file is not this server's
    alone (nodes of a cluster take up each other's matches from the database; another server
    holds the file), the store's worker thread otherwise (PostgreSQL, memory). A node of a
    cluster still moves what a server alone on the database left in the file."""
    direct: DirectWriter | FileLog | None = None
    leftover = None
    if path != ":memory:" and "://" not in path:
        try:
            leftover = FileLog(path + SUFFIX)
        except LogBusy as err:
            if not joins:  # a node of a cluster writes the database anyway
                _log.warning("journal: %s; writing the database instead", err)
        if leftover is not None and not joins:
            direct, leftover = leftover, None
        else:
            direct = DirectWriter(path)
    return Journal(
        store,
        window=limits.journal_window,
        direct=direct,
        compact_every=limits.journal_seal_rows,
        keep_bytes=limits.journal_keep_mb << 20,
        leftover=leftover,
    )


async def serve(
    host: str,
    port: int,
    *,
    db_path: str | os.PathLike[str],
    key_path: str | os.PathLike[str],
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    guests: bool = True,
    tls: ssl.SSLContext | None = None,
    limits: Limits | None = None,
    shutdown: trio.Event | None = None,
    metrics: tuple[str, int] | None = None,
    stats: Metrics | None = None,
    node: str = "main",
    cluster: bool | None = None,
    advertise: str | None = None,
    cluster_config: ClusterConfig | None = None,
    reuse_port: bool = False,
    own: list[tuple[str, int]] | None = None,
) -> None:
    """Run the seabattle server on ``host:port`` until ``shutdown`` is set or it is cancelled.

    Reports ``(host, port)`` of the first listener through ``task_status``. ``db_path`` is the
    database: a SQLite file (``":memory:"`` for tests) or a ``postgresql://`` URL; ``key_path``
    the server's Ed25519 key, created on first run. ``guests`` admits any key; otherwise only
    keys the store already knows.
    ``metrics`` is where to answer ``GET /metrics`` (port 0: any; the bound address is in
    ``stats.address`` before the server reports its own); ``stats`` the counters to keep.
    ``node`` names this server among those sharing one database: on start it takes up the
    running matches it refereed (and those no node claimed), never another node's.
    ``cluster``: join the other nodes on the store (:mod:`.cluster`: pairing across nodes,
    redirects, failover); ``None`` joins on PostgreSQL only. ``advertise`` is the ``host:port``
    other nodes send players to (default: the bound address); ``cluster_config`` overrides the
    cluster's timings (tests).
    ``reuse_port``: one worker of several on this machine (:mod:`.workers`): ``host:port`` is
    bound with ``SO_REUSEPORT``, shared with the other workers, and this worker also listens on
    a port of its own, the one it advertises to the other nodes (a redirect must reach this
    worker, not whichever the kernel picks), appended to ``own`` if given; it joins the cluster.
    """
    limits = limits or Limits()
    stats = stats if stats is not None else Metrics()
    key = load_or_create_key(key_path)
    public = key.public_key().public_bytes_raw()
    clients: set[Client] = set()
    async with (
        Store.open(db_path, on_call=stats.store_call, app=f"seabattle-{node}") as store,
        trio.open_nursery() as outer,
        trio.open_nursery() as matches,
    ):
        timers = Heartbeat()
        journal = None
        path = os.fspath(db_path)
        joins = reuse_port or (cluster if cluster is not None else _is_postgres(path))
        if limits.journal:
            journal = _journal(store, limits, path, joins)
            await outer.start(journal.run)
        lobby = Lobby(store, key, matches, limits, stats, timers=timers, journal=journal, node=node)
        # Bound before the node registers (the address is in its tickets), accepting only once
        # its matches are taken up: the kernel holds early connections in the backlog meanwhile.
        listeners: list[trio.abc.Listener[Any]] = (
            [await shared_listener(host, port)] if reuse_port else []
        )
        # A worker's own port: the address it advertises.
        listeners += await trio.open_tcp_listeners(0 if reuse_port else port, host=host)
        if tls is not None:
            listeners = [trio.SSLListener(ln, tls, https_compatible=False) for ln in listeners]
        addr = _first_socket(listeners).getsockname()[:2]
        mine = _first_socket(listeners[1:]).getsockname()[:2] if reuse_port else addr
        if own is not None:
            own.append((mine[0], mine[1]))
        if joins:
            config = cluster_config or ClusterConfig(node)
            if config.node != node:
                raise ValueError(f"cluster_config is node {config.node!r}'s, not {node!r}'s")
            if not config.addr:
                if reuse_port:
                    # Only the host of --advertise: its port is the shared one.
                    where = advertise.rpartition(":")[0].strip("[]") if advertise else mine[0]
                    config = dataclasses.replace(config, addr=_addr((where, mine[1])))
                else:
                    config = dataclasses.replace(config, addr=advertise or _addr(addr))
            clock = lobby.clock or Clock()
            lobby.cluster = Cluster(store, key, config, lambda: clock.wall(trio.current_time()))
            await lobby.cluster.register()
            if journal is not None:
                journal.gate = lobby.cluster.confirm
        await lobby.recover()
        if lobby.cluster is not None:
            await outer.start(lobby.cluster.run, lobby)
        ident = Identity(
            key, public, store, lobby, limits, guests, {}, {}, stats, timers, nursery=outer
        )
        stats.gauges = lambda: lobby.gauges(len(clients))
        outer.start_soon(ident.heartbeat.run)

        async def handle(stream: trio.abc.Stream) -> None:
            """Serve one accepted connection."""
            client = Client(ident, stream, _peer_name(stream))
            stats.connections_total += 1
            if len(clients) >= limits.max_clients:
                stats.connections_busy += 1
                # Each connection costs a task and buffers: past the bound, say why and go.
                with trio.move_on_after(1):
                    await client.goodbye("busy")
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(stream)
                return
            clients.add(client)
            try:
                await client.run()
            finally:
                clients.discard(client)

        accept_scope = trio.CancelScope()

        async def accept() -> None:
            """Accept connections until shutdown cancels ``accept_scope``."""
            with accept_scope:
                await trio.serve_listeners(handle, listeners, handler_nursery=outer)

        matches.start_soon(accept)
        if metrics is not None:
            # In the outer nursery: scrapes go on answering while matches drain on shutdown.
            mhost, mport = await outer.start(
                partial(
                    serve_metrics,
                    stats,
                    metrics[0],
                    metrics[1],
                    ready=partial(_not_ready, lobby),
                    routes=WatchSite(lobby),
                )
            )
            _log.info("metrics on http://%s:%d/metrics", mhost, mport)
        _log.info("listening on %s:%d (guests %s)", addr[0], addr[1], guests)
        task_status.started((addr[0], addr[1]))
        thresholds = _tune_gc()
        try:
            # Only the caller stops a server: a store outage or a lease taken is weathered
            # (server/cluster.py), never a reason to exit.
            await (shutdown if shutdown is not None else trio.Event()).wait()
            await _graceful(lobby, clients, limits, accept_scope)
            if lobby.cluster is not None:
                await lobby.cluster.release()
        finally:
            matches.cancel_scope.cancel()
            outer.cancel_scope.cancel()
            _restore_gc(thresholds)


def _not_ready(lobby: Lobby) -> str | None:
    """Why the server takes no players now (``/healthz/ready``), or ``None``."""
    if lobby.closing:
        return "shutting down"
    if lobby.cluster is not None and lobby.cluster.problem is not None:
        return lobby.cluster.problem
    journal = lobby.journal
    waits = None if journal is None else journal.waiting(trio.current_time())
    if waits is not None:
        return f"the store cannot take this server's writes ({waits})"
    return None


def _addr(addr: tuple[str, int]) -> str:
    host = addr[0]
    return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"


#: Cyclic-GC thresholds while serving: gen-0 every 100,000 net allocations (default 700), a
#: gen-1 pass every 50 of those, gen-2 every 100 gen-1 passes (CPython also skips a full pass
#: until the long-lived heap has grown by a quarter).
GC_THRESHOLDS = (100_000, 50, 100)


def _tune_gc() -> tuple[int, int, int]:
    """Freeze the startup heap out of the cyclic GC and collect less often; returns the old
    thresholds for :func:`_restore_gc`.

    Why (BENCHMARKS.md, "The garbage collector dominates at scale"): the server's heap grows with
    its matches, and every time it grows by a quarter CPython runs a full collection that walks
    every tracked object and stops every match - 0.3-2 s per pause at 1,000+ matches, 37 % of a
    2,000-match run. The server's state is acyclic in the main (its objects die by reference
    counting), so fewer, later collections lose little memory. ``gc.freeze()`` moves everything
    alive at startup (modules, rules, the lobby) to the permanent generation, never scanned again.
    Called by :func:`serve` once it listens, never at import: a library user's process is not
    retuned by importing the server.
    """
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    return (old[0], old[1], old[2])


def _restore_gc(thresholds: tuple[int, int, int]) -> None:
    """Undo :func:`_tune_gc` when the server stops (tests run many servers in one process)."""
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def _first_socket(listeners: list[trio.abc.Listener[Any]]) -> trio.socket.SocketType:
    ln: Any = listeners[0]
    if isinstance(ln, trio.SSLListener):
        ln = ln.transport_listener
    sock: trio.socket.SocketType = ln.socket
    return sock


async def _graceful(
    lobby: Lobby, clients: set[Client], limits: Limits, accept_scope: trio.CancelScope
) -> None:
    _log.info("shutting down: %d running matches", len(lobby.running))
    accept_scope.cancel()
    lobby.closing = True
    if lobby.journal is not None:
        # Journaled matches go on when the server comes back: nothing to wait for.
        for c in list(clients):
            c.close("shutdown")
        with trio.move_on_after(limits.flush_timeout):
            while clients:
                await trio.sleep(0.01)
        return
    busy = {s.peer for ref in lobby.running.values() for s in ref.seats if s.peer is not None}
    for c in list(clients):
        if c not in busy:
            c.close("shutdown")
    with trio.move_on_after(limits.shutdown_grace):
        for ref in list(lobby.running.values()):
            await ref.done.wait()
    for c in list(clients):
        c.close("shutdown")
    with trio.move_on_after(limits.flush_timeout):
        while clients:
            await trio.sleep(0.01)


def main(
    host: str,
    port: int,
    db: str,
    key: str,
    guests: bool = True,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    json_status: bool = False,
    log_format: str = "text",
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    node: str = "main",
    cluster: bool | None = None,
    advertise: str | None = None,
    lease: float = 10.0,
    limits: Limits | None = None,
    workers: int = 1,
    reuse_port: bool = False,
    cpu_latency_us: int | None = None,
) -> None:
    """Run the server until SIGINT/SIGTERM (``seabattle serve``); prints where it listens.

    ``json_status``: print one JSON object per line on stdout, ``{"event": "listening", ...}``
    once serving and ``{"event": "stopped", ...}`` with the totals on the way out. ``log_format``
    is ``text`` or ``json`` (stderr). ``metrics_port`` (0: any free port) serves ``GET /metrics``
    on ``metrics_host``, loopback unless asked otherwise. ``cluster``, ``advertise`` and
    ``lease`` place the node among the others on its database (:func:`serve`, :mod:`.cluster`).
    ``limits``: the server's :class:`~.config.Limits` (``seabattle serve`` reads them with
    :mod:`.settings`). A file or folder it cannot use stops it with one line on stderr.
    ``workers`` > 1 runs that many server processes on this port (:mod:`.workers`), each of
    them this function with ``reuse_port``. ``cpu_latency_us``: hold idle CPUs to this wake-up
    latency while serving (:mod:`seabattle.common.latency`; ``0``: idle CPUs poll), held once,
    by the supervisor when there are workers.
    """
    configure_logging(log_format)
    try:
        with cpu_latency(cpu_latency_us):
            if workers > 1:
                kwargs = dict(locals())
                del kwargs["workers"], kwargs["reuse_port"]
                kwargs["cpu_latency_us"] = None  # held here, for every worker
                supervise(workers, kwargs)
                return
            _main(**{k: v for k, v in locals().items() if k not in _NOT_SERVING})
    except CpuLatencyError as e:
        raise SystemExit(f"seabattle server: {e.strerror}") from None


_NOT_SERVING = frozenset({"workers", "cpu_latency_us", "log_format"})


def _main(
    host: str,
    port: int,
    db: str,
    key: str,
    guests: bool,
    tls_cert: str | None,
    tls_key: str | None,
    json_status: bool,
    metrics_port: int | None,
    metrics_host: str,
    node: str,
    cluster: bool | None,
    advertise: str | None,
    lease: float,
    limits: Limits | None,
    reuse_port: bool,
) -> None:
    """One server process (:func:`main` without workers)."""
    if advertise is not None:
        _host, sep, aport = advertise.rpartition(":")
        if not sep or not _host or not aport.isdigit() or not 1 <= int(aport) <= 65535:
            raise SystemExit(
                f"seabattle server: --advertise {advertise!r} is not HOST:PORT (a port 1..65535)"
            )
    tls: ssl.SSLContext | None = None
    if tls_cert or tls_key:
        if not (tls_cert and tls_key):
            raise SystemExit("TLS needs both a certificate and a key")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            tls.load_cert_chain(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as e:
            # ssl's errors name neither file: say which two were given.
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            raise SystemExit(
                f"seabattle server: cannot load the TLS certificate {tls_cert} and key {tls_key}:"
                f" {why}"
            ) from None
    stats = Metrics()
    metrics = (metrics_host, metrics_port) if metrics_port is not None else None
    started = False
    own: list[tuple[str, int]] = []

    async def run() -> None:
        """Serve until a signal asks for the graceful shutdown (a second one: at once)."""
        nonlocal started
        shutdown = trio.Event()
        # The handler goes in before anything is printed: whoever reads the address may signal
        # at once, and that must be a graceful shutdown, not a KeyboardInterrupt.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for signum in signals:
                        if shutdown.is_set():
                            _log.warning("second signal: stopping now")
                            nursery.cancel_scope.cancel()
                            return
                        _log.info("%s: shutting down", signal.Signals(signum).name)
                        shutdown.set()

                async def run_server(task_status: trio.TaskStatus[tuple[str, int]]) -> None:
                    await serve(
                        host,
                        port,
                        db_path=db,
                        key_path=key,
                        guests=guests,
                        tls=tls,
                        limits=limits,
                        shutdown=shutdown,
                        metrics=metrics,
                        stats=stats,
                        node=node,
                        cluster=cluster,
                        advertise=advertise,
                        cluster_config=ClusterConfig(
                            node, "" if reuse_port else advertise or "", lease=lease
                        ),
                        reuse_port=reuse_port,
                        own=own,
                        task_status=task_status,
                    )
                    nursery.cancel_scope.cancel()  # the server is done: stop watching

                nursery.start_soon(watch)
                addr = await nursery.start(run_server)
                started = True
                if json_status:
                    _status(
                        {
                            **_listening(addr, db, key, tls is not None, stats.address),
                            "node": node,
                        }
                        | ({"listening_own": _addr(own[0])} if own else {})
                    )
                else:
                    print(f"seabattle server listening on {addr[0]}:{addr[1]}")
                    if stats.address is not None:
                        print(f"metrics on http://{stats.address[0]}:{stats.address[1]}/metrics")
                sys.stdout.flush()

    try:
        trio.run(run)
    except (OSError, StoreError, ExceptionGroup) as e:
        # Most often a port is taken, or the database cannot be opened (a missing folder, a
        # wrong URL, a newer schema): one line, not a traceback. It comes out of the nurseries
        # wrapped in exception groups, which are unwrapped when nothing else is in them. A
        # store error once serving is a bug, and keeps its traceback.
        err = _only_os_error(e)
        if err is None or (isinstance(err, StoreError) and started):
            raise
        raise SystemExit(f"seabattle server: {err}") from None
    if json_status and started:
        _status({"event": "stopped", **stats.totals()})


def _only_os_error(e: BaseException) -> OSError | StoreError | None:
    """The one ``OSError`` or `StoreError` that ``e`` is or holds (through exception groups),
    or ``None``."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e if isinstance(e, OSError | StoreError) else None


def _listening(
    addr: tuple[str, int], db: str, key: str, tls: bool, metrics: tuple[str, int] | None
) -> dict[str, Any]:
    """The ``--json`` start line. ``listening`` (``host:port``) is kept for older readers."""
    public = load_or_create_key(key).public_key().public_bytes_raw()
    return {
        "event": "listening",
        "host": addr[0],
        "port": addr[1],
        "listening": f"{addr[0]}:{addr[1]}",
        "tls": tls,
        "metrics_host": metrics[0] if metrics else None,
        "metrics_port": metrics[1] if metrics else None,
        "db": _redact(db),
        # The key as clients see it (welcome.server, record.referee), and a digest to compare.
        "server_key": public.hex(),
        "key_fingerprint": "sha256:" + hashlib.sha256(public).hexdigest(),
    }


def _redact(db: str) -> str:
    """``db`` without a password, should it be a URL with one (``postgresql://u:pw@h/d``)."""
    scheme, sep, rest = db.partition("://")
    userinfo, at, hostpart = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return db
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{hostpart}"


def _status(event: dict[str, Any]) -> None:
    print(json.dumps(event, separators=(",", ":")), flush=True)
