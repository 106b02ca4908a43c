"""A throwaway PostgreSQL server that a harness starts, stops and starts again
(:mod:`.faults` uses it to take the cluster's store away and give it back).

Theory of operation. :class:`Postgres` runs ``initdb`` once into a temporary folder, then
``postgres`` as a child process on a free loopback port, with trust authentication over TCP
(loopback only, and the cluster lives for one run) and durability off. :meth:`Postgres.stop`
shuts it down the way an operator or a crash would (``fast``: SIGINT, ``immediate``: SIGQUIT,
``smart``: SIGTERM); :meth:`Postgres.start` brings it back on the same port and data folder, so
every client's URL stays valid across the outage. Its log (stderr) goes to ``postgres.log`` in the
folder, where extra settings (``log_statement``, ``log_line_prefix``...) make it something a check
can read.

initdb and postgres refuse to run as root: as root they run as the ``postgres`` user (``setpriv``,
else ``runuser``), who then owns the folder, made under /tmp where that user can reach it. The
server is told to shut down should this process die first (setpriv's parent-death signal), so a
harness that is killed leaves no server behind (as ``tests/conftest.py`` does), when it is
started from the main thread: the signal follows the thread that started it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode

__all__ = ["Postgres", "PostgresMissing", "find_bindir"]

_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries here, or they did not start."""


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` that holds ``initdb`` and ``postgres``, or
    ``None``."""
    found = []
    for initdb in glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        version = re.search(r"/postgresql/(\d+)", initdb)
        if version and os.path.exists(os.path.join(os.path.dirname(initdb), "postgres")):
            found.append((int(version.group(1)), Path(initdb).parent))
    return max(found)[1] if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # exited meanwhile
        os.kill(pid, sig)


class Postgres:
    """One PostgreSQL server in a temporary folder: :meth:`start`, :meth:`stop`, :meth:`start`
    again on the same port and data, :meth:`close` to stop it and delete the folder.

    ``settings`` are ``-c name=value`` options of the server (each start)."""

    def __init__(self, bindir: Path | None = None, settings: Mapping[str, str] | None = None):
        found = bindir or find_bindir()
        if found is None:
            raise PostgresMissing(
                "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb):"
                " install PostgreSQL (Debian: apt-get install postgresql)"
            )
        self.bindir = found
        self.settings = dict(settings or {})
        self.as_root = os.geteuid() == 0
        parent = Path("/tmp" if self.as_root else tempfile.gettempdir())
        self.root = Path(tempfile.mkdtemp(prefix="seabattle-pgctl-", dir=parent))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "postgres.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._frozen: list[int] = []
        self._run_as: list[str] = []
        if shutil.which("setpriv"):
            user = ["--reuid=postgres", "--regid=postgres", "--init-groups"] if self.as_root else []
            self._run_as = ["setpriv", *user, "--pdeathsig=INT", "--"]  # INT: a fast shutdown
        elif self.as_root:
            self._run_as = ["runuser", "-u", "postgres", "--"]
        self.sock.mkdir()
        if self.as_root:
            import pwd

            owner = pwd.getpwnam("postgres")
            for path in (self.root, self.sock):
                os.chown(path, owner.pw_uid, owner.pw_gid)

    def url(self, dbname: str = "postgres", **params: str) -> str:
        """A libpq URL of database ``dbname`` as the ``postgres`` user, with ``params`` (e.g.
        ``application_name``) in its query."""
        query = f"?{urlencode(params)}" if params else ""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}{query}"

    @property
    def running(self) -> bool:
        """Whether the server process runs (it may not accept connections yet)."""
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's log, for an error message."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def _initdb(self) -> None:
        initdb = [self.bindir / "initdb", "-D", self.data, "-U", "postgres", "-E", "UTF8"]
        auth = ["--auth-local=trust", "--auth-host=trust", "--no-sync"]
        done = subprocess.run(
            [*self._run_as, *map(str, initdb), *auth], capture_output=True, text=True
        )
        if done.returncode:
            raise PostgresMissing(f"initdb failed: {done.stdout}{done.stderr}")

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (initdb first, the first time) and wait until it accepts a
        connection; the first start takes a free port, every later one the same port."""
        import psycopg

        if self.running:
            return
        if not self.data.exists():
            self._initdb()
        # A port found free may be taken before the server binds it: only the first start
        # picks another; a restart must keep its port, or every client's URL would go stale.
        for _ in range(3 if self.port == 0 else 1):
            port = self.port or _free_port()
            args = ["-D", self.data, "-p", port, "-k", self.sock, "-F"]
            args += ["-c", "listen_addresses=127.0.0.1", "-c", "full_page_writes=off"]
            args += ["-c", "synchronous_commit=off"]
            for name, value in self.settings.items():
                args += ["-c", f"{name}={value}"]
            with self.log.open("ab") as out:
                run_as = self._run_as
                if threading.current_thread() is not threading.main_thread():
                    # The parent-death signal follows the thread that started the server, not
                    # the process: a worker thread that retires (trio's idle after seconds)
                    # would shut the server down in the middle of a run.
                    run_as = [a for a in run_as if not a.startswith("--pdeathsig")]
                self.proc = subprocess.Popen(
                    [*run_as, str(self.bindir / "postgres"), *map(str, args)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + timeout
            url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    psycopg.connect(url, connect_timeout=2).close()
                    self.port = port
                    return
                except psycopg.OperationalError:
                    time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop("immediate")
                raise PostgresMissing(f"postgres did not start in time: {self.log_tail()}")
            self.proc = None
        raise PostgresMissing(f"postgres did not start: {self.log_tail()}")

    def stop(self, mode: str = "fast", timeout: float = 30.0) -> None:
        """Shut the server down (``smart``, ``fast`` or ``immediate``, as ``pg_ctl stop -m``)
        and wait until it has gone."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(_SIGNALS[mode])
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def freeze(self) -> None:
        """SIGSTOP the server and every process of it (a paused VM, a storage stall): its
        clients' connections stay open, and their calls neither succeed nor fail."""
        self._frozen = self._processes()
        for pid in self._frozen:
            _signal(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT what :meth:`freeze` stopped."""
        for pid in self._frozen:
            _signal(pid, signal.SIGCONT)
        self._frozen = []

    def _processes(self) -> list[int]:
        """The server's process and its children (backends, writers), parents first."""
        if self.proc is None:
            return []
        found, i = [self.proc.pid], 0
        while i < len(found):
            children = Path(f"/proc/{found[i]}/task/{found[i]}/children")
            with contextlib.suppress(OSError):  # gone meanwhile
                found += [int(p) for p in children.read_text().split()]
            i += 1
        return found

    def create_database(self, name: str) -> str:
        """Create database ``name``; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self, keep: bool = False) -> None:
        """Stop the server and delete its folder (``keep``: leave the folder, its log with it,
        for a failed run to be read)."""
        self.stop("fast")
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
