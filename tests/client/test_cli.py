"""The ``seabattle`` command line, through click's CliRunner."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner
from helpers import BEST_OF_3, OTHER, PLAYERS, REFEREE, match_of, peer_match, start_server
from seabattle.bots.strategies import make_strategy
from seabattle.cli.main import main
from seabattle.client.peer import BotPlayer
from seabattle.protocol.record import dump_record, load_record
from seabattle.protocol.rules import PRESETS


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_rules_lists_every_preset() -> None:
    r = run("rules")
    assert r.exit_code == 0
    for name in PRESETS:
        assert name in r.output


def test_rules_json_is_the_full_rule_set() -> None:
    r = run("rules", "russian", "--json")
    assert r.exit_code == 0
    assert json.loads(r.output) == PRESETS["russian"].to_dict()
    every = json.loads(run("rules", "--json").output)
    assert set(every) == set(PRESETS)


def test_rules_readable_table() -> None:
    r = run("rules", "sea-battle")
    assert r.exit_code == 0
    assert "Ship-5 (5)" in r.output and "shot 30s" in r.output


def test_unknown_preset_is_a_usage_error() -> None:
    r = CliRunner().invoke(main, ["rules", "nope"])
    assert r.exit_code == 2 and "classic" in r.output


def _peer_record() -> dict[str, Any]:
    hosting = BotPlayer(make_strategy("density"), random.Random(3))
    joining = BotPlayer(make_strategy("hunt"), random.Random(4))
    hosted, _ = trio.run(peer_match, PRESETS["classic"], hosting, joining)
    signed: dict[str, Any] = hosted.signed
    return signed


@pytest.fixture(scope="module")
def signed() -> dict[str, Any]:
    return _peer_record()


def test_verify_accepts_a_good_record(tmp_path: Path, signed: dict[str, Any]) -> None:
    good = tmp_path / "good.sbr"
    good.write_bytes(dump_record(signed))
    r = run("verify", str(good))
    assert r.exit_code == 0, r.output
    assert "OK" in r.output
    r = run("verify", "--json", str(good))
    assert r.exit_code == 0 and json.loads(r.output)[0]["ok"] is True


def test_verify_rejects_a_tampered_record(tmp_path: Path, signed: dict[str, Any]) -> None:
    good = tmp_path / "good.sbr"
    good.write_bytes(dump_record(signed))
    bad = load_record(dump_record(signed))
    result = bad["record"]["result"]
    result["winner"] = 1 - result["winner"]  # claim the loser won
    tampered = tmp_path / "tampered.sbr"
    tampered.write_bytes(dump_record(bad))
    r = run("verify", str(good), str(tampered))
    assert r.exit_code == 1
    assert "FAIL" in r.output and "tampered.sbr" in r.output
    reports = json.loads(run("verify", "--json", str(tampered)).output)
    assert reports[0]["ok"] is False and reports[0]["reason"]


def test_verify_rejects_garbage(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sbr"
    junk.write_bytes(b"\xc1not a record")
    assert run("verify", str(junk)).exit_code == 1


def test_bot_stats_prints_a_summary() -> None:
    r = run(
        "bot",
        "--stats",
        "--games",
        "5",
        "--rules",
        "classic-8x8",
        "--strategy",
        "hunt",
        "--seed",
        "1",
    )
    assert r.exit_code == 0, r.output
    assert "mean" in r.output and "median" in r.output and "max" in r.output


def test_bot_needs_a_server_or_stats() -> None:
    assert CliRunner().invoke(main, ["bot"]).exit_code == 2


def test_demo_runs_and_verifies(tmp_path: Path) -> None:
    out = tmp_path / "demo.sbr"
    r = run("demo", "--save", str(out))
    assert r.exit_code == 0, r.output
    assert "verifies" in r.output
    assert run("verify", str(out)).exit_code == 0


def test_peer_demo_runs() -> None:
    r = run("demo", "--peer", "--rules", "russian")
    assert r.exit_code == 0, r.output
    assert "the signed record verifies: signed by both players" in r.output


async def test_bot_command_plays_on_a_server_and_saves_records(tmp_path: Path) -> None:
    from seabattle.cli.main import _bot_server

    pytest.importorskip("seabattle.server.app")
    rules = PRESETS["classic-8x8"]
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        async with trio.open_nursery() as bots:
            for i, strategy in enumerate(("density", "random")):
                bots.start_soon(
                    _bot_server,
                    addr[0],
                    addr[1],
                    strategy,
                    rules,
                    "blind",
                    2,
                    None,
                    str(tmp_path),
                    f"bot{i}",
                )
        nursery.cancel_scope.cancel()
    saved = sorted(tmp_path.glob("*.sbr"))
    assert len(saved) == 2  # two matches, each saved by both bots under the same name
    r = run("verify", *map(str, saved))
    assert r.exit_code == 0, r.output


def test_serve_starts_and_stops_on_sigint(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    pytest.importorskip("seabattle.server.app")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from seabattle.cli.main import main; main()",
            "serve",
            "--port",
            "0",
            "--db",
            str(tmp_path / "db"),
            "--key",
            str(tmp_path / "k"),
            "--json-status",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        status = json.loads(proc.stdout.readline())
        assert status["listening"].startswith("127.0.0.1:")
        # app.main installs its signal receiver before it prints its status, so a SIGINT sent at
        # once is a graceful shutdown (exit 0), never a KeyboardInterrupt (exit 1).
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()


def test_verify_pins_the_referee_key(tmp_path: Path) -> None:
    from seabattle.protocol.record import build_record, seal

    record = build_record(match_of(BEST_OF_3, 5), PLAYERS, REFEREE.public_key())
    path = tmp_path / "refereed.sbr"
    path.write_bytes(dump_record(seal(record, [("referee", REFEREE)])))
    mine = REFEREE.public_key().public_bytes_raw().hex()
    assert run("verify", "--referee-key", mine, str(path)).exit_code == 0
    other = OTHER.public_key().public_bytes_raw().hex()
    r = run("verify", "--referee-key", other, str(path))
    assert r.exit_code == 1 and "untrusted_referee" in r.output
    r = CliRunner().invoke(main, ["verify", "--referee-key", "not-a-key", str(path)])
    assert r.exit_code == 2 and "--referee-key" in r.output


def _downgraded_file(tmp_path: Path) -> tuple[Path, str]:
    """A refereed record rewritten as version 1 with its seats swapped and signed by its referee
    alone (spec 11.3, old_version), and that referee's key in hex."""
    from seabattle.protocol.record import build_record, seal

    record = build_record(match_of(BEST_OF_3, 5), PLAYERS, REFEREE.public_key())
    record["v"], record["players"] = 1, record["players"][::-1]
    for game in record["games"]:
        for entry in game["transcript"]:
            entry.pop("sig", None)
    path = tmp_path / "downgraded.sbr"
    path.write_bytes(dump_record(seal(record, [("referee", REFEREE)])))
    return path, REFEREE.public_key().public_bytes_raw().hex()


