"""The fuzz input as a stream of decisions, and well-typed messages built from it.

A target reads its choices from :class:`Data` rather than from ``atheris.FuzzedDataProvider`` so
that it runs the same without atheris (the tests feed it a fixed corpus). Reading past the end
gives zeros and empty strings: every input, however short, is a whole run.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from seabattle.protocol import messages as m

__all__ = ["Data", "build"]

_UINT64_MAX, _INT64_MIN = (1 << 64) - 1, -(1 << 63)

# Text a fuzzer is unlikely to find byte by byte: the words the protocol gives meaning to.
WORDS = (
    "", "peer", "redirect", "classic", "russian", "blind", "custody", "A1", "J10", "K1", "A0",
    "a1", " B2 ", "Z99", "miss", "hit", "sunk", "clock", "repeat", "\u00e9", "A\x001",
)  # fmt: skip


class Data:
    """Reads choices off the fuzz input, front to back."""

    __slots__ = ("_at", "_buf")

    def __init__(self, buf: bytes) -> None:
        self._buf = buf
        self._at = 0

    @property
    def done(self) -> bool:
        """Whether the input is used up."""
        return self._at >= len(self._buf)

    def byte(self) -> int:
        """The next byte (0 past the end)."""
        at = self._at
        self._at = at + 1
        return self._buf[at] if at < len(self._buf) else 0

    def below(self, n: int) -> int:
        """A number in ``range(n)``, from one byte (two when ``n`` needs them)."""
        if n <= 1:
            return 0
        v = self.byte()
        if n > 256:
            v = v << 8 | self.byte()
        return v % n

    def flag(self) -> bool:
        """A yes or no."""
        return self.byte() & 1 == 1

    def take(self, n: int) -> bytes:
        """Up to ``n`` raw bytes."""
        at = self._at
        self._at = at + n
        return self._buf[at : at + n]

    def blob(self, limit: int = 64) -> bytes:
        """A length byte, then that many bytes (at most ``limit``)."""
        return self.take(self.below(limit + 1))

    def integer(self) -> int:
        """An integer, biased to the edges a decoder or a rule checks."""
        kind = self.below(8)
        if kind == 0:
            return self.below(4) - 1
        if kind == 1:
            return self.below(16)
        if kind == 2:
            return int.from_bytes(self.take(8), "big", signed=True)
        if kind == 3:
            # Both sides of each width's edge, within msgpack's range (what a decoder can give).
            edge = 1 << (7, 8, 15, 16, 31, 32, 53, 63, 64)[self.below(9)]
            near = edge + 1 - self.below(3)
            return max(-near, _INT64_MIN) if self.below(4) == 0 else min(near, _UINT64_MAX)
        return self.below(256) - 8

    def text(self) -> str:
        """A string: a word the protocol knows, or arbitrary (valid) UTF-8."""
        if self.flag():
            return WORDS[self.below(len(WORDS))]
        return self.blob(16).decode("utf-8", "replace")

    def value(self, depth: int = 0) -> Any:
        """Any msgpack value the strict decoder lets through, nested a little."""
        kind = self.below(8 if depth < 3 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return self.flag()
        if kind == 2:
            return self.integer()
        if kind == 3:
            return self.text()
        if kind == 4:
            return self.blob(40)
        if kind == 5:
            return [self.value(depth + 1) for _ in range(self.below(4))]
        return {self.text(): self.value(depth + 1) for _ in range(self.below(4))}


def _of(hint: Any, d: Data) -> Any:
    """A value of type ``hint`` (mostly: one time in sixteen, any value, to reach the checks)."""
    if d.below(16) == 0:
        return d.value()
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        return _of(options[d.below(len(options))], d)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_of(item, d) for _ in range(d.below(5)))
    if hint is type(None):
        return None
    if hint is bool:
        return d.flag()
    if hint is int:
        return d.integer()
    if hint is str:
        return d.text()
    if hint is bytes:
        return d.blob(40)
    return d.value()


_FIELDS: dict[type[m.Message], tuple[tuple[str, Any], ...]] = {}


def build(cls: type[m.Message], d: Data, **known: Any) -> m.Message:
    """A ``cls`` with fields drawn from ``d`` (``known`` ones, when ``d`` says so, as given).

    Raises ``BAD_MESSAGE`` when a drawn value breaks the message's own checks, as decoding the
    same map would.
    """
    fields = _FIELDS.get(cls)
    if fields is None:
        hints = typing.get_type_hints(cls)
        fields = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
        _FIELDS[cls] = fields
    args = []
    for name, hint in fields:
        if name in known and d.below(8):
            args.append(known[name])
        else:
            args.append(_of(hint, d))
    return cls(*args)
