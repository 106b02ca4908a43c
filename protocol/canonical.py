"""Canonical msgpack: one byte string for one value, so that hashes and signatures agree.

Rules (``spec/protocol.md`` section "Canonical encoding"): maps have string keys sorted by their
UTF-8 bytes; integers take the shortest msgpack form (msgpack-python already does this); strings
are ``str`` (UTF-8), byte strings are ``bin``; arrays are arrays; no floats, no ext types. Any
implementation that follows these rules produces the same bytes.
"""

from __future__ import annotations

import operator
from typing import Any

import msgpack

__all__ = ["canonical", "canonical_pack", "is_canonical"]


def canonical(value: Any) -> Any:
    """Return ``value`` with every map's keys sorted (recursively) and tuples turned into lists."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict:
        return _map(value)
    if t is list or t is tuple:
        return [v if type(v) in _SCALARS else canonical(v) for v in value]
    return _general(value)


# Exact types, tested first: canonical() copies whole match records, so most values are these.
_SCALARS = frozenset({str, int, bytes, bool, type(None)})
_ENCODE = operator.methodcaller("encode")


def _map(value: dict[Any, Any]) -> dict[str, Any]:
    try:
        "".join(value)  # raises unless every key is a string, at C speed
    except TypeError:
        _check_keys(value)
    out = {}
    for k in sorted(value, key=_ENCODE):
        v = value[k]
        out[k] = v if type(v) in _SCALARS else canonical(v)
    return out


def _check_keys(value: dict[Any, Any]) -> None:
    for k in value:
        if not isinstance(k, str):
            raise TypeError(f"canonical maps need string keys, got {type(k).__name__}")


def _general(value: Any) -> Any:
    # Subclasses of the plain types, and the errors.
    if isinstance(value, dict):
        _check_keys(value)
        return {k: canonical(value[k]) for k in sorted(value, key=lambda s: s.encode())}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, float):
        raise TypeError("floats have no canonical form here; use integers")
    if value is None or isinstance(value, bool | int | str | bytes):
        return value
    raise TypeError(f"no canonical form for {type(value).__name__}")


def canonical_pack(value: Any) -> bytes:
    """Pack ``value`` canonically (see module docstring)."""
    packed: bytes = msgpack.packb(canonical(value), use_bin_type=True)
    return packed


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    # Checked before dict() hashes the keys (see codec._checked_map): string keys, none repeated.
    if any(type(k) is not str for k, _ in pairs):
        raise ValueError("a map key that is not a string")
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a repeated map key")
    return out


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"extension type {code}")


def is_canonical(data: bytes) -> bool:
    """Whether ``data`` is exactly one value in its canonical encoding (spec section 3).

    False for anything else: bytes that are not one msgpack value, a value with no canonical form
    (a float, an extension type, a non-string or repeated key), or another encoding of a value
    that has one (a 16-bit header for a small map, ``cd 00 01`` for 1, unsorted keys).
    """
    try:
        value = msgpack.unpackb(
            data, raw=False, strict_map_key=False, object_pairs_hook=_pairs, ext_hook=_no_ext
        )
        return canonical_pack(value) == data
    except (ValueError, TypeError, OverflowError):  # msgpack's ExtraData is a ValueError
        return False
