"""Idle CPUs held quick to wake while a server runs (``serve --cpu-latency-us``).

What an operator relies on: that the request is held on the kernel's real device for exactly as
long as the server runs and given back when it stops; that a request the machine cannot take
stops the server with one line naming the device, not a traceback, and not a server quietly
running without what was asked; and that a value out of range is refused before anything starts.
These run against the real ``/dev/cpu_dma_latency`` (CI runs as root on Linux).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import interrupt, server_process
from seabattle.cli.main import main as cli
from seabattle.common.latency import CpuLatencyError, cpu_latency, current


def test_the_request_is_held_for_the_block_and_given_back_after() -> None:
    before = current()
    with cpu_latency(0):
        assert current() == 0
        with cpu_latency(50):  # the strictest request held wins
            assert current() == 0
    assert current() == before
    with cpu_latency(None):  # not asked: nothing is touched
        assert current() == before


def test_a_server_holds_it_while_it_serves_and_not_after(tmp_path: Path) -> None:
    before = current()
    cli_main = "from seabattle.cli.main import main; main()"
    where = ["--port", "0", "--db", str(tmp_path / "db"), "--key", str(tmp_path / "k")]
    with server_process(cli_main, "serve", *where, "--cpu-latency-us", "0") as proc:
        assert proc.stdout is not None
        assert "listening on 127.0.0.1:" in proc.stdout.readline()
        assert current() == 0
        rc, _, err = interrupt(proc)
    assert rc == 0, err
    assert "idle CPUs held to a 0 µs wake-up" in err
    assert current() == before


def test_a_device_that_cannot_take_it_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-device")
    with (
        pytest.raises(CpuLatencyError, match="no-such-device: No such file"),
        cpu_latency(0, missing),
    ):
        pass  # pragma: no cover - not reached
    from seabattle.common import latency

    monkeypatch.setattr(latency, "DEVICE", missing)
    from seabattle.server.app import main

    with pytest.raises(SystemExit) as stop:
        main("127.0.0.1", 0, str(tmp_path / "db"), str(tmp_path / "k"), cpu_latency_us=0)
    said = str(stop.value)
    assert said.startswith("seabattle server: cannot hold the CPU wake-up latency at 0 µs")
    assert missing in said and "\n" not in said
    assert not (tmp_path / "db").exists()  # stopped before anything was opened


def test_a_latency_out_of_range_is_refused_by_the_settings() -> None:
    r = CliRunner().invoke(cli, ["serve", "--cpu-latency-us", "-1", "--print-config"])
    assert r.exit_code != 0
    assert "cpu_latency_us (--cpu-latency-us): -1 is not in 0..2147483647" in r.output
