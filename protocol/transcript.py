"""A game's transcript: the inputs it accepted, in wire form, kept compact.

:attr:`.game.Game.transcript` reads as a list of maps (``len``, indexing, iteration), but a referee
holds thousands of live games, and a map per input costs ~1.2 KB for every shot and its verdict (a
classic game late in its firing: 276 KB as maps, 45.5 KB compact; BENCHMARKS.md, session 21). So
the last entry is kept exactly as logged (a caller may read it back, by identity), and each earlier
one is stored in the smallest form that gives back an equal map:

* a called shot ``{in: fire, seat, member, cells}`` and a cell-by-cell verdict
  ``{in: answer, seat, verdict}`` (the two entries of nearly every shot) as a few bytes in one
  ``bytearray``, when every value in them has exactly the type the decoder gives (so that the map
  rebuilt is equal, value types included);
* an entry whose map the game can rebuild from state it keeps anyway (a commitment, a reveal) as
  that rebuilder;
* anything else as the map itself.

Reading an entry rebuilds it: equal to the one logged, but a new map each time, its keys in
canonical order (so that a record built from it need not be copied to be canonical). The record
verifier replays into a game that keeps a plain list (:meth:`Transcript.keep_plain`): it reads only
the last entry, and compacting would be work for nothing.
"""

from __future__ import annotations

import functools
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from .canonical import canonical
from .commit import ShipOpening, new_opening
from .fleet import Placement
from .grid import Cell
from .verdict import Result, Shot, SunkClaim, Verdict, new_result, new_shot, new_verdict

__all__ = ["Transcript"]

Entry = dict[str, Any]
#: Rebuilds an entry the game logged; never a shot or a verdict.
Rebuild = Callable[[], Entry]

_FIRE, _ANSWER, _TOTAL = 1, 2, 3
_FIRE_KEYS = frozenset({"in", "seat", "member", "cells"})
_ANSWER_KEYS = frozenset({"in", "seat", "verdict"})
_VERDICT_KEYS = frozenset({"n", "results", "total", "sunk", "found"})
_RESULT_KEYS = frozenset({"r", "open", "sunk"})
_OPEN_KEYS = frozenset({"i", "occ", "salt"})
_CLAIM_KEYS = frozenset({"k", "open"})
_SHIP_KEYS = frozenset({"k", "at", "salt"})
_CODES = {"miss": 0, "hit": 1, "sunk": 2}
_NAMES = ("miss", "hit", "sunk")
_OCC, _CLAIM, _SHOWN, _VERTICAL = 4, 8, 16, 32
_HEAD = struct.Struct(">BBIB")  # tag, seat, n, results
_TOTAL_HEAD = struct.Struct(">BBIBB")  # tag, seat, n, total, sunk claims
_U16 = struct.Struct(">H")
_OPENING = struct.Struct(">BH16s")  # a cell result's flags, cell index and salt
_FIRE_ONE = struct.Struct(">BBBBH")  # a called shot of one cell: tag, seat, member, 1, cell


