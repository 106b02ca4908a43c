"""Fleet commitments, openings, reveals and the fair lot.

Theory of operation (normative text: ``spec/protocol.md`` section "Commitments"):

* Every hash is SHA-256 over a one-byte *kind prefix* and the 32-byte *context* ``ctx``, so that no
  hash of one kind can stand for another, and none can be replayed in another match, game or seat::

      ctx = SHA-256("seabattle/v1/ctx" 0x00 || canonical({"game": g, "match": match_id,
                                                          "rules": rules_digest, "seat": s,
                                                          "v": 1}))

* A player draws a 32-byte ``secret``. Each committed value gets its own 128-bit salt derived from
  it: ``salt = HMAC-SHA256(secret, label || index)[:16]``. Opening one value reveals one salt and
  nothing about the others (HMAC is a PRF); the final reveal sends ``secret`` and the fleet, from
  which everything is recomputed.

* One *cell leaf* per grid cell binds whether a ship is there (not which one: 004 forbids a hit to
  say which ship), one *ship leaf* per ship binds where it lies::

      cell_leaf[i] = SHA-256(0x00 || ctx || u16(i) || u8(occupied) || salt("cell", i))
      ship_leaf[k] = SHA-256(0x01 || ctx || u8(k) || u8(row) || u8(col) || u8(vertical)
                             || salt("ship", k))
      root         = SHA-256(0x02 || ctx || cell_leaf[0] || ... || ship_leaf[0] || ...)

  The commitment sent before the first shot is the full leaf list (3.4 KB for 10x10); its ``root``
  names it in records and signatures. A flat list rather than a Merkle tree keeps every per-shot
  proof to one 16-byte salt and one hash to check, on the hot path; the one-time cost is the list.

* A verdict on a cell is proved by a :class:`CellOpening`; a sunk ship the rules show whole by a
  :class:`ShipOpening`. Everything else is checked against the :class:`Reveal` at the end.

All functions here are pure: the caller passes the randomness in (``secret``, ``nonce``).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from collections.abc import Iterable, Sequence
from dataclasses import FrozenInstanceError, dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import canonical_pack
from .errors import ErrorCode, RemoteProtocolError
from .fleet import Fleet, IllegalFleet, Placement
from .rules import RuleSet

__all__ = [
    "PROTOCOL_VERSION",
    "CellOpening",
    "Commitment",
    "Committed",
    "Reveal",
    "ShipOpening",
    "check_seat",
    "coin_commit",
    "coin_result",
    "context",
    "seat_statement",
    "sign_seat",
]

PROTOCOL_VERSION = 2
"""The protocol version this code speaks (spec revision 3; revision 2 and before were version 1)."""
COMMITMENT_VERSION = 1
"""The commitment scheme's version, inside every context (unchanged since revision 1)."""
SECRET_BYTES = 32
SALT_BYTES = 16

_CELL, _SHIP, _ROOT = b"\x00", b"\x01", b"\x02"
_U16 = struct.Struct(">H")
_OPENING_KEYS = frozenset({"i", "occ", "salt"})
_SHIP_OPENING_KEYS = frozenset({"k", "at", "salt"})


def _bad(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.BAD_PROOF, detail)


_SEAT_PREFIX = b"seabattle/v2/seat\x00"


def seat_statement(ctx: bytes, root: bytes) -> bytes:
    """What a player signs to take its seat with its fleet (spec 10.10): the context, which names
    the match, the game, the seat and the rules, and the root of its commitment."""
    return _SEAT_PREFIX + ctx + root


def sign_seat(key: Ed25519PrivateKey, ctx: bytes, root: bytes) -> bytes:
    """The player's seat signature: its key's Ed25519 signature of :func:`seat_statement`."""
    return key.sign(seat_statement(ctx, root))


def check_seat(player_key: bytes, ctx: bytes, root: bytes, sig: bytes) -> None:
    """Raise ``BAD_SIGNATURE`` unless ``sig`` by ``player_key`` (32 bytes) signs the seat."""
    try:
        Ed25519PublicKey.from_public_bytes(player_key).verify(sig, seat_statement(ctx, root))
    except (InvalidSignature, ValueError):
        raise RemoteProtocolError(
            ErrorCode.BAD_SIGNATURE, "the seat signature is not by this seat's player"
        ) from None


