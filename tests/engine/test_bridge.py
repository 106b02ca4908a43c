"""The bridge (engine/bridge.py): an engine that fails loses that game, and only that game, with
the reason; the match goes on, the opponent sees an ordinary resignation, the record verifies.
On a real server and in peer play."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import peer_match, quick_pair, start_server
from seabattle.client.api import connect
from seabattle.engine.base import Engine
from seabattle.engine.bridge import EnginePlayer, EngineResult, play_engine_match
from seabattle.engine.builtin import BuiltinEngine
from seabattle.engine.process import ProcessEngine
from seabattle.protocol.record import verify_bytes, verify_record
from seabattle.protocol.rules import MatchFormat, preset

FAULTY = str(Path(__file__).with_name("faulty_engine.py"))
BEST_OF_3 = {"preset": "russian", "match": {"kind": "best-of", "games": 3, "sunk_bonus": 0}}

#: mode of tests/engine/faulty_engine.py, its extra arguments, the fault it gives in game 1.
FAULTS = [
    ("crash", (), "crashed"),
    ("hang", (), "timeout"),
    ("garbage", (), "garbage"),
    ("repeat", (), "illegal_move"),
    ("off", (), "illegal_move"),
    ("decline", (), "wrong_rules"),
    ("classic-fleet", ("--rules", "russian"), "illegal_fleet"),
]


def faulty(mode: str, *args: str) -> ProcessEngine:
    return ProcessEngine([sys.executable, FAULTY, mode, *args], move_time=0.5)


async def server_match(
    addr: tuple[str, int], engines: list[Engine], mode: str = "blind"
) -> tuple[Any, ...]:
    """A best-of-3 russian match on the server between the two engines: both results and the
    signed record."""
    out: list[Any] = [None, None]
    for e in engines:
        await e.start()
    try:
        async with connect(*addr, name="a") as a, connect(*addr, name="b") as b:
            pair = await quick_pair(a, b, BEST_OF_3, mode)

            async def one(i: int) -> None:
                out[i] = await play_engine_match(pair[i], engines[i])

            async with trio.open_nursery() as n:
                n.start_soon(one, 0)
                n.start_soon(one, 1)
            record = await a.get_record(pair[0].id)
    finally:
        for e in engines:
            await e.close()
    return out[0], out[1], record


@pytest.mark.parametrize(("mode", "args", "reason"), FAULTS, ids=[f[0] for f in FAULTS])
async def test_a_faulty_engine_loses_that_game_and_the_match_goes_on(
    server: tuple[str, int], mode: str, args: tuple[str, ...], reason: str
) -> None:
    bad: EngineResult
    good: EngineResult
    bad, good, record = await server_match(server, [faulty(mode, *args), BuiltinEngine("hunt")])
    assert [(f.game, f.reason) for f in bad.faults] == [(1, reason)]
    assert bad.faults[0].detail
    assert not good.faults and not good.lies and not bad.lies
    assert bad.ended and good.ended and bad.result == good.result
    report = verify_record(record)
    assert report.ok, report.reason
    first = report.games[0].outcome
    assert first is not None and first["reason"] == "resigned"
    assert first["winner"] == 1 - bad.seat if bad.seat is not None else False
    # The next games were played out by the engine started again (whoever won them).
    assert len(report.games) == bad.result["games"] >= 2
    assert all(g.outcome and g.outcome["reason"] == "fleet_sunk" for g in report.games[1:])


async def test_an_engine_that_does_not_play_the_rules_resigns_every_game(
    server: tuple[str, int],
) -> None:
    bad, good, record = await server_match(
        server, [faulty("fine", "--rules", "classic"), BuiltinEngine("random")]
    )
    assert [(f.game, f.reason) for f in bad.faults] == [(1, "wrong_rules"), (2, "wrong_rules")]
    assert "plays classic, not russian" in bad.faults[0].detail
    assert good.won is True and not good.faults
    report = verify_record(record)
    assert report.ok and [g.outcome["reason"] for g in report.games if g.outcome] == [
        "resigned",
        "resigned",
    ]


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_two_engines_play_a_whole_match_without_faults(
    server: tuple[str, int], mode: str
) -> None:
    a, b, record = await server_match(server, [faulty("fine"), BuiltinEngine("hunt")], mode)
    assert not a.faults and not b.faults and a.won is not b.won
    assert verify_record(record).ok


@pytest.mark.parametrize(
    ("mode", "args", "reason"),
    [("crash", (), "crashed"), ("classic-fleet", ("--rules", "russian"), "illegal_fleet")],
)
async def test_in_peer_play_a_faulty_engine_resigns_that_game(
    mode: str, args: tuple[str, ...], reason: str
) -> None:
    # The fleet fault: a peer commits before it can resign, so a random fleet is committed and
    # the game resigned at the side's first turn.
    rules = preset("russian").replace(match=MatchFormat(games=3))
    engines: list[Engine] = [faulty(mode, *args), BuiltinEngine("hunt")]
    for e in engines:
        await e.start()
    players = [EnginePlayer(engines[0], 0), EnginePlayer(engines[1], 1)]
    try:
        hosted, joined = await peer_match(rules, players[0], players[1])
    finally:
        for e in engines:
            await e.close()
    assert [(f.game, f.reason) for f in players[0].faults] == [(1, reason)]
    assert not players[1].faults
    assert hosted.report.ok and joined.report.ok and hosted.signed == joined.signed
    report = verify_record(hosted.signed)
    assert len(report.games) == hosted.match.to_dict()["games"] >= 2
    outcomes = [g.outcome for g in report.games]
    assert outcomes[0] == {"winner": 1, "reason": "resigned", "detail": "seat 0 resigned"}
    assert all(o and o["reason"] == "fleet_sunk" for o in outcomes[1:])


async def test_an_engine_plays_on_across_a_dropped_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # An invited match; the host's connection drops after its second verdict: the client gets
    # back in, the bridge picks the game up from the snapshot, and the engine plays it out.
    from seabattle.client.events import Resumed, ShotResult

    async with trio.open_nursery() as servers:
        addr, stop = await start_server(servers, tmp_path)
        async with connect(*addr, name="host") as a, connect(*addr, name="guest") as b:
            ha, invite = await a.create(BEST_OF_3, "blind")
            assert invite is not None
            hb = await b.join(invite)
            seen: list[Any] = []
            emit = ha._emit

            def watch(ev: Any) -> None:
                seen.append(ev)
                if isinstance(ev, ShotResult) and sum(isinstance(e, ShotResult) for e in seen) == 2:
                    n.start_soon(a.wire.stream.aclose)
                emit(ev)

            ha._emit = watch  # type: ignore[method-assign]
            out: list[Any] = [None, None]

            async def one(i: int, h: Any, engine: Engine) -> None:
                out[i] = await play_engine_match(h, engine)

            async with trio.open_nursery() as n:
                n.start_soon(one, 0, ha, BuiltinEngine("hunt", seed=1))
                n.start_soon(one, 1, hb, BuiltinEngine("hunt", seed=2))
            record = await a.get_record(ha.id)
        stop.set()
    assert any(isinstance(e, Resumed) for e in seen)
    assert not out[0].faults and not out[1].faults and out[0].won is not out[1].won
    report = verify_record(record)
    assert report.ok
    assert all(g.outcome and g.outcome["reason"] == "fleet_sunk" for g in report.games)


async def test_seabattle_bot_engine_plays_matches_and_prints_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `seabattle bot --engine CMD --json`: one JSON object per match, the engine's faults in it.
    from seabattle.cli.main import _bot_server

    rules = preset("russian").replace(match=MatchFormat(games=3))
    command = f"{sys.executable} {FAULTY} garbage --rules russian"
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        async with trio.open_nursery() as bots:
            bots.start_soon(
                partial(
                    _bot_server, *addr, "hunt", rules, "blind", 2, None, str(tmp_path), "e",
                    as_json=True, engine=command, move_time=2.0,
                )
            )  # fmt: skip
            bots.start_soon(
                partial(_bot_server, *addr, "random", rules, "blind", 2, None, None, "r")
            )
        nursery.cancel_scope.cancel()
    out = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in out if line.startswith("{")]
    assert len(rows) == 2 and all(r["engine"] == "faulty-garbage" for r in rows)
    for r in rows:
        assert [(f["game"], f["reason"]) for f in r["faults"]] == [(1, "garbage")]
        assert "fire at will!" in r["faults"][0]["detail"]
    saved = sorted(tmp_path.glob("*.sbr"))
    assert len(saved) == 2
    for path in saved:
        assert verify_bytes(path.read_bytes()).ok
