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

# What the message layer refuses (spec 2.4); direction and state are the receiver's session, a
# size the receiver's rule that uses the value (tests/server/test_vectors_receivers.py), a cross
# rule either (messages.ONE_OF_CHECKED), and an order vector's code is its first defect's.
MESSAGE_LAYER = {"missing", "extra", "type", "range", "too_long", "tag"}
SESSION = {"direction", "state"}
CASES = MESSAGE_LAYER | SESSION | {"cross", "size", "order"}


def refused_by_message_layer(vector: dict[str, Any]) -> bool:
    """Whether decoding the vector's map alone refuses it (the first check that fails, 2.5)."""
    case = vector["defects"][0] if vector["case"] == "order" else vector["case"]
    return case in MESSAGE_LAYER or (case == "cross" and vector["tag"] in messages.ONE_OF_CHECKED)


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
    assert vector["case"] in CASES
    if refused_by_message_layer(vector):
        with pytest.raises(RemoteProtocolError) as info:
            messages.decode(decoded)
        assert info.value.code is code
    else:
        messages.decode(decoded)  # a valid message: only its receiver refuses it
    place = vector["receiver"]
    got = receive(body(vector), place["role"], place["state"])
    if vector["case"] in {"cross", "size"} and not refused_by_message_layer(vector):
        # The session lets it through; the receiver's own rule (5.3, 4.3) refuses it, which
        # tests/server/test_vectors_receivers.py checks against the reference server.
        assert isinstance(got, messages.MESSAGES[vector["tag"]]), got
        return
    assert isinstance(got, RemoteProtocolError), got
    assert got.code is code


def test_every_rule_tying_two_fields_has_vectors() -> None:
    # Spec 2.4/5.3: both set, and neither set, for each rule; and a valid vector for each side.
    for tag, (a, b) in messages.EXACTLY_ONE.items():
        cross = [v for v in VECTORS["invalid"] if v["tag"] == tag and v["case"] == "cross"]
        held = {
            (from_json(v["message"])[a] is None, from_json(v["message"])[b] is None) for v in cross
        }
        assert held == {(False, False), (True, True)}, tag
        valid = [from_json(v["message"]) for v in VECTORS["valid"] if v["tag"] == tag]
        assert {(v[a] is None, v[b] is None) for v in valid} == {(False, True), (True, False)}


def test_order_vectors_name_two_defects_and_the_first_ones_code() -> None:
    # Spec 2.5: the first failing check in the stated order gives the code.
    order = [v for v in VECTORS["invalid"] if v["case"] == "order"]
    assert len(order) >= 8
    known = CASES - {"order", "size"} | {"rule"}
    for v in order:
        first, second = v["defects"]
        assert {first, second} <= known and first != second, v["name"]
    pairs = {tuple(v["defects"]) for v in order}
    # Shape before direction, shape before state, direction before state, state before a
    # receiver rule.
    for pair in [("missing", "direction"), ("type", "state"), ("direction", "state")]:
        assert pair in pairs
    assert ("state", "rule") in pairs and ("state", "cross") in pairs


def test_the_integer_bounds_have_vectors_on_both_sides() -> None:
    # Spec 2.4: id, n, ref and seq go up to 2^32-1, which a uint32 carries; 2^32 is refused.
    top = messages.MAX_UINT32
    for tag, cls in messages.MESSAGES.items():
        for f in dataclasses.fields(cls):
            if f.name not in ("id", "n", "ref", "seq"):
                continue
            assert messages.int_range(tag, f.name) == (0, top)
            valid = [from_json(v["message"]) for v in VECTORS["valid"] if v["tag"] == tag]
            assert any(v[f.name] == top for v in valid), (tag, f.name)
            over = [
                v
                for v in VECTORS["invalid"]
                if v["tag"] == tag and v["case"] == "range" and v["field"] == f.name
            ]
            assert any(from_json(v["message"])[f.name] == top + 1 for v in over), (tag, f.name)


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
    # It also matches each item of an array of a type choice against one alternative only
    # (`[* (nil / int)]` refuses `[1]`): an array item of a map field's `value` is `any` here.
    text = re.sub(r"\[(0\*4096|\*) value\]", r"[\1 any]", text)
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
        defects = vector.get("defects", [vector["case"]])
        if set(defects) <= {"state", "size", "rule"} or _pycddl_misses(vector):
            # No session states, fixed sizes or receiver rules in the schema (15); what pycddl
            # gets wrong.
            continue
        if "direction" in defects:
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


def test_the_schema_refuses_keys_that_are_not_text_inside_map_fields() -> None:
    # Spec 2.3 (D5) at every depth: a map field's keys are str, and no value is a float.
    pycddl = pytest.importorskip("pycddl")
    cbor2 = pytest.importorskip("cbor2")
    schema = _schema("create-msg")
    create = {"t": "create", "id": 1, "mode": "blind", "public": True}
    schema.validate_cbor(
        cbor2.dumps(create | {"rules": {"preset": "classic", "x": [1, {"y": b""}]}})
    )
    for rules in ({1: "classic"}, {"preset": {2: 3}}, {"rows": 1.5}):
        with pytest.raises(pycddl.ValidationError):
            schema.validate_cbor(cbor2.dumps(create | {"rules": rules}))
            pytest.fail(f"the schema accepts rules {rules!r}")