def context(match_id: bytes, game: int, seat: int, rules: RuleSet) -> bytes:
    """The 32-byte domain-separation context of one player's fleet in one game."""
    if len(match_id) != 16:
        raise ValueError("match_id is 16 bytes")
    body = canonical_pack(
        {
            "v": COMMITMENT_VERSION,
            "match": match_id,
            "game": game,
            "seat": seat,
            "rules": _rules_digest(rules),
        }
    )
    return hashlib.sha256(b"seabattle/v1/ctx\x00" + body).digest()


# A rule set's digest packs its whole map: one rule set is shared by every game of a match and
# by both seats, so the digest is kept for the rule set object (alive while it is kept here).
_DIGESTS: dict[int, tuple[RuleSet, bytes]] = {}


def _rules_digest(rules: RuleSet) -> bytes:
    kept = _DIGESTS.get(id(rules))
    if kept is not None and kept[0] is rules:
        return kept[1]
    digest = rules.digest()
    if len(_DIGESTS) >= 64:
        _DIGESTS.clear()
    _DIGESTS[id(rules)] = (rules, digest)
    return digest


def _salt(secret: bytes, label: bytes, index: int) -> bytes:
    return hmac.digest(secret, label + _U16.pack(index), "sha256")[:SALT_BYTES]


@functools.lru_cache(maxsize=16)
def _messages(label: bytes, count: int) -> tuple[bytes, ...]:
    """``label || u16(i)`` for every index below ``count``: what each salt's HMAC hashes."""
    return tuple(label + _U16.pack(i) for i in range(count))


_TRANS_36 = bytes(x ^ 0x36 for x in range(256))
_TRANS_5C = bytes(x ^ 0x5C for x in range(256))


def _salts(secret: bytes, label: bytes, count: int) -> list[bytes]:
    """``[_salt(secret, label, i) for i in range(count)]``, twice as fast.

    HMAC (RFC 2104) with the key schedule done once: the inner and outer hashes of the padded key
    are copied for each index, instead of being set up again by every one-shot HMAC. Every fleet
    derives a salt per cell when committed and again at the reveal check.
    """
    key = secret if len(secret) <= 64 else hashlib.sha256(secret).digest()
    key = key.ljust(64, b"\x00")
    inner = hashlib.sha256(key.translate(_TRANS_36))
    outer = hashlib.sha256(key.translate(_TRANS_5C))
    out = []
    for message in _messages(label, count):
        h = inner.copy()
        h.update(message)
        o = outer.copy()
        o.update(h.digest())
        out.append(o.digest()[:SALT_BYTES])
    return out


def cell_leaf(ctx: bytes, index: int, occupied: bool, salt: bytes) -> bytes:
    """The leaf that binds whether cell ``index`` holds a ship."""
    return hashlib.sha256(
        _CELL + ctx + _U16.pack(index) + (b"\x01" if occupied else b"\x00") + salt
    ).digest()


def ship_leaf(ctx: bytes, k: int, p: Placement, salt: bytes) -> bytes:
    """The leaf that binds where ship ``k`` lies."""
    return hashlib.sha256(_SHIP + ctx + bytes((k, p.row, p.col, int(p.vertical))) + salt).digest()


def root_of(ctx: bytes, cells: tuple[bytes, ...], ships: tuple[bytes, ...]) -> bytes:
    """The root that names a leaf list."""
    return hashlib.sha256(_ROOT + ctx + b"".join(cells) + b"".join(ships)).digest()


@dataclass(frozen=True, slots=True)
class CellOpening:
    """Proof of what one cell holds: the occupied bit and that cell's salt."""

    index: int
    occupied: bool
    salt: bytes

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        return {"i": self.index, "occ": self.occupied, "salt": self.salt}

    @classmethod
    def from_dict(cls, d: Any) -> CellOpening:
        """Parse the wire form, refusing anything malformed with ``BAD_PROOF``."""
        if not isinstance(d, dict) or d.keys() != _OPENING_KEYS:
            raise _bad("a cell opening is {i, occ, salt}")
        i, occ, salt = d["i"], d["occ"], d["salt"]
        if type(i) is int and type(occ) is bool and type(salt) is bytes and len(salt) == SALT_BYTES:
            # What every decoder gives: the checks below, at once.
            return new_opening(i, occ, salt) if cls is CellOpening else cls(i, occ, salt)
        if isinstance(i, bool) or not isinstance(i, int) or not isinstance(occ, bool):
            raise _bad("cell opening: i is an integer, occ a boolean")
        if not isinstance(salt, bytes) or len(salt) != SALT_BYTES:
            raise _bad(f"cell opening: salt is {SALT_BYTES} bytes")
        return cls(i, occ, salt)


