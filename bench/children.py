"""The processes a scenario runs against: the server under test and the bare baselines.

Each is a fresh ``python -m bench KIND WORKDIR [PROFILE]`` (:func:`_child_main`,
through the package's ``__main__``) that prints its address as one JSON line and serves until
SIGTERM; :func:`_child` starts and stops one.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import click
import msgpack
import trio
from seabattle.common.netio import DirectSocket, direct

from .checkout import child_env
from .figures import _raise_nofile
from .records import time_verify

__all__ = ["bare_server"]

_TOKEN = 16  # bytes of the baseline's pairing token
_CHILD_ENV = "SEABATTLE_BENCH_CPU"


async def _read_exact(stream: trio.abc.ReceiveStream, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        data = await stream.receive_some(n - len(buf))
        if not data:
            raise trio.BrokenResourceError("closed before the pairing token")
        buf += data
    return buf


class _Rows:
    """The durable baselines' journal: each read stored as one row before it is forwarded, a
    write of its own, as the server's journal stores a human-paced input (a batch of one), with
    its own writer (:class:`~seabattle.server.journal_file.FileLog`, the file beside a SQLite
    server's database)."""

    def __init__(self, path: Path) -> None:
        from seabattle.server.journal_file import SUFFIX, FileLog

        self.log = FileLog(str(path) + SUFFIX)
        self.match_id = bytes(16).hex()
        self.n = 0

    def store(self, data: bytes) -> None:
        """Store ``data`` (``OSError`` if it cannot be)."""
        self.log.write([(self.match_id, self.n, data)])
        self.n += 1


async def _forward(
    src: trio.abc.Stream, dsts: list[trio.abc.Stream], *, rows: _Rows | None = None
) -> None:
    """Send whatever ``src`` receives to each of ``dsts`` in turn until ``src`` ends, with the
    server's own I/O (:mod:`seabattle.common.netio`: direct reads and writes on a plain socket),
    so that the baseline differs from the server by the game alone. ``dsts``: the partner (the
    relay), ``src`` itself (the echo), or both (the copies a server without ``lean`` gives a
    player of its own moves; a custody shot's verdict to the defender too); ``rows``: each read
    stored first, as the journal stores each input before anything it causes is sent."""
    rsock = direct(src)
    wsocks = [(d, direct(d)) for d in dsts]
    single = len(wsocks) == 1
    while True:
        data = await rsock.receive() if rsock is not None else await src.receive_some(65536)
        if not data:
            return
        if rows is not None or not single:
            data = bytes(data)  # a view of the shared buffer lasts only until the first await
            if rows is not None:
                rows.store(data)
        for dst, wsock in wsocks:
            await _send(dst, wsock, data)


async def _send(
    stream: trio.abc.SendStream, sock: DirectSocket | None, data: bytes | bytearray | memoryview
) -> None:
    """Write ``data``: straight to the socket while it takes it, the rest through the stream.
    ``data`` may be a view of the shared read buffer: what is left is copied before awaiting."""
    if sock is not None:
        sent = sock.try_send(data)
        if sent == len(data):
            return
        data = bytes(data[sent:])
    await stream.send_all(data)


async def bare_server(
    kind: str,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    db: Path | None = None,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The baseline: ``relay`` pairs connections by token and forwards bytes; ``echo`` echoes;
    ``relay-copies`` is the relay that also sends each connection a copy of what it sent (the
    four writes a blind shot costs a server whose players do not agree ``lean``, not the relay's
    two); ``echo-copies`` pairs connections too and echoes what one sends, then copies it to the
    other (a custody shot's two writes: the verdict to the shooter and to the defender). A
    ``+journal`` kind (``relay+journal``, ``echo-copies+journal``, ...) also stores each read in
    the journal file beside ``db`` before it goes on: the journal's cost, without the game.

    Every connection first sends a 16-byte pairing token and waits for one byte (``go``). Then the
    relay forwards whatever a connection sends to its partner, the echo sends it back: the same
    sockets and reads and writes as a server, and no game.
    """
    waiting: dict[bytes, tuple[trio.abc.Stream, trio.Event, list[trio.abc.Stream]]] = {}
    rows: _Rows | None = None
    if kind.endswith("+journal"):
        kind = kind.removesuffix("+journal")
        if db is None:
            raise ValueError(f"a {kind}+journal baseline needs its database file")
        rows = _Rows(db)

    async def handle(stream: trio.abc.Stream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            token = await _read_exact(stream, _TOKEN)
            if kind == "echo":
                await stream.send_all(b"\x01")
                await _forward(stream, [stream], rows=rows)
                return
            first = waiting.pop(token, None)
            if first is None:
                ready = trio.Event()
                box: list[trio.abc.Stream] = []
                waiting[token] = (stream, ready, box)
                try:
                    await ready.wait()
                finally:
                    waiting.pop(token, None)
                peer = box[0]
            else:
                peer, ready, box = first
                # Only this task writes before the pair is formed; afterwards each stream has one
                # writer: its partner's task.
                await stream.send_all(b"\x01")
                await peer.send_all(b"\x01")
                box.append(stream)
                ready.set()
            dsts = {
                "relay": [peer],
                "relay-copies": [peer, stream],
                "echo-copies": [stream, peer],
            }[kind]
            try:
                await _forward(stream, dsts, rows=rows)
            finally:
                await trio.aclose_forcefully(peer)

    listeners = await trio.open_tcp_listeners(port, host=host)
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        addr = listeners[0].socket.getsockname()[:2]
        task_status.started((addr[0], addr[1]))


#: ``0`` in the environment: the started server keeps no journal (``bench --no-journal``).
JOURNAL_ENV = "SEABATTLE_BENCH_JOURNAL"
#: the database of ``bench --workers`` (unset: a SQLite file in the run's folder)
DB_ENV = "SEABATTLE_BENCH_DB"
#: seconds the started server's journal waits to group moves (``bench --journal-window``)
WINDOW_ENV = "SEABATTLE_BENCH_JOURNAL_WINDOW"


def _bench_limits() -> Any:
    from seabattle.server.config import Limits

    # Bot-speed players send far more than the 100 messages/s a peer may send by default; the
    # limit would measure the token bucket, not the server. A big run also holds more
    # connections than a default server admits. Everything else stays as shipped.
    want: dict[str, Any] = {
        "rate": 1e9,
        "burst": 1 << 30,
        "max_clients": 1 << 20,
        "shutdown_grace": 0.5,
        "flush_timeout": 0.5,
        "journal": os.environ.get(JOURNAL_ENV, "1") != "0",
        "journal_window": float(os.environ.get(WINDOW_ENV, "0")),
    }
    known = {f.name for f in dataclasses.fields(Limits)}
    return Limits(**{k: v for k, v in want.items() if k in known})


def _child_main(argv: list[str]) -> None:
    """``python -m bench KIND WORKDIR [PROFILE]``: serve until SIGTERM;
    ``python -m bench verify FILE``: time :func:`time_verify` on the records
    in FILE (msgpack list of signed records), print the figures as JSON."""
    if argv[0] == "verify":
        records = msgpack.unpackb(Path(argv[1]).read_bytes(), raw=False)
        print(json.dumps(time_verify(records)))
        return
    kind, workdir = argv[0], Path(argv[1])
    profile = argv[2] if len(argv) > 2 and argv[2] else None
    _raise_nofile()
    cpu = os.environ.get(_CHILD_ENV)
    if cpu and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {int(cpu)})
    logging.basicConfig(
        level=logging.INFO,
        filename=workdir / f"{kind}.log",
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )

    async def main() -> None:
        shutdown = trio.Event()
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                if kind == "server":
                    from seabattle.server.app import serve

                    addr = await nursery.start(
                        partial(
                            serve,
                            "127.0.0.1",
                            0,
                            db_path=workdir / "bench.sqlite",
                            key_path=workdir / "server.key",
                            limits=_bench_limits(),
                            shutdown=shutdown,
                        )
                    )
                else:
                    addr = await nursery.start(
                        partial(bare_server, kind, db=workdir / "baseline.sqlite")
                    )
                print(
                    json.dumps({"listening": f"{addr[0]}:{addr[1]}", "pid": os.getpid()}),
                    flush=True,
                )
                async for _ in signals:
                    break
                shutdown.set()
                if kind != "server":
                    nursery.cancel_scope.cancel()

    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    try:
        trio.run(main)
    finally:
        if prof is not None and profile:
            prof.disable()
            prof.dump_stats(profile)


def _workers_argv(workdir: Path, workers: int, env: dict[str, str]) -> list[str]:
    """``seabattle serve --workers`` as the server under test, with the bench's limits."""
    limits = _bench_limits()
    for name in ("shutdown_grace", "flush_timeout", "journal", "journal_window"):
        env[f"SEABATTLE_{name.upper()}"] = str(getattr(limits, name))
    # The most the settings allow (the in-process server lifts them further).
    env.update(
        SEABATTLE_RATE="1000000", SEABATTLE_BURST="1000000", SEABATTLE_MAX_CLIENTS="10000000"
    )
    cli = "from seabattle.cli.main import main; main()"
    db, key = str(workdir / "bench.sqlite"), str(workdir / "server.key")
    where = ["--port", "0", "--db", os.environ.get(DB_ENV) or db, "--key", key]
    return [sys.executable, "-c", cli, "serve", "--workers", str(workers), *where, "--json"]


@contextlib.contextmanager
def _child(
    kind: str,
    workdir: Path,
    *,
    cpu: int | None,
    profile: str | None,
    workers: int = 1,
    cpus: set[int] | None = None,
) -> Iterator[tuple[tuple[str, int] | list[tuple[str, int]], int | list[int]]]:
    """Start a child process serving ``kind``; yield its address and pid (with ``workers`` > 1,
    each worker's address, and every process's pid: the supervisor's and its workers'); stop it
    after. ``cpu``: the core the child pins itself to; ``cpus``: the cores it (and every process
    it starts, such as ``serve --workers``'s workers) may run on from the start."""
    env = child_env()
    if cpu is not None:
        env[_CHILD_ENV] = str(cpu)
    argv = [sys.executable, "-m", "bench", kind, str(workdir), profile or ""]
    if workers > 1:
        argv = _workers_argv(workdir, workers, env)
    # A child inherits this process's affinity when it is forked: the generator's own core, where
    # a supervisor's workers would otherwise all run beside the generator.
    mine = None
    if cpus is not None:
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)
    try:
        with open(workdir / f"{kind}.stderr", "ab") as err:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
    finally:
        if mine is not None:
            os.sched_setaffinity(0, mine)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            proc.wait(5)
            detail = (workdir / f"{kind}.stderr").read_text(errors="replace")[-2000:]
            raise click.ClickException(f"the {kind} process did not start:\n{detail}")
        info = json.loads(line)
        host, _, port = info["listening"].rpartition(":")
        if workers > 1:
            # Each worker's own address: the bench's players do not follow redirects, so the
            # two of a match go to one worker, and matches go round the workers (what the kernel
            # does with the shared port, SO_REUSEPORT, tests/server/test_workers.py checks).
            pids = [proc.pid] + [int(w["pid"]) for w in info["workers"]]
            own = [w["own"].rpartition(":") for w in info["workers"]]
            yield [(h, int(p)) for h, _, p in own], pids
        else:
            yield (host, int(port)), int(info["pid"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
