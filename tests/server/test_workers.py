"""``seabattle serve --workers N``: N server processes on one port and one store, as an operator
runs them (real processes, real TCP, port 0): players on different workers play one match, the
stop is graceful for every worker, and what cannot work is one line."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import SMALL
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.protocol.record import verify_record
from test_user_errors import CLI, one_error, seabattle


def _start(tmp: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", "0", "--key", str(tmp / "k"), "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _hostport(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


async def _play(match: api.MatchHandle, seed: int) -> BotResult:
    return await play_match(match, make_strategy("random"), random.Random(seed))


async def test_two_workers_share_the_port_and_the_store(tmp_path: Path, db: str) -> None:
    proc, status = await trio.to_thread.run_sync(_start, tmp_path, "--db", db, "--workers", "2")
    try:
        workers = status["workers"]
        assert len(workers) == 2
        assert len({w["pid"] for w in workers}) == 2
        assert len({w["own"] for w in workers}) == 2
        one, two = (_hostport(w["own"]) for w in workers)
        shared = (status["host"], status["port"])
        # Host and guest reach different workers: the guest joins across, and one of them is
        # sent to the worker the match runs on.
        async with api.connect(*one, name="host") as host, api.connect(*two, name="guest") as g:
            match, invite = await host.create(SMALL, "blind")
            assert invite is not None
            joined = await g.join(invite)
            async with trio.open_nursery() as n:
                n.start_soon(_play, match, 1)
                n.start_soon(_play, joined, 2)
            assert len(host.moves + g.moves) == 1
        # Any worker, through the shared port, serves the record.
        async with api.connect(*shared, name="reader") as reader:
            verify_record(await reader.get_record(match.id))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await trio.to_thread.run_sync(proc.communicate)
    assert proc.returncode == 0
    stopped = json.loads(out.splitlines()[-1])
    assert stopped["event"] == "stopped" and stopped["workers"] == 2
    assert sum(stopped["matches_finished"].values()) == 1


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on the workers with pidfds")
async def test_workers_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    # SIGKILL forwards nothing: each worker must notice by itself, or it keeps the port and its
    # node name, and the next `serve --workers` runs beside it.
    proc, status = await trio.to_thread.run_sync(
        _start, tmp_path, "--db", str(tmp_path / "db"), "--workers", "2"
    )
    pids = [w["pid"] for w in status["workers"]]
    fds = [os.pidfd_open(pid) for pid in pids]
    try:
        proc.kill()
        await trio.to_thread.run_sync(proc.wait)
        with trio.fail_after(30):  # a graceful stop: up to the shutdown grace, 5 s
            for fd in fds:
                await trio.lowlevel.wait_readable(fd)  # readable once the process has ended
    finally:
        for fd in fds:
            os.close(fd)
        for pid in pids:  # whatever is left, so that a failure leaves no server behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_workers_need_the_cluster(tmp_path: Path) -> None:
    r = seabattle(
        "serve", "--port", "0", "--db", str(tmp_path / "db"), "--key", str(tmp_path / "k"),
        "--workers", "2", "--no-cluster",
    )  # fmt: skip
    one_error(r, "--no-cluster")


def test_a_store_the_workers_cannot_open_is_one_line(tmp_path: Path) -> None:
    r = seabattle(
        "serve", "--port", "0", "--db", str(tmp_path / "no" / "such" / "db"),
        "--key", str(tmp_path / "k"), "--workers", "2",
    )  # fmt: skip
    one_error(r, str(tmp_path / "no"))


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        r = seabattle(
            "serve", "--port", port, "--db", str(tmp_path / "db"), "--key", str(tmp_path / "k"),
            "--workers", "2",
        )  # fmt: skip
    one_error(r, f"127.0.0.1:{port}")


async def test_a_team_match_gathers_its_members_from_both_workers(tmp_path: Path, db: str) -> None:
    # Four players reach two workers; the match runs on its host's worker, and those who joined
    # on the other are sent there (a member's session may land on any worker of the port).
    proc, status = await trio.to_thread.run_sync(_start, tmp_path, "--db", db, "--workers", "2")
    try:
        one, two = (_hostport(w["own"]) for w in status["workers"])
        where = [one, two, one, two]
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(api.connect(*where[i], name=f"p{i}"))
                for i in range(4)
            ]
            host, _ = await clients[0].create({**SMALL, "team_size": 2}, "custody")
            assert host.team_invites is not None
            handles: dict[int, api.MatchHandle] = {0: host}

            async def join(i: int, code: str) -> None:
                handles[i] = await clients[i].join(code)

            with trio.fail_after(60):
                async with trio.open_nursery() as n:
                    for i, team in ((1, 0), (2, 1), (3, 1)):
                        n.start_soon(join, i, host.team_invites[team])
                async with trio.open_nursery() as n:
                    for i in range(4):
                        n.start_soon(_play, handles[i], i)
            assert [len(c.moves) for c in clients] == [0, 1, 0, 1]
        async with api.connect(*one, name="reader") as reader:
            verify_record(await reader.get_record(host.id))
    finally:
        proc.send_signal(signal.SIGTERM)
        await trio.to_thread.run_sync(proc.communicate)
    assert proc.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on the workers with pidfds")
async def test_a_worker_stopped_with_sigstop_does_not_hold_the_stop(tmp_path: Path) -> None:
    # A worker that never answers the stop (SIGSTOPped, or hung) is killed once its shutdown
    # grace and last flush are over: the operator's SIGTERM ends the service, on its own.
    proc, status = await trio.to_thread.run_sync(
        _start, tmp_path, "--db", str(tmp_path / "db"), "--workers", "2"
    )
    pids = [w["pid"] for w in status["workers"]]
    fds = [os.pidfd_open(pid) for pid in (proc.pid, *pids)]
    try:
        os.kill(pids[0], signal.SIGSTOP)
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(40):  # grace 5 s, flush 2 s, then 5 s more: killed at 12 s
            for fd in fds:
                await trio.lowlevel.wait_readable(fd)  # readable once the process has ended
        assert proc.wait() == 0
    finally:
        for fd in fds:
            os.close(fd)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
