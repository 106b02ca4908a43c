"""The engine protocol's vectors (spec/vectors/engine.json) against the code: the requests the
shell sends in given positions, and which answers it accepts or refuses with which fault.

``python tests/engine/test_engine_vectors.py --write`` rewrites the vectors from the code (then
read the diff: the vectors are the spec's, a change in them is a change of the protocol).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from seabattle.engine import lines
from seabattle.engine.base import EngineFault
from seabattle.engine.side import Side
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet, preset, rules_from_dict
from seabattle.protocol.seat_events import IncomingShot, ShotResult, YourTurn
from seabattle.protocol.verdict import Defender

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "engine.json"
MATCH_ID = bytes(16)


def rules_of(v: Any) -> RuleSet:
    return preset(v) if isinstance(v, str) else rules_from_dict(v)


def replay(v: dict[str, Any]) -> tuple[Side, list[dict[str, Any]]]:
    """The position ``v`` as the shell of seat ``v["seat"]`` saw it: its side, and the ``result``
    messages the engine was told on the way."""
    rules, seat, number = rules_of(v["rules"]), v["seat"], v["game"]
    fleets = [Fleet.from_list(f) for f in v["fleets"]]
    g = Game(rules, MATCH_ID, number, compact=False)
    defenders = []
    for s in (0, 1):
        c = Committed(rules, fleets[s], bytes([s + 1]) * 32, MATCH_ID, number, s)
        defenders.append(Defender(c))
        g.commit(s, c.commitment)
    g.set_first(v["first"])
    side = Side(rules, seat, number, fleets[seat])
    told = []
    for call in v["calls"]:
        s = g.turn
        assert s == call["seat"], f"seat {s} is to move, the vector calls for {call['seat']}"
        if "radar" in call:
            ev = g.radar(s, parse_cell(call["radar"], rules.rows, rules.cols))[0]
        else:
            ev = g.fire(s, [parse_cell(c, rules.rows, rules.cols) for c in call["cells"]])[0]
        shot = ev.shot  # type: ignore[attr-defined]
        before = set(g.boards[1 - s].crossed)
        verdict = defenders[1 - s].answer(shot)
        g.answer(1 - s, verdict)
        cols = rules.cols
        new = sorted(set(g.boards[1 - s].crossed) - before)
        crossed = tuple(Cell(*divmod(i, cols)) for i in new)
        event: ShotResult | IncomingShot
        if s == seat:
            event = ShotResult(number, shot.n, shot.cells, shot.radar, verdict, crossed)
        else:
            event = IncomingShot(number, shot.n, shot.cells, shot.radar, verdict)
        side.feed(event)
        told.append(lines.result(rules, event))
    assert g.turn == seat, "the position ends on the side's turn"
    radar = rules.radar and not g.boards[1 - seat].radar_used
    side.feed(YourTurn(number, g.shot_count(seat), radar))
    side.clock = v["time"]["clock"]
    return side, told


def answer_of(a: dict[str, Any], positions: dict[str, Side]) -> Any:
    """Read answer ``a`` as the shell does in its context; the plain value it gives."""
    obj = lines.decode(a["line"].encode())
    kind, _, where = a["context"].partition(":")
    if kind == "hello":
        h = lines.parse_hello(obj)
        return {"name": h.name, "author": h.author, "rules": list(h.rules)}
    if kind == "fleet":
        fleet = lines.parse_fleet(obj, rules_of(where))
        return None if fleet is None else fleet.to_list()
    move = lines.parse_move(obj, positions[where])
    return {
        "cells": [c.label() for c in move.cells],
        "radar": None if move.radar is None else move.radar.label(),
    }


def load() -> dict[str, Any]:
    return dict(json.loads(VECTORS.read_text()))


DATA = load() if VECTORS.exists() else {"positions": [], "answers": [], "messages": []}


@pytest.mark.parametrize("v", DATA["positions"], ids=[p["name"] for p in DATA["positions"]])
def test_the_move_request_in_each_position(v: dict[str, Any]) -> None:
    side, told = replay(v)
    assert told == v["results"]
    t = v["time"]
    assert side.request(move_time=t["move"], clock=t["clock"]) == v["request"]
    # What travels is the compact line, "type" first (section 3).
    line = lines.encode(v["request"])
    assert line.startswith(b'{"type":"move",') and line.endswith(b"}\n") and b"\n" not in line[:-1]


@pytest.mark.parametrize("a", DATA["answers"], ids=[a["name"] for a in DATA["answers"]])
def test_each_answer_is_accepted_or_refused_with_its_fault(a: dict[str, Any]) -> None:
    positions = {p["name"]: replay(p)[0] for p in DATA["positions"]}
    if a["accepted"]:
        assert answer_of(a, positions) == a["value"]
    else:
        with pytest.raises(EngineFault) as e:
            answer_of(a, positions)
        assert e.value.reason == a["fault"], e.value


@pytest.mark.parametrize("v", DATA["messages"], ids=[m["name"] for m in DATA["messages"]])
def test_the_other_requests(v: dict[str, Any]) -> None:
    assert lines.encode(v["message"]) == v["line"].encode()
    assert built(v["name"]) == v["message"]


def test_the_vectors_cover_every_fault_and_message() -> None:
    from seabattle.engine.base import FAULTS

    faults = {a["fault"] for a in DATA["answers"]}
    # crashed and timeout are the transport's: no answer line shows them.
    assert faults >= set(FAULTS) - {"crashed", "timeout"}
    assert {m["message"]["type"] for m in DATA["messages"]} >= {
        "engine",
        "new_game",
        "place",
        "game_over",
        "quit",
    }


# -- writing the vectors -----------------------------------------------------------------------


def built(name: str) -> dict[str, Any]:
    """The non-move requests of the vectors, by name."""
    table = {
        "greeting": lines.greeting(),
        "new_game": lines.new_game(preset("classic-8x8"), 1, 2),
        "place": lines.place(preset("classic-8x8"), 1, 2, 5.0),
        "game_over-won": lines.game_over(2, True, "fleet_sunk"),
        "game_over-draw": lines.game_over(3, None, "nobody_placed"),
        "quit": lines.quit_msg(),
    }
    return table[name]


def _ship(rules: RuleSet, fleet: Fleet, k: int) -> list[str]:
    return [c.label() for c in fleet.ship_cells(rules)[k]]


def _water(rules: RuleSet, fleet: Fleet, n: int) -> list[str]:
    """``n`` cells of water away from every ship (no neighbour of one), from the bottom right."""
    near = set()
    for cells in fleet.ship_cells(rules):
        for c in cells:
            near.add(c)
            near.update(c.neighbours(rules.rows, rules.cols))
    out = []
    for i in reversed(range(rules.cells)):
        c = Cell(*divmod(i, rules.cols))
        if c not in near:
            out.append(c.label())
        if len(out) == n:
            break
    return out


def positions() -> list[dict[str, Any]]:
    rng = random.Random(2026)
    out = []

    def add(
        name: str, rules_v: Any, seat: int, first: int, calls: Any, t: Any, f: Any, game: int = 1
    ) -> None:
        v = {
            "name": name,
            "rules": rules_v,
            "seat": seat,
            "game": game,
            "first": first,
            "fleets": [x.to_list() for x in f],
            "calls": calls,
            "time": t,
        }
        side, told = replay(v)
        v["results"] = told
        v["request"] = side.request(move_time=t["move"], clock=t["clock"])
        out.append(v)

    russian = preset("russian")
    f = [random_fleet(russian, rng), random_fleet(russian, rng)]
    add("russian-opening", "russian", 1, 1, [], {"move": 5.0, "clock": None}, f)
    boat, battleship = _ship(russian, f[1], 6), _ship(russian, f[1], 0)
    calls = [
        {"seat": 0, "cells": [boat[0]]},  # sunk, shown: its ring is crossed out; hit again
        {"seat": 0, "cells": [battleship[0]]},  # a hit: its corners are crossed out; hit again
        {"seat": 0, "cells": _water(russian, f[1], 1)},  # a miss: the turn passes
        {"seat": 1, "cells": _water(russian, f[0], 1)},
    ]
    add("russian-sunk-and-crossed", "russian", 0, 0, calls, {"move": 5.0, "clock": None}, f)

    classic = preset("classic")
    f = [random_fleet(classic, rng), random_fleet(classic, rng)]
    destroyer = _ship(classic, f[0], 4)
    water1 = _water(classic, f[1], 3)
    calls = [
        {"seat": 0, "cells": [water1[0]]},
        {"seat": 1, "cells": [destroyer[0]]},
        {"seat": 0, "cells": [water1[1]]},
        {"seat": 1, "cells": [destroyer[1]]},  # named: the ship, not its cells
        {"seat": 0, "cells": [_ship(classic, f[1], 0)[0]]},
    ]
    add("classic-named-sunk", "classic", 1, 0, calls, {"move": 2.5, "clock": None}, f, game=2)

    salvo = {
        "preset": "classic",
        "shots": "salvo-fixed",
        "salvo_size": 3,
        "salvo_report": "total",
        "radar": True,
    }
    rules = rules_from_dict(dict(salvo))
    f = [random_fleet(rules, rng), random_fleet(rules, rng)]
    carrier = f[0].ship_cells(rules)[0][0]
    calls = [
        {"seat": 1, "radar": Cell(min(carrier.row, 8), min(carrier.col, 8)).label()},
        {"seat": 0, "cells": [_ship(rules, f[1], 1)[0], *_water(rules, f[1], 2)]},
        {"seat": 1, "cells": _water(rules, f[0], 3)},
    ]
    add("salvo-total-radar", salvo, 0, 1, calls, {"move": 5.0, "clock": 12.5}, f)
    return out


def answers() -> list[dict[str, Any]]:
    def a(name: str, context: str, line: str, fault: str | None = None) -> dict[str, Any]:
        return {"name": name, "context": context, "line": line, "fault": fault}

    fleet = random_fleet(preset("russian"), random.Random(7)).to_list()
    touching = [[0, 0, False], [2, 0, False], [4, 0, False], [6, 0, False], [8, 0, False]]
    move = "move:russian-sunk-and-crossed"
    salvo = "move:salvo-total-radar"
    out = [
        a("hello", "hello", '{"type":"hello","name":"hunt","author":"A. N. Other",'
          '"rules":["classic","russian"]}'),
        a("hello-minimal", "hello", '{"type":"hello","name":"x"}'),
        a("hello-unknown-keys", "hello", '{"type":"hello","name":"x","version":"1.2","x":{}}'),
        a("hello-blanks-and-cr", "hello", '  {"type":"hello","name":"x"}  \r'),
        a("hello-no-name", "hello", '{"type":"hello"}', "garbage"),
        a("hello-empty-name", "hello", '{"type":"hello","name":""}', "garbage"),
        a("hello-rules-not-list", "hello", '{"type":"hello","name":"x","rules":"classic"}',
          "garbage"),
        a("not-json", "hello", "hello, I am an engine", "garbage"),
        a("not-an-object", "hello", '["hello"]', "garbage"),
        a("no-type", "hello", '{"name":"x"}', "garbage"),
        a("key-twice", "hello", '{"type":"hello","name":"x","name":"y"}', "garbage"),
        a("nan", "hello", '{"type":"hello","name":"x","n":NaN}', "garbage"),
        a("wrong-type", "hello", '{"type":"fleet","ships":"random"}', "garbage"),
        a("fleet-random", "fleet:russian", '{"type":"fleet","ships":"random"}'),
        a("fleet", "fleet:russian", json.dumps({"type": "fleet", "ships": fleet})),
        a("fleet-touching", "fleet:russian",
          json.dumps({"type": "fleet", "ships": [[0, 0, False], [0, 5, False], *fleet[2:]]}),
          "illegal_fleet"),
        a("fleet-too-few", "fleet:russian", json.dumps({"type": "fleet", "ships": touching}),
          "illegal_fleet"),
        a("fleet-off-grid", "fleet:classic",
          json.dumps({"type": "fleet", "ships": [[9, 9, True], *touching[1:]]}),
          "illegal_fleet"),
        a("fleet-malformed", "fleet:classic",
          '{"type":"fleet","ships":[[0,0,"across"]]}', "garbage"),
        a("fleet-missing", "fleet:classic", '{"type":"fleet"}', "garbage"),
        a("decline", "fleet:russian", '{"type":"decline","reason":"no-touch is not for me"}',
          "wrong_rules"),
        a("fire", move, '{"type":"fire","cells":["A1"]}'),
        a("fire-lower-case", move, '{"type":"fire","cells":[" a1\\t"]}'),
        a("fire-count", move, '{"type":"fire","cells":["A1","A2"]}', "illegal_move"),
        a("fire-off-grid", move, '{"type":"fire","cells":["K1"]}', "illegal_move"),
        a("fire-far-off-grid", move, '{"type":"fire","cells":["AB999"]}', "illegal_move"),
        a("fire-not-a-label", move, '{"type":"fire","cells":["E 5"]}', "garbage"),
        a("fire-an-index", move, '{"type":"fire","cells":[4]}', "garbage"),
        a("fire-not-a-list", move, '{"type":"fire","cells":"A1"}', "garbage"),
        a("radar-not-allowed", move, '{"type":"radar","at":"A1"}', "illegal_move"),
        a("radar", salvo, '{"type":"radar","at":"I9"}'),
        a("radar-off-grid", salvo, '{"type":"radar","at":"J10"}', "illegal_move"),
        a("radar-no-at", salvo, '{"type":"radar"}', "garbage"),
        a("salvo-twice-a-cell", salvo, '{"type":"fire","cells":["A1","A1","A2"]}',
          "illegal_move"),
    ]
    return out


def write() -> None:
    """Rewrite spec/vectors/engine.json from the code."""
    pos = positions()
    places = {p["name"]: replay(p)[0] for p in pos}
    russian = next(p for p in pos if p["name"] == "russian-sunk-and-crossed")
    # Named here (not above) because they depend on the position's random fleets.
    ours = russian["request"]
    fired = ours["shots"][0]["cells"][0]
    crossed = ours["crossed"][0]
    extra = [
        {"name": "fire-fired-already", "context": "move:russian-sunk-and-crossed",
         "line": json.dumps({"type": "fire", "cells": [fired]}), "fault": "illegal_move"},
        {"name": "fire-crossed-out", "context": "move:russian-sunk-and-crossed",
         "line": json.dumps({"type": "fire", "cells": [crossed]}), "fault": "illegal_move"},
    ]  # fmt: skip
    ans = []
    for a in [*answers(), *extra]:
        a = dict(a)
        try:
            a["value"] = answer_of(a, places)
            a["accepted"] = True
            assert a["fault"] is None, a
        except EngineFault as e:
            assert e.reason == a["fault"], (a, e)
            a["accepted"], a["value"] = False, None
        ans.append(a)
    names = ["greeting", "new_game", "place", "game_over-won", "game_over-draw", "quit"]
    messages = [
        {"name": n, "message": built(n), "line": lines.encode(built(n)).decode()} for n in names
    ]
    data = {
        "description": (
            "Engine protocol vectors (spec/engine.md section 9). 'positions': a game replayed "
            "from both fleets (the protocol's placement form), the seat that fires first and "
            "the calls in order (each seat's, every one answered truthfully); 'results' are the "
            "result messages the shell of 'seat' sends its engine on the way, and 'request' the "
            "move request it sends when the side is to move, with 'time'. 'answers': an "
            "engine's answer line in a context (hello; fleet:RULES, the answer to place under "
            "a preset; move:POSITION, the answer to that position's request), whether the "
            "shell accepts it, the value it reads (cells as labels) or the fault. 'messages': "
            "other requests and their exact lines. The key order of this file's objects means "
            "nothing, except in 'line', which is what travels."
        ),
        "positions": pos,
        "answers": ans,
        "messages": messages,
    }
    VECTORS.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
