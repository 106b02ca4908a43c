"""Fixtures shared by the tests that need a running referee server (built on ``helpers``), the
PostgreSQL server the store's tests run against (`postgres_url`, `postgres_db`), and the headless
Chromium the web pages' tests drive (`browser`, built on ``chromium``)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing
from chromium import Browser
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


def _sweep_killed_runs(parent: Path) -> None:
    """Delete the folders of throwaway clusters whose test run was killed (its server went with
    it, but nothing was left to delete the folder)."""
    for folder in parent.glob("seabattle-pg-*"):
        try:
            os.kill(int((folder / "owner").read_text()), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):
            continue


@contextmanager
def _throwaway_cluster(bindir: Path) -> Iterator[str]:
    """A PostgreSQL cluster in a temporary folder on a free loopback port, password auth over
    TCP, stopped and deleted afterwards; yields the URL of its ``postgres`` database.

    initdb and postgres refuse to run as root: as root they run as the ``postgres`` user, who
    then owns the folder (under /tmp, which that user can reach). The server is this process's
    child, told to shut down should this process die first (setpriv's parent-death signal), so
    a test run that is killed leaves no server behind."""
    import psycopg

    as_root = os.geteuid() == 0
    parent = Path("/tmp" if as_root else tempfile.gettempdir())
    _sweep_killed_runs(parent)
    root = Path(tempfile.mkdtemp(prefix="seabattle-pg-", dir=parent))
    (root / "owner").write_text(str(os.getpid()))
    data, sock, log, pwfile = root / "data", root / "sock", root / "log", root / "pw"
    sock.mkdir()
    pwfile.write_text(_PG_PASSWORD)
    run_as: list[str] = []
    if shutil.which("setpriv"):
        user = ["--reuid=postgres", "--regid=postgres", "--init-groups"] if as_root else []
        run_as = ["setpriv", *user, "--pdeathsig=INT", "--"]  # INT: a fast shutdown
    elif as_root:
        run_as = ["runuser", "-u", "postgres", "--"]
    if as_root:
        import pwd

        owner = pwd.getpwnam("postgres")
        for path in (root, sock, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def log_tail() -> str:
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""

    server: subprocess.Popen[bytes] | None = None
    try:
        initdb = [bindir / "initdb", "-D", data, "-U", "postgres", "--pwfile", pwfile, "-E", "UTF8"]
        auth = ["--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"]
        done = subprocess.run([*run_as, *initdb, *auth], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        for _ in range(3):  # a port found free may be taken before the server binds it
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            url = f"postgresql://postgres:{_PG_PASSWORD}@127.0.0.1:{port}/postgres"
            # Durability off: the cluster lives for one test session.
            args = ["-D", data, "-p", port, "-k", sock, "-c", "listen_addresses=127.0.0.1", "-F"]
            args += ["-c", "full_page_writes=off", "-c", "synchronous_commit=off"]
            with log.open("ab") as out:
                server = subprocess.Popen(
                    [*run_as, bindir / "postgres", *map(str, args)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + 60
            while server.poll() is None and time.monotonic() < deadline:
                try:
                    psycopg.connect(url, connect_timeout=2).close()
                    break
                except psycopg.OperationalError:
                    time.sleep(0.05)
            else:
                if server.poll() is None:
                    raise RuntimeError(f"postgres did not start in time: {log_tail()}")
                server = None
                continue
            break
        else:
            raise RuntimeError(f"postgres did not start: {log_tail()}")
        yield url
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
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
def postgres_binaries() -> None:
    """For a test that starts (and stops) a PostgreSQL of its own (``bench.pg.Postgres``): the
    server's binaries and psycopg are there, or the test fails (``CI`` set) or is skipped."""
    from bench.pg import find_bindir

    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_missing("psycopg is not installed (pip install -e '.[dev]')")
    if find_bindir() is None:
        _postgres_missing("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)")


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


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Either store a test's server may keep: a SQLite file, or a fresh PostgreSQL database (its
    URL); a test taking ``db`` runs once on each."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    url: str = request.getfixturevalue("postgres_db")
    return url


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    """Virtual time that jumps once the run loop has been idle for 20 ms of real time.

    pytest-trio's own jumps at once; but a server's journal writes in a worker thread, which
    virtual time does not see, so an instant jump would let a match's clocks run out while its
    moves are being stored. 20 ms is far above a journal write and far below any test's length.
    """
    return trio.testing.MockClock(autojump_threshold=0.02)


# Headless Chromium for the web pages' tests (the record replay, the live spectator page).


def _chromium_missing(why: str) -> NoReturn:
    """In CI a test that needs Chromium fails without it; elsewhere it is skipped."""
    what = f"{why}: install Chromium (Debian: apt-get install chromium) or set SEABATTLE_CHROMIUM"
    if os.environ.get("CI"):
        pytest.fail(what, pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium to drive: ``SEABATTLE_CHROMIUM`` if set, else ``chromium`` on the PATH, else
    the test fails (``CI`` set) or is skipped."""
    found = os.environ.get("SEABATTLE_CHROMIUM") or shutil.which("chromium")
    if not found:
        _chromium_missing("no chromium on the PATH")
    return found


@pytest.fixture(scope="module")
def browser(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """A headless Chromium with one page, driven over the DevTools protocol on a pipe; one per
    test module (it takes seconds to start), each test opening the page it needs."""
    b = Browser(chromium_path, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()
