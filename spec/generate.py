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
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seabattle.protocol import messages, session
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import encode_frame
from seabattle.protocol.commit import (
    COMMITMENT_VERSION,
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
    "FILES",
    "SECTIONS",
    "SPEC",
    "canonical_example",
    "check",
    "cli",
    "commit_example",
    "error_table",
    "frame_example",
    "game_states",
    "handshake_table",
    "integer_ranges",
    "main",
    "message_table",
    "message_vectors",
    "messages_cddl",
    "presets_table",
    "render",
    "rewrite",
    "stale_files",
    "write_files",
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


#: Messages whose fields changed in a later version than 1 (the "Since" column).
_SINCE = {"commit": PROTOCOL_VERSION, "place": PROTOCOL_VERSION}
# Added in version 2 behind the capability people (section 6.9).
_SINCE.update(
    dict.fromkeys(
        (
            "seated",
            "running",
            "player",
            "online",
            "challenge",
            "challenged",
            "accept",
            "decline",
            "cancel",
            "challenge_gone",
            "say",
            "said",
        ),
        PROTOCOL_VERSION,
    )
)


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
            f"{_SINCE.get(tag, 1)} | {_first_line(cls.__doc__)} |"
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
    """The bytes of a real ``ping`` frame, annotated byte by byte, and what its order means."""
    frame = encode_frame(messages.encode(messages.Ping(n=7)))
    body = frame[4:]
    assert body[1:3] == b"\xa1t", "the table below assumes the tag is written first"
    canonical = canonical_pack(messages.encode(messages.Ping(n=7)))
    assert canonical != body
    lines = [
        "The frame carrying `ping{n: 7}` as this implementation sends it:",
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
        "",
        "This body is **not** in canonical order (section 3 puts `n` before `t`; the canonical "
        f"body is `{canonical.hex(' ')}`), and it need not be: frames on the wire need not be "
        "canonical, only bytes that are hashed or signed must be (section 3). A sender MAY write "
        "a message's entries in any order and a receiver MUST accept any order.",
    ]
    return "\n".join(lines)


def _power(v: int) -> str:
    """``v`` as the spec writes bounds: ``2^53-1`` rather than ``9007199254740991``."""
    for k in range(8, 65):
        if v == 2**k - 1:
            return f"2^{k}-1"
    return str(v)


def integer_ranges() -> str:
    """Every integer field of every message and the range its values must lie in."""
    rows: dict[tuple[str, int, int], list[str]] = {}
    for tag, cls in sorted(messages.MESSAGES.items()):
        for name, tp in _fields(cls):
            if "int" not in _type_name(tp).split(" "):
                continue
            lo, hi = messages.int_range(tag, name)
            key = name if messages.INT_RANGES.get(f"{tag}.{name}") is None else f"{tag}.{name}"
            rows.setdefault((key, lo, hi), []).append(f"`{tag}`")
    lines = ["| Field | Range (inclusive) | In |", "|---|---|---|"]
    for (key, lo, hi), tags in sorted(rows.items(), key=lambda r: (r[0][1], r[0][2], r[0][0])):
        lines.append(f"| `{key}` | {_power(lo)} .. {_power(hi)} | {', '.join(tags)} |")
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
    # The map hashed into the context carries the commitment format's version, which stayed 1
    # when the protocol became version 2 (spec 10.2): print exactly the bytes that are hashed.
    ctx_body = canonical_pack(
        {"v": COMMITMENT_VERSION, "match": _EX_MATCH, "game": 1, "seat": 0, "rules": rules.digest()}
    )
    ctx = context(_EX_MATCH, 1, 0, rules)
    assert hashlib.sha256(b"seabattle/v1/ctx\x00" + ctx_body).digest() == ctx
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


def verify_reasons() -> str:
    """The reasons a record fails verification, in the order the checks run (11.3)."""
    from seabattle.protocol.verify import REASONS

    rows = ["| # | Reason | When |", "|---|---|---|"]
    rows += [f"| {i} | `{slug}` | {why} |" for i, (slug, why) in enumerate(REASONS.items(), 1)]
    return "\n".join(rows)


# -- the message schema and the message vectors ---------------------------------------------------
#
# Two files beside the spec restate the message table for machines: spec/messages.cddl (CDDL,
# RFC 8610) and spec/vectors/messages.json. Both are made here from messages.MESSAGES and the
# rules of sections 2.4 and 4.1 (direction from Dir, handshake states from session.RECV), so a
# message added to the code gets its schema rule and its vectors when the script runs again.

_CDDL_TEXT = "text-field"  # a str: MAX_TEXT bounds it ("text" is CDDL's own name for tstr)
_CDDL_BIN_C2S = "bin-field"  # a bin in a message a client may send: MAX_BYTES bounds it
_CDDL_BIN_S2C = "bin-server"  # a bin in a message only a server sends: the frame bounds it


def _cddl_type(tp: Any, tag: str, name: str, s2c: bool) -> str:
    """The CDDL of a field annotated ``tp`` of message ``tag``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " / ".join(_cddl_type(a, tag, name, s2c) for a in typing.get_args(tp))
    if origin is tuple:
        item = _cddl_type(typing.get_args(tp)[0], tag, name, s2c)
        return f"[0*{messages.MAX_LIST} {item}]"
    if tp is int:
        lo, hi = messages.int_range(tag, name)
        return f"{lo}..{hi}"
    if tp is bytes:
        return _CDDL_BIN_S2C if s2c else _CDDL_BIN_C2S
    names: dict[Any, str] = {
        type(None): "nil",
        bool: "bool",
        str: _CDDL_TEXT,
        dict: "any-map",
        Any: "value",
    }
    found = names.get(origin or tp)
    if found is None:
        raise TypeError(f"no CDDL for {tp!r}")
    return found


def _cddl_rule(tag: str) -> str:
    return tag.replace("_", "-") + "-msg"


def messages_cddl() -> str:
    """``spec/messages.cddl``: every message of ``messages.MESSAGES`` as a CDDL map rule."""
    by_receiver = {
        role: [t for t, cls in messages.MESSAGES.items() if cls.DIR is not refused]
        for role, refused in (("server", messages.Dir.S2C), ("client", messages.Dir.C2S))
    }
    out = [
        f"; The messages of the seabattle protocol, version {PROTOCOL_VERSION}, in CDDL "
        "(RFC 8610).",
        "; Generated by spec/generate.py from protocol/messages.py (messages.MESSAGES): do not",
        "; edit; run `python spec/generate.py`. spec/protocol.md section 5.1 is the same table in",
        "; prose, and sections 5.2-5.5 say what a receiver does with each message.",
        ";",
        "; A message is one msgpack map (section 2). CDDL's data model fits msgpack's: tstr is a",
        "; msgpack str, bstr a bin, nil a nil, [...] an array, {...} a map, int an integer. A map",
        "; here is closed (a key it does not list is refused, section 2.4); its keys may come in",
        "; any order. Any refusal by this schema is BAD_MESSAGE, except a `t` naming no message,",
        "; which is UNKNOWN_TAG; a message the receiver may not get (`to-server`, `to-client`)",
        "; is UNEXPECTED_MESSAGE. The handshake states (section 4.1) and what the values mean",
        "; (sections 5 to 11) are not expressed here, nor the order in which a receiver checks",
        "; (section 2.5), which decides the code of a message wrong in several ways.",
        ";",
        "; What this schema does not say (section 15): a length limit on text counts code points,",
        "; not the UTF-8 bytes .size counts; nesting is at most 8 deep (section 2.3); the fixed",
        "; sizes of ids, keys and signatures are checked by the receiver rule that uses them, with",
        "; its own code (a 15-byte match id names no match: NO_SUCH_MATCH), not here.",
        "",
        "message = to-server / to-client",
        "",
        "; What a server (or, outside peer play, a hosting peer) may receive: C→S and both.",
        "to-server = " + " / ".join(_cddl_rule(t) for t in by_receiver["server"]),
        "",
        "; What a client (or a joining peer) may receive: S→C and both.",
        "to-client = " + " / ".join(_cddl_rule(t) for t in by_receiver["client"]),
        "",
        "; Limits (section 2.4). CDDL's .size counts a tstr in UTF-8 bytes, the limit of section",
        "; 2.4 in Unicode code points: for text beyond ASCII this rule is stricter than 2.4.",
        f"{_CDDL_TEXT} = tstr .size (0..{messages.MAX_TEXT})",
        f"{_CDDL_BIN_C2S} = bstr .size (0..{messages.MAX_BYTES})   ; in what a client may send",
        f"{_CDDL_BIN_S2C} = bstr   ; in a message only a server sends: the frame limit bounds it",
        "; A map field's contents are defined by the section that names it; every key at any",
        "; depth is a str, and no value is a float or an extension type (section 2.3).",
        "any-map = { * tstr => value }",
        "value = nil / bool / int / tstr / bstr / [* value] / any-map",
    ]
    for tag, cls in messages.MESSAGES.items():
        s2c = cls.DIR is messages.Dir.S2C
        about = f"{tag}: {_DIR_LABEL[cls.DIR]}. " + _first_line(cls.__doc__).replace("\\|", "|")
        out += ["", *textwrap.wrap(about, 98, initial_indent="; ", subsequent_indent="; ")]
        pair = messages.EXACTLY_ONE.get(tag)
        if pair is not None:
            where = "2.4" if tag in messages.ONE_OF_CHECKED else "5.3, after the session's checks"
            out.append(f"; Exactly one of {pair[0]} and {pair[1]} is not nil (section {where}).")
        out.append(f"{_cddl_rule(tag)} = {{")
        out.append(f'  t: "{tag}",')
        hints = dict(_fields(cls))
        for name, tp in _fields(cls):
            if pair is None or name not in pair:
                out.append(f"  {name}: {_cddl_type(tp, tag, name, s2c)},")
            elif name == pair[0]:
                a, b = pair
                ta, tb = (_cddl_type(_base(hints[k]), tag, k, s2c) for k in pair)
                out.append(f"  ({a}: {ta}, {b}: nil // {a}: nil, {b}: {tb}),")
        out.append("}")
    return "\n".join(out) + "\n"


#: Example values by field name, where the plain example of the type would say little (section
#: 5.1: match ids are 16 bytes, cells are labels; section 4.3: keys 32 bytes, signatures 64).
_EXAMPLES: dict[str, Any] = {
    "match": bytes(range(16)),
    "key": bytes(range(32)),
    "server": bytes(range(32, 64)),
    "challenge": bytes([0x5C]) * 32,
    "sig": bytes([0x51]) * 64,
    "secret": bytes([0x11]) * 32,
    "root": bytes([0x70]) * 32,
    "hash": bytes([0x4A]) * 32,
    "nonce": bytes([0xA0]) * 32,
    "head": bytes([0x4E]) * 32,
    "resume": bytes([0x7E]) * 16,
    "ticket": bytes([0x7C]) * 24,
    "versions": (2,),
    "version": 2,
    "agent": "vectors/1",
    "caps": ("redirect",),
    "name": "alice",
    "player": bytes(range(32)).hex(),
    "players": (bytes(range(32)).hex(), bytes(range(32, 64)).hex()),
    "code": int(ErrorCode.BAD_MESSAGE),
    "msg": "a message needs a string 't' tag",
    "reason": "done",
    "mode": "blind",
    "rules": {"preset": "classic"},
    "invite": "K7P2QX9M",
    "cells": ("E5",),
    "at": "E5",
    "kind": "shot",
    "why": "clock",
    "seconds": 30,
}

_EMPTY: dict[Any, Any] = {str: "", bytes: b"", bool: False}

# A value of another type for a field of each kind: the pitfalls first (a boolean is not an
# integer, an integer not a boolean, bin and str are two types, a map is not an array).
_WRONG: dict[Any, Any] = {int: True, bool: 1, str: b"E5", bytes: "E5", dict: [], tuple: {}}


def _base(tp: Any) -> Any:
    """``tp`` without ``| None``, and ``tuple[X, ...]`` as ``tuple``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (tp,) = (a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    return tuple if origin is tuple else (origin or tp)


def _item(tp: Any) -> Any:
    """The item type of an array field (``Any`` if it has none)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _item(next(a for a in typing.get_args(tp) if a is not type(None)))
    return typing.get_args(tp)[0] if origin is tuple else None


def _nullable(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def _example(tag: str, name: str, tp: Any) -> Any:
    if name in _EXAMPLES:
        return _EXAMPLES[name]
    base = _base(tp)
    if base is int:
        lo, hi = messages.int_range(tag, name)
        return min(max(1, lo), hi)
    plain: dict[Any, Any] = {bool: True, str: "x", bytes: b"\x01\x02", dict: {"a": 1}}
    if base is tuple:
        item = _item(tp)
        return (_example(tag, name, item),) if item is not Any else (1, "x")
    if base in plain:
        return plain[base]
    raise TypeError(f"no example for {tag}.{name}: {tp!r}")


def _to_json(value: Any) -> Any:
    """A value as the vectors write it (section 15): ``{"$bin": hex}`` for bytes, ``{"$int":
    decimal}`` for an integer a double would not hold exactly, arrays for tuples."""
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if type(value) is int and abs(value) > messages.MAX_SAFE_INT:
        return {"$int": str(value)}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    return value


def _misdirected(tag: str, role: session.Role) -> bool:
    """Whether the direction of ``tag`` (section 5.1) forbids ``role`` to receive it."""
    refused = messages.Dir.C2S if role is session.Role.CLIENT else messages.Dir.S2C
    return messages.MESSAGES[tag].DIR is refused


def _session_code(tag: str, role: session.Role, state: session.State) -> ErrorCode | None:
    """The code a receiver in ``role`` and ``state`` refuses a valid ``tag`` with (spec 2.4,
    4.1, 5.2), or ``None`` if it accepts it."""
    if _misdirected(tag, role):
        return ErrorCode.UNEXPECTED_MESSAGE
    handshake = {t for _, _, t in session.RECV}
    if state is session.State.READY:
        return ErrorCode.UNEXPECTED_MESSAGE if tag in handshake else None
    if tag in session._ANY_STATE or (role, state, tag) in session.RECV:
        return None
    return ErrorCode.HANDSHAKE_REQUIRED


def _places() -> list[tuple[session.Role, session.State]]:
    """Where the vectors put a receiver: each handshake state of each role, then ``ready``."""
    out = []
    for role in (session.Role.SERVER, session.Role.CLIENT):
        states = [
            s for s in session.State if any(r is role and st is s for r, st, _ in session.RECV)
        ]
        out += [(role, s) for s in [*states, session.State.READY]]
    return out


def _longest(tag: str, name: str, tp: Any, extra: int) -> Any:
    """A value of field ``name`` at its length limit, plus ``extra``: ASCII text, so that its
    length is the same in every unit (characters, UTF-16 units, bytes)."""
    kind = _base(tp)
    if kind is str:
        return "a" * (messages.MAX_TEXT + extra)
    if kind is bytes:
        return bytes(messages.MAX_BYTES + extra)
    item = _item(tp)
    filler = None if item is Any else _example(tag, "", item) if item is int else _EMPTY[item]
    if name == "versions":
        filler = session.SUPPORTED_VERSIONS[0]  # a list of versions must name one spoken here
    return (filler,) * (messages.MAX_LIST + extra)


class _Vectors:
    """The vectors being made: :meth:`good` and :meth:`bad` add one each."""

    def __init__(self) -> None:
        self.valid: list[dict[str, Any]] = []
        self.invalid: list[dict[str, Any]] = []
        self.limits_shown: set[Any] = set()  # a valid vector at the limit, once per kind

    def good(self, name: str, body: dict[str, Any], where: list[dict[str, str]]) -> None:
        self.valid.append(
            {
                "name": name,
                "tag": body["t"],
                "receivers": where,
                "message": _to_json(body),
                "hex": canonical_pack(body).hex(),
            }
        )

    def bad(
        self,
        name: str,
        body: dict[str, Any],
        code: ErrorCode,
        at: dict[str, str],
        case: str,
        field: str | None = None,
        defects: list[str] | None = None,
    ) -> None:
        tag = body.get("t")
        v: dict[str, Any] = {"name": name, "tag": tag if tag in messages.MESSAGES else None}
        v |= {"case": case, "field": field, "receiver": at}
        if defects is not None:
            v["defects"] = defects
        if case == "too_long":  # the hex alone: the message would repeat kilobytes of it
            v["length"] = len(body[field or "t"])
        else:
            v["message"] = _to_json(body)
        v |= {"hex": canonical_pack(body).hex(), "error": code.slug, "code": int(code)}
        self.invalid.append(v)

    def message(self, tag: str, cls: type[messages.Message]) -> None:
        """Every vector of message ``tag``."""
        fields = _fields(cls)
        example = _example_body(tag)
        accepted = [(r, s) for r, s in _places() if _session_code(tag, r, s) is None]
        receivers = [_place(r, s) for r, s in accepted]
        self.good(tag, example, receivers)
        pair = messages.EXACTLY_ONE.get(tag, ())
        if pair:  # the other one of the two (the example holds the first)
            a, b = pair
            other = example | {a: None, b: _example(tag, b, dict(fields)[b])}
            self.good(f"{tag}: {b} in place of {a}", other, receivers)
        nils = [n for n, tp in fields if _nullable(tp) and n not in pair]
        if nils:
            self.good(f"{tag}: nil for {', '.join(nils)}", example | dict.fromkeys(nils), receivers)
        for n, tp in fields:
            if _base(tp) is int:
                for value in messages.int_range(tag, n):
                    if value != example[n]:
                        self.good(
                            f"{tag}: {n} = {value} (its bound)", example | {n: value}, receivers
                        )
        # A message-layer defect goes to a receiver that accepts the whole message, so that the
        # defect is all that is wrong; to a client where one may receive it, whose frame limit
        # (2.1) lets the longest bin arrive.
        role, state = min(accepted, key=lambda p: p[0] is not session.Role.CLIENT)
        at = _place(role, state)
        bad = ErrorCode.BAD_MESSAGE
        for n, _ in fields:
            without = {k: v for k, v in example.items() if k != n}
            self.bad(f"{tag}: {n} missing", without, bad, at, "missing", n)
        self.bad(f"{tag}: an extra key", example | {"zz": 0}, bad, at, "extra", "zz")
        for n, tp in fields:
            self._wrong(tag, n, tp, example, at)
        for kind in (str, tuple, bytes):  # too long: the first field of each kind with a limit
            names = [n for n, tp in fields if _base(tp) is kind]
            if not names or (kind is bytes and cls.DIR is messages.Dir.S2C):
                continue  # MAX_BYTES bounds a bin in what a client may send (2.4)
            if kind is bytes and role is not session.Role.CLIENT:
                continue  # a longer bin overflows the 64 KiB frame to a server (2.1) first
            n, tp = names[0], dict(fields)[names[0]]
            if kind not in self.limits_shown and kind is not bytes:  # 128 KiB of hex, twice
                self.limits_shown.add(kind)
                limit = _alone(tag, example | {n: _longest(tag, n, tp, 0)}, n)
                self.good(f"{tag}: {n} at its length limit", limit, [at])
            over = _alone(tag, example | {n: _longest(tag, n, tp, 1)}, n)
            self.bad(f"{tag}: {n} too long", over, bad, at, "too_long", n)
        # The session layer (2.4, 4.1): every place that refuses this otherwise valid message.
        for role, state in _places():
            code = _session_code(tag, role, state)
            if code is not None:
                case = "direction" if _misdirected(tag, role) else "state"
                where = f"{tag}: to a {role.value} in state {state.value}"
                self.bad(where, example, code, _place(role, state), case)

    def _wrong(
        self, tag: str, n: str, tp: Any, example: dict[str, Any], at: dict[str, str]
    ) -> None:
        """The vectors of field ``n`` holding a value of the wrong type or out of its range."""
        if tp is Any:
            return
        base, item, bad = _base(tp), _item(tp), ErrorCode.BAD_MESSAGE
        wrong = _alone(tag, example | {n: _WRONG[base]}, n)
        self.bad(f"{tag}: {n} of the wrong type", wrong, bad, at, "type", n)
        if item not in (None, Any):
            wrong = example | {n: (_WRONG[item],)}
            self.bad(f"{tag}: an item of {n} of the wrong type", wrong, bad, at, "type", n)
        if int not in (base, item):
            return
        lo, hi = messages.int_range(tag, n)
        for value in (lo - 1, hi + 1):
            if -(2**63) <= value < 2**64:  # what msgpack can carry at all
                out = example | {n: (value,) if base is tuple else value}
                self.bad(f"{tag}: {n} = {value} (out of range)", out, bad, at, "range", n)


def _place(role: session.Role, state: session.State) -> dict[str, str]:
    return {"role": role.value, "state": state.value}


def _example_body(tag: str) -> dict[str, Any]:
    """The plain valid body of message ``tag`` that the vectors vary: of two fields of which
    exactly one is not nil (``messages.EXACTLY_ONE``), the first holds a value."""
    body = {"t": tag} | {n: _example(tag, n, tp) for n, tp in _fields(messages.MESSAGES[tag])}
    pair = messages.EXACTLY_ONE.get(tag)
    return body if pair is None else body | {pair[1]: None}


def _alone(tag: str, body: dict[str, Any], name: str) -> dict[str, Any]:
    """``body``, whose field ``name`` was given a (wrong, or long) value, with the other field
    of its pair (``messages.EXACTLY_ONE``) nil: so that the value is the vector's one defect."""
    pair = messages.EXACTLY_ONE.get(tag)
    if pair is None or name not in pair or body[name] is None:
        return body
    other = pair[1] if name == pair[0] else pair[0]
    return body | {other: None}


_SERVER_READY = (session.Role.SERVER, session.State.READY)


def _cross_vectors(made: _Vectors) -> None:
    """A message whose fields are each valid but break a rule tying two of them (2.4, 5.3):
    both set and neither set, for each rule of ``messages.EXACTLY_ONE``."""
    for tag, (a, b) in messages.EXACTLY_ONE.items():
        example = _example_body(tag)
        both = example | {a: _EXAMPLES[a], b: _EXAMPLES[b]}
        # join's rule is the server's (5.3), coin's the message layer's (2.4): a server refuses
        # both with BAD_MESSAGE, and a server may receive both messages.
        at = _place(*_SERVER_READY)
        bad = ErrorCode.BAD_MESSAGE
        made.bad(f"{tag}: both {a} and {b}", both, bad, at, "cross", a)
        made.bad(f"{tag}: neither {a} nor {b}", example | {a: None, b: None}, bad, at, "cross", a)


#: Fixed sizes that a receiver rule checks, with that rule's code (not the message layer's):
#: (tag, field, wrong size, role and state of the receiver, code, section).
_SIZE_RULES: list[tuple[str, str, int, tuple[session.Role, session.State], ErrorCode, str]] = [
    ("auth", "key", 31, (session.Role.SERVER, session.State.AUTH), ErrorCode.AUTH_FAILED, "4.3"),
    ("auth", "key", 33, (session.Role.SERVER, session.State.AUTH), ErrorCode.AUTH_FAILED, "4.3"),
    ("auth", "sig", 63, (session.Role.SERVER, session.State.AUTH), ErrorCode.AUTH_FAILED, "4.3"),
    ("auth", "sig", 65, (session.Role.SERVER, session.State.AUTH), ErrorCode.AUTH_FAILED, "4.3"),
    ("leave", "match", 15, _SERVER_READY, ErrorCode.NO_SUCH_MATCH, "5.3"),
    ("join", "match", 17, _SERVER_READY, ErrorCode.NO_SUCH_MATCH, "5.3"),
    ("fire", "match", 15, _SERVER_READY, ErrorCode.NO_SUCH_MATCH, "5.4"),
]


def _size_vectors(made: _Vectors) -> None:
    """A value of a fixed-size field (an id, a key, a signature) of another size: a valid message,
    refused by the receiver rule that uses the value, with that rule's code."""
    for tag, field, size, (role, state), code, section in _SIZE_RULES:
        body = _example_body(tag) | {field: bytes([0x5A]) * size}
        name = f"{tag}: {field} of {size} bytes ({section})"
        made.bad(name, body, code, _place(role, state), "size", field)


def _order_vectors(made: _Vectors) -> None:
    """Messages wrong in two ways: the code is that of the first check in the order of 2.5."""
    hello, auth, ready = session.State.HELLO, session.State.AUTH, session.State.READY
    server, client = session.Role.SERVER, session.Role.CLIENT
    bad, unexpected = ErrorCode.BAD_MESSAGE, ErrorCode.UNEXPECTED_MESSAGE
    ex = _example_body
    join, coin = ex("join"), ex("coin")
    cases: list[
        tuple[str, dict[str, Any], str | None, session.Role, session.State, ErrorCode, list[str]]
    ] = [
        (
            "welcome without guests, to a server",
            {k: v for k, v in ex("welcome").items() if k != "guests"},
            "guests",
            server,
            ready,
            bad,
            ["missing", "direction"],
        ),
        (
            "commit with a sig of the wrong type, to a client",
            ex("commit") | {"sig": _WRONG[bytes]},
            "sig",
            client,
            ready,
            bad,
            ["type", "direction"],
        ),
        (
            "create with an id of the wrong type, before the handshake",
            ex("create") | {"id": _WRONG[int]},
            "id",
            server,
            hello,
            bad,
            ["type", "state"],
        ),
        (
            f"fire with seq {messages.MAX_UINT32 + 1}, before the handshake is done",
            ex("fire") | {"seq": messages.MAX_UINT32 + 1},
            "seq",
            server,
            auth,
            bad,
            ["range", "state"],
        ),
        (
            "hello with an extra key, once the handshake is done",
            ex("hello") | {"zz": 0},
            "zz",
            server,
            ready,
            bad,
            ["extra", "state"],
        ),
        (
            "coin with both hash and nonce, before the handshake",
            coin | {"hash": _EXAMPLES["hash"], "nonce": _EXAMPLES["nonce"]},
            "hash",
            server,
            hello,
            bad,
            ["cross", "state"],
        ),
        (
            "welcome, to a server in state hello",
            ex("welcome"),
            None,
            server,
            hello,
            unexpected,
            ["direction", "state"],
        ),
        (
            "join with both match and invite, before the handshake",
            join | {"match": _EXAMPLES["match"], "invite": _EXAMPLES["invite"]},
            "match",
            server,
            hello,
            ErrorCode.HANDSHAKE_REQUIRED,
            ["state", "cross"],
        ),
        (
            "hello offering only version 1, to a server in state auth",
            ex("hello") | {"versions": (1,)},
            "versions",
            server,
            auth,
            ErrorCode.HANDSHAKE_REQUIRED,
            ["state", "rule"],
        ),
    ]
    for name, body, field, role, state, code, defects in cases:
        made.bad(f"order: {name}", body, code, _place(role, state), "order", field, defects)


def message_vectors() -> dict[str, Any]:
    """``spec/vectors/messages.json``: valid and invalid bodies of every message, with codes."""
    made = _Vectors()
    for tag, cls in messages.MESSAGES.items():
        made.message(tag, cls)
    at, bad, unknown = (
        _place(session.Role.SERVER, session.State.READY),
        ErrorCode.BAD_MESSAGE,
        ErrorCode.UNKNOWN_TAG,
    )
    made.bad("no tag", {"n": 1}, bad, at, "tag")
    made.bad("a tag that is not a str", {"t": 1, "n": 1}, bad, at, "tag")
    made.bad("a tag that is a bin", {"t": b"ping", "n": 1}, bad, at, "tag")
    made.bad("an unknown tag", {"t": "nope", "n": 1}, unknown, at, "tag")
    made.bad("tags are case-sensitive", {"t": "PING", "n": 1}, unknown, at, "tag")
    _cross_vectors(made)
    _size_vectors(made)
    _order_vectors(made)
    return {
        "description": _VECTORS_DESCRIPTION,
        "version": PROTOCOL_VERSION,
        "limits": {
            "max_text": messages.MAX_TEXT,
            "max_bytes": messages.MAX_BYTES,
            "max_list": messages.MAX_LIST,
        },
        "tags": list(messages.MESSAGES),
        "valid": made.valid,
        "invalid": made.invalid,
    }


_VECTORS_DESCRIPTION = (
    "Message vectors for the seabattle protocol (spec/protocol.md sections 2.4, 4.1 and 5), "
    "generated from the reference implementation by spec/generate.py; the schema is "
    "spec/messages.cddl. 'hex' is one frame body (the msgpack map, without the 4-byte length "
    "prefix), in canonical encoding (section 3). 'message' is the same map as JSON, an object "
    'whose only key is "$bin" standing for a byte string given in hex. A valid vector is a '
    "message that every receiver in 'receivers' (a role and a session state, section 4.1) MUST "
    "accept as the message 'message' describes; what it then does with its values is sections "
    "5.2 to 5.5, which these vectors do not test (the values of map fields are placeholders). "
    "An invalid vector has one defect, named by 'case' (missing, extra, type, range, "
    "too_long: the field 'field' is wrong; tag: the 't' key is; cross: 'field' and another "
    "field break a rule that ties them (exactly one of join's match and invite, of coin's hash "
    "and nonce, is not nil); size: 'field' is valid but not the fixed size of the id, key or "
    "signature it holds, which the receiver's rule refuses with its own code; direction, "
    "state: the message is valid but 'receiver' may not receive it in that state), or, for "
    "case order, two defects, listed in 'defects' in the order in which section 2.5 checks "
    "them (those above, and rule: a receiver rule of sections 4 to 11), the code being the "
    "first one's. 'receiver' MUST refuse it "
    "with 'error'/'code' from the error registry and go on with the session. A too_long "
    "vector gives the 'length' of its field instead of 'message'. A bin over the limit is "
    "given only where a client receives it: it makes a frame over the 64 KiB a server accepts "
    "(section 2.1), which a server refuses first, as FRAME_TOO_LARGE. Text in these vectors "
    "is ASCII, so that a length is the same in every unit."
)


def _vectors_json(vectors: dict[str, Any]) -> str:
    """``vectors`` as JSON with one vector a line, so that a diff shows which vectors changed."""
    lines = []
    for key, value in vectors.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n".join("  " + json.dumps(v) for v in value)
            lines.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


#: The files beside the spec that the script writes whole (path relative to ``spec/`` ->
#: renderer), next to the sections of ``protocol.md`` that it rewrites in place.
FILES: dict[str, Callable[[], str]] = {
    "messages.cddl": messages_cddl,
    "vectors/messages.json": lambda: _vectors_json(message_vectors()),
}


def stale_files(root: Path | None = None) -> list[str]:
    """The generated files under ``root`` (default: ``spec/``) that differ from the code."""
    base = root or SPEC.parent
    out = []
    for name, fn in FILES.items():
        path = base / name
        if not path.exists() or path.read_text(encoding="utf-8") != fn():
            out.append(name)
    return out


def write_files(root: Path | None = None) -> list[str]:
    """Write every generated file under ``root`` (default: ``spec/``); the names rewritten."""
    base = root or SPEC.parent
    written = []
    for name in stale_files(base):
        (base / name).write_text(FILES[name](), encoding="utf-8")
        written.append(name)
    return written


def cli(argv: Sequence[str] | None = None) -> int:
    """:func:`main`, then the same for the generated files of :data:`FILES`."""
    status = main(argv)
    args = list(sys.argv[1:] if argv is None else argv)
    if "--check" in args:
        stale = stale_files()
        for name in stale:
            print(f"spec/{name}: out of date; run: python spec/generate.py", file=sys.stderr)
        return status or (1 if stale else 0)
    for name in write_files():
        print(f"spec/{name}: rewritten")
    return status


# -- the file -------------------------------------------------------------------------------------

#: Section name -> renderer. The names appear in the markers of ``spec/protocol.md``.
SECTIONS: dict[str, Callable[[], str]] = {
    "frame-example": frame_example,
    "integer-ranges": integer_ranges,
    "canonical-example": canonical_example,
    "handshake": handshake_table,
    "messages": message_table,
    "presets": presets_table,
    "game-states": game_states,
    "commit-example": commit_example,
    "errors": error_table,
    "verify-reasons": verify_reasons,
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
    raise SystemExit(cli())
