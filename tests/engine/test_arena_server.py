"""The arena through a real server (port 0): every game a real match between two clients, the
engines behind the bridge, the server's signed record saved and verified."""

from __future__ import annotations

from pathlib import Path

from seabattle.common.keys import load_or_create_key
from seabattle.engine.arena import Arena, Contender, paired
from seabattle.engine.builtin import BuiltinEngine
from seabattle.protocol.rules import preset
from seabattle.protocol.verify import verify_bytes
from test_arena import Faulty


async def test_a_small_run_through_a_server(server: tuple[str, int], tmp_path: Path) -> None:
    contenders = [
        Contender("hunt", lambda: BuiltinEngine("hunt")),
        Contender("density", lambda: BuiltinEngine("density")),
        Contender("bad", lambda: Faulty("crashed", after=4)),
    ]
    records = tmp_path / "records"
    arena = Arena(
        contenders, preset("russian"), seed=6, records=records, server=server, concurrency=2
    )
    results = await arena.play(paired(3, range(1)))
    assert len(results) == 6
    # The server signs with its own key (the fixture's key file): the one beside the records.
    key = load_or_create_key(tmp_path / "server.key").public_key().public_bytes_raw()
    assert bytes.fromhex((records / "referee.pub").read_text()) == key
    for r in results:
        assert r.winner is not None and set(r.engines) <= {"hunt", "density", "bad"}
        if "bad" in r.engines:
            assert r.fault is not None and r.fault.reason == "crashed"
            assert r.engines[r.winner] != "bad" and r.reason == "resigned"
        else:
            assert r.fault is None and r.reason == "fleet_sunk"
            assert r.to_win == (r.shots[r.winner],)
        assert r.record is not None
        report = verify_bytes((records / r.record).read_bytes(), referee_key=key)
        assert report.ok, report.problems
        assert {s["role"] for s in report.signatures if s["ok"]} == {"referee", "seat0", "seat1"}
        outcome = report.games[-1].outcome
        assert outcome is not None and outcome["winner"] == r.winner
        # The shots counted are the shots the record holds.
        assert report.games[-1].shots == sum(r.shots)
