"""The arena in process: whole round robins on the pure referee and seats, paired boards, the same
seed the same games, engines that fail losing their games with the reason, every record verified
as ``seabattle verify`` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from seabattle.engine.arena import (
    Arena,
    Contender,
    GameResult,
    Scheduled,
    board,
    paired,
    unique_names,
)
from seabattle.engine.base import Engine, EngineFault, Hello, Move
from seabattle.engine.builtin import BuiltinEngine
from seabattle.engine.side import Side
from seabattle.protocol.fleet import Fleet, Placement
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, preset, rules_from_dict
from seabattle.protocol.verify import verify_bytes

RUSSIAN = preset("russian")


def builtin(name: str, label: str | None = None) -> Contender:
    return Contender(label or name, lambda: BuiltinEngine(name))


def verified(arena: Arena, results: list[GameResult]) -> None:
    """Every game's record is saved, verifies pinned to the arena's referee key, is co-signed by
    both seats, and says what the result says."""
    assert arena.records is not None
    key = bytes.fromhex((arena.records / "referee.pub").read_text())
    for r in results:
        assert r.record is not None
        report = verify_bytes((arena.records / r.record).read_bytes(), referee_key=key)
        assert report.ok, (r, report.problems)
        assert {s["role"] for s in report.signatures if s["ok"]} == {"referee", "seat0", "seat1"}
        outcome = report.games[-1].outcome
        assert outcome is not None and outcome["winner"] == r.winner


async def test_a_round_robin_of_builtins_finishes_with_records_that_verify(tmp_path: Path) -> None:
    contenders = [builtin("random"), builtin("hunt"), builtin("density")]
    arena = Arena(contenders, RUSSIAN, seed=5, records=tmp_path)
    results = await arena.play(paired(3, range(2)))
    assert [r.index for r in results] == list(range(12))  # 3 pairs, 2 boards, seats swapped
    for a, b in (("random", "hunt"), ("random", "density"), ("hunt", "density")):
        mine = [r for r in results if set(r.engines) == {a, b}]
        assert len(mine) == 4 and sum(r.engines[0] == a for r in mine) == 2
    assert all(r.fault is None and r.reason == "fleet_sunk" for r in results)
    for r in results:
        assert r.winner is not None
        assert r.to_win == (r.shots[r.winner],)  # one game, won by sinking the fleet
        assert r.shots[r.winner] >= sum(s.length for s in RUSSIAN.fleet)
    verified(arena, results)
    # The density engine beats the random one on every board but a freak one.
    density = sum(
        r.score(r.engines.index("density"))
        for r in results
        if set(r.engines) == {"random", "density"}
    )
    assert density >= 3


async def test_the_same_seed_gives_the_same_games_whatever_the_concurrency(
    tmp_path: Path,
) -> None:
    def run(seed: int, concurrency: int, folder: str) -> Arena:
        contenders = [builtin("random"), builtin("hunt"), builtin("random", "random#2")]
        return Arena(
            contenders, RUSSIAN, seed=seed, concurrency=concurrency, records=tmp_path / folder
        )

    one = run(9, 1, "a")
    first = await one.play(paired(3, range(2)))
    many = run(9, 4, "b")
    again = await many.play(paired(3, range(2)))
    assert [r.to_dict() for r in first] == [r.to_dict() for r in again]
    # The records are the same bytes but for the referee's signature (a key of each run's own).
    for r in first:
        assert r.record is not None
        a = (one.records / r.record).read_bytes()  # type: ignore[operator]
        b = (many.records / r.record).read_bytes()  # type: ignore[operator]
        assert len(a) == len(b)
    other = await run(10, 1, "c").play(paired(3, range(2)))
    assert [r.to_dict() for r in other] != [r.to_dict() for r in first]


class Watcher(BuiltinEngine):
    """A built-in engine that notes the fleet it defends and what it knew at every move."""

    def __init__(self, log: list[tuple[str, int, Fleet | None]], label: str) -> None:
        super().__init__("random")
        self.log, self.label = log, label
        self.crossed: list[frozenset[Cell]] = []

    async def move(self, side: Side) -> Move:
        if not side.shots:
            self.log.append((self.label, side.seat, side.fleet))
        self.crossed.append(frozenset(side.crossed))
        return await super().move(side)


async def test_paired_boards_give_both_engines_the_same_fleets_to_shoot_at() -> None:
    log: list[tuple[str, int, Fleet | None]] = []
    contenders = [
        Contender("a", lambda: Watcher(log, "a")),
        Contender("b", lambda: Watcher(log, "b")),
    ]
    arena = Arena(contenders, RUSSIAN, seed=3)
    results = await arena.play(paired(2, range(3)))
    for r in results:
        b = arena.board(r.board)
        assert b == board(RUSSIAN, 3, r.board)  # drawn from the seed and the number alone
        defended = {(who, seat): f for who, seat, f in log}
        # Each engine defends its seat's board fleet: so each shot at both of them.
        for seat, name in enumerate(r.engines):
            assert defended[(name, seat)] is not None
    firsts = {(r.board, r.engines[0]) for r in results}
    assert len(firsts) == 6  # on every board each engine sat first once
    fleets = {f for _, _, f in log}
    assert len(fleets) == 6  # three boards, two fleets each, both engines on each
    assert sum(1 for _, _, f in log if f == arena.board(0).fleets[0]) == 2


async def test_a_trusting_seat_tells_its_engine_the_crossed_cells_a_checking_one_does() -> None:
    """In process the seats keep no mirror by default: the crossed-out cells an engine is told
    come from the referee's board instead, and are the same, move by move."""
    seen: dict[bool, list[list[frozenset[Cell]]]] = {}
    for checking in (True, False):
        engines: list[Watcher] = []

        def make(label: str, engines: list[Watcher] = engines) -> Watcher:
            engines.append(Watcher([], label))
            return engines[-1]

        contenders = [Contender("a", lambda: make("a")), Contender("b", lambda: make("b"))]
        arena = Arena(contenders, RUSSIAN, seed=4, checking=checking)
        await arena.play(paired(2, range(1)))
        seen[checking] = [e.crossed for e in engines]
        assert any(c for e in engines for c in e.crossed)  # russian crosses cells out
    assert seen[True] == seen[False]


