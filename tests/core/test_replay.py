"""Game.replay, the record verifier's way in, is feed(input_from_entry(entry)) exactly.

Its one-step path (a single shot, a single-cell verdict that sinks nothing) must accept, refuse
and end games exactly as the general way does: every entry of honest games under several rule
sets, and entries altered one way or another, go through both ways into twin games that must
agree after every entry.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from helpers import fire_honestly
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.inputs import input_from_entry
from seabattle.protocol.rules import RuleSet, SalvoReport, ShotMode, SunkReport, preset
from seabattle.protocol.verdict import Defender

MATCH = bytes(range(16))

RULES = {
    "classic": preset("classic"),
    "russian": preset("russian"),  # crossed out, shown sinkings, hit again
    "sea-battle": preset("sea-battle"),
    "silent-radar": preset("classic").replace(sunk=SunkReport.SILENT, radar=True),
    "salvo-total": preset("classic").replace(
        shots=ShotMode.SALVO_AFLOAT, salvo_report=SalvoReport.TOTAL
    ),
    "team": preset("classic").replace(team_size=2),
}


def honest(rules: RuleSet, seed: int) -> list[dict[str, Any]]:
    """The transcript of one honest game, fired at random."""
    rng = random.Random(seed)
    g = Game(rules, MATCH, 1, compact=False)
    ds = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MATCH, 1, seat)
        ds.append(Defender(c))
        g.commit(seat, c.commitment)
    g.set_first(rng.randrange(2))
    fire_honestly(g, ds, rng)
    for seat in (0, 1):
        g.reveal(seat, ds[seat].committed.reveal())
    return list(g.transcript)


def state(g: Game) -> Any:
    """Everything the game holds, so that a field the one-step path forgets to set shows (the
    boards by their slots, which have no equality of their own)."""
    held = {k: v for k, v in vars(g).items() if k not in ("boards", "transcript")}
    boards = [{k: getattr(b, k) for k in type(b).__slots__} for b in g.boards]
    return (held, boards, list(g.transcript), g.view(), g.shots)


def step(g: Game, entry: Any, fast: bool) -> Any:
    """What feeding ``entry`` did: the events, or the refusal (type, code, detail)."""
    try:
        return g.replay(entry) if fast else g.feed(input_from_entry(entry, g.rules))
    except ProtocolError as e:
        return type(e), e.code, e.detail


def replay_both(rules: RuleSet, entries: list[Any]) -> None:
    fast, slow = (Game(rules, MATCH, 1, compact=False) for _ in range(2))
    for entry in entries:
        assert step(fast, entry, True) == step(slow, entry, False), entry
        assert state(fast) == state(slow)


@pytest.mark.parametrize("name", sorted(RULES))
def test_honest_games_replay_alike(name: str) -> None:
    rules = RULES[name]
    for seed in range(3):
        entries = honest(rules, seed)
        replay_both(rules, entries)
        g = Game(rules, MATCH, 1, compact=False)
        for entry in entries:
            g.replay(entry)
            assert g.transcript[-1] == entry
        assert g.phase is Phase.OVER


def _flip(salt: bytes) -> bytes:
    return bytes([salt[0] ^ 1]) + salt[1:]


class Label(str):
    pass


class Seat(int):
    pass


def _alter(entry: dict[str, Any], how: int, rng: random.Random) -> dict[str, Any] | None:
    """``entry`` altered the ``how``-th way, or ``None`` when that way does not apply to it."""
    e = copy.deepcopy(entry)
    if e["in"] == "fire":
        label = e["cells"][0]
        changes: list[Any] = [
            ("cells", [label.lower()]),
            ("cells", [f" {label}"]),
            ("cells", [Label(label)]),
            ("cells", (label,)),
            ("cells", ["A1"]),  # often a repeat
            ("cells", ["Z99"]),
            ("seat", 1 - e["seat"]),
            ("seat", Seat(e["seat"])),
            ("seat", True),
            ("member", 1),
            ("member", -1),
            ("in", Label("fire")),
        ]
    elif e["in"] == "answer":
        v = e["verdict"]
        if not v["results"]:
            return None
        res = v["results"][0]
        changes = [
            ("salt", _flip(res["open"]["salt"])),
            ("occ", not res["open"]["occ"]),
            ("r", "hit" if res["r"] == "miss" else "miss"),
            ("r", "sunk"),
            ("i", res["open"]["i"] + 1),
            ("n", v["n"] + 1),
            ("n", True),
            ("seat", 1 - e["seat"]),
            ("seat", Seat(e["seat"])),
            ("sunk", {"k": 0, "open": None}),
            ("total", 1),
            ("results", (res,)),
        ]
    else:
        return None
    key, value = changes[how % len(changes)]
    if key in ("salt", "occ", "i"):
        v["results"][0]["open"][{"salt": "salt", "occ": "occ", "i": "i"}[key]] = value
    elif key in ("r", "sunk"):
        v["results"][0][key] = value
    elif key in ("n", "total", "results"):
        v[key] = value
    else:
        e[key] = value
    return e


@pytest.mark.parametrize("name", sorted(RULES))
def test_altered_entries_are_judged_alike(name: str) -> None:
    rules = RULES[name]
    rng = random.Random(name)
    entries = honest(rules, 7)
    for k in range(40):
        at = rng.randrange(len(entries))
        altered = _alter(entries[at], k, rng)
        if altered is None:
            continue
        # The altered entry in place, and the rest of the game after it (refused or not).
        replay_both(rules, [*entries[:at], altered, *entries[at + 1 :]])


def test_out_of_phase_and_foreign_entries_are_judged_alike() -> None:
    rules = RULES["classic"]
    entries = honest(rules, 3)
    shots = [e for e in entries if e["in"] in ("fire", "answer")]
    # Shot entries before the commitments, twice in a row, and swapped.
    replay_both(rules, [shots[0], shots[1], *entries])
    replay_both(rules, [*entries[:3], shots[1], shots[0], *entries[3:]])
    replay_both(rules, [*entries[:4], entries[3], *entries[4:]])
    replay_both(rules, [*entries[:4], "fire", 3, None, {"in": "fire"}, *entries[4:]])
