"""The example engines in examples/ (JavaScript for Node.js, awk) play verified best-of-3
matches through the bridge: on a real server and in peer play."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from click.testing import CliRunner
from helpers import peer_match, quick_pair
from seabattle.cli.main import main
from seabattle.client.api import MatchHandle, connect
from seabattle.engine.base import Engine
from seabattle.engine.bridge import EnginePlayer, EngineResult, play_engine_match
from seabattle.engine.http import HttpEngine
from seabattle.engine.process import ProcessEngine
from seabattle.protocol.record import dump_record, verify_record
from seabattle.protocol.rules import MatchFormat, preset

ROOT = Path(__file__).resolve().parents[2]
NODE = ["node", str(ROOT / "examples" / "engine.js")]
AWK = ["sh", str(ROOT / "examples" / "engine.sh")]
BEST_OF_3 = {"preset": "russian", "match": {"kind": "best-of", "games": 3, "sunk_bonus": 0}}


async def both(pair: list[MatchHandle], engines: list[Engine]) -> list[EngineResult]:
    out: list[Any] = [None, None]

    async def one(i: int) -> None:
        out[i] = await play_engine_match(pair[i], engines[i])

    async with trio.open_nursery() as n:
        n.start_soon(one, 0)
        n.start_soon(one, 1)
    return out


def seabattle_verifies(tmp_path: Path, record: dict[str, Any]) -> bool:
    """``seabattle verify`` on the record saved to a file."""
    path = tmp_path / "match.sbr"
    path.write_bytes(dump_record(record))
    r = CliRunner().invoke(main, ["verify", str(path)], catch_exceptions=False)
    return r.exit_code == 0 and r.output.startswith("OK")


async def _best_of_3_on_a_server(
    server: tuple[str, int], tmp_path: Path, engines: list[Engine]
) -> list[str]:
    """``engines`` play a best-of-3 on ``server``, which both verify; their names."""
    hellos = [await e.start() for e in engines]
    try:
        async with connect(*server, name="one") as a, connect(*server, name="two") as b:
            pair = await quick_pair(a, b, BEST_OF_3, "blind")
            ra, rb = await both(pair, engines)
            record = await a.get_record(pair[0].id)
    finally:
        for e in engines:
            await e.close()
    assert ra.ended and rb.ended
    assert not ra.faults and not rb.faults and not ra.lies and not rb.lies
    assert ra.won is not rb.won and max(ra.result["wins"]) == 2
    assert [ra.engine, rb.engine] == [h.name for h in hellos]
    report = verify_record(record)
    assert report.ok, report.reason
    assert len(report.games) == ra.result["games"] >= 2
    assert seabattle_verifies(tmp_path, record)
    return [h.name for h in hellos]


async def test_node_and_awk_engines_play_a_verified_best_of_3_on_a_server(
    server: tuple[str, int], tmp_path: Path
) -> None:
    engines: list[Engine] = [ProcessEngine(NODE), ProcessEngine(AWK)]
    assert await _best_of_3_on_a_server(server, tmp_path, engines) == ["hunt.js", "hunt.awk"]


async def test_the_node_web_service_plays_a_verified_best_of_3_on_a_server(
    server: tuple[str, int], tmp_path: Path
) -> None:
    # examples/engine_http.js: the same engine as engine.js, over HTTP (spec/engine.md 5).
    service = await trio.lowlevel.open_process(
        ["node", str(ROOT / "examples" / "engine_http.js")], stdout=subprocess.PIPE
    )
    try:
        assert service.stdout is not None
        with trio.fail_after(30):
            first = await service.stdout.receive_some(4096)
        url = json.loads(first.decode().splitlines()[0])["listening"]
        engines: list[Engine] = [HttpEngine(url), ProcessEngine(AWK)]
        assert await _best_of_3_on_a_server(server, tmp_path, engines) == ["hunt.js", "hunt.awk"]
    finally:
        service.kill()
        await service.wait()


async def test_node_and_awk_engines_play_a_verified_best_of_3_in_peer_play(
    tmp_path: Path,
) -> None:
    rules = preset("classic").replace(match=MatchFormat(games=3))
    engines = [ProcessEngine(NODE), ProcessEngine(AWK)]
    players = [EnginePlayer(engines[0], 0), EnginePlayer(engines[1], 1)]
    try:
        hosted, joined = await peer_match(rules, players[0], players[1])
    finally:
        for e in engines:
            await e.close()
    assert not players[0].faults and not players[1].faults
    assert hosted.report.ok and joined.report.ok, (hosted.report.reason, joined.report.reason)
    assert hosted.signed == joined.signed
    assert verify_record(hosted.signed).ok and seabattle_verifies(tmp_path, hosted.signed)
    assert hosted.won is not joined.won
    assert max(hosted.match.to_dict()["wins"]) == 2


def test_host_and_join_engines_play_matches_in_a_row_as_processes(tmp_path: Path) -> None:
    # seabattle host/join --engine --matches 2, each a process of its own, the engines too.
    cli = [sys.executable, "-c", "from seabattle.cli.main import main; main()"]
    js, awk = "node " + shlex.quote(NODE[1]), "sh " + shlex.quote(AWK[1])
    host = subprocess.Popen(
        [*cli, "host", "--rules", "russian", "--engine", js, "--matches", "2",
         "--save", str(tmp_path / "m.sbr")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert host.stdout is not None
        lines = [host.stdout.readline(), host.stdout.readline()]
        assert lines[0].startswith("engine hunt.js by seabattle examples"), lines
        address = lines[1].split(" on ")[1].split(";")[0]
        joined = subprocess.run(
            [*cli, "join", address, "--engine", awk, "--matches", "2"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out, _ = host.communicate(timeout=60)
    finally:
        host.kill()
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert host.returncode == 0, out
    assert joined.stdout.count("record signed by both seats: verifies") == 2
    records = sorted(tmp_path.glob("m-*.sbr"))
    assert [p.name for p in records] == ["m-1.sbr", "m-2.sbr"]
    r = CliRunner().invoke(main, ["verify", *map(str, records)], catch_exceptions=False)
    assert r.exit_code == 0 and r.output.count("OK ") == 2, r.output
