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


# -- issue 36: mistakes that ended in a traceback or a wrong result ------------------------------


def seabattles(
    *runs: list[str], timeout: float = TIMEOUT
) -> list[subprocess.CompletedProcess[str]]:
    """Several ``seabattle`` runs at once (each one is a second or so of start-up alone)."""
    procs = [
        (
            args,
            subprocess.Popen(
                [*CLI, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            ),
        )
        for args in runs
    ]
    done = []
    for args, p in procs:
        out, err = p.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(args, p.returncode, out, err))
    return done


@pytest.fixture
def silent() -> Iterator[str]:
    """HOST:PORT of a socket that listens and never answers: the kernel completes the TCP
    handshake (a stopped server, a wedged process) and nobody ever reads."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_an_unknown_bot_is_refused_naming_the_bots() -> None:
    for r in seabattles(["host", "--bot", "nosuch"], ["join", "127.0.0.1:1", "--bot", "nosuch"]):
        one_error(r, "'nosuch' is not one of")
        assert all(name in r.stderr for name in ("random", "hunt", "density", "best")), r.stderr


def test_a_file_that_is_not_a_key_is_refused_by_every_command_taking_one(
    tmp_path: Path, server: Server
) -> None:
    cert, tls_key = self_signed(tmp_path)  # a certificate, and an EC (not Ed25519) key
    mid = "00" * 16
    runs: list[list[str]] = []
    for bad in (cert, tls_key):
        k = ["--key", str(bad)]
        runs += [
            ["bot", "--server", server.addr, *k],
            ["play", "--server", server.addr, "--line", *k],
            ["host", "--bot", "hunt", *k],
            ["join", server.addr, "--bot", "hunt", *k],
            ["ladder", "--server", server.addr, *k],
            ["matches", "--server", server.addr, *k],
            ["watch", mid, "--server", server.addr, *k],
            ["record", "fetch", mid, "--server", server.addr, *k],
            ["keys", "show", str(bad)],
            ["verify", "--referee-key", str(bad), str(cert)],
        ]
    runs.append(
        ["serve", "--port", "0", "--db", str(tmp_path / "db"), "--key", str(cert)],
    )
    for r in seabattles(*runs):
        one_error(r, "holds no Ed25519 private key")


def test_a_key_in_a_missing_folder_is_refused_and_made_in_an_existing_one(tmp_path: Path) -> None:
    lost = tmp_path / "no" / "such" / "me.key"
    runs = [
        ["keys", "show", str(lost)],
        ["host", "--bot", "hunt", "--key", str(lost)],
        ["bot", "--server", "127.0.0.1:1", "--key", str(lost)],
        ["serve", "--port", "0", "--db", str(tmp_path / "db"), "--key", str(lost)],
    ]
    for r in seabattles(*runs):
        one_error(r, f"there is no folder {lost.parent}")
    assert not (tmp_path / "no").exists()
    # The first run in a folder that exists makes the key, and the next finds the same one.
    me = tmp_path / "me.key"
    first, again = seabattle("keys", "show", str(me)), seabattle("keys", "show", str(me))
    assert first.returncode == 0 and me.is_file() and first.stdout == again.stdout, first


def test_ports_out_of_range_are_refused_everywhere_a_port_is_taken() -> None:
    far, mid = "127.0.0.1:99999", "00" * 16
    runs = [
        ["host", "--port", "99999", "--bot", "hunt"],
        ["play", "--server", far],
        ["bot", "--server", far],
        ["join", far, "--bot", "hunt"],
        ["ladder", "--server", far],
        ["matches", "--server", far],
        ["watch", mid, "--server", far],
        ["record", "fetch", mid, "--server", far],
        ["conformance", far],
        ["bot", "--server", "127.0.0.1:0"],  # nothing to connect to on port 0
    ]
    host, *clients, zero = seabattles(*runs)
    one_error(host, "99999 is not in the range 0<=x<=65535")
    for r in clients:
        one_error(r, "99999 is not in 1..65535")
    one_error(zero, "port 0 is not in 1..65535")


def test_an_advertised_port_out_of_range_is_refused(tmp_path: Path) -> None:
    r = seabattle("serve", "--port", "0", "--db", str(tmp_path / "s.db"), "--advertise", "x:99999")
    one_error(r, "--advertise 'x:99999' is not HOST:PORT (a port 1..65535)")


def test_an_address_without_a_port_is_a_usage_error() -> None:
    for r in seabattles(["bot", "--server", "localhost"], ["join", "localhost", "--bot", "hunt"]):
        one_error(r, "'localhost' is not HOST:PORT (the port is missing)")
        assert r.returncode == 2


def test_a_server_that_never_answers_the_handshake_is_given_up_in_one_line(silent: str) -> None:
    mid = "00" * 16
    t = ["--handshake-timeout", "1"]
    runs = [
        ["bot", "--server", silent, "--wait", "3", *t],
        ["play", "--server", silent, "--line", *t],
        ["join", silent, "--bot", "hunt", *t],
        ["ladder", "--server", silent, *t],
        ["matches", "--server", silent, *t],
        ["watch", mid, "--server", silent, *t],
        ["record", "fetch", mid, "--server", silent, *t],
        ["conformance", silent, "--timeout", "1"],
    ]
    for r in seabattles(*runs, timeout=30):
        one_error(
            r, f"{silent} accepted the connection but did not answer the handshake within 1 s"
        )


def test_join_pointed_at_a_server_says_it_is_one(server: Server) -> None:
    r = seabattle("join", server.addr, "--bot", "hunt")
    one_error(r, f"{server.addr} is a seabattle server, not a hosting peer")
    assert f"play --server {server.addr}" in r.stderr and "bot --server" in r.stderr


def _record_file(tmp_path: Path) -> bytes:
    from helpers import from_json
    from seabattle.protocol.record import dump_record

    vectors = Path(__file__).resolve().parents[2] / "spec" / "vectors"
    vector = from_json(json.loads((vectors / "records.json").read_text()))
    return dump_record(vector["signed"])


def test_a_damaged_record_is_one_line_on_stderr_that_says_so(tmp_path: Path) -> None:
    data = _record_file(tmp_path)
    cut = tmp_path / "cut.sbr"
    cut.write_bytes(data[: len(data) // 2])  # a copy that stopped half way
    text = tmp_path / "notes.sbr"
    text.write_text("hello\n")
    for path, why in ((cut, "is cut short"), (text, "holds no signed match record")):
        for r in seabattles(["show", str(path)], ["verify", str(path)]):
            one_error(r, f"{path}: damaged: the file {why}")
            assert r.stdout == "", r.stdout
        j = seabattle("verify", "--json", str(path))
        assert j.returncode == 1 and "Traceback" not in j.stderr, j
        (report,) = json.loads(j.stdout)
        assert report["ok"] is False and report["reason"].startswith(f"damaged: the file {why}")
    missing = str(tmp_path / "missing.sbr")
    show, verify = seabattles(["show", missing], ["verify", missing])
    one_error(show, "No such file or directory")
    one_error(verify, "unreadable: No such file or directory")
    # A good record beside a damaged one: the good one is still verified on stdout.
    good = tmp_path / "good.sbr"
    good.write_bytes(data)
    both = seabattle("verify", str(good), str(cut))
    one_error(both, "damaged")
    assert both.stdout.startswith("OK") and str(good) in both.stdout


def test_other_wrong_arguments_are_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        runs = [
            ["bot", "--stats", "--rules", '{"rows": 8,'],
            ["bot", "--stats", "--rules", "[1]"],
            ["host", "--bot", "hunt", "--port", port],
            ["host", "--bot", "hunt", "--bind", "192.0.2.1"],  # TEST-NET: no address of ours
            ["host", "--bot", "hunt", "--save", str(tmp_path / "no" / "m.sbr")],
            ["join", "127.0.0.1:1", "--bot", "hunt", "--save", str(tmp_path / "no" / "m.sbr")],
            ["bot", "--server", "127.0.0.1:1", "--ca", str(tmp_path / "ca.pem")],
        ]
        (tmp_path / "ca.pem").write_text("not a certificate\n")
        results = seabattles(*runs)
    says = [
        "--rules: not valid JSON",
        "--rules: no preset",
        f"cannot listen on 127.0.0.1:{port}: Address already in use",
        "cannot listen on 192.0.2.1:0",
        "there is no folder for",
        "there is no folder for",
        "holds no CA certificate",
    ]
    for r, said in zip(results, says, strict=True):
        one_error(r, said)
