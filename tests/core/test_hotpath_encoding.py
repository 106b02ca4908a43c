"""The per-message shortcuts change nothing a peer can see.

* :func:`messages.frame` gives the bytes and the errors of ``encode_frame(encode(msg))``: it walks
  only a message's free-form fields (maps, ``Any``), and a hostile value there is still refused
  with the code the peer would send; every other field cannot hold one, because construction
  refuses it.
* Construction and decoding (one validation path) accept, normalise and refuse exactly what the
  reference rules written out here do, with the same error text.
* ``parse_cell``'s label table gives what the parser gives.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import IntEnum, StrEnum
from typing import Any

import msgpack
import pytest
from helpers import fields, sample, wire_of
from seabattle.protocol import messages as m
from seabattle.protocol.codec import MAX_DEPTH, encode_frame
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, Refused, RemoteProtocolError
from seabattle.protocol.grid import Cell, column_label, parse_cell

TAGS = sorted(m.MESSAGES)


class _Num(IntEnum):
    TWO = 2


class _Word(StrEnum):
    E5 = "E5"


def _build(cls: type[m.Message], **values: Any) -> m.Message:
    args = {name: sample(tp) for name, tp in fields(cls).items()}
    args.update(values)
    return cls(**args)


def _same(msg: m.Message, max_frame: int = 1 << 24) -> None:
    """frame() and the reference give the same bytes, or the same error."""
    try:
        want: bytes | LocalProtocolError = encode_frame(m.encode(msg), max_frame=max_frame)
    except LocalProtocolError as e:
        want = e
    try:
        got: bytes | LocalProtocolError = m.frame(msg, max_frame=max_frame)
    except LocalProtocolError as e:
        got = e
    if isinstance(want, LocalProtocolError):
        assert isinstance(got, LocalProtocolError), msg
        assert (got.code, got.detail) == (want.code, want.detail)
    else:
        assert got == want


def _free(cls: type[m.Message]) -> list[str]:
    return list(m._FRAMING[cls][1])


def _deep(levels: int) -> Any:
    v: Any = 1
    for _ in range(levels):
        v = {"k": v}
    return v


# Values no frame may carry (or, for the deep ones, carry at some depth).
HOSTILE: list[Any] = [
    1.5,
    {1: "int key"},
    {"f": [1, 2.5]},
    {"b": {"x": {b"k": 1}}},
    {"big": 1 << 64},
    {"neg": -(1 << 63) - 1},
    {"ext": msgpack.ExtType(1, b"x")},
    {"ts": msgpack.Timestamp(0)},
    {"set": {1, 2}},
    _deep(MAX_DEPTH - 1),  # still fits: a field is at depth 2
    _deep(MAX_DEPTH),
    [[[[[[[[1]]]]]]]],
    {"ok": [1, "two", b"3", None, True, {"nested": []}]},
]


@pytest.mark.parametrize("tag", TAGS)
def test_frame_gives_the_reference_bytes_for_every_message(tag: str) -> None:
    cls = m.MESSAGES[tag]
    msg = m.decode(wire_of(cls))
    _same(msg)
    assert m.frame(msg) == encode_frame(m.encode(msg))
    _same(msg, max_frame=8)  # too large: the same FRAME_TOO_LARGE


@pytest.mark.parametrize("tag", TAGS)
def test_a_hostile_value_in_a_free_form_field_is_refused_as_before(tag: str) -> None:
    cls = m.MESSAGES[tag]
    for name in _free(cls):
        tp = fields(cls)[name]
        for bad in HOSTILE:
            value = [bad] if typing.get_origin(tp) is tuple else bad
            try:
                msg = _build(cls, **{name: value})
            except RemoteProtocolError:
                continue  # the field's type refuses it already (a scalar in a map field)
            _same(msg)


def test_free_form_fields_are_the_maps_and_the_untyped_lists() -> None:
    # What frame() walks: every field that can hold a container of unchecked items.
    free = {tag: _free(cls) for tag, cls in m.MESSAGES.items() if _free(cls)}
    assert free["verdict"] == ["verdict"]
    assert free["firing"] == ["commitments"]
    assert free["snapshot"] == ["view"]
    assert free["start"] == ["rules"]
    assert "shot" not in free and "clock" not in free
    for tag, cls in m.MESSAGES.items():
        for name, tp in fields(cls).items():
            text = repr(tp)
            untyped = "dict" in text or "Any" in text
            assert (name in free.get(tag, [])) == untyped, (tag, name, tp)


# Values a field that is not walked could be handed: each is refused at construction, or kept
# as a scalar (or a tuple of scalars) that the walk accepts.
ANYTHING: list[Any] = [
    None,
    True,
    0,
    -(1 << 70),
    _Num.TWO,
    "E5",
    _Word.E5,
    "x" * (m.MAX_TEXT + 1),
    b"",
    bytearray(b"x"),
    1.5,
    {"k": 1},
    [],
    ["E5", "A1"],
    ["E5", 1.5],
    [1, 2],
    [1, {"k": 1}],
    ("E5",),
    (1, 2.5),
    [[1]],
    {1, 2},
    msgpack.ExtType(1, b"x"),
]


@pytest.mark.parametrize("tag", TAGS)
def test_a_field_that_is_not_walked_cannot_hold_what_the_walk_refuses(tag: str) -> None:
    cls = m.MESSAGES[tag]
    for name in fields(cls):
        if name in _free(cls):
            continue
        for value in ANYTHING:
            try:
                msg = _build(cls, **{name: value})
            except RemoteProtocolError:
                continue
            held = getattr(msg, name)
            items = held if type(held) is tuple else (held,)
            assert all(x is None or isinstance(x, str | int | bytes) for x in items), (tag, name)
            _same(msg)  # the same bytes (or, for a huge int, the same packing error)


def _reference_check(
    value: Any, tp: Any, where: str, max_bytes: int | None, ints: tuple[int, int]
) -> Any:
    """The field rules as the protocol states them, written out plainly: what ``value`` is held
    as in a field annotated ``tp`` (lists as tuples), or the ``BAD_MESSAGE`` refusal. The message
    module's one validation path must agree with it, value types and error text included."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _reference_check(value, a, where, max_bytes, ints)
            except RemoteProtocolError as e:
                if "integer outside" in e.detail:
                    raise  # the right type, a value out of range: that is the refusal
                continue
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: wrong type")
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        if not isinstance(value, list | tuple) or len(value) > m.MAX_LIST:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a list")
        return tuple(
            _reference_check(v, item, f"{where}[{i}]", max_bytes, ints) for i, v in enumerate(value)
        )
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a boolean")
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected an integer")
        if not ints[0] <= value <= ints[1]:
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"{where}: integer outside {ints[0]}..{ints[1]}"
            )
    elif tp is str:
        if not isinstance(value, str) or len(value) > m.MAX_TEXT:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected text")
    elif tp is bytes:
        if not isinstance(value, bytes) or (max_bytes is not None and len(value) > max_bytes):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected bytes")
    elif tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a map")
    else:
        raise TypeError(f"unsupported field type {tp!r}")
    return value


