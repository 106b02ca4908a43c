"""The whole product as a user runs it: separate processes, real TCP, the stored record verified.

`seabattle serve` on port 0, two `seabattle bot` processes playing each other through it, then
`seabattle verify` on the records they saved. Every wait is bounded.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_two_bot_processes_play_through_a_server_and_the_records_verify(
    tmp_path: Path, mode: str
) -> None:
    server = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--port",
            "0",
            "--db",
            str(tmp_path / "db"),
            "--key",
            str(tmp_path / "key"),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        status = json.loads(server.stdout.readline())
        assert status["event"] == "listening"
        address = status["listening"]
        bots = [
            subprocess.Popen(
                [
                    *CLI,
                    "bot",
                    "--server",
                    address,
                    "--strategy",
                    strategy,
                    "--rules",
                    "classic",
                    "--mode",
                    mode,
                    "--name",
                    f"bot-{strategy}",
                    "--save",
                    str(tmp_path),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for strategy in ("density", "hunt")
        ]
        for bot in bots:
            out, _ = bot.communicate(timeout=90)
            assert bot.returncode == 0, out
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    assert server.returncode == 0
    records = sorted(map(str, tmp_path.glob("*.sbr")))
    assert records, "the bots saved no record"
    verified = _run("verify", "--json", *records)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    tampered = tmp_path / "tampered.sbr"
    data = bytearray(Path(records[0]).read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    assert _run("verify", str(tampered)).returncode != 0