def test_verify_refuses_a_version_1_record_in_one_line_unless_asked(tmp_path: Path) -> None:
    path, mine = _downgraded_file(tmp_path)
    r = run("verify", "--referee-key", mine, str(path))
    assert r.exit_code == 1
    (line,) = r.output.splitlines()
    assert line.startswith(f"FAIL {path}: old_version: ") and line.endswith(
        "(--accept-v1 reads it)"
    )
    r = run("verify", "--referee-key", mine, "--accept-v1", str(path))
    assert r.exit_code == 0, r.output
    (line,) = r.output.splitlines()
    assert line.startswith(f"OK   {path}: ") and "seats unbound" in line
    reports = json.loads(run("verify", "--json", "--accept-v1", str(path)).output)
    assert reports[0]["ok"] is True and reports[0]["seats_bound"] is False


def test_verify_says_nothing_of_seats_for_a_version_2_record(
    tmp_path: Path, signed: dict[str, Any]
) -> None:
    good = tmp_path / "good.sbr"
    good.write_bytes(dump_record(signed))
    for args in ([], ["--accept-v1"]):
        r = run("verify", *args, str(good))
        assert r.exit_code == 0 and "unbound" not in r.output
    assert json.loads(run("verify", "--json", str(good)).output)[0]["seats_bound"] is True


def test_verify_and_show_refuse_a_record_file_that_is_not_canonical(
    tmp_path: Path, signed: dict[str, Any]
) -> None:
    data = dump_record(signed)
    assert data[0] == 0x82  # {record, sigs}: a fixmap, canonically
    path = tmp_path / "map16.sbr"
    path.write_bytes(b"\xde\x00\x02" + data[1:])
    r = run("verify", str(path))
    assert r.exit_code == 1 and "malformed: the bytes are not the canonical encoding" in r.output
    r = run("show", str(path))
    assert r.exit_code == 1 and "malformed: the bytes are not the canonical encoding" in r.output
