"""Sans-IO framing and strict decoding: bytes in, message maps out (and back).

A frame is a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes holding exactly one
msgpack map. ``N`` is at least 1 and at most the frame limit (:data:`MAX_FRAME` by default).

Decoding is strict, so that every implementation accepts exactly the same messages:

* the top level is a map whose keys are strings, at every level, with no key repeated;
* values are nil, booleans, integers, strings, binaries, arrays and maps; floats and every
  extension type (the msgpack timestamp included) are refused;
* nesting is at most :data:`MAX_DEPTH` containers deep, the top-level map counting as 1;
* the map fills the frame exactly and is well-formed msgpack (strings are valid UTF-8).

Every refusal is a :class:`~seabattle.protocol.errors.RemoteProtocolError` carrying the wire code
(``spec/vectors/framing.json`` lists a vector for each). There is no I/O here: the caller feeds
received bytes to a :class:`FrameDecoder` and writes what :func:`encode_frame` returns.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, NoReturn

import msgpack

from .errors import ErrorCode, LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "HEADER_SIZE",
    "MAX_DEPTH",
    "MAX_FRAME",
    "FrameDecoder",
    "encode_frame",
    "encode_frame_walking",
    "strict_unpack",
]

MAX_FRAME = 65536
"""Default largest frame body, in bytes (the 4-byte header not counted)."""

MAX_DEPTH = 8
"""Deepest nesting of maps and arrays; the top-level map is at depth 1."""

HEADER_SIZE = 4
"""Size of the length prefix."""

_HEADER = struct.Struct(">I")
_unpackb = msgpack.unpackb


class _Packer(threading.local):
    # msgpack.packb makes a Packer (and its 256 KB buffer) for every call and drops it: about a
    # third of packing a small frame, which happens for every frame sent and for every received
    # one whose maps nest (the re-pack in _unpack). One packer per thread is kept instead (its
    # buffer stays as large as the largest body it packed); a Packer resets itself after an
    # error, and gives the bytes and the errors packb gives.
    def __init__(self) -> None:
        self.packer: msgpack.Packer | None = msgpack.Packer(use_bin_type=True)


_PACKER = _Packer()


def _packb(obj: Any) -> bytes:
    """``msgpack.packb(obj, use_bin_type=True)``."""
    local = _PACKER
    packer = local.packer
    if packer is None:  # a pack inside a pack (a finalizer run mid-way, say): not the same buffer
        return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]
    local.packer = None
    try:
        return packer.pack(obj)  # type: ignore[no-any-return]
    finally:
        local.packer = packer


# Value types that need no further look: exact types, because msgpack only ever builds these.
_SCALARS = frozenset({str, int, bytes, bool, type(None)})
_SCALAR_BASES = (str, int, bytes)
_CONTAINERS = (dict, list, tuple)
_EXTENSIONS = (msgpack.Timestamp, msgpack.ExtType)


def _refuse_ext(code: int, data: bytes) -> NoReturn:
    raise RemoteProtocolError(ErrorCode.FORBIDDEN_TYPE, f"ext type {code} is not allowed")


def _checked_map(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    # Keys are checked before dict() hashes them: str hashes are randomised, but an int key
    # could be chosen to collide (hash flooding), so non-string keys must never reach a dict.
    for key, _ in pairs:
        if type(key) is not str:
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"map key of type {type(key).__name__}, not str"
            )
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RemoteProtocolError(ErrorCode.DUPLICATE_KEY, f"key {key[:40]!r} repeated")
            seen.add(key)
    return result


def _check_tree(
    container: dict[Any, Any] | list[Any] | tuple[Any, ...],
    depth: int,
    error: type[ProtocolError],
) -> bool:
    """Check keys, value types and depth below ``container``, which sits at ``depth``.

    Returns whether a map was found below ``container`` (the fast decoding path needs to know).
    """
    # Exact type tests come first and isinstance() gets tuples, not X | Y unions: this walk
    # runs on every nested message, and both choices measurably speed it up.
    nested_map = False
    values: Any
    if isinstance(container, dict):
        for key in container:
            if type(key) is not str and not isinstance(key, str):
                raise error(ErrorCode.BAD_MESSAGE, f"map key of type {type(key).__name__}, not str")
        values = container.values()
    else:
        values = container
    for value in values:
        kind = type(value)
        if kind in _SCALARS:
            continue
        if kind is not list and kind is not dict:
            # Floats, timestamps and encode_frame's more exotic input.
            if isinstance(value, _EXTENSIONS):  # before tuples: ExtType is a namedtuple
                raise error(
                    ErrorCode.FORBIDDEN_TYPE, f"{kind.__name__} (an ext type) is not allowed"
                )
            if not isinstance(value, _CONTAINERS):
                if isinstance(value, _SCALAR_BASES):  # IntEnum, StrEnum and the like
                    continue
                raise error(ErrorCode.FORBIDDEN_TYPE, f"{kind.__name__} is not allowed")
        if depth >= MAX_DEPTH:
            raise error(ErrorCode.TOO_DEEP, f"nesting deeper than {MAX_DEPTH}")
        if _check_tree(value, depth + 1, error) or isinstance(value, dict):
            nested_map = True
    return nested_map


def _unpack_exact(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The reference decoder: every check, in a fixed order, for every message."""
    n = len(body)
    try:
        obj = _unpackb(
            body,
            raw=False,
            # Our hook rejects non-string keys itself, with the right code and before hashing.
            strict_map_key=False,
            object_pairs_hook=_checked_map,
            ext_hook=_refuse_ext,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n >> 1,
            max_ext_len=n,
        )
    except RemoteProtocolError:
        raise
    except msgpack.ExtraData as exc:
        raise RemoteProtocolError(
            ErrorCode.MALFORMED_MSGPACK, "trailing bytes after the message"
        ) from exc
    except msgpack.StackError as exc:
        raise RemoteProtocolError(ErrorCode.TOO_DEEP, f"nesting deeper than {MAX_DEPTH}") from exc
    except (ValueError, TypeError) as exc:
        # ValueError covers truncated data, reserved bytes, bad UTF-8 and announced lengths
        # longer than the body (which no honest encoder can produce). TypeError is not known
        # to happen; it is caught so that no input can escape as anything but a protocol error.
        detail = str(exc) or type(exc).__name__
        raise RemoteProtocolError(ErrorCode.MALFORMED_MSGPACK, detail[:120]) from exc
    if type(obj) is not dict:
        raise RemoteProtocolError(
            ErrorCode.BAD_MESSAGE, f"top level is {type(obj).__name__}, not a map"
        )
    _check_tree(obj, 1, RemoteProtocolError)
    return obj


