"""Fixtures shared by the tests that need a running referee server (built on ``helpers``), and
the PostgreSQL server the store's tests run against (`postgres_url`, `postgres_db`)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing
from helpers import start_server


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> tuple[str, int]:
    """A referee server on 127.0.0.1, port 0, with its store and key in ``tmp_path``."""
    addr, _ = await start_server(nursery, tmp_path)
    return addr


# PostgreSQL for the store's tests: a server for the session, a fresh database for each test.

_PG_PASSWORD = "seabattle-tests"


def _postgres_missing(why: str) -> NoReturn:
    """In CI a test that needs PostgreSQL fails without it; elsewhere it is skipped."""
    what = (
        f"{why}: install PostgreSQL (Debian: apt-get install postgresql) or set"
        " SEABATTLE_TEST_POSTGRES=postgresql://user:password@host:port/db"
    )
    if os.environ.get("CI"):
        pytest.fail(what, pytrace=False)
    pytest.skip(what)


@contextmanager
def _throwaway_cluster(bindir: Path) -> Iterator[str]:
    """A PostgreSQL cluster in a temporary folder on a free loopback port, password auth over
    TCP, stopped and deleted afterwards; yields the URL of its ``postgres`` database.

    initdb and postgres refuse to run as root: as root they run as the ``postgres`` user, who
    then owns the folder (under /tmp, which that user can reach)."""
    as_root = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="seabattle-pg-", dir="/tmp" if as_root else None))
    data, sock, log, pwfile = root / "data", root / "sock", root / "log", root / "pw"
    sock.mkdir()
    pwfile.write_text(_PG_PASSWORD)
    run_as: list[str] = []
    if as_root:
        import pwd

        user = pwd.getpwnam("postgres")
        for p in (root, sock, pwfile):
            os.chown(p, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]

    def run(*args: str | Path) -> None:
        done = subprocess.run(
            [*run_as, *map(str, args)], capture_output=True, text=True, check=False
        )
        if done.returncode:
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}{tail}")

    try:
        run(
            bindir / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--pwfile",
            pwfile,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        for attempt in range(3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            # Durability off: the cluster lives for one test session.
            opts = (
                f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -F"
                " -c full_page_writes=off -c synchronous_commit=off"
            )
            try:
                run(bindir / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", opts, "start")
                break
            except RuntimeError:
                if attempt == 2:  # the port may have been taken meanwhile: try another
                    raise
        try:
            yield f"postgresql://postgres:{_PG_PASSWORD}@127.0.0.1:{port}/postgres"
        finally:
            run(bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server for the tests, as a URL whose role may create databases:
    ``SEABATTLE_TEST_POSTGRES`` if set, else a throwaway cluster started from the installed
    binaries (``/usr/lib/postgresql/*/bin``), else the test fails (``CI`` set) or is skipped."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_missing("psycopg is not installed (pip install -e '.[dev]')")
    given = os.environ.get("SEABATTLE_TEST_POSTGRES")
    if given:
        yield given
        return
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        _postgres_missing("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)")
    newest = sorted(found)[-1]  # /usr/lib/postgresql/15/..., 16/...: two digits since 10
    with _throwaway_cluster(Path(newest).parent) as url:
        yield url


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[str]:
    """The URL of a fresh, empty database on `postgres_url`'s server, dropped after the test."""
    import psycopg

    name = f"seabattle_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(postgres_url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Virtual time that jumps once the run loop has been idle for 20 ms of real time.

    pytest-trio's own jumps at once; but a server's journal writes in a worker thread, which
    virtual time does not see, so an instant jump would let a match's clocks run out while its
    moves are being stored. 20 ms is far above a journal write and far below any test's length.
    """
    return trio.testing.MockClock(autojump_threshold=0.02)
