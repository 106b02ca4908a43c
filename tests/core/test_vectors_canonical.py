"""Check every vector of spec/vectors/canonical.json against the canonical encoder and the codec.

The vectors are what an implementation in another language (JavaScript's msgpack libraries
above all) gets wrong: key order by UTF-8 bytes, the shortest headers and integer forms, wide
integers, str against bin. These tests hold the reference implementation to them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from seabattle.protocol.canonical import canonical_pack, is_canonical
from seabattle.protocol.codec import encode_frame, strict_unpack
from seabattle.protocol.errors import ErrorCode, ProtocolError, Refused
from seabattle.protocol.grid import parse_cell

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "spec" / "vectors" / "canonical.json").read_text()
)


def typed(value: dict[str, Any]) -> Any:
    """Undo the vectors' typed JSON (``{"int": "4294967296"}``, ``{"map": [[k, v], ...]}``)."""
    [(kind, x)] = value.items()
    if kind == "nil":
        assert x is None
        return None
    if kind == "bool":
        assert type(x) is bool
        return x
    if kind == "int":
        return int(x)
    if kind == "str":
        return x
    if kind == "bin":
        return bytes.fromhex(x)
    if kind == "float":
        return float(x)
    if kind == "array":
        return [typed(v) for v in x]
    if kind == "map":
        out = {k: typed(v) for k, v in x}
        if len(out) != len(x):
            raise ValueError("a map that repeats a key")
        return out
    raise AssertionError(f"unknown type {kind!r}")


def same(a: Any, b: Any) -> bool:
    """Equal with types (Python equates True with 1, a float with an int, a tuple with a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def in_message(value: Any) -> dict[str, Any]:
    """``value`` as the one entry of a message map, so the message decoder can be put to it."""
    return {"v": value}


def wrapped(encoding: bytes) -> bytes:
    """The body of ``in_message`` around a value already encoded as ``encoding``."""
    return b"\x81\xa1v" + encoding


def vector_id(v: dict[str, Any]) -> str:
    return str(v["name"])


@pytest.mark.parametrize("vector", VECTORS["values"], ids=vector_id)
def test_the_canonical_encoding_is_the_one_given(vector: dict[str, Any]) -> None:
    value = typed(vector["value"])
    data = bytes.fromhex(vector["hex"])
    assert canonical_pack(value) == data
    assert is_canonical(data)
    # A receiver decodes it back to the same value, types and key order included.
    decoded = strict_unpack(wrapped(data))["v"]
    assert same(decoded, canonical_pack_order(value))


def canonical_pack_order(value: Any) -> Any:
    """``value`` with its maps in canonical order (what decoding canonical bytes gives)."""
    if isinstance(value, dict):
        return {k: canonical_pack_order(value[k]) for k in sorted(value, key=str.encode)}
    if isinstance(value, list):
        return [canonical_pack_order(v) for v in value]
    return value


NONCANONICAL = [(v, n) for v in VECTORS["values"] for n in v["noncanonical"]]


@pytest.mark.parametrize(
    ("vector", "other"), NONCANONICAL, ids=[f"{v['name']}: {n['why']}" for v, n in NONCANONICAL]
)
def test_a_canonical_check_rejects_another_encoding(
    vector: dict[str, Any], other: dict[str, Any]
) -> None:
    data = bytes.fromhex(other["hex"])
    assert not is_canonical(data)
    # A message carrying it is still accepted (2.3), with the same value, unless it is a float.
    try:
        decoded = strict_unpack(wrapped(data))["v"]
    except ProtocolError as e:
        assert e.code is ErrorCode.FORBIDDEN_TYPE
        assert data[0] in (0xCA, 0xCB)
    else:
        assert same(canonical_pack_order(decoded), canonical_pack_order(typed(vector["value"])))


@pytest.mark.parametrize("vector", VECTORS["unencodable"], ids=vector_id)
def test_a_value_without_canonical_form_is_refused(vector: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError, OverflowError)):
        canonical_pack(typed(vector["value"]))
    # Neither can it be sent in a message.
    try:
        value = typed(vector["value"])
    except ValueError:
        return
    with pytest.raises(ProtocolError):
        encode_frame(in_message(value))


def test_the_vectors_cover_every_pitfall() -> None:
    ints = {int(v["value"]["int"]) for v in VECTORS["values"] if list(v["value"]) == ["int"]}
    for e in (7, 8, 15, 16, 31, 32, 53, 63):
        assert 2**e in ints
    assert {-1, -32, -33, -129, -(2**63), 2**64 - 1} <= ints

    # At least one pair of keys sorts differently by UTF-8 bytes and by UTF-16 code units.
    def utf16(k: str) -> bytes:
        return k.encode("utf-16-be")

    maps = [v["value"]["map"] for v in VECTORS["values"] if list(v["value"]) == ["map"]]
    assert any(
        sorted((k for k, _ in m), key=str.encode) != sorted((k for k, _ in m), key=utf16)
        for m in maps
    )


LABELS = VECTORS["labels"]


@pytest.mark.parametrize(("text", "index"), LABELS["cases"], ids=repr)
def test_cell_labels(text: str, index: int | None) -> None:
    rows, cols = LABELS["rows"], LABELS["cols"]
    if index is None:
        with pytest.raises(Refused) as info:
            parse_cell(text, rows, cols)
        assert info.value.code is ErrorCode.OFF_BOARD
    else:
        assert parse_cell(text, rows, cols).index(cols) == index
