"""``seabattle serve --workers N``: N server processes on one machine, one port, one store.

Theory of operation. CPython runs one core per process, so a machine's other cores serve
matches only from other processes. :func:`supervise` (the process ``seabattle serve`` started)
checks what it can once (the database opens and migrates, the key exists, the port binds), then
starts N workers (``python -m seabattle.server.workers``, their settings as JSON on stdin) and
waits for each to say it listens. Every worker binds the same ``host:port`` with
``SO_REUSEPORT`` (:func:`shared_listener`), so the kernel spreads new connections over them;
the supervisor holds that port too (bound, never listening: it takes no connections), so that
port 0 names one port for all, and a worker started again finds it free.

The workers share the store as the nodes of :mod:`.cluster` do: each is a node of its own
(``NODE.1`` ... ``NODE.N``), with its lease, its journal and its running matches, pairing
players with the other workers' through the shared queue and sending a player to the worker its
match runs on with ``redirect``. For that each worker also listens on a port of its own, the
address it advertises (with ``--advertise``, that host and the worker's own port). A worker that
dies is started again after a second, and its matches are taken up again (by it, or by another
worker once its lease has run out). On SIGINT or SIGTERM the supervisor asks every worker for
the graceful stop once (a second signal: at once), waits for them all, and exits. A worker
whose supervisor is gone without a word (SIGKILL) stops gracefully by itself.

Both stores work. On PostgreSQL this is the multi-node design on one machine. On SQLite the
workers share one file, which SQLite's WAL mode allows for processes of one machine: each
worker's journal writes from its event loop and, when another worker holds the write lock,
from its thread instead (:class:`~.journal.DirectWriter` never waits), so the write lock is what
they contend for; BENCHMARKS.md has what that costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import trio
from seabattle.common.keys import load_or_create_key

from .config import Limits
from .store import Store, StoreError

__all__ = ["shared_listener", "supervise", "worker_main"]

_log = logging.getLogger("seabattle.server.workers")

#: Seconds before a worker that ended unasked is started again.
RESTART_DELAY = 1.0
#: Seconds between a worker's looks at whether its supervisor is still there.
PARENT_POLL = 0.5
#: Seconds a worker asked to stop may take past its shutdown grace and last flush before it is
#: killed: a worker that hangs, or that was stopped (SIGSTOP) and never continued, must not
#: hold its supervisor's stop for ever.
STOP_SLACK = 5.0


def _reuse_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (not listening yet)."""
    family, kind, proto, _, where = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(where)
    except BaseException:
        sock.close()
        raise
    return sock


async def shared_listener(host: str, port: int) -> trio.SocketListener:
    """A listener on ``host:port`` that other processes bind too (``SO_REUSEPORT``): the kernel
    hands each new connection to one of them."""
    raw = _reuse_socket(host, port)
    raw.listen(socket.SOMAXCONN)
    return trio.SocketListener(trio.socket.from_stdlib_socket(raw))


def _node_names(node: str, workers: int) -> list[str]:
    return [f"{node}.{i}" for i in range(1, workers + 1)]


def _check(db: str, key: str) -> None:
    """What every worker would find wrong, found once, before any starts: one line each."""

    async def open_store() -> None:
        async with Store.open(db):
            pass  # opened and migrated: the workers find the schema done

    try:
        trio.run(open_store)
    except StoreError as e:
        raise SystemExit(f"seabattle server: {e}") from None
    try:
        # Created here, once: N workers creating it at the same moment would each make their own.
        load_or_create_key(key)
    except OSError as e:
        raise SystemExit(f"seabattle server: cannot use the key file {key}: {e}") from None


def supervise(workers: int, kwargs: dict[str, Any]) -> None:
    """Run ``workers`` server processes sharing ``kwargs["host"]:kwargs["port"]`` and the store,
    until SIGINT or SIGTERM; ``kwargs`` are :func:`.app.main`'s. Prints where they listen."""
    if kwargs.get("cluster") is False:
        raise SystemExit(
            "seabattle server: --workers runs its workers as nodes of one cluster:"
            " drop --no-cluster"
        )
    _check(kwargs["db"], kwargs["key"])
    try:
        hold = _reuse_socket(kwargs["host"], kwargs["port"])
    except OSError as e:
        where = f"{kwargs['host']}:{kwargs['port']}"
        raise SystemExit(f"seabattle server: cannot listen on {where}: {e.strerror or e}") from None
    with hold:
        host, port = hold.getsockname()[:2]
        base = {**kwargs, "host": host, "port": port}
        limits = base.pop("limits", None) or Limits()
        base["limits"] = dataclasses.asdict(limits)
        code = trio.run(_supervise, workers, base)
    if code:
        raise SystemExit(code)


