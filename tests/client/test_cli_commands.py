"""The commands for what a server shows: ``watch``, ``ladder``, ``matches``, ``record fetch``, and
``play --invite`` / ``--join`` / ``--save``, each run as a real process against a server on port 0.

The processes run in real time: every wait is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import SMALL, start_server
from seabattle.bots.play import play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.protocol.record import dump_record, load_record, verify_record

pytest.importorskip("seabattle.server.app")

CLI = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]


async def seabattle(*args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [*CLI, *args], capture_stdout=True, capture_stderr=True, check=False
        )


def one_error(r: subprocess.CompletedProcess[bytes], says: str) -> None:
    """A non-zero exit with one line on stderr (click's usage hint aside) that says ``says``."""
    err = r.stderr.decode()
    assert r.returncode != 0, r
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("Usage:", "Try '"))]
    assert len(lines) == 1, err
    assert says in lines[0], lines[0]


class Output:
    """The standard output of a running process, read up to what a test waits for."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.text = ""

    async def expect(self, pattern: str) -> re.Match[str]:
        assert self.proc.stdout is not None
        with trio.fail_after(30):
            while (found := re.search(pattern, self.text)) is None:
                data = await self.proc.stdout.receive_some(65536)
                assert data, f"ended before {pattern!r}:\n{self.text}"
                self.text += data.decode()
        return found

    async def finish(self) -> int:
        assert self.proc.stdout is not None
        with trio.fail_after(30):
            while data := await self.proc.stdout.receive_some(65536):
                self.text += data.decode()
            return await self.proc.wait()


async def spawn(*args: str) -> Output:
    proc = await trio.lowlevel.open_process(
        [*CLI, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    return Output(proc)


async def test_watch_matches_ladder_and_record_fetch(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        server = f"{addr[0]}:{addr[1]}"
        async with (
            api.connect(*addr, name="alice") as alice,
            api.connect(*addr, name="bob") as bob,
        ):
            match, _ = await alice.create(SMALL, "blind", public=True)
            listed = await seabattle("matches", "--server", server, "--json")
            assert listed.returncode == 0, listed
            rows = json.loads(listed.stdout)
            assert [(r["match"], r["mode"], r["host"]) for r in rows] == [
                (match.id.hex(), "blind", alice.player)
            ]
            table = await seabattle("matches", "--server", server)
            assert table.returncode == 0 and b"Open matches" in table.stdout

            theirs = await bob.join(match.id)
            lines = await spawn("watch", match.id.hex(), "--server", server)
            jsonl = await spawn("watch", match.id.hex(), "--server", server, "--json")
            await lines.expect(r"watching match [0-9a-f]{32}: classic\+custom, blind mode, game 1")
            await jsonl.expect(r"\n")
            async with trio.open_nursery() as players:
                for i, h in enumerate((match, theirs)):
                    players.start_soon(play_match, h, make_strategy("random"), random.Random(i))
            assert await lines.finish() == 0
            assert await jsonl.finish() == 0
            shown = lines.text.splitlines()
            # Seats by the names the players gave (off a terminal: one line an event).
            assert "alice against bob" in shown[0]
            assert re.search(r"shot 1: (alice|bob) fires at [A-E]\d", lines.text)
            assert re.search(r"shot 1: (alice|bob): [A-E]\d (miss|hit)", lines.text)
            assert re.match(r"match over: (alice|bob) won 1-0 \(record: ", shown[-1]), shown[-1]
            events = [json.loads(x) for x in jsonl.text.splitlines()]
            assert events[0]["t"] == "snapshot" and events[-1]["t"] == "match_over"
            assert {"shot", "verdict", "revealed"} <= {e["t"] for e in events}
            assert "commitments" not in jsonl.text  # digests a reader of the stream has no use for
            expected = dump_record(await alice.get_record(match.id))

        out = tmp_path / "m.sbr"
        fetched = await seabattle(
            "record", "fetch", match.id.hex(), "--server", server, "--out", str(out)
        )
        assert fetched.returncode == 0, fetched
        assert out.read_bytes() == expected
        assert verify_record(load_record(out.read_bytes())).ok
        assert re.match(rf"OK +record {match.id.hex()} -> .*: 1 game\(s\)", fetched.stdout.decode())
        summary = await seabattle("record", "fetch", match.id.hex(), "--server", server, "--json")
        report = json.loads(summary.stdout)
        assert summary.returncode == 0 and report["ok"] and report["file"] is None

        ladder = await seabattle("ladder", "--server", server, "--json")
        assert ladder.returncode == 0, ladder
        rows = json.loads(ladder.stdout)
        assert sorted(r["player"] for r in rows) == sorted([alice.player, bob.player])
        assert all(r["games"] == 1 for r in rows)
        assert sum(r["wins"] for r in rows) == 1
        table = await seabattle("ladder", "--server", server)
        assert table.returncode == 0 and b"Ladder of" in table.stdout
        nursery.cancel_scope.cancel()


async def test_bad_match_ids_and_an_unreachable_server_are_one_line(tmp_path: Path) -> None:
    nobody = "0" * 32
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        server = f"{addr[0]}:{addr[1]}"
        one_error(await seabattle("watch", "xyz", "--server", server), "not a match id")
        one_error(await seabattle("record", "fetch", "ab", "--server", server), "not a match id")
        one_error(await seabattle("watch", nobody, "--server", server), "refused: no_such_match")
        one_error(
            await seabattle("record", "fetch", nobody, "--server", server),
            "refused: no_such_record",
        )
        nursery.cancel_scope.cancel()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"  # bound, never listening: refused
    for args in (("ladder",), ("matches",), ("watch", nobody), ("record", "fetch", nobody)):
        one_error(await seabattle(*args, "--server", closed), f"cannot reach {closed}")


async def test_play_invite_join_and_save(tmp_path: Path) -> None:
    rules = json.dumps(SMALL)
    cells = "".join(f"{c}{r}\n" for r in range(1, 6) for c in "ABCDE")
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        server = f"{addr[0]}:{addr[1]}"
        saved = {side: tmp_path / f"{side}.sbr" for side in ("host", "guest")}
        host = await spawn(
            "play", "--server", server, "--rules", rules, "--invite", "--save", str(saved["host"])
        )
        code = (await host.expect(r"invitation code (\w+): "))[1]
        guest = await spawn(
            "play", "--server", server, "--join", code, "--save", str(saved["guest"])
        )
        for player in (host, guest):
            assert player.proc.stdin is not None
            await player.proc.stdin.send_all(("random\n" + cells).encode())
        assert await host.finish() == 0, host.text
        assert await guest.finish() == 0, guest.text
        for player in (host, guest):
            assert re.search(r"OK +record [0-9a-f]{32} -> .*: 1 game\(s\)", player.text)
        records: list[Any] = [load_record(p.read_bytes()) for p in saved.values()]
        assert all(verify_record(r).ok for r in records)
        nursery.cancel_scope.cancel()


async def test_play_takes_invite_or_join_not_both() -> None:
    r = await seabattle("play", "--server", "127.0.0.1:1", "--invite", "--join", "ABCD")
    one_error(r, "give one of them")


async def test_host_and_join_play_a_peer_match_to_one_record(tmp_path: Path) -> None:
    # `join` connects before it starts its screen (or line mode); the match it then plays on
    # that connection ends with the record both sides co-signed, byte for byte the same.
    saved = {side: tmp_path / f"{side}.sbr" for side in ("host", "joiner")}
    rules = json.dumps(SMALL)
    host = await spawn(
        "host", "--port", "0", "--rules", rules, "--bot", "random", "--save", str(saved["host"])
    )
    where = (await host.expect(r"hosting \S+ on ([\d.]+:\d+)"))[1]
    joiner = await spawn("join", where, "--bot", "random", "--save", str(saved["joiner"]))
    assert await joiner.finish() == 0, joiner.text
    assert await host.finish() == 0, host.text
    for side in (host, joiner):
        assert "record signed by both seats: verifies" in side.text
    assert saved["host"].read_bytes() == saved["joiner"].read_bytes()
    assert verify_record(load_record(saved["host"].read_bytes())).ok