class Faulty(Engine):
    """Plays a few random moves, then fails as ``reason`` says."""

    def __init__(self, reason: str, after: int = 3) -> None:
        self.reason, self.after = reason, after
        self.inner = BuiltinEngine("random", seed=1)
        self.moves = 0
        self.name = f"faulty-{reason}"

    async def start(self) -> Hello:
        if self.reason == "wrong_rules":
            return Hello(self.name, rules=("classic",))
        return Hello(self.name)

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        await self.inner.new_game(rules, seat, game)

    async def place(self, rules: RuleSet) -> Fleet | None:
        if self.reason == "illegal_fleet":
            return Fleet(tuple(Placement(0, 0, False) for _ in rules.fleet))
        return None

    async def move(self, side: Side) -> Move:
        self.moves += 1
        if self.moves > self.after:
            if self.reason == "illegal_move":
                return Move((side.shots[0].cells[0],) if side.shots else (Cell(99, 0),))
            raise EngineFault(self.reason, "as the test asked")
        return await self.inner.move(side)


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("crashed", "as the test asked"),
        ("timeout", "as the test asked"),
        ("illegal_move", "fired at already"),
        ("illegal_fleet", "Cruiser-1"),
        ("wrong_rules", "it plays classic, not russian"),
    ],
)
async def test_a_failing_engine_loses_its_games_with_the_reason(
    tmp_path: Path, reason: str, says: str
) -> None:
    contenders = [builtin("hunt"), Contender("bad", lambda: Faulty(reason)), builtin("random")]
    arena = Arena(contenders, RUSSIAN, seed=2, records=tmp_path)
    results = await arena.play(paired(3, range(1)))
    assert len(results) == 6
    for r in results:
        if "bad" in r.engines:
            assert r.fault is not None and r.fault.engine == "bad" and r.fault.reason == reason
            assert says in r.fault.detail
            assert r.winner == 1 - r.engines.index("bad") and r.reason == "resigned"
        else:
            assert r.fault is None and r.reason == "fleet_sunk"
    verified(arena, results)


