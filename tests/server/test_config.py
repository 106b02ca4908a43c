"""``seabattle serve`` settings: a TOML file, ``SEABATTLE_*`` variables and options, in that
order of precedence, checked one value at a time, and printed back by ``--print-config``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner
from seabattle.cli.main import main
from seabattle.client.wire import ConnectionClosed
from seabattle.server.settings import OPTIONS, SettingsError, load

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]


def test_an_option_beats_a_variable_which_beats_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "seabattle.toml"
    conf.write_text('port = 7100\nnode = "file"\nrate = 150\nmax_clients = 50\n')
    env = {"SEABATTLE_PORT": "7200", "SEABATTLE_RATE": "300.5", "SEABATTLE_JOURNAL": "off"}
    s = load({"port": 7300, "node": None}, config=conf, env=env)
    assert (s["port"], s["node"], s["rate"]) == (7300, "file", 300.5)
    assert s.sources["port"] == "command line" and s.sources["node"] == str(conf)
    limits = s.limits()
    assert (limits.rate, limits.max_clients, limits.journal) == (300.5, 50, False)
    assert load(env={})["port"] == OPTIONS["port"].default


@pytest.mark.parametrize(
    ("toml", "env", "says"),
    [
        ('port = "7010"', {}, "port (FILE): expected an integer"),
        ("port = 99999", {}, "99999 is not in 0..65535"),
        ("guests = 1", {}, "guests (FILE): expected true or false"),
        ("", {"SEABATTLE_MAX_CLIENTS": "many"}, "max_clients (SEABATTLE_MAX_CLIENTS)"),
        ("", {"SEABATTLE_RATE": "5"}, "the floor of spec 2.5"),
        ("", {"SEABATTLE_IDLE_TIMEOUT": "nan"}, "not a finite number"),
        ("log_format = 'xml'", {}, "not one of text, json"),
        ("prot = 7010", {}, "unknown setting 'prot'"),
        ("port = ", {}, "is not TOML"),
        ("ping_interval = 90", {}, "must be less than idle_timeout"),
        ('tls_cert = "a.pem"', {}, "TLS needs both"),
    ],
)
def test_a_bad_setting_is_one_line_that_names_it(
    tmp_path: Path, toml: str, env: dict[str, str], says: str
) -> None:
    conf = tmp_path / "bad.toml"
    conf.write_text(toml + "\n")
    with pytest.raises(SettingsError) as e:
        load(config=conf, env=env)
    assert says.replace("FILE", str(conf)) in str(e.value)
    r = CliRunner().invoke(main, ["serve", "--config", str(conf)], env=env)
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1, r.output


def test_print_config_shows_the_effective_settings_and_reads_back(tmp_path: Path) -> None:
    env = {"SEABATTLE_DB": "postgresql://alice:s3cret@db.example:5432/sea", "SEABATTLE_BURST": "60"}
    r = CliRunner().invoke(main, ["serve", "--print-config", "--port", "0", "--no-guests"], env=env)
    assert r.exit_code == 0, r.output
    assert "s3cret" not in r.output and "alice:***@db.example" in r.output
    assert "burst = 60  # SEABATTLE_BURST" in r.output
    assert "port = 0  # command line" in r.output
    # What it prints is a config file: fed back, it gives the same settings.
    saved = tmp_path / "printed.toml"
    saved.write_text(r.output.replace("***", "s3cret"))
    again = load(config=saved, env={})
    assert dict(again.values) == dict(load({"port": 0, "guests": False}, env=env).values)


def test_limits_from_the_environment_reach_the_running_server(tmp_path: Path) -> None:
    conf = tmp_path / "seabattle.toml"
    conf.write_text(f"port = 0\ndb = {json.dumps(str(tmp_path / 'db'))}\njson_status = true\n")
    env = {**os.environ, "SEABATTLE_MAX_CLIENTS": "1", "SEABATTLE_KEY": str(tmp_path / "k")}
    proc = subprocess.Popen(
        [*CLI, "serve", "--config", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["port"]

        async def two_clients() -> str:
            from seabattle.client.api import connect

            async with connect("127.0.0.1", port, name="first"):
                try:
                    async with connect("127.0.0.1", port, name="second"):
                        return "admitted"
                except ConnectionClosed as e:
                    return str(e)

        assert "busy" in trio.run(two_clients)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