def slot_setters(cls: type, *names: str) -> tuple[Any, ...]:
    """The setters of the slots ``names`` of ``cls``, for building a frozen dataclass fast.

    A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__``, about
    0.2 us a field; a slot's own setter takes a third of that. The few objects made on every shot
    (an opening, a result, a verdict, a shot) are built with these, as equal objects.
    """
    return tuple(vars(cls)[name].__set__ for name in names)


_new = object.__new__
_OPENING_SETTERS = slot_setters(CellOpening, "index", "occupied", "salt")


def new_opening(index: int, occupied: bool, salt: bytes) -> CellOpening:
    """``CellOpening(index, occupied, salt)``, built fast (:func:`slot_setters`)."""
    o: CellOpening = _new(CellOpening)
    set_index, set_occupied, set_salt = _OPENING_SETTERS
    set_index(o, index)
    set_occupied(o, occupied)
    set_salt(o, salt)
    return o


@dataclass(frozen=True, slots=True)
class ShipOpening:
    """Proof of where one ship lies (for a sunk ship the rules show whole)."""

    ship: int
    placement: Placement
    salt: bytes

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        return {"k": self.ship, "at": self.placement.to_list(), "salt": self.salt}

    @classmethod
    def from_dict(cls, d: Any) -> ShipOpening:
        """Parse the wire form, refusing anything malformed with ``BAD_PROOF``."""
        if not isinstance(d, dict) or d.keys() != _SHIP_OPENING_KEYS:
            raise _bad("a ship opening is {k, at, salt}")
        k, salt = d["k"], d["salt"]
        if isinstance(k, bool) or not isinstance(k, int):
            raise _bad("ship opening: k is an integer")
        if not isinstance(salt, bytes) or len(salt) != SALT_BYTES:
            raise _bad(f"ship opening: salt is {SALT_BYTES} bytes")
        try:
            p = Placement.from_list(d["at"])
        except IllegalFleet as e:
            raise _bad(e.detail) from None
        return cls(k, p, salt)


_BYTES, _LEAF_SIZE = frozenset({bytes}), frozenset({32})


def _joined(cells: Sequence[Any], ships: Sequence[Any]) -> bytes | None:
    """Every leaf of ``cells`` then ``ships`` in one string, or ``None`` unless each is 32 bytes."""
    leaves = (*cells, *ships)
    if set(map(type, leaves)) <= _BYTES and set(map(len, leaves)) <= _LEAF_SIZE:
        return b"".join(leaves)  # what every decoder gives: checked at C speed
    if all(isinstance(x, bytes) and len(x) == 32 for x in leaves):
        return b"".join(leaves)
    return None


def _split(leaves: bytes, start: int, end: int) -> tuple[bytes, ...]:
    return tuple(leaves[i : i + 32] for i in range(start, end, 32))


_put = object.__setattr__


