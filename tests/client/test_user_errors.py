"""Issue 12's list of user errors, each run as a user would (real processes, real TCP on port 0):
one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import self_signed

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]
TIMEOUT = 60


def seabattle(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def one_error(r: subprocess.CompletedProcess[str], says: str) -> None:
    """Exit status non-zero; stderr one error line (click's usage hint aside) that says ``says``."""
    assert r.returncode != 0, r
    assert "Traceback" not in r.stderr, r.stderr
    lines = [
        line
        for line in r.stderr.splitlines()
        if line.strip() and not line.startswith(("Usage:", "Try '"))
    ]
    assert len(lines) == 1, r.stderr
    assert says in lines[0], lines[0]


class Server:
    def __init__(self, tmp: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [
                *CLI,
                "serve",
                "--port",
                "0",
                "--db",
                str(tmp / "db"),
                "--key",
                str(tmp / "k"),
                "--json",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        status = json.loads(self.proc.stdout.readline())
        self.addr = f"127.0.0.1:{status['port']}"
        self.key = status["server_key"]
        self.db = str(tmp / "db")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(tmp)
    s = Server(tmp, "--tls-cert", str(cert), "--tls-key", str(key))
    s.addr = s.addr.replace("127.0.0.1", "localhost")  # the name the certificate is for
    yield s, cert
    s.stop()


@pytest.fixture(scope="module")
def closed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("closed"), "--no-guests")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("open"))
    yield s
    s.stop()


# -- the server ------------------------------------------------------------------------------


def test_db_in_a_missing_folder(tmp_path: Path) -> None:
    r = seabattle(
        "serve", "--port", "0", "--db", str(tmp_path / "no" / "x.db"), "--key", str(tmp_path / "k")
    )
    one_error(r, "there is no folder")


def test_postgresql_unreachable(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    with socket.socket() as held:  # bound, never listening: connecting to it is refused
        held.bind(("127.0.0.1", 0))
        url = f"postgresql://nobody@127.0.0.1:{held.getsockname()[1]}/db"
        r = seabattle("serve", "--port", "0", "--db", url, "--key", str(tmp_path / "k"))
    one_error(r, "cannot open the PostgreSQL database")


def test_missing_tls_cert_file(tmp_path: Path) -> None:
    r = seabattle(
        "serve",
        "--port",
        "0",
        "--db",
        str(tmp_path / "db"),
        "--key",
        str(tmp_path / "k"),
        "--tls-cert",
        str(tmp_path / "no.pem"),
        "--tls-key",
        str(tmp_path / "no.key"),
    )
    one_error(r, "cannot load the TLS certificate")


def test_port_out_of_range_is_refused_not_wrapped() -> None:
    one_error(seabattle("serve", "--port", "99999"), "99999 is not in 0..65535")


# -- clients ---------------------------------------------------------------------------------


def test_plain_client_against_a_tls_server(tls_server: tuple[Server, Path]) -> None:
    s, _ = tls_server
    one_error(seabattle("bot", "--server", s.addr), "add --tls")


def test_tls_client_checks_the_certificate_and_the_pinned_key(
    tls_server: tuple[Server, Path],
) -> None:
    s, cert = tls_server
    one_error(seabattle("bot", "--server", s.addr, "--tls"), "the certificate does not verify")
    wrong = "00" * 32
    one_error(
        seabattle("bot", "--server", s.addr, "--ca", str(cert), "--server-key", wrong),
        "not the server pinned by --server-key",
    )
    # The right CA and key: connected, then no opponent within --wait.
    r = seabattle(
        "bot", "--server", s.addr, "--ca", str(cert), "--server-key", s.key, "--wait", "0.5"
    )
    one_error(r, "no opponent")
    assert "waiting for an opponent" in r.stdout


def test_closed_server_refuses_a_guest_until_keys_add(
    closed_server: Server, tmp_path: Path
) -> None:
    one_error(seabattle("bot", "--server", closed_server.addr), "seabattle keys add")
    me = tmp_path / "me.key"
    player = seabattle("keys", "show", str(me)).stdout.strip()
    added = seabattle("keys", "add", str(me), "--db", closed_server.db)
    assert added.returncode == 0 and player in added.stdout, added
    r = seabattle("bot", "--server", closed_server.addr, "--key", str(me), "--wait", "0.5")
    one_error(r, "no opponent")


def test_keys_add_on_a_database_it_cannot_open(tmp_path: Path) -> None:
    one_error(seabattle("keys", "add", "ab" * 32, "--db", str(tmp_path / "no" / "db")), "no folder")
    one_error(seabattle("keys", "add", "nokey"), "neither a player id")


def test_ctrl_c_in_bot_is_one_line(server: Server) -> None:
    p = subprocess.Popen(
        [*CLI, "bot", "--server", server.addr],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    for line in p.stdout:
        if "waiting for an opponent" in line:
            break
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 130 and err.strip() == "interrupted", err


def test_bot_reports_matches_as_json_and_plain_lines(server: Server) -> None:
    env = dict(os.environ, COLUMNS="200")
    a = subprocess.Popen(
        [*CLI, "bot", "--server", server.addr, "--json", "--games", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    b = subprocess.run(
        [*CLI, "bot", "--server", server.addr, "--games", "2", "--strategy", "hunt"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    out, err = a.communicate(timeout=TIMEOUT)
    assert a.returncode == 0 and b.returncode == 0, (err, b.stderr)
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and "waiting for an opponent" in err
    for row in rows:
        assert row["outcome"] in ("won", "lost") and row["reason"] and row["winner"] in (0, 1)
        assert set(row["rating"]) == {"old", "new"}
    assert "{'" not in b.stdout and "rating" in b.stdout  # no Python reprs


def test_bot_names_an_aborted_match() -> None:
    from seabattle.bots.play import BotResult
    from seabattle.cli.bot import _bot_line

    line = _bot_line(BotResult(b"\0" * 16, 0, None, {}), "p")
    assert line.startswith("aborted") and "{}" not in line


# -- conformance -----------------------------------------------------------------------------


def test_conformance_against_an_unreachable_server() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        r = seabattle("conformance", f"127.0.0.1:{held.getsockname()[1]}")
    one_error(r, "cannot reach")


def test_conformance_only_matching_nothing(server: Server) -> None:
    one_error(seabattle("conformance", server.addr, "--only", "nosuch"), "no case matches")