def _unpack(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    # Fast path. An object_pairs_hook is the only way to see duplicate keys while decoding, and
    # calling it per map costs more than the whole unpackb. So decode without it, check types,
    # keys and depth with one walk, and prove the absence of duplicates afterwards:
    # * with no map below the top one, the top map's header must announce len(obj) entries;
    # * otherwise re-packing must give back the very same bytes (a repeated key would have
    #   made the dict shorter than the map it was decoded from; non-shortest encodings also
    #   differ, and merely take the slow path).
    # strict_map_key=True keeps hashing to str and bytes keys, whose hashes are randomised.
    # Anything else, errors included, goes to _unpack_exact, so that one function alone decides
    # which error is reported and both paths always agree (tests/core/test_codec.py checks that).
    n = len(body)
    try:
        obj = _unpackb(
            body,
            raw=False,
            strict_map_key=True,
            ext_hook=_refuse_ext,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n >> 1,
            max_ext_len=n,
        )
        if type(obj) is not dict:
            return _unpack_exact(body)
        nested_map = _check_tree(obj, 1, RemoteProtocolError)
    except (ValueError, TypeError, RemoteProtocolError):
        return _unpack_exact(body)
    if nested_map:
        if _packb(obj) == body:
            return obj
    elif len(obj) == _top_map_count(body):
        return obj
    return _unpack_exact(body)


def _top_map_count(body: bytes | bytearray | memoryview) -> int:
    # Only called once unpackb has read a map that fills the body, so body[0] is a map header.
    first = body[0]
    if first == 0xDE:
        return (body[1] << 8) | body[2]
    if first == 0xDF:
        count: int = _HEADER.unpack_from(body, 1)[0]
        return count
    return first & 0x0F


def strict_unpack(
    body: bytes | bytearray | memoryview, *, max_size: int = MAX_FRAME
) -> dict[str, Any]:
    """Decode one frame body (without its length prefix) into a message map.

    Raises :class:`RemoteProtocolError` with ``BAD_MESSAGE`` for an empty body or a top level
    that is not a map, ``FRAME_TOO_LARGE`` for a body over ``max_size``, and otherwise the code
    of the first rule broken (see the module docstring).
    """
    if not body:
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "empty frame")
    if len(body) > max_size:
        raise RemoteProtocolError(ErrorCode.FRAME_TOO_LARGE, f"{len(body)} bytes, limit {max_size}")
    return _unpack(body)


