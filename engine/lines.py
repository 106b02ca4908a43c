"""The engine protocol's messages (spec/engine.md): what a shell sends an engine, and the strict
reading of what the engine answers.

Sans-IO, as :mod:`seabattle.protocol` is: bytes and values in, values and bytes out, no process,
no socket, no clock. The process shell (:mod:`.process`) writes each request as one line and reads
one line back; the HTTP shell (:mod:`.http`) posts the same objects. Every answer is held to the
protocol here: a line that is not one JSON object of the expected type with well-typed fields is
``garbage``; a fleet the rules refuse is ``illegal_fleet``; a call the rules refuse is
``illegal_move``; an engine that declines the rules is ``wrong_rules`` (:data:`~.base.FAULTS`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from seabattle.protocol.fleet import Fleet, IllegalFleet
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat_events import IncomingShot, ShotResult

from .base import EngineFault, Hello, Move
from .side import Side, shot_json

__all__ = [
    "MAX_ANSWER",
    "PROTOCOL",
    "decode",
    "encode",
    "game_over",
    "greeting",
    "new_game",
    "parse_fleet",
    "parse_hello",
    "parse_move",
    "place",
    "quit_msg",
    "result",
]

#: The engine protocol's version, in the shell's greeting.
PROTOCOL = 1
#: The longest answer line a shell reads, in bytes (its newline excluded); longer is garbage.
MAX_ANSWER = 65536
#: The longest name, author or rule-set name in a hello.
MAX_NAME = 64


# -- encoding --------------------------------------------------------------------------------------


def encode(msg: dict[str, Any]) -> bytes:
    """One message as one line: compact JSON, ASCII only, then a newline."""
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} twice")
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode(line: bytes | str) -> dict[str, Any]:
    """One answer: a JSON object with a string ``type``. Surrounding blanks and a final ``\\r``
    are allowed; anything else (not UTF-8, not JSON, a key twice, ``NaN``, not an object, no
    ``type``, longer than :data:`MAX_ANSWER`) raises ``EngineFault("garbage")``."""
    if len(line) > MAX_ANSWER:
        raise EngineFault("garbage", f"an answer of more than {MAX_ANSWER} bytes")
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            raise EngineFault("garbage", f"not UTF-8: {_show(line)}") from None
    try:
        obj = json.loads(line, object_pairs_hook=_pairs, parse_constant=_constant)
    except ValueError as e:
        raise EngineFault("garbage", f"not JSON ({e}): {_show(line)}") from None
    if not isinstance(obj, dict):
        raise EngineFault("garbage", f"not a JSON object: {_show(line)}")
    if not isinstance(obj.get("type"), str):
        raise EngineFault("garbage", f"no string 'type': {_show(line)}")
    return obj


def _show(text: str | bytes, limit: int = 80) -> str:
    """An engine's text, quoted and cut, for a fault's detail."""
    r = repr(text[:limit])
    return r + ("..." if len(text) > limit else "")


# -- what the shell sends ------------------------------------------------------------------------


def greeting() -> dict[str, Any]:
    """The shell's first line: the protocol and its version; the engine answers ``hello``."""
    return {"type": "engine", "protocol": PROTOCOL}


def new_game(rules: RuleSet, seat: int, game: int) -> dict[str, Any]:
    """A game begins: its rules (the full form, spec 7.4), our seat, its number in the match."""
    return {"type": "new_game", "game": game, "seat": seat, "rules": rules.to_dict()}


def place(rules: RuleSet, seat: int, game: int, move_time: float) -> dict[str, Any]:
    """Where is our fleet? The engine answers ``fleet``, or ``decline``."""
    return {
        "type": "place",
        "game": game,
        "seat": seat,
        "rules": rules.to_dict(),
        "time": {"move": move_time, "clock": None},
    }


def result(rules: RuleSet, ev: ShotResult | IncomingShot) -> dict[str, Any]:
    """A shot's verdict: one of ours (``mine``) or the opponent's at our fleet. No answer."""
    crossed = ev.crossed if isinstance(ev, ShotResult) else ()
    shot = shot_json(rules, ev.n, ev.cells, ev.radar, ev.verdict, crossed)
    return {"type": "result", "game": ev.game, "mine": isinstance(ev, ShotResult), "shot": shot}


def game_over(game: int, won: bool | None, reason: str) -> dict[str, Any]:
    """The game ended: whether we won (``None``: a draw) and why (spec 8.9's reasons). No
    answer."""
    return {"type": "game_over", "game": game, "won": won, "reason": reason}