async def _supervise(workers: int, base: dict[str, Any]) -> int:
    names = _node_names(base["node"], workers)
    metrics_port = base.get("metrics_port")
    stopping = trio.Event()
    procs: dict[str, trio.Process] = {}
    started: dict[str, dict[str, Any]] = {}
    totals: list[dict[str, Any]] = []
    failed: list[str] = []

    def settings(i: int, name: str) -> dict[str, Any]:
        out = {**base, "node": name, "json_status": True, "parent": os.getpid()}
        if metrics_port:
            out["metrics_port"] = metrics_port + i  # each worker its own: one scrape each
        return out

    lim = base["limits"]
    stop_wait = lim["shutdown_grace"] + lim["flush_timeout"] + STOP_SLACK

    async def kill_late(proc: trio.Process, name: str) -> None:
        """Once the stop is asked, give ``proc`` ``stop_wait`` seconds, then kill it."""
        await stopping.wait()
        await trio.sleep(stop_wait)
        if proc.returncode is None:
            _log.warning(
                "worker %s did not stop %.0f s after it was asked: killed", name, stop_wait
            )
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # SIGKILL ends a stopped process too

    def ask_all() -> None:
        for proc in procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)

    async def run_worker(
        i: int, name: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        first = True
        while not stopping.is_set():
            proc = procs[name] = await trio.lowlevel.open_process(
                [sys.executable, "-m", "seabattle.server.workers"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # Its own session: a Ctrl-C at the terminal reaches the supervisor alone, which
                # asks each worker once (a second signal to a worker stops it at once).
                start_new_session=True,
            )
            listening = False
            try:
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.send_all(json.dumps(settings(i, name)).encode())
                await proc.stdin.aclose()
                async with trio.open_nursery() as watch:
                    watch.start_soon(kill_late, proc, name)
                    async for line in _lines(proc.stdout):
                        event = json.loads(line)
                        if event.get("event") == "listening":
                            listening = True
                            started[name] = event | {"pid": proc.pid}
                            if stopping.is_set():
                                proc.send_signal(signal.SIGTERM)  # a signal came as it started
                            if first:
                                task_status.started()
                        elif event.get("event") == "stopped":
                            totals.append(event)
                    code = await proc.wait()
                    watch.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGTERM)
                        with trio.move_on_after(stop_wait):
                            await proc.wait()
                        if proc.returncode is None:
                            proc.kill()
                            await proc.wait()
            if first and not listening:
                # It said why on stderr, which it shares with this process.
                failed.append(f"worker {name} did not start (exit status {code})")
                stopping.set()
                ask_all()
                task_status.started()
                return
            first = False
            if not stopping.is_set():
                _log.warning("worker %s ended (exit status %s): starting it again", name, code)
                await trio.sleep(RESTART_DELAY)

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as outer:

            async def on_signals() -> None:
                async for _ in signals:
                    # Each signal once to every worker: the first is the graceful stop, a
                    # second stops them at once.
                    stopping.set()
                    ask_all()

            outer.start_soon(on_signals)
            async with trio.open_nursery() as running:
                for i, name in enumerate(names):
                    await running.start(run_worker, i, name)
                    if failed:
                        break
                if not failed:
                    _announce(base, started, names, bool(base.get("json_status")))
            outer.cancel_scope.cancel()  # every worker has ended
    if failed:
        print(f"seabattle server: {failed[0]}", file=sys.stderr)
        return 1
    if base.get("json_status"):
        _status({"event": "stopped", "workers": len(names), **_sum(totals)})
    return 0


async def _lines(stream: trio.abc.ReceiveStream) -> Any:
    """The lines ``stream`` sends, until it ends."""
    buf = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield line


def _announce(
    base: dict[str, Any], started: dict[str, dict[str, Any]], names: list[str], as_json: bool
) -> None:
    host, port = base["host"], base["port"]
    if as_json:
        first = started[names[0]]
        _status(
            {
                **first,
                "host": host,
                "port": port,
                "listening": f"{host}:{port}",
                "node": base["node"],
                "workers": [
                    {
                        "node": n,
                        "pid": started[n]["pid"],
                        "own": started[n]["listening_own"],
                        "metrics_port": started[n].get("metrics_port"),
                    }
                    for n in names
                ],
            }
        )
    else:
        print(f"seabattle server listening on {host}:{port} ({len(names)} workers)")
        for n in names:
            w = started[n]
            line = f"  worker {n}: pid {w['pid']}, its own address {w['listening_own']}"
            if w.get("metrics_port") is not None:
                line += f", metrics on http://{w['metrics_host']}:{w['metrics_port']}/metrics"
            print(line)
    sys.stdout.flush()


def _sum(totals: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' stopped totals added up (counts by mode added by key; uptime the longest)."""
    out: dict[str, Any] = {}
    for t in totals:
        for k, v in t.items():
            if k == "event":
                continue
            if isinstance(v, dict):
                into = out.setdefault(k, {})
                for kk, vv in v.items():
                    into[kk] = into.get(kk, 0) + vv
            elif k == "uptime":
                out[k] = max(out.get(k, 0), v)
            elif isinstance(v, int | float):
                out[k] = out.get(k, 0) + v
    return out


def _status(event: dict[str, Any]) -> None:
    print(json.dumps(event, separators=(",", ":")), flush=True)


def worker_main() -> None:
    """``python -m seabattle.server.workers``: one worker, its settings as JSON on stdin."""
    from .app import main

    kwargs = json.loads(sys.stdin.read())
    kwargs["limits"] = Limits(**kwargs["limits"])
    _stop_without(kwargs.pop("parent"))
    main(**kwargs, reuse_port=True)


def _stop_without(parent: int) -> None:
    """Stop this worker gracefully once its supervisor ``parent`` is gone.

    A supervisor killed with SIGKILL forwards no signal: its workers would go on holding the
    port and their node names, and a supervisor started again would run beside them. The
    worker's running matches stay in the journal and resume when a server starts again.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        _log.warning("the supervisor (pid %d) is gone: stopping", parent)
        # Nobody reads the status pipe any more: the last status line must not fail the stop.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


if __name__ == "__main__":
    worker_main()
