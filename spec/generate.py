"""Render the generated sections of ``spec/protocol.md`` from the code, so the two never drift.

Every table in the specification that restates something the code defines (the message table, the
error registry, the game's phases, the handshake table, the presets, the worked byte examples) is
written by a function here and pasted between a pair of markers::

    <!-- BEGIN GENERATED: messages -->
    ...
    <!-- END GENERATED: messages -->

``python spec/generate.py`` rewrites those sections of ``spec/protocol.md`` in place;
``python spec/generate.py --check`` exits 1 when a section differs from what the code generates now
(and names it). Either takes another file as an argument. The renderers are pure functions of the
code: no clock, no randomness, no I/O.

This is a script, not part of the package: it imports :mod:`seabattle.protocol` as any user of it
does. The facts the sections state live next to the code they describe, not here: the game's edges
in ``state.TRANSITIONS``, the meaning, layer and session-failing codes of the error registry in
``errors``, which message feeds which game input in ``referee.GAME_INPUTS``. This module only
formats them, so that a change to any of them fails the check until the spec is rewritten.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seabattle.protocol import messages, session
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import encode_frame
from seabattle.protocol.commit import (
    PROTOCOL_VERSION,
    Committed,
    _salt,
    cell_leaf,
    coin_commit,
    coin_result,
    context,
    ship_leaf,
)
from seabattle.protocol.errors import FAILS_SESSION, MEANINGS, ErrorCode
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.referee import GAME_INPUTS
from seabattle.protocol.rules import PRESETS, RuleSet
from seabattle.protocol.state import TRANSITIONS, Phase, accepted

__all__ = [
    "SECTIONS",
    "SPEC",
    "canonical_example",
    "check",
    "commit_example",
    "error_table",
    "frame_example",
    "game_states",
    "handshake_table",
    "main",
    "message_table",
    "presets_table",
    "render",
    "rewrite",
]

# -- messages -------------------------------------------------------------------------------------

_DIR_LABEL = {
    messages.Dir.C2S: "C→S",
    messages.Dir.S2C: "S→C",
    messages.Dir.BOTH: "both",
}


def _type_name(tp: Any) -> str:
    """The wire spelling of a field annotation: msgpack family names."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"array of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict or tp is dict:
        return "map"
    names: dict[Any, str] = {
        type(None): "nil",
        bool: "bool",
        int: "int",
        str: "str",
        bytes: "bin",
        Any: "any",
    }
    if tp in names:
        return names[tp]
    raise TypeError(f"no wire name for {tp!r}")


def _fields(cls: type[messages.Message]) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(cls)]


def _first_line(doc: str | None) -> str:
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    return text.replace("``", "`").replace("`None`", "`nil`").replace("|", "\\|")


def _valid_in(tag: str) -> str:
    """Session states (and game phases) in which a message may be received."""
    if tag in session._ANY_STATE:
        return "any state"
    recv = sorted(
        f"{role.value} in `{state.value}`" for (role, state, t) in session.RECV if t == tag
    )
    if recv:
        return "; ".join(recv)
    where = "`ready`"
    name = GAME_INPUTS.get(tag)
    if name is not None:
        phases = [p.value for p in Phase if name in accepted(p)]
        where += "; game phase " + ", ".join(f"`{p}`" for p in phases)
    return where


def message_table() -> str:
    """The message table: tag, direction, fields with types, where valid, since, meaning."""
    rows = [
        "| Tag | Dir | Fields (after `t`) | Valid in | Since | Meaning |",
        "|---|---|---|---|---|---|",
    ]
    for tag, cls in messages.MESSAGES.items():
        fields = ", ".join(f"`{n}`: {_type_name(tp)}" for n, tp in _fields(cls)) or "-"
        rows.append(
            f"| `{tag}` | {_DIR_LABEL[cls.DIR]} | {fields} | {_valid_in(tag)} | "
            f"{PROTOCOL_VERSION} | {_first_line(cls.__doc__)} |"
        )
    rows.append("")
    rows.append(
        f"Limits checked on every field: a `str` holds at most {messages.MAX_TEXT} characters, "
        f"a `bin` at most {messages.MAX_BYTES} bytes, an array at most {messages.MAX_LIST} "
        "elements. C→S: sent by a client (or the joining peer) to the server (or hosting peer); "
        "S→C the other way; `both`: either side."
    )
    return "\n".join(rows)


