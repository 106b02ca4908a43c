"""Cases of ``spec/protocol.md`` section 2, framing and decoding: frames (2.1), strict decoding
(2.3) and from map to message (2.4).

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

import struct
from typing import Any

from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.errors import ErrorCode

from .results import Trace
from .suite import Suite, case


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


async def _refused_body(
    s: Suite, t: Trace, body: bytes, what: str, code: ErrorCode, *, authed: bool = False
) -> None:
    p = await (s.player(t, "C") if authed else s.connect(t, "C"))
    await p.send_raw(_frame(body), what)
    await p.expect_error(code, None)
    t.expect("the session goes on: ping answered by pong")
    await p.alive()
    await p.aclose()


@case(
    "2.1-frame-too-large",
    "2.1 Frames",
    "Oversized frame header",
    "`N` over the limit of its direction with `FRAME_TOO_LARGE`, and in both cases the receiver "
    "MUST fail the session",
    "error{FRAME_TOO_LARGE}, then the end of the stream",
)
async def _frame_too_large(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    # Only the header: a conforming server refuses it before waiting for any body.
    await p.send_raw((65537).to_bytes(4, "big"), "header announcing 65537 bytes, no body")
    await p.expect_error(ErrorCode.FRAME_TOO_LARGE, None)
    await p.expect_close()


@case(
    "2.1-zero-length",
    "2.1 Frames",
    "Zero-length frame",
    "`N = 0` is refused with `BAD_MESSAGE` [...] the receiver MUST fail the session",
    "error{BAD_MESSAGE}, then the end of the stream",
)
async def _zero_length(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send_raw(b"\x00\x00\x00\x00", "header announcing 0 bytes")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.expect_close()


@case(
    "2.3-D1-malformed",
    "2.3 Strict decoding",
    "Malformed msgpack; the session continues",
    "The body is well-formed msgpack: no reserved byte (`0xc1`) [...] `MALFORMED_MSGPACK` (1003)",
    "error{MALFORMED_MSGPACK, ref: nil}; then ping -> pong",
)
async def _malformed(s: Suite, t: Trace) -> None:
    await _refused_body(s, t, b"\xc1", "body c1", ErrorCode.MALFORMED_MSGPACK)


@case(
    "2.3-D3-ext",
    "2.3 Strict decoding",
    "Extension type",
    "No extension type anywhere (`fixext`, `ext8/16/32`) [...] `FORBIDDEN_TYPE` (1004)",
    "error{FORBIDDEN_TYPE}; then ping -> pong",
)
async def _ext(s: Suite, t: Trace) -> None:
    body = b"\x82\xa1t\xa4ping\xa1n\xd4\x05\x01"  # {"t": "ping", "n": fixext1(type 5)}
    await _refused_body(s, t, body, "ping with n = fixext1", ErrorCode.FORBIDDEN_TYPE)


@case(
    "2.3-D4-float",
    "2.3 Strict decoding",
    "Float",
    "No float anywhere (`float32`, `float64`). Integers are the only numbers. | `FORBIDDEN_TYPE`",
    "error{FORBIDDEN_TYPE}; then ping -> pong",
)
async def _float(s: Suite, t: Trace) -> None:
    body = b"\x82\xa1t\xa4ping\xa1n\xcb" + struct.pack(">d", 1.5)  # n: float64 1.5
    await _refused_body(s, t, body, "ping with n = 1.5", ErrorCode.FORBIDDEN_TYPE)


@case(
    "2.3-D5-key-type",
    "2.3 Strict decoding",
    "Non-string map key",
    "Every map key, at every level, is a `str`. [...] | `BAD_MESSAGE` (1007)",
    "error{BAD_MESSAGE}; then ping -> pong",
)
async def _int_key(s: Suite, t: Trace) -> None:
    body = b"\x83\xa1t\xa4ping\xa1n\x01\x07\x01"  # {"t": "ping", "n": 1, 7: 1}
    await _refused_body(s, t, body, "ping with an integer key", ErrorCode.BAD_MESSAGE)


@case(
    "2.3-D6-duplicate",
    "2.3 Strict decoding",
    "Duplicate key",
    "No map repeats a key (compared as decoded strings). | `DUPLICATE_KEY` (1005)",
    "error{DUPLICATE_KEY}; then ping -> pong",
)
async def _duplicate(s: Suite, t: Trace) -> None:
    body = b"\x83\xa1t\xa4ping\xa1n\x01\xa1n\x02"  # {"t": "ping", "n": 1, "n": 2}
    await _refused_body(s, t, body, "ping with n twice", ErrorCode.DUPLICATE_KEY)


@case(
    "2.3-D7-too-deep",
    "2.3 Strict decoding",
    "Nesting deeper than 8",
    "Maps and arrays nest at most **8** deep [...] `TOO_DEEP` (1006)",
    "error{TOO_DEEP}; then ping -> pong",
)
async def _too_deep(s: Suite, t: Trace) -> None:
    deep: Any = 1
    for _ in range(8):
        deep = [deep]
    body = canonical_pack({"t": "ping", "n": deep})
    await _refused_body(s, t, body, "ping nesting 9 deep", ErrorCode.TOO_DEEP)


@case(
    "2.3-D8-not-a-map",
    "2.3 Strict decoding",
    "Top level not a map",
    "The top-level value is a map. | `BAD_MESSAGE` (1007)",
    "error{BAD_MESSAGE}; then ping -> pong",
)
async def _not_map(s: Suite, t: Trace) -> None:
    await _refused_body(s, t, b"\x92\x01\x02", "array [1, 2]", ErrorCode.BAD_MESSAGE)


@case(
    "2.4-unknown-tag",
    "2.4 From map to message",
    "Unknown tag",
    "a tag that names no message of the agreed version: `UNKNOWN_TAG`",
    "error{UNKNOWN_TAG}; then ping -> pong",
)
async def _unknown_tag(s: Suite, t: Trace) -> None:
    body = canonical_pack({"t": "frobnicate", "n": 1})
    await _refused_body(s, t, body, "{t: frobnicate}", ErrorCode.UNKNOWN_TAG, authed=True)


@case(
    "2.4-extra-key",
    "2.4 From map to message",
    "Extra key",
    "a missing key, an extra key, a value of the wrong type [...]: `BAD_MESSAGE`",
    "error{BAD_MESSAGE} for an extra key and for true where an int is due",
)
async def _extra_key(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send_raw(_frame(canonical_pack({"t": "ping", "n": 1, "x": 0})), "ping with key x")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.send_raw(_frame(canonical_pack({"t": "ping", "n": True})), "ping with n = true")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.alive()
    await p.aclose()


@case(
    "2.4-wrong-direction",
    "2.4 From map to message",
    "Message in the wrong direction",
    "a message whose direction (section 5) does not allow this receiver: `UNEXPECTED_MESSAGE`",
    "error{UNEXPECTED_MESSAGE} for a `shot` sent to the server; the session goes on",
)
async def _wrong_direction(s: Suite, t: Trace) -> None:
    p = await s.player(t, "C")
    await p.send(m.ShotCalled(bytes(16), 1, 1, 0, 0, ("A1",), False))
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p.alive()
    await p.aclose()
