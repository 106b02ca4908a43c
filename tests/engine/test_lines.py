"""The engine protocol's sans-IO part (engine/lines.py, engine/side.py) beyond the vectors: what
a side knows after many honest shots, the same after a reconnect, the strict reading of lines."""

from __future__ import annotations

import json
import random

import pytest
from seabattle.engine import lines
from seabattle.engine.base import EngineFault, Hello
from seabattle.engine.side import Side
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import MatchFormat, RuleSet, SunkReport, preset, rules_from_dict
from seabattle.protocol.seat_events import IncomingShot, ShotResult, YourTurn
from seabattle.protocol.verdict import Defender

SALVO = rules_from_dict(
    {"preset": "classic", "shots": "salvo-afloat", "salvo_report": "per-cell", "radar": True}
)


def play(rules: RuleSet, seed: int, stop: int) -> tuple[Game, list[Side]]:
    """An honest game of random shots (a radar scan now and then), ``stop`` shots in or to its
    end; both seats' sides, fed as the seat feeds them."""
    rng = random.Random(seed)
    g = Game(rules, bytes(16), 1)
    ds, sides = [], []
    for s in (0, 1):
        fleet = random_fleet(rules, rng)
        c = Committed(rules, fleet, rng.randbytes(32), bytes(16), 1, s)
        ds.append(Defender(c))
        sides.append(Side(rules, s, 1, fleet))
        g.commit(s, c.commitment)
    g.set_first(0)
    while g.phase is Phase.FIRING and len(g.shots) < stop:
        s = g.turn
        assert s is not None
        side = sides[s]
        radar = rules.radar and not g.boards[1 - s].radar_used
        side.feed(YourTurn(1, g.shot_count(s), radar))
        if radar and rng.random() < 0.2:
            at = Cell(rng.randrange(rules.rows - 1), rng.randrange(rules.cols - 1))
            assert side.illegal((), at) is None
            shot = g.radar(s, at)[0].shot  # type: ignore[attr-defined]
        else:
            legal = [
                Cell(*divmod(i, rules.cols))
                for i in range(rules.cells)
                if Cell(*divmod(i, rules.cols)) not in side.fired | side.crossed
            ]
            cells = rng.sample(legal, g.shot_count(s))
            assert side.illegal(cells, None) is None
            shot = g.fire(s, cells)[0].shot  # type: ignore[attr-defined]
        before = set(g.boards[1 - s].crossed)
        verdict = ds[1 - s].answer(shot)
        g.answer(1 - s, verdict)
        new = sorted(set(g.boards[1 - s].crossed) - before)
        crossed = tuple(Cell(*divmod(i, rules.cols)) for i in new)
        side.feed(ShotResult(1, shot.n, shot.cells, shot.radar, verdict, crossed))
        sides[1 - s].feed(IncomingShot(1, shot.n, shot.cells, shot.radar, verdict))
    return g, sides


@pytest.mark.parametrize("rules", [preset("russian"), preset("classic"), SALVO], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_the_side_agrees_with_the_game(rules: RuleSet, seed: int) -> None:
    # What the side thinks it fired at and sees crossed out is the game's own; every call the
    # side calls legal, the game accepted (play() asserts it).
    g, sides = play(rules, seed, 10_000)
    for side in sides:
        board = g.boards[1 - side.seat]
        assert {c.index(rules.cols) for c in side.fired} == set(board.fired)
        assert {c.index(rules.cols) for c in side.crossed} == set(board.crossed)
        req = side.request(move_time=1.0)
        marks = "".join(req["grid"])
        assert len(req["grid"]) == rules.rows and len(marks) == rules.cells
        assert len(req["shots"]) + len(req["incoming"]) == len(g.shots)
        assert "salt" not in json.dumps(req) and "open" not in json.dumps(req)


@pytest.mark.parametrize("rules", [preset("russian"), preset("classic")], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_after_a_reconnect_the_side_knows_the_same_from_the_snapshot(
    rules: RuleSet, seed: int
) -> None:
    g, sides = play(rules, seed, 60)
    for side in sides:
        a = side.request(move_time=1.0)
        # A side that saw nothing of the game (it all happened while away): what the rules
        # showed is exact; a named sinking's cells are known from the hits.
        again = Side(rules, side.seat, 1, side.fleet)
        again.resume(g.view())
        b = again.request(move_time=1.0)
        for key in ("sunk", "crossed", "afloat", "fleet"):
            assert a[key] == b[key], key
        if rules.sunk is SunkReport.SHOWN:
            assert a["grid"] == b["grid"]
        # The side that was there keeps all it knew: the same request, but for the shots.
        side.resume(g.view())
        c = side.request(move_time=1.0)
        shots = ("shots", "incoming")
        assert {k: v for k, v in a.items() if k not in shots} == {
            k: v for k, v in c.items() if k not in shots
        }
        assert again.fired == side.fired
        # The shots themselves: each fired cell once, its number unknown.
        assert sorted(s["cells"][0] for s in b["shots"]) == sorted(
            c for s in a["shots"] if not s["radar"] for c in s["cells"]
        )
        assert all(s["n"] is None for s in b["shots"])


def test_a_line_too_long_is_garbage() -> None:
    line = b'{"type":"hello","name":"x","pad":"' + b"x" * lines.MAX_ANSWER + b'"}'
    with pytest.raises(EngineFault) as e:
        lines.decode(line)
    assert e.value.reason == "garbage" and "more than 65536 bytes" in e.value.detail


def test_bytes_that_are_not_utf8_are_garbage() -> None:
    with pytest.raises(EngineFault) as e:
        lines.decode(b'{"type":"hello","name":"\xff"}')
    assert e.value.reason == "garbage" and "not UTF-8" in e.value.detail


def test_a_request_is_one_compact_ascii_line_type_first() -> None:
    rules = preset("classic").replace(fleet=preset("classic").fleet)
    line = lines.encode(lines.new_game(rules.replace(name="Ålesund"), 0, 1))
    assert line.startswith(b'{"type":"new_game",') and line.count(b"\n") == 1
    assert line.isascii() and b": " not in line and b", " not in line
    assert json.loads(line)["rules"]["name"] == "Ålesund"


def test_a_hello_names_presets_whatever_the_match_format() -> None:
    hello = Hello("x", rules=("russian",))
    assert hello.plays(preset("russian").replace(match=MatchFormat(games=5)))
    assert not hello.plays(preset("russian").replace(touching=True, crossed_out=False))
    assert not hello.plays(preset("classic"))
    assert Hello("y").plays(preset("classic")) and Hello("z", rules=("*",)).plays(SALVO)
    with pytest.raises(EngineFault) as e:
        lines.check_rules(hello, preset("classic"))
    assert e.value.reason == "wrong_rules"


def test_a_call_out_of_turn_is_illegal() -> None:
    side = Side(preset("classic"), 0)
    assert side.illegal((Cell(0, 0),), None) == "it is not this side's turn"