# -- errors ---------------------------------------------------------------------------------------


def error_table() -> str:
    """The error registry, one row per :class:`ErrorCode` in code order, from ``MEANINGS``."""
    missing = [c.name for c in ErrorCode if c not in MEANINGS]
    if missing:
        raise KeyError(f"errors.MEANINGS lacks {', '.join(missing)}")
    rows = ["| Code | Name | Layer | Meaning |", "|---|---|---|---|"]
    for code in sorted(ErrorCode):
        meaning = MEANINGS[code] + (" Fails the session." if code in FAILS_SESSION else "")
        rows.append(f"| {int(code)} | `{code.name}` | {code.layer} | {meaning} |")
    rows.append("")
    rows.append(
        "Codes that fail the session: "
        + ", ".join(f"{int(c)} `{c.name}`" for c in sorted(FAILS_SESSION))
        + " (and a zero-length frame, reported as `BAD_MESSAGE`)."
    )
    return "\n".join(rows)


# -- the game's state machine ---------------------------------------------------------------------


def game_states() -> str:
    """The game's phases as a mermaid state diagram and a table, from ``state.TRANSITIONS``."""
    lines = ["```mermaid", "stateDiagram-v2", f"    [*] --> {Phase.SETUP.value}"]
    for phase in Phase:
        targets: dict[Phase, list[str]] = {}
        for inp in sorted(accepted(phase)):
            for dst, _ in TRANSITIONS[(phase, inp)]:
                names = targets.setdefault(dst, [])
                if inp not in names:
                    names.append(inp)
        for dst, inputs in sorted(targets.items(), key=lambda kv: list(Phase).index(kv[0])):
            lines.append(f"    {phase.value} --> {dst.value}: {', '.join(inputs)}")
    lines.append(f"    {Phase.OVER.value} --> [*]")
    lines.append("```")
    lines.append("")
    lines.append("| Phase | Input | Next phase | When |")
    lines.append("|---|---|---|---|")
    for phase in Phase:
        inputs = sorted(accepted(phase))
        if not inputs:
            lines.append(
                f"| `{phase.value}` | (none) | - | the game is over; every input is "
                "refused with `GAME_OVER` |"
            )
        for inp in inputs:
            for dst, when in TRANSITIONS[(phase, inp)]:
                lines.append(f"| `{phase.value}` | `{inp}` | `{dst.value}` | {when} |")
    lines.append("")
    lines.append(
        "Any input not listed for the current phase is refused with `WRONG_PHASE` "
        "(`GAME_OVER` in `over`); the state does not change."
    )
    return "\n".join(lines)


# -- the handshake --------------------------------------------------------------------------------


def handshake_table() -> str:
    """The handshake state machine from ``session.RECV`` and ``session.SEND``."""
    rows = ["| Role | State | Event | Tag | Next state |", "|---|---|---|---|---|"]
    entries = [(r, s, "send", t, n) for (r, s, t), n in session.SEND.items()]
    entries += [(r, s, "receive", t, n) for (r, s, t), n in session.RECV.items()]
    order = list(session.State)
    entries.sort(key=lambda e: (e[0].value, order.index(e[1]), e[2]))
    for role, state, event, tag, nxt in entries:
        rows.append(f"| {role.value} | `{state.value}` | {event} | `{tag}` | `{nxt.value}` |")
    rows.append("")
    rows.append(
        "Allowed in every state, in both directions: "
        + ", ".join(f"`{t}`" for t in sorted(session._ANY_STATE))
        + f". Versions this implementation speaks: {list(session.SUPPORTED_VERSIONS)}."
    )
    return "\n".join(rows)


# -- presets --------------------------------------------------------------------------------------


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((prefix + k, v))
    return out