@functools.lru_cache(maxsize=32)
def _labels(rows: int, cols: int) -> tuple[tuple[str, ...], dict[str, int]]:
    labels = tuple(Cell(i // cols, i % cols).label() for i in range(rows * cols))
    return labels, {s: i for i, s in enumerate(labels)}


@functools.lru_cache(maxsize=32)
def _cells(count: int, cols: int) -> tuple[Cell, ...]:
    return tuple(Cell(i // cols, i % cols) for i in range(count))


_RESULTS = (Result.MISS, Result.HIT, Result.SUNK)


def _claim_object(data: bytearray, flags: int, at: int) -> tuple[SunkClaim, int]:
    """:func:`_decode_claim`, read straight into a :class:`SunkClaim`."""
    if not flags & _SHOWN:
        return SunkClaim(data[at]), at + 1
    place = Placement(data[at + 2], data[at + 3], bool(flags & _VERTICAL))
    shown = ShipOpening(data[at + 1], place, bytes(data[at + 4 : at + 20]))
    return SunkClaim(data[at], shown), at + 20


def _verdict(data: bytearray, start: int) -> Verdict:
    """The verdict of the compact answer at ``start``, as ``Verdict.from_dict`` reads its map."""
    if data[start] == _TOTAL:
        _, _, n, total, count = _TOTAL_HEAD.unpack_from(data, start)
        at = start + _TOTAL_HEAD.size
        claims = []
        for _ in range(count):
            claim, at = _claim_object(data, data[at], at + 1)
            claims.append(claim)
        return new_verdict(n, (), total, tuple(claims), None)
    _, _, n, count = _HEAD.unpack_from(data, start)
    at = start + _HEAD.size
    results = []
    unpack = _OPENING.unpack_from
    for _ in range(count):
        flags, i, salt = unpack(data, at)
        at += 19
        sunk = None
        if flags & _CLAIM:
            sunk, at = _claim_object(data, flags, at)
        results.append(
            new_result(_RESULTS[flags & 3], new_opening(i, flags & _OCC != 0, salt), sunk)
        )
    return new_verdict(n, tuple(results), None, (), None)


def _byte(v: Any) -> bool:
    return type(v) is int and 0 <= v < 256


def _salt(v: Any) -> bool:
    return type(v) is bytes and len(v) == 16


def _encode_claim(claim: Any) -> tuple[int, bytes] | None:
    """The flags and bytes of a sunk claim ``{k, open}``, or ``None`` unless it has the form."""
    if type(claim) is not dict or claim.keys() != _CLAIM_KEYS or not _byte(claim["k"]):
        return None
    shown = claim["open"]
    if shown is None:
        return 0, bytes((claim["k"],))
    if type(shown) is not dict or shown.keys() != _SHIP_KEYS:
        return None
    k, at, salt = shown["k"], shown["at"], shown["salt"]
    if not _byte(k) or not _salt(salt) or type(at) is not list or len(at) != 3:
        return None
    if not (_byte(at[0]) and _byte(at[1]) and type(at[2]) is bool):
        return None
    return _SHOWN | (_VERTICAL if at[2] else 0), bytes((claim["k"], k, at[0], at[1])) + salt


def _decode_claim(data: bytearray, flags: int, at: int) -> tuple[dict[str, Any], int]:
    """The claim whose bytes start at ``at`` (after its flags), and the offset after it."""
    if not flags & _SHOWN:
        return {"k": data[at], "open": None}, at + 1
    place = [data[at + 2], data[at + 3], bool(flags & _VERTICAL)]
    shown = {"at": place, "k": data[at + 1], "salt": bytes(data[at + 4 : at + 20])}
    return {"k": data[at], "open": shown}, at + 20


class Transcript(Sequence[Entry]):
    """The list of entries a game logged; see the module docstring."""

    __slots__ = ("_cols", "_data", "_ends", "_index", "_kept", "_labels", "_plain", "_tail")

    def __init__(self, rows: int, cols: int) -> None:
        self._labels, self._index = _labels(rows, cols)
        self._cols = cols
        self._data = bytearray()
        self._ends = array("I")  # end offset in _data of every entry but the tail
        self._kept: dict[int, Entry | Rebuild] = {}  # entries stored as maps or rebuilders
        self._tail: tuple[Entry, Rebuild | None] | None = None
        self._plain: list[Entry] | None = None

    def keep_plain(self) -> list[Entry]:
        """Keep every entry as given, in the list returned (for a replay); only while empty."""
        if len(self):
            raise ValueError("the transcript has entries already")
        self._plain = []
        return self._plain

    # -- writing ---------------------------------------------------------------------------------

    def append(self, entry: Entry, rebuild: Rebuild | None = None) -> None:
        """Log ``entry``; ``rebuild()``, if given, returns a map equal to it at any later time."""
        if self._plain is not None:
            self._plain.append(entry)
            return
        if self._tail is not None:
            self._store(*self._tail)
            self._tail = None
        if rebuild is not None:
            # Stored at once: kept as the tail, a commit entry's map held its ~100 leaf slices
            # alive until the next entry (3.5 KB a connection while every match is in setup).
            self._store(entry, rebuild)
        else:
            self._tail = (entry, rebuild)

    def _store(self, entry: Entry, rebuild: Rebuild | None) -> None:
        n = len(self._ends)
        if rebuild is not None:
            self._kept[n] = rebuild
        elif not self._encode(entry):
            self._kept[n] = entry
        self._ends.append(len(self._data))

    def _encode(self, e: Entry) -> bool:
        """Append the compact form of ``e`` to the data if it has one; whether it had."""
        kind = e.get("in")
        if kind == "fire" and type(kind) is str:
            return self._encode_fire(e)
        if kind == "answer" and type(kind) is str:
            return self._encode_answer(e)
        return False

    def _encode_fire(self, e: Entry) -> bool:
        if e.keys() != _FIRE_KEYS:
            return False
        cells, seat, member = e["cells"], e["seat"], e["member"]
        if not (_byte(seat) and _byte(member)) or type(cells) is not list:
            return False
        if len(self._labels) > 1 << 16:
            return False
        index = self._index
        if len(cells) == 1:  # a single shot: nearly every entry
            c = cells[0]
            i = index.get(c) if type(c) is str else None
            if i is None:
                return False
            self._data += _FIRE_ONE.pack(_FIRE, seat, member, 1, i)
            return True
        if not 0 < len(cells) < 256 or not all(type(c) is str for c in cells):
            return False
        try:
            at = [index[c] for c in cells]
        except KeyError:
            return False
        self._data += bytes((_FIRE, seat, member, len(at)))
        for i in at:
            self._data += _U16.pack(i)
        return True

    def _encode_answer(self, e: Entry) -> bool:
        if e.keys() != _ANSWER_KEYS:
            return False
        v, seat = e["verdict"], e["seat"]
        if not _byte(seat) or type(v) is not dict:
            return False
        if v.keys() != _VERDICT_KEYS or v["found"] is not None:
            return False
        n, results, sunk = v["n"], v["results"], v["sunk"]
        if type(n) is not int or not 0 <= n < 1 << 32 or type(sunk) is not list:
            return False
        if v["total"] is not None:  # a salvo reported as a total
            if type(results) is not list or results:
                return False
            return self._encode_total(seat, n, v["total"], sunk)
        if sunk:
            return False
        if type(results) is not list or not 0 < len(results) < 256:
            return False
        out = bytearray(_HEAD.pack(_ANSWER, seat, n, len(results)))
        for res in results:
            if type(res) is not dict or res.keys() != _RESULT_KEYS:
                return False
            r, o, claim = res["r"], res["open"], res["sunk"]
            code = _CODES.get(r) if type(r) is str else None
            if code is None or type(o) is not dict or o.keys() != _OPEN_KEYS:
                return False
            i, occ, salt = o["i"], o["occ"], o["salt"]
            if type(i) is not int or not 0 <= i < 1 << 16 or type(occ) is not bool:
                return False
            if not _salt(salt):
                return False
            flags = code | (_OCC if occ else 0)
            if claim is None:
                out += _OPENING.pack(flags, i, salt)
                continue
            packed = _encode_claim(claim)
            if packed is None:
                return False
            out += _OPENING.pack(flags | _CLAIM | packed[0], i, salt)
            out += packed[1]
        self._data += out
        return True

    def _encode_total(self, seat: int, n: int, total: Any, claims: Any) -> bool:
        if not _byte(total) or type(claims) is not list or not len(claims) < 256:
            return False
        out = bytearray(_TOTAL_HEAD.pack(_TOTAL, seat, n, total, len(claims)))
        for claim in claims:
            packed = _encode_claim(claim)
            if packed is None:
                return False
            out += bytes((packed[0],)) + packed[1]
        self._data += out
        return True

    # -- reading ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        if self._plain is not None:
            return len(self._plain)
        return len(self._ends) + (self._tail is not None)

    @overload
    def __getitem__(self, i: int) -> Entry: ...

    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...

    def __getitem__(self, i: int | slice) -> Entry | list[Entry]:
        if self._plain is not None:
            return self._plain[i]
        n = len(self)
        if isinstance(i, slice):
            return [self._entry(j) for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("transcript index out of range")
        return self._entry(i)

    def __iter__(self) -> Iterator[Entry]:
        if self._plain is not None:
            return iter(self._plain)
        return (self._entry(j) for j in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Transcript | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Transcript({list(self)!r})"

    def canonical_entries(self) -> list[Entry]:
        """Every entry as a new map in canonical form (3): what a record holds. A compact entry
        is rebuilt in that form already; any other is copied through ``canonical``, so that
        nothing in the list is shared with the game."""
        if self._plain is not None:
            return [canonical(e) for e in self._plain]
        out = []
        kept, compact = self._kept, self._compact
        start = 0
        for j, end in enumerate(self._ends):
            if start == end:  # kept as a map or a rebuilder: copied into canonical form
                e = kept[j]
                out.append(canonical(e() if callable(e) else e))
            else:  # compact: rebuilt in canonical form already
                out.append(compact(start))
            start = end
        if self._tail is not None:
            out.append(canonical(self._tail[0]))
        return out

    def _entry(self, j: int) -> Entry:
        if j == len(self._ends):
            assert self._tail is not None
            return self._tail[0]
        start = self._ends[j - 1] if j else 0
        if start == self._ends[j]:
            kept = self._kept[j]
            return kept() if callable(kept) else kept
        return self._compact(start)

    def _compact(self, start: int) -> Entry:
        """The entry whose compact bytes start at ``start``, as a new map in canonical form."""
        data = self._data
        if data[start] == _FIRE:
            seat, member, count = data[start + 1 : start + 4]
            labels = self._labels
            if count == 1:  # a single shot: nearly every entry
                cells = [labels[_U16.unpack_from(data, start + 4)[0]]]
            else:
                cells = [labels[_U16.unpack_from(data, start + 4 + 2 * k)[0]] for k in range(count)]
            return {"cells": cells, "in": "fire", "member": member, "seat": seat}
        if data[start] == _TOTAL:
            _, seat, n, total, count = _TOTAL_HEAD.unpack_from(data, start)
            at = start + _TOTAL_HEAD.size
            claims = []
            for _ in range(count):
                sunk, at = _decode_claim(data, data[at], at + 1)
                claims.append(sunk)
            verdict = {"found": None, "n": n, "results": [], "sunk": claims, "total": total}
            return {"in": "answer", "seat": seat, "verdict": verdict}
        _, seat, n, count = _HEAD.unpack_from(data, start)
        at = start + _HEAD.size
        results = []
        for _ in range(count):
            flags = data[at]
            i = _U16.unpack_from(data, at + 1)[0]
            salt = bytes(data[at + 3 : at + 19])
            claim = None
            at += 19
            if flags & _CLAIM:
                claim, at = _decode_claim(data, flags, at)
            results.append(
                {
                    "open": {"i": i, "occ": bool(flags & _OCC), "salt": salt},
                    "r": _NAMES[flags & 3],
                    "sunk": claim,
                }
            )
        verdict = {"found": None, "n": n, "results": results, "sunk": [], "total": None}
        return {"in": "answer", "seat": seat, "verdict": verdict}

    def shots(
        self, parse: Callable[[Entry, int], Shot], answer: Callable[[Entry, int], Verdict]
    ) -> list[tuple[Shot, Verdict]]:
        """Every answered shot with its verdict, in order, as the game applied them.

        Compact entries are read straight into objects (equal to what ``Verdict.from_dict`` of
        the logged map gives); any other ``fire``/``radar`` entry is turned into shot ``n`` by
        ``parse(entry, n)``, and any other ``answer`` into its verdict by ``answer(entry, n)``.
        """
        out: list[tuple[Shot, Verdict]] = []
        if self._plain is not None:
            return out  # a replay keeps its own list
        data, kept = self._data, self._kept
        cells = _cells(len(self._labels), self._cols)
        u16 = _U16.unpack_from
        called: tuple[int, tuple[Cell, ...]] | Entry | None = None

        # The entries kept as maps, and the tail, are read by this; compact ones inline below.
        def logged(e: Entry | Rebuild | None) -> None:
            nonlocal called
            if e is None or callable(e):
                return
            kind = e.get("in")
            if kind == "fire" or kind == "radar":
                called = e
            elif kind == "answer" and called is not None:
                n = len(out) + 1
                shot = parse(called, n) if isinstance(called, dict) else Shot(n, *called)
                out.append((shot, answer(e, n)))
                called = None

        start = 0
        for j, end in enumerate(self._ends):
            if start == end:
                logged(kept.get(j))
            elif data[start] == _FIRE:
                count = data[start + 3]
                if count == 1:
                    at: tuple[Cell, ...] = (cells[u16(data, start + 4)[0]],)
                else:
                    at = tuple(cells[u16(data, start + 4 + 2 * k)[0]] for k in range(count))
                called = (data[start + 1], at)
            elif called is not None:
                n = len(out) + 1
                shot = parse(called, n) if isinstance(called, dict) else new_shot(n, *called)
                out.append((shot, _verdict(data, start)))
                called = None
            start = end
        if self._tail is not None:
            logged(self._tail[0])
        return out