def encode_frame(obj: dict[str, Any], *, max_frame: int = MAX_FRAME) -> bytes:
    """Return the frame (length prefix and msgpack body) carrying the map ``obj``.

    ``obj`` must obey the rules the decoder enforces, so that whatever is sent is accepted:
    string keys, only nil/bool/int/str/bytes/list/tuple/dict values, at most :data:`MAX_DEPTH`
    deep, integers within msgpack's 64-bit range, and a body of at most ``max_frame`` bytes.
    Otherwise :class:`LocalProtocolError` is raised with the code the peer would have sent.
    Map order is kept as given; use :mod:`.canonical` when the bytes themselves must be unique.
    """
    if not isinstance(obj, dict):
        raise LocalProtocolError(ErrorCode.BAD_MESSAGE, f"a frame carries a map, not {type(obj)}")
    _check_tree(obj, 1, LocalProtocolError)
    return _pack_frame(obj, max_frame)


def encode_frame_walking(
    obj: dict[str, Any], walk: list[Any], *, max_frame: int = MAX_FRAME
) -> bytes:
    """:func:`encode_frame` for a map whose caller vouches for all of it but the values ``walk``.

    Every key of ``obj`` must be a ``str``, and every value not in ``walk`` nil, a bool, int,
    str or bytes (or a subclass), or a list or tuple of such: values the walk accepts at once.
    ``walk`` lists the other values, in the map's order; they are checked as values of the
    top-level map, so the result, and the first error, are those of :func:`encode_frame`.
    """
    if walk:
        _check_tree(walk, 1, LocalProtocolError)
    return _pack_frame(obj, max_frame)