def _cell(key: str, v: Any) -> str:
    if key == "fleet":
        return ", ".join(f"{name} {length}" for name, length in v)
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def presets_table() -> str:
    """Every option of every preset, one column per preset, and each preset's digest."""
    names = list(PRESETS)
    cols = {n: dict(_flat(PRESETS[n].to_dict())) for n in names}
    keys = [k for k, _ in _flat(PRESETS[names[0]].to_dict()) if k != "name"]
    rows = [
        "| Option | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for k in keys:
        rows.append(f"| `{k}` | " + " | ".join(_cell(k, cols[n][k]) for n in names) + " |")
    rows.append("| (ship cells) | " + " | ".join(str(PRESETS[n].fleet_cells) for n in names) + " |")
    rows.append(
        "| (commitment bytes) | "
        + " | ".join(str(32 * (PRESETS[n].cells + len(PRESETS[n].fleet))) for n in names)
        + " |"
    )
    rows.append("")
    rows.append('Rule-set digests (`SHA-256("seabattle/v1/rules" || 0x00 || canonical(rules))`):')
    rows.append("")
    for n in names:
        rows.append(f"- `{n}`: `{PRESETS[n].digest().hex()}`")
    return "\n".join(rows)


# -- worked byte examples -------------------------------------------------------------------------


def _hexdump(data: bytes, width: int = 16) -> list[str]:
    return [data[i : i + width].hex(" ") for i in range(0, len(data), width)]


def frame_example() -> str:
    """The bytes of a real ``ping`` frame, annotated byte by byte."""
    frame = encode_frame(messages.encode(messages.Ping(n=7)))
    body = frame[4:]
    lines = [
        "The frame carrying `ping{n: 7}` as this implementation encodes it:",
        "",
        "```",
        *_hexdump(frame),
        "```",
        "",
        "| Offset | Bytes | Meaning |",
        "|---|---|---|",
        f"| 0 | `{frame[:4].hex(' ')}` | length prefix: the body is {len(body)} bytes |",
        f"| 4 | `{body[:1].hex()}` | fixmap of {body[0] & 0x0F} entries |",
        f"| 5 | `{body[1:3].hex(' ')}` | fixstr of 1 byte: `t` |",
        f"| 7 | `{body[3:8].hex(' ')}` | fixstr of 4 bytes: `ping` |",
        f"| 12 | `{body[8:10].hex(' ')}` | fixstr of 1 byte: `n` |",
        f"| 14 | `{body[10:11].hex()}` | positive fixint {body[10]} |",
    ]
    return "\n".join(lines)


def canonical_example() -> str:
    """A small value in canonical encoding, byte by byte."""
    data = canonical_pack({"b": 1, "a": [True, None, b"\x01"], "é": "x"})
    return "\n".join(
        [
            '`{"b": 1, "a": [true, nil, 0x01], "é": "x"}` (the `0x01` a 1-byte `bin`) encodes '
            "canonically as:",
            "",
            "```",
            *_hexdump(data, 32),
            "```",
            "",
            '`83` map of 3; `a1 61` "a"; `93` array of 3: `c3` true, `c0` nil, `c4 01 01` bin of '
            '1 byte; `a1 62` "b"; `01` 1; `a2 c3 a9` "é" (UTF-8 `c3 a9`, sorting after "b"); '
            '`a1 78` "x".',
        ]
    )


_EX_MATCH = bytes(range(16))
_EX_SECRET = bytes([0x11]) * 32


def _example_fleet() -> Fleet:
    return Fleet.of(
        ("A1", "across"), ("A3", "across"), ("A5", "across"), ("A7", "across"), ("A9", "across")
    )


def commit_example() -> str:
    """A worked commitment: context, salts, leaves, root, for a fixed fleet and secret."""
    rules: RuleSet = PRESETS["classic"]
    fleet = _example_fleet()
    ctx_body = canonical_pack(
        {"v": PROTOCOL_VERSION, "match": _EX_MATCH, "game": 1, "seat": 0, "rules": rules.digest()}
    )
    ctx = context(_EX_MATCH, 1, 0, rules)
    c = Committed(rules, fleet, _EX_SECRET, _EX_MATCH, 1, 0)
    salt0 = _salt(_EX_SECRET, b"cell", 0)
    ssalt0 = _salt(_EX_SECRET, b"ship", 0)
    n0 = bytes([0xA0]) * 32
    n1 = bytes([0xB1]) * 32
    placements = ", ".join(
        f"{s.name} at `{p.to_list()}`".replace("True", "true").replace("False", "false")
        for s, p in zip(rules.fleet, fleet.placements, strict=True)
    )
    assert cell_leaf(ctx, 0, True, salt0) == c.commitment.cells[0]
    assert ship_leaf(ctx, 0, fleet.placements[0], ssalt0) == c.commitment.ships[0]
    lines = [
        "Inputs: preset `classic`; match id `" + _EX_MATCH.hex() + "`; game 1; seat 0; "
        f"secret 32 bytes of `11`; fleet {placements}.",
        "",
        "```",
        "canonical context map (" + str(len(ctx_body)) + " bytes):",
        *_hexdump(ctx_body, 32),
        "ctx          = " + ctx.hex(),
        "salt(cell,0) = " + salt0.hex(),
        "cell_leaf[0] = " + c.commitment.cells[0].hex() + "   (A1, occupied)",
        "cell_leaf[1] = " + c.commitment.cells[1].hex(),
        "salt(ship,0) = " + ssalt0.hex(),
        "ship_leaf[0] = " + c.commitment.ships[0].hex(),
        "root         = " + c.root.hex(),
        "```",
        "",
        "Coin for game 1 with nonces of 32 bytes `a0` (seat 0) and `b1` (seat 1):",
        "",
        "```",
        "coin_commit(seat 0) = " + coin_commit(_EX_MATCH, 1, 0, n0).hex(),
        "coin_commit(seat 1) = " + coin_commit(_EX_MATCH, 1, 1, n1).hex(),
        "lot hash            = " + hashlib.sha256(b"seabattle/v1/lot\x00" + n0 + n1).hexdigest(),
        f"first               = seat {coin_result(n0, n1)}",
        "```",
    ]
    return "\n".join(lines)


# -- the file -------------------------------------------------------------------------------------

#: Section name -> renderer. The names appear in the markers of ``spec/protocol.md``.
SECTIONS: dict[str, Callable[[], str]] = {
    "frame-example": frame_example,
    "canonical-example": canonical_example,
    "handshake": handshake_table,
    "messages": message_table,
    "presets": presets_table,
    "game-states": game_states,
    "commit-example": commit_example,
    "errors": error_table,
}

_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)"
    r"(<!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)


