"""spec/vectors/messages.json and spec/messages.cddl hold for this code.

Each valid vector must decode to the message it describes and be accepted by every receiver it
names; each invalid one must be refused with its code, by the message layer (a bad field) or by
the receiver's connection (a message it may not get, or not yet). The files themselves must be
what ``spec/generate.py`` makes from ``messages.MESSAGES`` now, so a message added to the code
fails here until the script is run; and the valid vectors must satisfy the schema, the invalid
message-layer ones break it, when a CDDL validator is installed (``pycddl``, with ``cbor2``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import struct
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import from_json
from seabattle.protocol import messages
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import strict_unpack
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import MAX_S2C_FRAME, Connection, Role, State

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
VECTORS = json.loads((SPEC_DIR / "vectors" / "messages.json").read_text(encoding="utf-8"))
SCHEMA = (SPEC_DIR / "messages.cddl").read_text(encoding="utf-8")

# What the message layer refuses (spec 2.4); the other cases are the receiver's session.
MESSAGE_LAYER = {"missing", "extra", "type", "range", "too_long", "tag"}


def _load_generator() -> ModuleType:
    path = SPEC_DIR / "generate.py"
    spec = importlib.util.spec_from_file_location("seabattle_spec_generate_vectors", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module




def body(vector: dict[str, Any]) -> bytes:
    return bytes.fromhex(vector["hex"])


def receive(body: bytes, role: str, state: str) -> messages.Message | RemoteProtocolError:
    """What a connection of ``role`` in ``state`` makes of one frame holding ``body``."""
    # The largest frame limit: the frame limits are framing.json's business, not these vectors'.
    conn = Connection(Role(role), max_frame=MAX_S2C_FRAME)
    conn.state = State(state)
    [result] = conn.receive_data(struct.pack(">I", len(body)) + body)
    return result


def test_files_are_what_the_code_generates() -> None:
    generate = _load_generator()
    assert generate.stale_files() == [], "run: python spec/generate.py"


def test_limits_match_the_code() -> None:
    assert VECTORS["limits"] == {
        "max_text": messages.MAX_TEXT,
        "max_bytes": messages.MAX_BYTES,
        "max_list": messages.MAX_LIST,
    }


def test_every_message_has_valid_and_invalid_vectors() -> None:
    assert VECTORS["tags"] == list(messages.MESSAGES)
    for tag, cls in messages.MESSAGES.items():
        valid = [v for v in VECTORS["valid"] if v["tag"] == tag]
        invalid = [v for v in VECTORS["invalid"] if v["tag"] == tag]
        assert valid, tag
        for field in dataclasses.fields(cls):
            cases = {v["case"] for v in invalid if v["field"] == field.name}
            assert {"missing", "type"} <= cases, (tag, field.name)
        assert any(v["case"] == "extra" for v in invalid), tag
        if cls.DIR is not messages.Dir.BOTH:
            assert any(v["case"] == "direction" for v in invalid), tag


def test_vector_names_are_unique() -> None:
    names = [v["name"] for v in VECTORS["valid"] + VECTORS["invalid"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector(vector: dict[str, Any]) -> None:
    fields = from_json(vector["message"])
    assert canonical_pack(fields) == body(vector)  # the file agrees with itself
    cls = messages.MESSAGES[vector["tag"]]
    expected = cls(**{k: v for k, v in fields.items() if k != "t"})
    decoded = messages.decode(strict_unpack(body(vector), max_size=MAX_S2C_FRAME))
    # repr() as well as ==, because True == 1 and the types must survive too.
    assert decoded == expected
    assert repr(decoded) == repr(expected)
    # What we decode we send as the same map (in whatever key order).
    assert canonical_pack(messages.encode(decoded)) == body(vector)
    assert vector["receivers"]
    for place in vector["receivers"]:
        got = receive(body(vector), place["role"], place["state"])
        assert got == expected, place


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector(vector: dict[str, Any]) -> None:
    code = ErrorCode(vector["code"])
    assert code.slug == vector["error"]
    decoded = strict_unpack(body(vector), max_size=MAX_S2C_FRAME)
    if "message" in vector:
        assert canonical_pack(from_json(vector["message"])) == body(vector)
    else:
        assert len(decoded[vector["field"]]) == vector["length"]
    if vector["case"] in MESSAGE_LAYER:
        with pytest.raises(RemoteProtocolError) as info:
            messages.decode(decoded)
        assert info.value.code is code
    else:
        messages.decode(decoded)  # a valid message: only its receiver refuses it
    place = vector["receiver"]
    got = receive(body(vector), place["role"], place["state"])
    assert isinstance(got, RemoteProtocolError), got
    assert got.code is code


def test_a_receiver_refuses_and_goes_on() -> None:
    # Spec 2.5: a refused body costs nothing; the next frame is read as if it had not been.
    [bad] = [v for v in VECTORS["invalid"] if v["name"] == "ping: n missing"]
    [good] = [v for v in VECTORS["valid"] if v["name"] == "ping"]
    conn = Connection(Role.SERVER)
    conn.state = State.READY
    frames = b"".join(struct.pack(">I", len(b)) + b for b in (body(bad), body(good)))
    refused, ping = conn.receive_data(frames)
    assert isinstance(refused, RemoteProtocolError)
    assert refused.code is ErrorCode.BAD_MESSAGE
    assert ping == messages.Ping(n=1)


# -- the schema -----------------------------------------------------------------------------------


def _schema(root: str) -> Any:
    pycddl = pytest.importorskip("pycddl")
    # pycddl 0.6.4 (cddl-rs) checks only the length of `T .size (lo..hi)`, not that it is a T
    # (it takes 5 for `tstr .size (0..10)`); `T .and (T .size ...)` means the same and is checked.
    text = re.sub(r"\b(tstr|bstr) (\.size \([0-9.]+\))", r"\1 .and (\1 \2)", SCHEMA)
    assert text != SCHEMA
    return pycddl.Schema(f"root = {root}\n" + text)


def _cbor(vector: dict[str, Any]) -> bytes:
    """The vector's message in CBOR, the data model a CDDL validator reads (msgpack's, here)."""
    cbor2 = pytest.importorskip("cbor2")
    value = strict_unpack(body(vector), max_size=MAX_S2C_FRAME)
    data: bytes = cbor2.dumps(value)
    return data


def _pycddl_misses(vector: dict[str, Any]) -> bool:
    """The vectors pycddl 0.6.4 is known to get wrong (the schema refuses them, it does not):
    it bounds no array of `any` (`[0*4096 any]` takes 4097 items), and panics on a `t` that is a
    bin."""
    if vector["case"] == "too_long":
        hints = typing.get_type_hints(messages.MESSAGES[vector["tag"]])
        return bool(hints[vector["field"]] == tuple[Any, ...])
    return "t" in (fields := strict_unpack(body(vector))) and isinstance(fields["t"], bytes)


def _rule(tag: str) -> str:
    return tag.replace("_", "-") + "-msg"


def test_the_schema_accepts_every_valid_vector() -> None:
    schemas = {role: _schema(f"to-{role.value}") for role in Role}
    for vector in VECTORS["valid"]:
        _schema(_rule(vector["tag"])).validate_cbor(_cbor(vector))
        for place in vector["receivers"]:
            schemas[Role(place["role"])].validate_cbor(_cbor(vector))


def test_the_schema_refuses_every_malformed_or_misdirected_vector() -> None:
    pycddl = pytest.importorskip("pycddl")
    schemas = {role: _schema(f"to-{role.value}") for role in Role}
    for vector in VECTORS["invalid"]:
        if vector["case"] == "state" or _pycddl_misses(vector):
            continue  # no session states in the schema; what pycddl gets wrong
        if vector["case"] == "direction":
            schema = schemas[Role(vector["receiver"]["role"])]
        elif vector["tag"] is None:
            schema = _schema("message")
        else:
            # A message's own rule: pycddl 0.6.4 takes a choice of maps (`to-server`) whose
            # one matching map holds an array item of the wrong type.
            schema = _schema(_rule(vector["tag"]))
        with pytest.raises(pycddl.ValidationError):
            schema.validate_cbor(_cbor(vector))
            pytest.fail(f"the schema accepts {vector['name']!r}")
