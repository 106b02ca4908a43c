"""``seabattle online``, ``challenge``, ``accept`` and ``decline`` as separate processes against
a real server (spec 6.9): a challenge accepted and played by bots, one declined, and the
mistakes a user can make, each one line on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]
SMALL = json.dumps({"preset": "classic", "rows": 5, "cols": 5, "fleet": [["Boat", 2], ["Raft", 1]]})


async def seabattle(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run the command in a process of its own, the server answering in this test's loop."""
    with trio.fail_after(60):
        return await trio.run_process(
            [*CLI, *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )


async def _until_online(addr: str, name: str) -> None:
    """Wait until ``online`` lists ``name`` (its ``accept`` or ``decline`` is waiting)."""
    with trio.fail_after(60):
        while True:
            listed = await seabattle("online", "--server", addr, "--json")
            assert listed.returncode == 0, listed.stderr
            if any(r["name"] == name for r in json.loads(listed.stdout)):
                return
            await trio.sleep(0.1)


def one_line(r: subprocess.CompletedProcess[bytes], says: str) -> None:
    err = r.stderr.decode()
    assert r.returncode == 1, (r.returncode, err)
    # Progress goes to stderr too (as bot's does); what went wrong is its one last line.
    lines = err.splitlines()
    assert "Traceback" not in err and says in lines[-1], err
    assert [x for x in lines if x.startswith("Error")] == lines[-1:], err


async def test_challenge_accepted_between_two_processes(
    server: tuple[str, int], tmp_path: Path
) -> None:
    addr = f"{server[0]}:{server[1]}"
    bob_key = str(tmp_path / "bob.key")
    got: dict[str, subprocess.CompletedProcess[bytes]] = {}

    async def bob() -> None:
        got["bob"] = await seabattle(
            "accept", "--server", addr, "--key", bob_key, "--name", "bob", "--bot", "random"
        )

    async with trio.open_nursery() as n:
        n.start_soon(bob)
        # The challenger finds bob online by name once its accept is waiting.
        await _until_online(addr, "bob")
        got["alice"] = await seabattle(
            "challenge",
            "bob",
            "--server",
            addr,
            "--rules",
            SMALL,
            "--name",
            "alice",
            "--bot",
            "random",
        )
    for who in ("alice", "bob"):
        r = got[who]
        assert r.returncode == 0, (who, r.stderr.decode())
        assert "Traceback" not in r.stderr.decode()
    alice, bob_out = got["alice"].stdout.decode(), got["bob"].stdout.decode()
    mid = alice.split("match ", 1)[1][:32]
    assert mid in bob_out and ("you won" in alice) != ("you won" in bob_out), (alice, bob_out)
    assert " from alice (" in got["bob"].stderr.decode()


async def test_declined_is_one_line(server: tuple[str, int], tmp_path: Path) -> None:
    addr = f"{server[0]}:{server[1]}"
    bob_key = str(tmp_path / "bob.key")
    got: dict[str, subprocess.CompletedProcess[bytes]] = {}

    async def bob() -> None:
        got["bob"] = await seabattle(
            "decline", "--server", addr, "--key", bob_key, "--name", "bob", "--reason", "busy"
        )

    async with trio.open_nursery() as n:
        n.start_soon(bob)
        await _until_online(addr, "bob")
        got["alice"] = await seabattle("challenge", "bob", "--server", addr, "--bot", "random")
    one_line(got["alice"], "the challenge was declined: busy")
    assert got["bob"].returncode == 0 and "declined challenge" in got["bob"].stdout.decode()


async def test_mistakes_are_one_line(server: tuple[str, int], tmp_path: Path) -> None:
    addr = f"{server[0]}:{server[1]}"
    one_line(
        await seabattle("challenge", "nobody", "--server", addr, "--bot", "random"),
        "no player online is 'nobody'",
    )
    one_line(
        await seabattle("accept", "--server", addr, "--wait", "0", "--bot", "random"),
        "no challenge came in 0 s",
    )


async def test_engines_in_two_languages_challenge_and_accept(
    server: tuple[str, int], tmp_path: Path
) -> None:
    # Bots in any language (spec/engine.md) take challenges through the bridge: a Node.js
    # engine challenges, an awk one accepts, and the record both co-signed verifies.
    root = Path(__file__).resolve().parents[2] / "examples"
    addr = f"{server[0]}:{server[1]}"
    got: dict[str, subprocess.CompletedProcess[bytes]] = {}

    async def bob() -> None:
        got["bob"] = await seabattle(
            "accept", "--server", addr, "--key", str(tmp_path / "bob.key"), "--name", "bob",
            "--engine", f"sh {root / 'engine.sh'}",
        )  # fmt: skip

    async with trio.open_nursery() as n:
        n.start_soon(bob)
        await _until_online(addr, "bob")
        got["alice"] = await seabattle(
            "challenge", "bob", "--server", addr, "--rules", SMALL, "--name", "alice",
            "--engine", f"node {root / 'engine.js'}",
        )  # fmt: skip
    for who in ("alice", "bob"):
        assert got[who].returncode == 0, (who, got[who].stderr.decode())
    alice, bob_out = got["alice"].stdout.decode(), got["bob"].stdout.decode()
    mid = alice.split("match ", 1)[1][:32]
    assert mid in bob_out and ("you won" in alice) != ("you won" in bob_out), (alice, bob_out)
    fetched = await seabattle(
        "record", "fetch", mid, "--server", addr, "--out", str(tmp_path / "m.sbr")
    )
    assert fetched.returncode == 0, fetched.stderr.decode()
    verified = await seabattle("verify", str(tmp_path / "m.sbr"))
    assert verified.returncode == 0, verified.stdout.decode() + verified.stderr.decode()