def render() -> dict[str, str]:
    """Every generated section, as the code defines it now."""
    return {name: fn() for name, fn in SECTIONS.items()}


def sections_of(text: str) -> dict[str, str]:
    """The generated sections found in ``text`` (name -> body without the markers)."""
    return {m["name"]: m["body"].removesuffix("\n") for m in _BLOCK.finditer(text)}


def check(text: str) -> list[str]:
    """Names of the sections that are missing from ``text`` or differ from the code."""
    found = sections_of(text)
    want = render()
    return [name for name in want if found.get(name) != want[name]]


def rewrite(text: str) -> str:
    """``text`` with every generated section replaced by what the code generates now."""
    want = render()
    missing = [name for name in want if name not in sections_of(text)]
    if missing:
        raise KeyError(f"no markers for section(s) {', '.join(missing)}")

    def repl(m: re.Match[str]) -> str:
        body = want.get(m["name"])
        if body is None:
            return m.group(0)
        return f"{m.group(1)}{body}\n{m.group(4)}"

    return _BLOCK.sub(repl, text)


#: The file the script rewrites by default: the specification next to it.
SPEC = Path(__file__).resolve().with_name("protocol.md")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: rewrite FILE (default ``spec/protocol.md``), or ``--check`` it (exit 1)."""
    parser = argparse.ArgumentParser(
        prog="python spec/generate.py",
        description="Rewrite (or check) the generated sections of spec/protocol.md.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a section is out of date"
    )
    group.add_argument("--write", action="store_true", help="rewrite the sections (the default)")
    parser.add_argument("file", nargs="?", type=Path, default=SPEC, help="default: %(default)s")
    args = parser.parse_args(argv)
    path: Path = args.file
    old = path.read_text(encoding="utf-8")
    if args.check:
        stale = check(old)
        if stale:
            print(f"{path}: out of date: {', '.join(stale)}", file=sys.stderr)
            again = "" if path == SPEC else f" {path}"
            print(f"run: python spec/generate.py{again}", file=sys.stderr)
            return 1
        print(f"{path}: generated sections match the code")
        return 0
    new = rewrite(old)
    if new != old:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: rewritten")
    else:
        print(f"{path}: already up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