class Commitment:
    """The public commitment of one player's fleet in one game: its leaf list.

    Held in one form, whoever made it: every leaf, the cells' by cell index then the ships' by
    ship index, in one ``bytes`` of 32-byte hashes (3.4 KB for 10x10, against 7 KB as 105
    separate ``bytes``; a referee holds two per game), and the number of ship leaves. The tuples
    :attr:`cells` and :attr:`ships` are built when read. The commitment of a fleet whose secret is
    at hand (:class:`Committed`) may stop holding the string (:meth:`Committed.drop_leaves`): it
    is then derived again, the same bytes, when read.

    Leaf lists of anything but 32-byte leaves make no commitment: the constructor and
    :meth:`from_dict` keep them as given, in a private subclass that :meth:`check_shape` refuses
    (so that a game refuses them in its own order, and they read back as they came).
    """

    __slots__ = ("_leaves", "_opener", "_ships")
    _leaves: bytes | None  #: every leaf, cells then ships; None once dropped (see _opener)
    _ships: int  #: how many of them are ship leaves
    _opener: _Opener | None  #: the fleet and secret they derive from, if known here

    def __new__(cls, cells: Iterable[bytes], ships: Iterable[bytes]) -> Commitment:
        """The commitment to the leaves ``cells`` and ``ships`` (32 bytes each)."""
        cells = cells if isinstance(cells, list | tuple) else tuple(cells)
        ships = ships if isinstance(ships, list | tuple) else tuple(ships)
        leaves = _joined(cells, ships)
        if leaves is None:
            return _Malformed(cells, ships)
        return Commitment._of(leaves, len(ships), None)

    @classmethod
    def _of(cls, leaves: bytes | None, ships: int, opener: _Opener | None) -> Commitment:
        self = object.__new__(cls)
        _put(self, "_leaves", leaves)
        _put(self, "_ships", ships)
        _put(self, "_opener", opener)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Commitment, (self.cells, self.ships))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commitment):
            return NotImplemented
        return self._ships == other._ships and self._string() == other._string()

    def __hash__(self) -> int:
        return hash((self.cells, self.ships))

    def __repr__(self) -> str:
        return f"Commitment(cells={self.cells!r}, ships={self.ships!r})"

    def _string(self) -> bytes:
        """Every leaf, held or derived again."""
        leaves = self._leaves
        if leaves is None:
            assert self._opener is not None  # only a commitment with an opener drops them
            return self._opener.leaves()
        return leaves

    def _cell_count(self) -> int:
        leaves = self._leaves
        if leaves is None:
            assert self._opener is not None
            return len(self._opener.occupancy)
        return (len(leaves) >> 5) - self._ships

    @property
    def cells(self) -> tuple[bytes, ...]:
        """The cell leaves, by cell index."""
        leaves = self._string()
        return _split(leaves, 0, len(leaves) - (self._ships << 5))

    @property
    def ships(self) -> tuple[bytes, ...]:
        """The ship leaves, by ship index."""
        leaves = self._string()
        return _split(leaves, len(leaves) - (self._ships << 5), len(leaves))

    def cell_leaf(self, i: int) -> bytes:
        """Cell leaf ``i`` (``self.cells[i]``, without building the tuple)."""
        if not 0 <= i < self._cell_count():
            raise IndexError("cell leaf index out of range")
        leaves = self._leaves
        if leaves is None:
            assert self._opener is not None
            return self._opener.cell_leaf(i)  # derived alone, not with all the others
        return leaves[i << 5 : (i + 1) << 5]

    def ship_leaf(self, k: int) -> bytes:
        """Ship leaf ``k`` (``self.ships[k]``, without building the tuple)."""
        if not 0 <= k < self._ships:
            raise IndexError("ship leaf index out of range")
        leaves = self._leaves
        if leaves is None:
            assert self._opener is not None
            return self._opener.ship_leaf(k)
        at = len(leaves) - ((self._ships - k) << 5)
        return leaves[at : at + 32]

    def shares_leaves(self, other: Commitment) -> bool:
        """Whether any cell leaf of ``other`` is also one of this commitment's."""
        if type(self) is not Commitment or type(other) is not Commitment:
            return not set(self.cells).isdisjoint(other.cells)
        # Sliced straight into the set and the list rather than through the tuples of cells.
        mine, theirs = self._string(), other._string()
        ours = {mine[i : i + 32] for i in range(0, len(mine) - (self._ships << 5), 32)}
        end = len(theirs) - (other._ships << 5)
        return not ours.isdisjoint([theirs[i : i + 32] for i in range(0, end, 32)])

    def root(self, ctx: bytes) -> bytes:
        """The 32-byte name of this commitment under ``ctx``."""
        return hashlib.sha256(_ROOT + ctx + self._string()).digest()  # root_of(), at once

    def check_shape(self, rules: RuleSet) -> None:
        """Refuse a leaf list of the wrong size or with malformed leaves (``BAD_COMMITMENT``)."""
        _check_counts(rules, self._cell_count(), self._ships)

    def check_cell(self, ctx: bytes, o: CellOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens this commitment's leaf ``o.index``."""
        i, leaves = o.index, self._leaves
        if leaves is None:  # dropped: the opener checks it without the leaf
            assert self._opener is not None
            self._opener.check_cell(ctx, o)
            return
        # The leaf inline (cell_leaf(ctx, i, o.occupied, o.salt)): this runs for every opening.
        if not 0 <= i < (len(leaves) >> 5) - self._ships:
            raise _bad(f"cell index {i} is off the grid")
        leaf = hashlib.sha256(
            _CELL + ctx + _U16.pack(i) + (b"\x01" if o.occupied else b"\x00") + o.salt
        ).digest()
        if not hmac.compare_digest(leaf, leaves[i << 5 : (i + 1) << 5]):
            raise _bad(f"opening of cell {i} does not match the commitment")

    def check_ship(self, ctx: bytes, o: ShipOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens this commitment's ship leaf ``o.ship``."""
        if not 0 <= o.ship < self._ships:
            raise _bad(f"ship index {o.ship} is not in the fleet")
        p = o.placement
        if not (0 <= p.row < 256 and 0 <= p.col < 256):
            # A leaf binds a row and a column of one byte each; nothing else can be opened.
            raise _bad(f"ship {o.ship} opened at ({p.row},{p.col}), off any grid")
        if not hmac.compare_digest(
            ship_leaf(ctx, o.ship, o.placement, o.salt), self.ship_leaf(o.ship)
        ):
            raise _bad(f"opening of ship {o.ship} does not match the commitment")

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        leaves = self._string()  # once: a dropped string is derived once for both lists
        split = len(leaves) - (self._ships << 5)
        return {
            "cells": list(_split(leaves, 0, split)),
            "ships": list(_split(leaves, split, len(leaves))),
        }

    @classmethod
    def from_dict(cls, d: Any) -> Commitment:
        """Parse the wire form (shape against a rule set is :meth:`check_shape`)."""
        if (
            not isinstance(d, dict)
            or set(d) != {"cells", "ships"}
            or not isinstance(d["cells"], list)
            or not isinstance(d["ships"], list)
        ):
            raise RemoteProtocolError(ErrorCode.BAD_COMMITMENT, "a commitment is {cells, ships}")
        return Commitment(d["cells"], d["ships"])

    # -- for Reveal.check and Committed -----------------------------------------------------------

    def _cells_begin_with(self, cells: bytes) -> bool:
        """Whether the cell leaves, joined, begin with ``cells``."""
        leaves = self._string()
        return leaves[: min(len(cells), len(leaves) - (self._ships << 5))] == cells

    def _opened_by(self, reveal: Reveal, ctx: bytes) -> bool:
        """Whether the leaves are dropped and ``reveal`` under ``ctx`` is what they derive from."""
        opener = self._opener
        return self._leaves is None and opener is not None and opener.opened_by(reveal, ctx)

    def _drop(self) -> None:
        assert self._opener is not None, "only the commitment of a known secret drops its leaves"
        _put(self, "_leaves", None)

    def _keep(self, leaves: bytes) -> None:
        _put(self, "_leaves", leaves)


def _check_counts(rules: RuleSet, cells: int, ships: int) -> None:
    if cells != rules.cells or ships != len(rules.fleet):
        raise RemoteProtocolError(
            ErrorCode.BAD_COMMITMENT,
            f"expected {rules.cells} cell leaves and {len(rules.fleet)} ship leaves, "
            f"got {cells} and {ships}",
        )


class _Malformed(Commitment):
    """Leaf lists that hold something other than 32-byte leaves, kept as given.

    Not a commitment: it reads back as it came (the tuples, the wire form, a root of what they
    join to) and :meth:`check_shape` refuses it, after the leaf counts, as for any leaf list.
    """

    __slots__ = ("_given",)
    _given: tuple[tuple[Any, ...], tuple[Any, ...]]

    def __new__(cls, cells: Iterable[Any], ships: Iterable[Any]) -> _Malformed:
        """The leaf lists ``cells`` and ``ships``, as they are."""
        self = object.__new__(cls)
        _put(self, "_leaves", b"")
        _put(self, "_ships", 0)
        _put(self, "_opener", None)
        _put(self, "_given", (tuple(cells), tuple(ships)))
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commitment):
            return NotImplemented
        return (self.cells, self.ships) == (other.cells, other.ships)

    def __hash__(self) -> int:
        return hash((self.cells, self.ships))

    @property
    def cells(self) -> tuple[Any, ...]:
        """The cell leaves, as given."""
        return self._given[0]

    @property
    def ships(self) -> tuple[Any, ...]:
        """The ship leaves, as given."""
        return self._given[1]

    def cell_leaf(self, i: int) -> Any:
        """Cell leaf ``i``, as given."""
        return self._given[0][i]

    def ship_leaf(self, k: int) -> Any:
        """Ship leaf ``k``, as given."""
        return self._given[1][k]

    def root(self, ctx: bytes) -> bytes:
        """The root of what the leaves join to (``TypeError`` if they are not all bytes)."""
        return root_of(ctx, *self._given)

    def check_shape(self, rules: RuleSet) -> None:
        """Refuse the leaf lists (``BAD_COMMITMENT``): their counts first, then their leaves."""
        _check_counts(rules, len(self._given[0]), len(self._given[1]))
        raise RemoteProtocolError(ErrorCode.BAD_COMMITMENT, "every leaf is 32 bytes")

    def check_cell(self, ctx: bytes, o: CellOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens the given leaf ``o.index``."""
        i, cells = o.index, self._given[0]
        if not 0 <= i < len(cells):
            raise _bad(f"cell index {i} is off the grid")
        if not hmac.compare_digest(cell_leaf(ctx, i, o.occupied, o.salt), cells[i]):
            raise _bad(f"opening of cell {i} does not match the commitment")

    def check_ship(self, ctx: bytes, o: ShipOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens the given ship leaf ``o.ship``."""
        ships = self._given[1]
        if not 0 <= o.ship < len(ships):
            raise _bad(f"ship index {o.ship} is not in the fleet")
        p = o.placement
        if not (0 <= p.row < 256 and 0 <= p.col < 256):
            raise _bad(f"ship {o.ship} opened at ({p.row},{p.col}), off any grid")
        if not hmac.compare_digest(ship_leaf(ctx, o.ship, o.placement, o.salt), ships[o.ship]):
            raise _bad(f"opening of ship {o.ship} does not match the commitment")

    def to_dict(self) -> dict[str, Any]:
        """Wire form: the lists as given."""
        return {"cells": list(self._given[0]), "ships": list(self._given[1])}

    def _cells_begin_with(self, cells: bytes) -> bool:
        return False  # Reveal.check compares leaf by leaf


@dataclass(frozen=True, slots=True)
class Reveal:
    """The end-of-game reveal: the fleet and the secret that every salt derives from."""

    fleet: Fleet
    secret: bytes

    def to_dict(self) -> dict[str, Any]:
        """Wire form."""
        return {"fleet": self.fleet.to_list(), "secret": self.secret}

    @classmethod
    def from_dict(cls, d: Any) -> Reveal:
        """Parse the wire form, refusing anything malformed with ``BAD_REVEAL``."""
        if not isinstance(d, dict) or set(d) != {"fleet", "secret"}:
            raise RemoteProtocolError(ErrorCode.BAD_REVEAL, "a reveal is {fleet, secret}")
        if not isinstance(d["secret"], bytes) or len(d["secret"]) != SECRET_BYTES:
            raise RemoteProtocolError(ErrorCode.BAD_REVEAL, f"secret is {SECRET_BYTES} bytes")
        try:
            fleet = Fleet.from_list(d["fleet"])
        except IllegalFleet as e:
            raise RemoteProtocolError(ErrorCode.BAD_REVEAL, e.detail) from None
        return cls(fleet, d["secret"])

    def check(self, rules: RuleSet, ctx: bytes, commitment: Commitment) -> list[int]:
        """Check the reveal opens ``commitment``; return the occupancy (ship index + 1 or 0).

        Raises ``BAD_REVEAL`` when the leaves differ (the fleet moved, or the commitment was not
        made from this secret), and :class:`IllegalFleet` when the fleet breaks the rules.
        """
        if len(self.fleet.placements) != len(rules.fleet):
            raise IllegalFleet(
                f"{len(self.fleet.placements)} ships revealed; the fleet has {len(rules.fleet)}"
            )
        # Leaves first: only a fleet that matches the commitment is judged for legality. A fleet
        # that leaves the board cannot be hashed into a cell index, so legality of bounds comes
        # from validate() below, after the ship leaves (which do not need bounds) matched.
        # A commitment that dropped its leaves (:meth:`Committed.drop_leaves`) and is opened by its
        # own fleet and secret: the leaves computed here are its leaves by construction. They are
        # kept again instead of being derived a second time to be compared.
        own = commitment._opened_by(self, ctx)
        ship_salts = _salts(self.secret, b"ship", len(self.fleet.placements))
        ship_leaves = []
        for k, p in enumerate(self.fleet.placements):
            if not (0 <= p.row < 256 and 0 <= p.col < 256):
                raise IllegalFleet(f"{rules.fleet[k].name} lies off the board")
            leaf = ship_leaf(ctx, k, p, ship_salts[k])
            ship_leaves.append(leaf)
            if not own and leaf != commitment.ship_leaf(k):
                raise RemoteProtocolError(
                    ErrorCode.BAD_REVEAL,
                    f"revealed {rules.fleet[k].name} does not match the commitment",
                )
        self.fleet.validate(rules)
        occ = self.fleet.occupancy(rules)
        # cell_leaf(ctx, i, o > 0, salt) for every cell, inlined: this runs for both seats at the
        # end of every game, live and in every record verification.
        salts = _salts(self.secret, b"cell", len(occ))
        sha256, prefix, u16 = hashlib.sha256, _CELL + ctx, _U16.pack
        digests = [
            sha256(prefix + u16(i) + (b"\x01" if o > 0 else b"\x00") + salts[i]).digest()
            for i, o in enumerate(occ)
        ]
        cells = b"".join(digests)
        if own:
            commitment._keep(cells + b"".join(ship_leaves))
            return occ
        if commitment._cells_begin_with(cells):
            return occ
        leaves = commitment.cells
        for i, d in enumerate(digests):
            if d != leaves[i]:
                raise RemoteProtocolError(
                    ErrorCode.BAD_REVEAL, f"revealed cell {i} does not match the commitment"
                )
        return occ


class _Opener:
    """A fleet and the secret its commitment's leaves and salts derive from (see
    :class:`Committed`).

    What lets that commitment drop its leaf string: an opening's salt is derived when asked for
    (one HMAC), and the string again, whole, when read.
    """

    __slots__ = ("ctx", "fleet", "occupancy", "opened", "salt", "secret")

    def __init__(
        self, ctx: bytes, fleet: Fleet, occupancy: bytes | list[int], secret: bytes
    ) -> None:
        self.ctx = ctx
        self.fleet = fleet
        self.occupancy = occupancy
        self.secret = secret
        # The cell last opened and its salt, for check_cell (which follows an opening). Two slots
        # rather than a tuple: a custody referee holds one opener per seat.
        self.opened = -1
        self.salt = b""

    def leaves(self) -> bytes:
        """Every leaf, the cells' then the ships', in one string."""
        ctx, secret, placements = self.ctx, self.secret, self.fleet.placements
        cell_salts = _salts(secret, b"cell", len(self.occupancy))
        ship_salts = _salts(secret, b"ship", len(placements))
        sha256, prefix, u16 = hashlib.sha256, _CELL + ctx, _U16.pack
        leaves = [
            sha256(prefix + u16(i) + (b"\x01" if o > 0 else b"\x00") + cell_salts[i]).digest()
            for i, o in enumerate(self.occupancy)
        ]
        leaves += [ship_leaf(ctx, k, p, ship_salts[k]) for k, p in enumerate(placements)]
        return b"".join(leaves)

    def open(self, i: int) -> bytes:
        """The salt of cell ``i`` (``0 <= i``), remembered for :meth:`check_cell`."""
        salt = _salt(self.secret, b"cell", i)
        self.opened, self.salt = i, salt
        return salt

    def cell_leaf(self, i: int) -> bytes:
        """Cell leaf ``i``, derived alone."""
        return cell_leaf(self.ctx, i, self.occupancy[i] > 0, _salt(self.secret, b"cell", i))

    def ship_leaf(self, k: int) -> bytes:
        """Ship leaf ``k``, derived alone."""
        return ship_leaf(self.ctx, k, self.fleet.placements[k], _salt(self.secret, b"ship", k))

    def check_cell(self, ctx: bytes, o: CellOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens leaf ``o.index``.

        Without hashing: the leaf under ``ctx`` equals the one the opening makes exactly when the
        context, the occupied bit and the salt are the fleet's (SHA-256 being collision resistant).
        """
        i, occ = o.index, self.occupancy
        if not 0 <= i < len(occ):
            raise _bad(f"cell index {i} is off the grid")
        salt = self.salt if self.opened == i else _salt(self.secret, b"cell", i)
        if (
            o.occupied != (occ[i] > 0)
            or not hmac.compare_digest(o.salt, salt)
            or not (ctx is self.ctx or ctx == self.ctx)
        ):
            raise _bad(f"opening of cell {i} does not match the commitment")

    def opened_by(self, reveal: Reveal, ctx: bytes) -> bool:
        """Whether ``reveal`` under ``ctx`` is this fleet and secret."""
        return ctx == self.ctx and reveal.secret == self.secret and reveal.fleet == self.fleet


def _compact(occupancy: list[int]) -> bytes | list[int]:
    """``occupancy`` as bytes (one per cell rather than a pointer), unless a value does not fit."""
    try:
        return bytes(occupancy)
    except ValueError:  # pragma: no cover - a fleet of 256 ships or more
        return occupancy


class Committed:
    """A player's own side of a commitment: fleet and secret, able to open and reveal.

    This is what a client (or a custody referee) holds; the opponent and the referee only ever see
    :attr:`commitment` and the openings. A custody referee holds one per seat for a whole game,
    so nothing is kept that the fleet and the secret give: every salt is derived when opened
    (one HMAC), and the leaf list can be dropped (:meth:`drop_leaves`).
    """

    __slots__ = ("_opener", "commitment", "ctx", "fleet", "occupancy", "root", "rules", "secret")

    def __init__(
        self, rules: RuleSet, fleet: Fleet, secret: bytes, match_id: bytes, game: int, seat: int
    ) -> None:
        if len(secret) != SECRET_BYTES:
            raise ValueError(f"secret is {SECRET_BYTES} bytes")
        fleet.validate(rules)
        self.rules = rules
        self.fleet = fleet
        self.secret = secret
        self.ctx = context(match_id, game, seat, rules)
        #: For every cell index, the ship index + 1 that occupies it, or 0 for water.
        self.occupancy = _compact(fleet.occupancy(rules))
        self._opener = _Opener(self.ctx, fleet, self.occupancy, secret)
        self.commitment = Commitment._of(self._opener.leaves(), len(fleet.placements), self._opener)
        self.root = self.commitment.root(self.ctx)

    def seat_sig(self, key: Ed25519PrivateKey) -> bytes:
        """The seat signature of this fleet's player (``key``): :func:`sign_seat`."""
        return sign_seat(key, self.ctx, self.root)

    def drop_leaves(self) -> None:
        """Stop holding the leaf list of :attr:`commitment`: it is derived again when read.

        For a holder that rarely reads it after the commit (a custody referee); openings, their
        checks and the reveal cost the same.
        """
        self.commitment._drop()

    def open_cell(self, index: int) -> CellOpening:
        """The proof of what cell ``index`` holds."""
        occupied = self.occupancy[index] > 0  # IndexError off the grid, as for any list
        at = index if index >= 0 else index + len(self.occupancy)
        return CellOpening(index, occupied, self._opener.open(at))

    def open_ship(self, k: int) -> ShipOpening:
        """The proof of where ship ``k`` lies."""
        placements = self.fleet.placements
        p = placements[k]  # IndexError off the fleet, as for any tuple
        return ShipOpening(k, p, _salt(self.secret, b"ship", k if k >= 0 else k + len(placements)))

    def reveal(self) -> Reveal:
        """The end-of-game reveal."""
        return Reveal(self.fleet, self.secret)


# -- the fair lot ----------------------------------------------------------------------------------


def coin_commit(match_id: bytes, game: int, seat: int, nonce: bytes) -> bytes:
    """Commit to a 32-byte coin ``nonce`` for the lot of ``game``; sent before either coin opens."""
    if len(nonce) != 32:
        raise ValueError("coin nonce is 32 bytes")
    return hashlib.sha256(
        b"seabattle/v1/coin\x00" + match_id + _U16.pack(game) + bytes((seat,)) + nonce
    ).digest()


def coin_result(nonce0: bytes, nonce1: bytes) -> int:
    """The seat that fires first: the low bit of SHA-256(nonce0 || nonce1).

    Neither player controls it: each nonce was committed before the other was opened.
    """
    return hashlib.sha256(b"seabattle/v1/lot\x00" + nonce0 + nonce1).digest()[-1] & 1