def quit_msg() -> dict[str, Any]:
    """The last line: the engine exits."""
    return {"type": "quit"}


# -- what the engine answers ----------------------------------------------------------------------


def _expect(obj: dict[str, Any], *types: str) -> str:
    kind = obj["type"]
    if kind not in types:
        want = " or ".join(repr(t) for t in types)
        raise EngineFault("garbage", f"expected an answer of type {want}, got {kind!r}")
    return str(kind)


def _text(obj: dict[str, Any], key: str, *, required: bool) -> str:
    v = obj.get(key)
    if v is None and not required:
        return ""
    if not isinstance(v, str) or not 0 < len(v) <= MAX_NAME or not v.isprintable():
        raise EngineFault("garbage", f"{key!r} is 1..{MAX_NAME} printable characters, got {v!r}")
    return v


def parse_hello(obj: dict[str, Any]) -> Hello:
    """The engine's ``hello``: its name, its author, and the rule sets it plays (preset names;
    absent or empty: any)."""
    _expect(obj, "hello")
    name = _text(obj, "name", required=True)
    author = _text(obj, "author", required=False)
    rules = obj.get("rules")
    if rules is None:
        rules = []
    if not isinstance(rules, list) or len(rules) > 64:
        raise EngineFault("garbage", f"'rules' is a list of rule-set names, got {rules!r}")
    names = []
    for r in rules:
        if not isinstance(r, str) or not 0 < len(r) <= MAX_NAME:
            raise EngineFault("garbage", f"'rules' is a list of rule-set names, got {r!r}")
        names.append(r)
    return Hello(name, author, tuple(names))


def check_rules(hello: Hello, rules: RuleSet) -> None:
    """Raise ``wrong_rules`` unless the hello says the engine plays ``rules``."""
    if not hello.plays(rules):
        raise EngineFault(
            "wrong_rules",
            f"{hello.name} plays {', '.join(hello.rules)}, not {rules.name}",
        )


def parse_fleet(obj: dict[str, Any], rules: RuleSet) -> Fleet | None:
    """The answer to ``place``: a legal fleet, ``None`` for a uniformly random one
    (``"ships": "random"``); ``decline`` is ``wrong_rules``."""
    if _expect(obj, "fleet", "decline") == "decline":
        reason = obj.get("reason")
        why = reason[:200] if isinstance(reason, str) else "no reason given"
        raise EngineFault("wrong_rules", f"the engine declined {rules.name}: {why}")
    ships = obj.get("ships")
    if ships == "random":
        return None
    if not isinstance(ships, list):
        raise EngineFault("garbage", f"'ships' is a list of placements or 'random', got {ships!r}")
    try:
        fleet = Fleet.from_list(ships)
    except IllegalFleet as e:
        raise EngineFault("garbage", e.detail) from None
    try:
        fleet.validate(rules)
    except IllegalFleet as e:
        raise EngineFault("illegal_fleet", e.detail) from None
    return fleet


def _cell(v: Any) -> Cell:
    """A label as the protocol writes it (8.1); the grid's size is checked by the caller."""
    if not isinstance(v, str):
        raise EngineFault("garbage", f"a cell is a label such as 'E5', got {v!r}")
    try:
        return parse_cell(v, 999, 702)  # any label: the grid is the rules' to check
    except Exception:
        raise EngineFault("garbage", f"a cell is a label such as 'E5', got {v!r}") from None


def parse_move(obj: dict[str, Any], side: Side) -> Move:
    """The answer to ``move``: ``fire`` with ``cells`` (exactly ``count`` labels) or ``radar``
    with ``at`` (the area's top-left cell), held to the rules and to what ``side`` fired at
    already: ``illegal_move`` says why not."""
    if _expect(obj, "fire", "radar") == "radar":
        at = _cell(obj.get("at"))
        move = Move(radar=at)
    else:
        cells = obj.get("cells")
        if not isinstance(cells, list) or len(cells) > side.rules.cells:
            raise EngineFault("garbage", f"'cells' is a list of labels, got {cells!r}")
        move = Move(tuple(_cell(c) for c in cells))
    why = side.illegal(move.cells, move.radar)
    if why is not None:
        raise EngineFault("illegal_move", why)
    return move


def clock_left(seconds: float | None) -> float | None:
    """A clock's seconds left as a request carries them: to the millisecond, never negative."""
    if seconds is None or math.isinf(seconds):
        return None
    return round(max(0.0, seconds), 3)
