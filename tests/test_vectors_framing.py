"""Check every vector of spec/vectors/framing.json against the codec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from seabattle.protocol.codec import MAX_DEPTH, MAX_FRAME, FrameDecoder, encode_frame
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError

VECTORS = json.loads(
    (Path(__file__).resolve().parent.parent / "spec" / "vectors" / "framing.json").read_text()
)


def from_json(value: Any) -> Any:
    """Undo the vectors' JSON encoding: ``{"$bin": hex}`` stands for bytes."""
    if isinstance(value, dict):
        if list(value) == ["$bin"]:
            return bytes.fromhex(value["$bin"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def decode_stream(data: bytes) -> list[dict[str, Any]]:
    """Decode a whole stream (then end it) with a default decoder."""
    decoder = FrameDecoder()
    decoder.feed(data)
    out = []
    while (message := decoder.next_frame()) is not None:
        out.append(message)
    decoder.eof()
    assert decoder.next_frame() is None
    return out


def test_limits_match_the_codec() -> None:
    assert VECTORS["max_frame"] == MAX_FRAME
    assert VECTORS["max_depth"] == MAX_DEPTH


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector(vector: dict[str, Any]) -> None:
    expected = from_json(vector["message"])
    [message] = decode_stream(bytes.fromhex(vector["hex"]))
    # repr() as well as ==, because True == 1 and the types must survive too.
    assert message == expected
    assert repr(message) == repr(expected)
    # Whatever we decode, we can send back, and it decodes to the same thing.
    assert decode_stream(encode_frame(expected)) == [expected]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector(vector: dict[str, Any]) -> None:
    code = ErrorCode(vector["code"])
    assert code.slug == vector["error"]
    with pytest.raises(RemoteProtocolError) as info:
        decode_stream(bytes.fromhex(vector["hex"]))
    assert info.value.code is code


def test_every_framing_error_has_a_vector() -> None:
    # UNKNOWN_TAG belongs to the message layer above the codec.
    framing_codes = {c for c in ErrorCode if 1000 < c < 2000} - {ErrorCode.UNKNOWN_TAG}
    assert framing_codes <= {ErrorCode(v["code"]) for v in VECTORS["invalid"]}


def test_vector_names_are_unique() -> None:
    names = [v["name"] for v in VECTORS["valid"] + VECTORS["invalid"]]
    assert len(names) == len(set(names))
