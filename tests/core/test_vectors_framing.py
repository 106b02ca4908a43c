"""Check every vector of spec/vectors/framing.json against the codec and the message layer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import from_json
from seabattle.protocol import messages
from seabattle.protocol.canonical import is_canonical
from seabattle.protocol.codec import MAX_DEPTH, MAX_FRAME, FrameDecoder, encode_frame
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "spec" / "vectors" / "framing.json").read_text()
)


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
    # A valid vector is a valid message (section 5), and says whether it is also canonical.
    assert type(messages.decode(message)) is messages.MESSAGES[expected["t"]]
    assert is_canonical(bytes.fromhex(vector["hex"])[4:]) is vector["canonical"]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector(vector: dict[str, Any]) -> None:
    code = ErrorCode(vector["code"])
    assert code.slug == vector["error"]
    with pytest.raises(RemoteProtocolError) as info:
        decode_stream(bytes.fromhex(vector["hex"]))
    assert info.value.code is code


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: v["name"])
def test_message_vector(vector: dict[str, Any]) -> None:
    # A well-formed body that the message layer (section 2.4) refuses.
    code = ErrorCode(vector["code"])
    assert code.slug == vector["error"]
    [body] = decode_stream(bytes.fromhex(vector["hex"]))
    with pytest.raises(RemoteProtocolError) as info:
        messages.decode(body)
    assert info.value.code is code


def test_every_strict_decoding_rule_has_a_vector() -> None:
    assert {v["rule"] for v in VECTORS["invalid"]} == {"2.1"} | {f"D{i}" for i in range(1, 9)}


def test_every_framing_error_has_a_vector() -> None:
    # UNKNOWN_TAG belongs to the message layer above the codec.
    framing_codes = {c for c in ErrorCode if 1000 < c < 2000} - {ErrorCode.UNKNOWN_TAG}
    assert framing_codes <= {ErrorCode(v["code"]) for v in VECTORS["invalid"]}


def test_vector_names_are_unique() -> None:
    names = [v["name"] for v in VECTORS["valid"] + VECTORS["invalid"] + VECTORS["messages"]]
    assert len(names) == len(set(names))