def _reference(cls: type[m.Message], args: dict[str, Any]) -> list[Any]:
    """The values a message of ``cls`` built from ``args`` holds, by the reference rules, in
    field order; the first field refused raises (a server's bin is bounded by the frame alone)."""
    max_bytes = None if cls.DIR is m.Dir.S2C else m.MAX_BYTES
    held = [
        _reference_check(args[name], tp, f"{cls.TAG}.{name}", max_bytes, m.int_range(cls.TAG, name))
        for name, tp in fields(cls).items()
    ]
    if cls.TAG in m.ONE_OF_CHECKED:  # then, exactly one of two fields is not nil (spec 2.4)
        a, b = m.EXACTLY_ONE[cls.TAG]
        if (args[a] is None) == (args[b] is None):
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"{cls.TAG}: exactly one of {a} and {b} is not nil"
            )
    return held


def _held(msg: m.Message) -> list[Any]:
    return [getattr(msg, f.name) for f in dataclasses.fields(msg)]


@pytest.mark.parametrize("tag", TAGS)
def test_validation_agrees_with_the_reference_rules(tag: str) -> None:
    cls = m.MESSAGES[tag]
    base = {name: v for name, v in wire_of(cls).items() if name != "t"}
    edges = [-1, 1, 2, 7, 8, 999, 1000, 9999, 10000, 2**31 - 1, 2**31, 2**53 - 1, 2**53]
    values = [
        *ANYTHING,
        *edges,
        [1, 2**53],
        b"x" * (m.MAX_BYTES + 1),
        ["x"] * (m.MAX_LIST + 1),
        [1, True],
        (True,),
    ]
    for name in fields(cls):
        for value in values:
            args = {**base, name: value}
            outcome: list[Any] = []
            for built in (True, False):
                try:
                    got = _held(cls(**args)) if built else _reference(cls, args)
                except RemoteProtocolError as e:
                    outcome.append(("refused", e.code, e.detail))
                else:
                    outcome.append(("ok", got, [type(x) for x in got]))
            assert outcome[0] == outcome[1], (tag, name, value)
            # Decoding builds the message the same way: the same values, or the same refusal.
            wire = {"t": tag, **{k: list(v) if type(v) is tuple else v for k, v in args.items()}}
            try:
                decoded: Any = m.decode(wire)
            except RemoteProtocolError as e:
                assert outcome[0] == ("refused", e.code, e.detail), (tag, name, value)
            else:
                got = _held(decoded)
                assert outcome[0] == ("ok", got, [type(x) for x in got]), (tag, name, value)


def test_a_subclass_of_a_message_is_framed_with_the_whole_walk() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Sub(m.Bye):
        pass

    msg = Sub("done")
    assert m.frame(msg) == encode_frame(m.encode(msg))


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (10, 10), (26, 26), (30, 40), (1000, 2)])
def test_parse_cell_from_the_table_is_what_the_parser_gives(rows: int, cols: int) -> None:
    texts = [f"{column_label(c)}{r + 1}" for r in range(rows + 2) for c in range(cols + 2)]
    texts += ["e5", " E5 ", "E05", "A0", "", "AAA1", "A1000", "E5\n", "Z26"]
    for text in texts:
        # The reference: the parser alone (the table bypassed by a str subclass).
        class Text(str):
            pass

        try:
            want: Cell | tuple[Any, ...] = parse_cell(Text(text), rows, cols)
        except Refused as e:
            want = (e.code, e.detail)
        try:
            got: Cell | tuple[Any, ...] = parse_cell(text, rows, cols)
        except Refused as e:
            got = (e.code, e.detail)
        assert got == want and type(got) is type(want), text