async def test_salvo_and_radar_rules_play_through() -> None:
    for rules in (
        rules_from_dict({"preset": "classic", "shots": "salvo-afloat"}),
        rules_from_dict({"preset": "classic", "radar": True}),
        rules_from_dict({"preset": "classic", "match": {"kind": "best-of", "games": 3}}),
    ):
        arena = Arena([builtin("hunt"), builtin("best")], rules, seed=1)
        results = await arena.play(paired(2, range(1)))
        assert all(r.fault is None and r.winner is not None for r in results)


async def test_stop_ends_the_run_between_games() -> None:
    arena = Arena([builtin("random"), builtin("hunt")], RUSSIAN, seed=1)
    seen: list[GameResult] = []
    results = await arena.play(paired(2, range(100)), done=seen.append, stop=lambda: len(seen) >= 3)
    assert len(results) == 3 and seen == results


def test_schedules_and_names() -> None:
    rr = list(paired(3, range(1)))
    assert [s.seats for s in rr] == [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)]
    g = list(paired(3, range(2), gauntlet=True))
    assert [s.seats for s in g] == [(0, 1), (1, 0), (0, 2), (2, 0)] * 2
    assert g[-1] == Scheduled(7, 1, (2, 0))
    assert unique_names(["random", "random", "best", "random"]) == [
        "random",
        "random#2",
        "best",
        "random#3",
    ]
    with pytest.raises(ValueError, match="repeat"):
        Arena([builtin("random"), builtin("random")], RUSSIAN)


#: An engine process in Python that plays at random, but for ``FAULT``: ``hang`` never answers a
#: move, ``garbage`` answers one with a line that is no JSON, ``rules`` says it plays classic
#: only, ``exit`` dies before its hello.
ENGINE_PROCESS = """
import json, random, sys, time
FAULT = sys.argv[1]
if FAULT == "exit":
    sys.exit(2)
def send(obj):
    print(json.dumps(obj), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    kind = req["type"]
    if kind == "engine":
        send({"type": "hello", "name": "proc", "rules": ["classic"] if FAULT == "rules" else []})
    elif kind == "place":
        send({"type": "fleet", "ships": "random"})
    elif kind == "move":
        if FAULT == "hang":
            time.sleep(600)
        if FAULT == "garbage":
            print("<html>oops</html>", flush=True)
            continue
        free = [(r, c) for r, row in enumerate(req["grid"]) for c, x in enumerate(row) if x == "."]
        cells = random.sample(free, req["count"])
        send({"type": "fire", "cells": [chr(65 + c) + str(r + 1) for r, c in cells]})
    elif kind == "quit":
        break
"""


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("hang", "timeout"), ("garbage", "garbage"), ("rules", "wrong_rules"), ("exit", "crashed")],
)
async def test_an_engine_process_that_fails_loses_its_games_and_the_run_finishes(
    tmp_path: Path, fault: str, reason: str
) -> None:
    import sys

    from seabattle.engine.process import ProcessEngine

    script = tmp_path / "engine.py"
    script.write_text(ENGINE_PROCESS)
    argv = [sys.executable, str(script), fault]
    contenders = [
        builtin("hunt"),
        Contender("proc", lambda: ProcessEngine(argv, move_time=0.5, name="proc")),
    ]
    arena = Arena(contenders, RUSSIAN, seed=3, records=tmp_path / "records")
    results = await arena.play(paired(2, range(1)))
    assert len(results) == 2
    for r in results:
        assert r.fault is not None and r.fault.engine == "proc", r
        assert r.fault.reason == reason and r.fault.detail
        assert r.winner is not None and r.engines[r.winner] == "hunt" and r.reason == "resigned"
    verified(arena, results)
