"""Tests for protocol/codec.py: framing, strict decoding, encoding."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seabattle.protocol import codec
from seabattle.protocol.codec import (
    HEADER_SIZE,
    MAX_DEPTH,
    MAX_FRAME,
    FrameDecoder,
    encode_frame,
    strict_unpack,
)
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def decode_error(body: bytes) -> ErrorCode:
    with pytest.raises(RemoteProtocolError) as info:
        strict_unpack(body)
    return info.value.code


# ---------------------------------------------------------------------------------------------
# A raw msgpack writer for tests: it can produce what msgpack.packb never will (duplicate keys,
# non-string keys, non-shortest forms, ext types), so the decoder can be fed all of it.


def raw_int(value: int, wide: bool) -> bytes:
    if wide and 0 <= value < 2**32:
        return b"\xce" + value.to_bytes(4, "big")
    if wide and -(2**31) <= value < 0:
        return b"\xd2" + value.to_bytes(4, "big", signed=True)
    packed: bytes = msgpack.packb(value)
    return packed


def raw_str(value: str, wide: bool) -> bytes:
    data = value.encode()
    if wide:
        return b"\xda" + len(data).to_bytes(2, "big") + data
    packed: bytes = msgpack.packb(value)
    return packed


def raw_map(pairs: list[tuple[bytes, bytes]], wide: bool = False) -> bytes:
    if wide:
        head = b"\xde" + len(pairs).to_bytes(2, "big")
    else:
        assert len(pairs) < 16
        head = bytes([0x80 + len(pairs)])
    return head + b"".join(k + v for k, v in pairs)


def raw_array(items: list[bytes], wide: bool = False) -> bytes:
    if wide:
        return b"\xdc" + len(items).to_bytes(2, "big") + b"".join(items)
    assert len(items) < 16
    return bytes([0x90 + len(items)]) + b"".join(items)


def raw_ext(code: int, data: bytes) -> bytes:
    """An ext value; msgpack.ExtType cannot make the negative (reserved) codes."""
    code_byte = code.to_bytes(1, "big", signed=True)
    fixext = {1: b"\xd4", 2: b"\xd5", 4: b"\xd6", 8: b"\xd7", 16: b"\xd8"}
    if len(data) in fixext:
        return fixext[len(data)] + code_byte + data
    return b"\xc7" + bytes([len(data)]) + code_byte + data


def s(text: str) -> bytes:
    """A msgpack str."""
    return raw_str(text, wide=False)


# Strategies for raw msgpack, allowed or not. Keys come from a small alphabet so that duplicates
# are frequent. The "plain" variants use only allowed kinds and string keys, so that they still
# often make valid messages (the decoder's fast path) next to duplicates and deep nesting.
plain_raw_scalars = st.one_of(
    st.just(b"\xc0"),
    st.sampled_from([b"\xc2", b"\xc3"]),
    st.builds(raw_int, st.integers(-(2**63), 2**64 - 1), st.booleans()),
    st.builds(raw_str, st.text(max_size=5), st.booleans()),
    st.binary(max_size=5).map(lambda b: msgpack.packb(b, use_bin_type=True)),
)
raw_scalars = st.one_of(
    plain_raw_scalars,
    st.floats(allow_nan=False).map(lambda f: msgpack.packb(f)),
    st.builds(raw_ext, st.integers(-128, 127).filter(lambda c: c != -1), st.binary(max_size=4)),
    st.integers(0, 2**32 - 1).map(lambda sec: msgpack.packb(msgpack.Timestamp(sec))),
)
string_keys = st.builds(raw_str, st.sampled_from("abcdefgt"), st.booleans())
raw_keys = st.one_of(string_keys, st.sampled_from([b"\x01", b"\xc4\x01a", b"\xc0", b"\x90"]))


def raw_containers(
    keys: st.SearchStrategy[bytes],
) -> Callable[[st.SearchStrategy[bytes]], st.SearchStrategy[bytes]]:
    def extend(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
        return st.one_of(
            st.builds(raw_array, st.lists(children, max_size=4), st.booleans()),
            st.builds(raw_map, st.lists(st.tuples(keys, children), max_size=4), st.booleans()),
        )

    return extend


def raw_maps(
    keys: st.SearchStrategy[bytes], values: st.SearchStrategy[bytes]
) -> st.SearchStrategy[bytes]:
    return st.builds(raw_map, st.lists(st.tuples(keys, values), max_size=6), st.booleans())


raw_values = st.recursive(raw_scalars, raw_containers(raw_keys), max_leaves=20)
plain_raw_values = st.recursive(plain_raw_scalars, raw_containers(string_keys), max_leaves=20)
raw_messages = st.one_of(
    raw_maps(string_keys, plain_raw_values),
    raw_maps(raw_keys, raw_values),
    raw_values,
)

# Strategy for valid messages, as Python values.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.text(max_size=20),
    st.binary(max_size=40),
)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    )


messages = st.dictionaries(
    st.text(max_size=8),
    # Mostly shallow; the few messages deeper than MAX_DEPTH test encode_frame's refusal.
    st.recursive(scalars, containers, max_leaves=12),
    max_size=6,
)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


# ---------------------------------------------------------------------------------------------
# Round trips and arbitrary input


@settings(deadline=None)
@given(st.lists(messages, max_size=5), st.data())
def test_round_trip_split_at_arbitrary_boundaries(batch: list[dict[str, Any]], data: Any) -> None:
    batch = [m for m in batch if depth(m) <= MAX_DEPTH]
    stream = b"".join(encode_frame(m) for m in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    out = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.feed(stream[start:end])
        while (message := decoder.next_frame()) is not None:
            out.append(message)
    decoder.eof()
    assert out == batch
    assert [repr(m) for m in out] == [repr(m) for m in batch]
    assert decoder.buffered == 0


@settings(deadline=None)
@given(messages)
def test_encode_refuses_exactly_what_is_too_deep(message: dict[str, Any]) -> None:
    if depth(message) <= MAX_DEPTH:
        assert strict_unpack(encode_frame(message)[4:]) == message
    else:
        with pytest.raises(LocalProtocolError) as info:
            encode_frame(message)
        assert info.value.code is ErrorCode.TOO_DEEP


# Pieces of a hostile stream: raw noise (whose first 4 bytes, read as a header, are nearly always
# over the limit), and frames around arbitrary or near-valid bodies.
stream_pieces = st.one_of(
    st.binary(max_size=12),
    st.binary(max_size=30).map(frame),
    raw_messages.map(frame),
)


def drain(decoder: FrameDecoder) -> int:
    """Read every frame available, going on after refused bodies; return how many calls."""
    calls = 0
    while True:
        calls += 1
        try:
            if decoder.next_frame() is None:
                return calls
        except RemoteProtocolError:
            if decoder.failed:
                raise


@settings(deadline=None)
@given(st.lists(stream_pieces, max_size=6), st.data(), st.booleans())
def test_arbitrary_streams_raise_only_remote_protocol_error(
    pieces: list[bytes], data: Any, end: bool
) -> None:
    stream = b"".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    calls = 0
    try:
        for start, stop in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            decoder.feed(stream[start:stop])
            calls += drain(decoder)
        if end:
            decoder.eof()
            calls += drain(decoder)
    except RemoteProtocolError:
        assert decoder.failed
    # Each call either ends a drain or consumes at least one header: no call repeats itself.
    assert calls <= len(stream) // HEADER_SIZE + len(cuts) + 2


@settings(deadline=None)
@given(st.one_of(raw_messages, st.binary(max_size=30)))
def test_arbitrary_bodies_raise_only_remote_protocol_error(body: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(frame(body))
    try:
        message = decoder.next_frame()
    except RemoteProtocolError:
        return
    # Nothing was refused, so the body must have been a whole, valid message.
    assert isinstance(message, dict)
    assert decoder.buffered == 0


def outcome(decode: Any, body: bytes) -> tuple[str, Any]:
    try:
        return ("ok", repr(decode(body)))
    except RemoteProtocolError as exc:
        return ("error", exc.code)


@settings(deadline=None, max_examples=500)
@given(st.one_of(raw_messages, st.binary(min_size=1, max_size=30)))
def test_fast_path_agrees_with_the_reference_decoder(body: bytes) -> None:
    # The decoder first tries a shortcut (codec._unpack) and falls back to codec._unpack_exact,
    # which applies every check in one fixed order; the two must never disagree.
    assert outcome(codec._unpack, body) == outcome(codec._unpack_exact, body)


# ---------------------------------------------------------------------------------------------
# Valid edge cases


def test_decodes_a_simple_message() -> None:
    body = msgpack.packb({"t": "shot", "x": 3, "y": 7, "salt": b"\x00\xff"}, use_bin_type=True)
    assert strict_unpack(body) == {"t": "shot", "x": 3, "y": 7, "salt": b"\x00\xff"}


def test_binary_stays_bytes_and_strings_stay_str() -> None:
    message = strict_unpack(raw_map([(s("b"), b"\xc4\x01a"), (s("s"), s("a"))]))
    assert message == {"b": b"a", "s": "a"}
    assert type(message["b"]) is bytes
    assert type(message["s"]) is str


def test_empty_map_is_a_valid_frame() -> None:
    assert strict_unpack(b"\x80") == {}


def test_non_shortest_encodings_are_accepted() -> None:
    body = raw_map([(raw_str("t", wide=True), raw_int(1, wide=True))], wide=True)
    assert strict_unpack(body) == {"t": 1}


def test_nested_non_shortest_map_is_accepted() -> None:
    # A nested map whose re-encoding differs from the bytes received: must still be accepted.
    inner = raw_map([(s("a"), raw_int(5, wide=True))], wide=True)
    assert strict_unpack(raw_map([(s("m"), inner)])) == {"m": {"a": 5}}


def test_integer_extremes() -> None:
    body = msgpack.packb({"lo": -(2**63), "hi": 2**64 - 1})
    assert strict_unpack(body) == {"lo": -(2**63), "hi": 2**64 - 1}


def test_map16_with_many_keys() -> None:
    pairs = [(s(f"k{i}"), b"\x01") for i in range(95)]
    assert len(strict_unpack(raw_map(pairs, wide=True))) == 95


def test_depth_limit_is_inclusive() -> None:
    # Top-level map (depth 1), then MAX_DEPTH - 1 arrays.
    body = b"\x81\xa1a" + b"\x91" * (MAX_DEPTH - 2) + b"\x90"
    value: Any = strict_unpack(body)["a"]
    levels = 1
    while value:
        value = value[0]
        levels += 1
    assert levels == MAX_DEPTH - 1


def test_frame_of_exactly_max_frame_is_accepted() -> None:
    pad = MAX_FRAME - len(b"\x81\xa1b\xc5\xff\xff")  # fixmap, key "b", bin16 header
    data = encode_frame({"b": b"\x00" * pad})
    assert len(data) == 4 + MAX_FRAME
    decoder = FrameDecoder()
    decoder.feed(data)
    assert decoder.next_frame() == {"b": b"\x00" * pad}


# ---------------------------------------------------------------------------------------------
# One test (at least) per error code


def test_header_over_limit_fails_before_the_body_arrives() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", MAX_FRAME + 1))
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE


def test_limit_is_per_decoder() -> None:
    small = FrameDecoder(max_frame=10)
    small.feed(struct.pack(">I", 10))
    assert small.next_frame() is None  # 10 is allowed: waits for the body
    other = FrameDecoder(max_frame=10)
    other.feed(struct.pack(">I", 11))
    with pytest.raises(RemoteProtocolError) as info:
        other.next_frame()
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE
    assert small.max_frame == 10


def test_strict_unpack_refuses_an_oversized_body() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        strict_unpack(b"\x80" * 11, max_size=10)
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE


def test_zero_length_frame_is_a_bad_message() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00\x00\x00")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.code is ErrorCode.BAD_MESSAGE
    assert decode_error(b"") is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize("cut", [1, 3, 4, 6])
def test_stream_ending_inside_a_frame_is_truncated(cut: int) -> None:
    data = encode_frame({"t": "ping"})
    decoder = FrameDecoder()
    decoder.feed(data[:cut])
    assert decoder.next_frame() is None
    with pytest.raises(RemoteProtocolError) as info:
        decoder.eof()
    assert info.value.code is ErrorCode.TRUNCATED_FRAME


def test_eof_keeps_complete_frames_readable() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame({"n": 1}) + encode_frame({"n": 2}) + encode_frame({"n": 3})[:5])
    decoder.eof()  # a complete frame is next, so nothing is wrong yet
    assert decoder.next_frame() == {"n": 1}
    assert decoder.next_frame() == {"n": 2}
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.code is ErrorCode.TRUNCATED_FRAME


def test_clean_eof() -> None:
    decoder = FrameDecoder()
    decoder.eof()
    assert decoder.next_frame() is None
    decoder = FrameDecoder()
    decoder.feed(encode_frame({"n": 1}))
    assert decoder.next_frame() == {"n": 1}
    decoder.eof()
    assert decoder.next_frame() is None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xc1", id="reserved byte"),
        pytest.param(b"\x82\xa1a\x01", id="map ends early"),
        pytest.param(b"\x81\xa1a\xa5abc", id="string ends early"),
        pytest.param(b"\x81\xa1a\xdd\xff\xff\xff\xff", id="array longer than the frame"),
        pytest.param(b"\x81\xa1a\xa2\xc3\x28", id="invalid utf-8"),
        pytest.param(b"\x81\xa1a\xd4\xff\x00", id="timestamp ext of a wrong size"),
    ],
)
def test_malformed_msgpack(body: bytes) -> None:
    assert decode_error(body) is ErrorCode.MALFORMED_MSGPACK


def test_trailing_bytes_inside_the_frame_are_malformed() -> None:
    assert decode_error(msgpack.packb({"a": 1}) + b"\xc0") is ErrorCode.MALFORMED_MSGPACK
    assert decode_error(msgpack.packb({"a": 1}) * 2) is ErrorCode.MALFORMED_MSGPACK


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"\xcb" + struct.pack(">d", 0.5), id="float64"),
        pytest.param(b"\xca" + struct.pack(">f", 0.5), id="float32"),
        pytest.param(raw_array([b"\x01", b"\xcb" + struct.pack(">d", 2.0)]), id="float in array"),
        pytest.param(b"\xd4\x05\x00", id="fixext1"),
        pytest.param(b"\xc7\x03\x7f\x00\x00\x00", id="ext8"),
        pytest.param(b"\xd6\xff\x00\x00\x00\x01", id="timestamp32"),
        pytest.param(msgpack.packb(msgpack.Timestamp(1, 5)), id="timestamp64"),
    ],
)
def test_forbidden_types(value: bytes) -> None:
    assert decode_error(raw_map([(s("v"), value)])) is ErrorCode.FORBIDDEN_TYPE


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(raw_map([(s("a"), b"\x01"), (s("a"), b"\x01")]), id="top level"),
        pytest.param(
            raw_map([(s("m"), raw_map([(s("k"), b"\x01"), (s("k"), b"\x02")]))]), id="nested"
        ),
        pytest.param(
            raw_map([(s("l"), raw_array([raw_map([(s("k"), b"\xc0"), (s("k"), b"\xc0")])]))]),
            id="map in array",
        ),
        # One more entry announced than distinct keys: 0xde - 0x80 == 94, a trap for a
        # shortcut that would compare the header byte with the number of entries.
        pytest.param(
            raw_map([(s(f"k{i}"), b"\x01") for i in range(94)] + [(s("k0"), b"\x02")], wide=True),
            id="map16",
        ),
        pytest.param(raw_map([(s("a"), b"\x01"), (raw_str("a", wide=True), b"\x01")]), id="str16"),
        # map16 and map32 headers announcing one entry more than there are distinct keys.
        pytest.param(
            b"\xde\x00\x0f" + b"".join(s(f"k{i}") + b"\x01" for i in [*range(14), 0]),
            id="map16 of 15",
        ),
        pytest.param(
            b"\xdf\x00\x00\x00\x03" + s("a") + b"\x01" + s("b") + b"\x01" + s("a") + b"\x01",
            id="map32",
        ),
    ],
)
def test_duplicate_keys(body: bytes) -> None:
    assert decode_error(body) is ErrorCode.DUPLICATE_KEY


@pytest.mark.parametrize("kind", ["arrays", "maps"])
def test_too_deep(kind: str) -> None:
    wrap = b"\x91" if kind == "arrays" else b"\x81\xa1a"
    body = b"\x81\xa1a" + wrap * (MAX_DEPTH - 1) + b"\x80"
    assert decode_error(body) is ErrorCode.TOO_DEEP


def test_far_too_deep_is_still_too_deep() -> None:
    # Deep enough for msgpack's own stack limit to be the one that trips.
    assert decode_error(b"\x81\xa1a" + b"\x91" * 10_000 + b"\x90") is ErrorCode.TOO_DEEP


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\x90", id="array"),
        pytest.param(b"\x01", id="int"),
        pytest.param(b"\xa1a", id="str"),
        pytest.param(b"\xc0", id="nil"),
    ],
)
def test_top_level_must_be_a_map(body: bytes) -> None:
    assert decode_error(body) is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(b"\x01", id="int"),
        pytest.param(b"\xc3", id="bool"),
        pytest.param(b"\xc0", id="nil"),
        pytest.param(b"\xc4\x01a", id="bin"),
        pytest.param(b"\x90", id="array"),
        pytest.param(b"\x80", id="map"),
    ],
)
def test_keys_must_be_strings(key: bytes) -> None:
    assert decode_error(raw_map([(key, b"\x01")])) is ErrorCode.BAD_MESSAGE
    nested = raw_map([(s("m"), raw_map([(key, b"\x01")]))])
    assert decode_error(nested) is ErrorCode.BAD_MESSAGE


# ---------------------------------------------------------------------------------------------
# Decoder state


def test_byte_at_a_time() -> None:
    data = encode_frame({"t": "ping", "n": 1}) + encode_frame({"t": "pong"})
    decoder = FrameDecoder()
    out = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        message = decoder.next_frame()
        if message is not None:
            out.append((i, message))
    first = len(encode_frame({"t": "ping", "n": 1})) - 1
    assert out == [(first, {"t": "ping", "n": 1}), (len(data) - 1, {"t": "pong"})]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(b"\xff\xff\xff\xff", id="too large"),
        pytest.param(b"\x00\x00\x00\x00", id="zero length"),
    ],
)
def test_a_frame_level_error_fails_the_decoder_for_good(bad: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(bad + encode_frame({"t": "ping"}))
    with pytest.raises(RemoteProtocolError) as first:
        decoder.next_frame()
    assert decoder.failed
    for call in (decoder.next_frame, lambda: decoder.feed(b"more"), decoder.eof):
        with pytest.raises(RemoteProtocolError) as again:
            call()
        assert again.value is first.value


def test_truncation_fails_the_decoder_for_good() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"\x00\x00")
    with pytest.raises(RemoteProtocolError) as first:
        decoder.eof()
    assert decoder.failed
    with pytest.raises(RemoteProtocolError) as again:
        decoder.next_frame()
    assert again.value is first.value


def test_a_refused_body_is_skipped_and_the_stream_goes_on() -> None:
    # The length prefix delimited the bad body, so the stream is still in step.
    decoder = FrameDecoder()
    decoder.feed(frame(b"\xc1") + frame(b"\x82\xa1a\x01\xa1a\x02") + encode_frame({"t": "ping"}))
    with pytest.raises(RemoteProtocolError) as first:
        decoder.next_frame()
    assert first.value.code is ErrorCode.MALFORMED_MSGPACK
    with pytest.raises(RemoteProtocolError) as second:
        decoder.next_frame()
    assert second.value.code is ErrorCode.DUPLICATE_KEY
    assert not decoder.failed
    assert decoder.next_frame() == {"t": "ping"}
    assert decoder.next_frame() is None
    decoder.eof()


def test_feed_after_eof_is_a_local_error() -> None:
    decoder = FrameDecoder()
    decoder.eof()
    with pytest.raises(LocalProtocolError):
        decoder.feed(b"\x00")


def test_max_frame_must_fit_the_header() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame=0)
    with pytest.raises(ValueError):
        FrameDecoder(max_frame=2**32)


def test_buffered_counts_undecoded_bytes() -> None:
    decoder = FrameDecoder()
    data = encode_frame({"a": 1})
    decoder.feed(data + data[:3])
    assert decoder.buffered == len(data) + 3
    decoder.next_frame()
    assert decoder.buffered == 3


# ---------------------------------------------------------------------------------------------
# Encoding


def test_encode_frame_layout() -> None:
    data = encode_frame({"t": "ping"})
    assert data == b"\x00\x00\x00\x08" + b"\x81\xa1t\xa4ping"


def test_encode_uses_bin_for_bytes() -> None:
    assert encode_frame({"b": b"x"})[4:] == b"\x81\xa1b\xc4\x01x"


def test_encode_refuses_an_oversized_frame() -> None:
    with pytest.raises(LocalProtocolError) as info:
        encode_frame({"b": b"\x00" * MAX_FRAME})
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE
    with pytest.raises(LocalProtocolError) as info:
        encode_frame({"b": b"\x00" * 10}, max_frame=10)
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE


class Color(IntEnum):
    RED = 1


@pytest.mark.parametrize(
    ("message", "code"),
    [
        pytest.param({"f": 1.0}, ErrorCode.FORBIDDEN_TYPE, id="float"),
        pytest.param({"l": [1, 2.5]}, ErrorCode.FORBIDDEN_TYPE, id="float in list"),
        pytest.param({"t": msgpack.Timestamp(1)}, ErrorCode.FORBIDDEN_TYPE, id="timestamp"),
        pytest.param({"x": msgpack.ExtType(1, b"")}, ErrorCode.FORBIDDEN_TYPE, id="ext"),
        pytest.param({"s": {1, 2}}, ErrorCode.FORBIDDEN_TYPE, id="set"),
        pytest.param({"b": bytearray(b"x")}, ErrorCode.FORBIDDEN_TYPE, id="bytearray"),
        pytest.param({1: "x"}, ErrorCode.BAD_MESSAGE, id="int key"),
        pytest.param({"m": {b"k": 1}}, ErrorCode.BAD_MESSAGE, id="nested bytes key"),
        pytest.param({"i": 2**64}, ErrorCode.BAD_MESSAGE, id="int too big"),
        pytest.param({"i": -(2**63) - 1}, ErrorCode.BAD_MESSAGE, id="int too small"),
        pytest.param({"s": "\ud800"}, ErrorCode.BAD_MESSAGE, id="lone surrogate"),
    ],
)
def test_encode_refuses_what_the_peer_would_refuse(message: Any, code: ErrorCode) -> None:
    with pytest.raises(LocalProtocolError) as info:
        encode_frame(message)
    assert info.value.code is code


def test_encode_refuses_a_non_map() -> None:
    with pytest.raises(LocalProtocolError) as info:
        encode_frame([1, 2])  # type: ignore[arg-type]
    assert info.value.code is ErrorCode.BAD_MESSAGE


def test_encode_refuses_a_cycle() -> None:
    message: dict[str, Any] = {}
    message["self"] = message
    with pytest.raises(LocalProtocolError) as info:
        encode_frame(message)
    assert info.value.code is ErrorCode.TOO_DEEP


def test_encode_accepts_int_subclasses_and_tuples() -> None:
    data = encode_frame({"c": Color.RED, "p": (1, 2), "ok": True})
    assert strict_unpack(data[4:]) == {"c": 1, "p": [1, 2], "ok": True}


# One msgpack packer per thread packs every frame (and the decoder's re-pack): what it gives must be
# what msgpack.packb gives, whatever was packed before, in whichever thread, from inside a pack.


def packed(message: dict[str, Any]) -> bytes:
    return frame(msgpack.packb(message, use_bin_type=True))


def test_a_refused_frame_leaves_nothing_behind_for_the_next() -> None:
    good = {"t": "ping", "n": [1, "two", b"3", {"k": None}]}
    for bad in ({"a": 1, "i": 2**64}, {"a": "x", "s": "\ud800"}, {"a": [1, 2], "z": -(2**63) - 1}):
        with pytest.raises(LocalProtocolError) as info:
            encode_frame(bad)
        assert info.value.code is ErrorCode.BAD_MESSAGE
        assert encode_frame(good) == packed(good)
        assert strict_unpack(packed({"m": good})[HEADER_SIZE:]) == {"m": good}


def test_frames_packed_by_threads_at_once_are_each_their_own() -> None:
    messages = [{"t": "x", "i": i, "b": bytes(i % 64), "l": list(range(i % 9))} for i in range(300)]
    want = [packed(msg) for msg in messages]
    got: dict[int, list[bytes]] = {}
    start = threading.Barrier(4)

    def work(k: int) -> None:
        start.wait()
        got[k] = [encode_frame(msg) for msg in messages for _ in range(3)][::3]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [0, 1, 2, 3] and all(frames == want for frames in got.values())


def test_a_frame_packed_while_another_is_being_packed_is_its_own() -> None:
    inner: list[bytes] = []

    class Mapping(dict[str, Any]):
        # msgpack reads a dict subclass with its (Python) items(): code that runs mid-pack.
        def items(self) -> Any:
            inner.append(encode_frame({"inner": [1, 2, 3]}))
            return super().items()

    assert encode_frame({"m": Mapping(a=1), "z": b"z"}) == packed({"m": {"a": 1}, "z": b"z"})
    assert inner == [packed({"inner": [1, 2, 3]})]