def _pack_frame(obj: dict[str, Any], max_frame: int) -> bytes:
    try:
        body = _packb(obj)
    except (OverflowError, ValueError, TypeError) as exc:
        raise LocalProtocolError(ErrorCode.BAD_MESSAGE, str(exc)) from exc
    if len(body) > max_frame:
        raise LocalProtocolError(ErrorCode.FRAME_TOO_LARGE, f"{len(body)} bytes, limit {max_frame}")
    return _HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental, sans-IO frame decoder.

    :meth:`feed` bytes as they arrive, then call :meth:`next_frame` until it returns ``None``;
    call :meth:`eof` when the stream ends.

    A frame's length is checked as soon as its 4-byte header has arrived, before any of its
    body is waited for.

    Errors come in two kinds (``spec/protocol.md`` section 2.5). A frame-level error
    (``FRAME_TOO_LARGE``, ``BAD_MESSAGE`` for a zero length, ``TRUNCATED_FRAME``) means the
    stream can no longer be trusted to be in step: the decoder is then failed for good, as in
    h11, :attr:`failed` is true and every later call raises the same error. A body refused by
    the strict decoding rules was already delimited by its length prefix, so it is consumed and
    the next call goes on with the next frame; :attr:`failed` stays false.
    """

    __slots__ = ("_buf", "_eof", "_error", "_max_frame", "_pos")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        """Create a decoder accepting frame bodies of up to ``max_frame`` bytes."""
        if not 1 <= max_frame <= 0xFFFFFFFF:
            raise ValueError(f"max_frame must be in 1..2**32-1, got {max_frame}")
        self._max_frame = max_frame
        self._buf = bytearray()
        # Bytes before _pos are consumed; they are dropped at the next feed(), not per frame.
        self._pos = 0
        self._eof = False
        self._error: RemoteProtocolError | None = None

    @property
    def max_frame(self) -> int:
        """The largest frame body this decoder accepts."""
        return self._max_frame

    @property
    def failed(self) -> bool:
        """Whether a frame-level error has ended this stream (the session must fail)."""
        return self._error is not None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def _fail(self, code: ErrorCode, detail: str) -> NoReturn:
        self._error = RemoteProtocolError(code, detail)
        raise self._error

    def _raise_stored(self, error: RemoteProtocolError) -> NoReturn:
        # Re-raising one object would grow its traceback on every call.
        raise error.with_traceback(None)

    def _bad_header(self, size: int) -> NoReturn:
        if size:
            self._fail(
                ErrorCode.FRAME_TOO_LARGE, f"header announces {size}, limit {self._max_frame}"
            )
        self._fail(ErrorCode.BAD_MESSAGE, "zero-length frame")

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes. Raises the frame-level error if the decoder has failed."""
        if self._error is not None:
            self._raise_stored(self._error)
        if self._eof:
            raise LocalProtocolError(ErrorCode.INTERNAL_ERROR, "feed() after eof()")
        if self._pos:
            # Deleting a bytearray's head only moves its start pointer in CPython: cheap.
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_frame(self) -> dict[str, Any] | None:
        """Return the next decoded message, or ``None`` if more data is needed.

        Raises :class:`RemoteProtocolError` for a bad header or body (and ``TRUNCATED_FRAME``
        after :meth:`eof` if the stream ended inside a frame); check :attr:`failed` to tell
        whether the stream is lost or the next frame may be read.
        """
        if self._error is not None:
            self._raise_stored(self._error)
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < HEADER_SIZE:
            if self._eof and len(buf) > pos:
                self._fail(ErrorCode.TRUNCATED_FRAME, "stream ended inside a frame header")
            return None
        size = _HEADER.unpack_from(buf, pos)[0]
        if size > self._max_frame or not size:
            self._bad_header(size)
        end = pos + HEADER_SIZE + size
        if end > len(buf):
            if self._eof:
                self._fail(
                    ErrorCode.TRUNCATED_FRAME,
                    f"stream ended {end - len(buf)} bytes before the end of a frame",
                )
            return None
        body = buf[pos + HEADER_SIZE : end]
        # Consumed before decoding: a refused body must not be met again on the next call.
        if end == len(buf):
            # Nothing left: let the buffer go now rather than at the next feed(). A server holds
            # a decoder per connection, and an idle peer's last frame (a commit: 3.5 KB) would
            # otherwise stay in memory until it speaks again.
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
        return _unpack(body)

    def eof(self) -> None:
        """Mark the end of the stream.

        Raises ``TRUNCATED_FRAME`` if the bytes buffered end inside a frame. Complete frames
        still buffered stay readable with :meth:`next_frame`, which then reports a truncated
        tail, if any, instead of returning ``None``. No more data may be fed afterwards.
        """
        if self._error is not None:
            self._raise_stored(self._error)
        self._eof = True
        buf = self._buf
        pos = self._pos
        if len(buf) == pos:
            return
        if len(buf) - pos < HEADER_SIZE:
            self._fail(ErrorCode.TRUNCATED_FRAME, "stream ended inside a frame header")
        size = _HEADER.unpack_from(buf, pos)[0]
        if size > self._max_frame or not size:
            self._bad_header(size)
        if pos + HEADER_SIZE + size > len(buf):
            self._fail(ErrorCode.TRUNCATED_FRAME, "stream ended inside a frame")
