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

import hashlib
import hmac
import struct
from collections.abc import Iterable
from dataclasses import FrozenInstanceError, dataclass
from typing import Any

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
    "coin_commit",
    "coin_result",
    "context",
]

PROTOCOL_VERSION = 1
SECRET_BYTES = 32
SALT_BYTES = 16

_CELL, _SHIP, _ROOT = b"\x00", b"\x01", b"\x02"
_U16 = struct.Struct(">H")
_OPENING_KEYS = frozenset({"i", "occ", "salt"})
_SHIP_OPENING_KEYS = frozenset({"k", "at", "salt"})


def _bad(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.BAD_PROOF, detail)


def context(match_id: bytes, game: int, seat: int, rules: RuleSet) -> bytes:
    """The 32-byte domain-separation context of one player's fleet in one game."""
    if len(match_id) != 16:
        raise ValueError("match_id is 16 bytes")
    body = canonical_pack(
        {
            "v": PROTOCOL_VERSION,
            "match": match_id,
            "game": game,
            "seat": seat,
            "rules": rules.digest(),
        }
    )
    return hashlib.sha256(b"seabattle/v1/ctx\x00" + body).digest()


def _salt(secret: bytes, label: bytes, index: int) -> bytes:
    return hmac.digest(secret, label + _U16.pack(index), "sha256")[:SALT_BYTES]


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
    pack = _U16.pack
    out = []
    for i in range(count):
        h = inner.copy()
        h.update(label + pack(i))
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
            return cls(i, occ, salt)  # what every decoder gives: the checks below, at once
        if isinstance(i, bool) or not isinstance(i, int) or not isinstance(occ, bool):
            raise _bad("cell opening: i is an integer, occ a boolean")
        if not isinstance(salt, bytes) or len(salt) != SALT_BYTES:
            raise _bad(f"cell opening: salt is {SALT_BYTES} bytes")
        return cls(i, occ, salt)


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


def _packed(leaves: list[Any] | tuple[Any, ...]) -> bytes | None:
    """``leaves`` as one string of 32-byte hashes, or ``None`` unless every leaf is one."""
    if set(map(type, leaves)) <= _BYTES and set(map(len, leaves)) <= _LEAF_SIZE:
        return b"".join(leaves)  # what every decoder gives: checked at C speed
    if all(isinstance(x, bytes) and len(x) == 32 for x in leaves):
        return b"".join(leaves)
    return None


_BYTES, _LEAF_SIZE = frozenset({bytes}), frozenset({32})


def _split(packed: bytes) -> tuple[bytes, ...]:
    return tuple(packed[i : i + 32] for i in range(0, len(packed), 32))


class Commitment:
    """The public commitment of one player's fleet in one game: its leaf list.

    ``cells`` and ``ships`` are tuples of 32-byte leaves. A referee holds thousands of these, so
    well-formed leaves are kept as one byte string per list (3.4 KB for 10x10, against 7 KB as 105
    separate ``bytes``); the tuples are built when read. Anything else given (a leaf of the wrong
    type or size) is kept as given, for :meth:`check_shape` to refuse.
    """

    __slots__ = ("_cells", "_ships")
    _cells: bytes | tuple[Any, ...]
    _ships: bytes | tuple[Any, ...]

    def __init__(self, cells: Iterable[bytes], ships: Iterable[bytes]) -> None:
        for name, given in (("_cells", cells), ("_ships", ships)):
            leaves = given if isinstance(given, list | tuple) else tuple(given)
            packed = _packed(leaves)
            object.__setattr__(self, name, tuple(leaves) if packed is None else packed)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Commitment, (self.cells, self.ships))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commitment):
            return NotImplemented
        if isinstance(self._cells, bytes) and isinstance(other._cells, bytes):
            return self._cells == other._cells and self._ships == other._ships
        return (self.cells, self.ships) == (other.cells, other.ships)

    def __hash__(self) -> int:
        return hash((self.cells, self.ships))

    def __repr__(self) -> str:
        return f"Commitment(cells={self.cells!r}, ships={self.ships!r})"

    @property
    def cells(self) -> tuple[bytes, ...]:
        """The cell leaves, by cell index."""
        c = self._cells
        return _split(c) if isinstance(c, bytes) else c

    @property
    def ships(self) -> tuple[bytes, ...]:
        """The ship leaves, by ship index."""
        s = self._ships
        return _split(s) if isinstance(s, bytes) else s

    def cell_leaf(self, i: int) -> bytes:
        """Cell leaf ``i`` (``self.cells[i]``, without building the tuple)."""
        c = self._cells
        if isinstance(c, bytes):
            if not 0 <= i < len(c) >> 5:
                raise IndexError("cell leaf index out of range")
            return c[i << 5 : (i + 1) << 5]
        leaf: bytes = c[i]
        return leaf

    def ship_leaf(self, k: int) -> bytes:
        """Ship leaf ``k`` (``self.ships[k]``, without building the tuple)."""
        s = self._ships
        if isinstance(s, bytes):
            if not 0 <= k < len(s) >> 5:
                raise IndexError("ship leaf index out of range")
            return s[k << 5 : (k + 1) << 5]
        leaf: bytes = s[k]
        return leaf

    def _count(self, leaves: bytes | tuple[Any, ...]) -> int:
        return len(leaves) >> 5 if isinstance(leaves, bytes) else len(leaves)

    def _ship_count(self) -> int:
        return self._count(self._ships)

    def shares_leaves(self, other: Commitment) -> bool:
        """Whether any cell leaf of ``other`` is also one of this commitment's."""
        return not set(self.cells).isdisjoint(other.cells)

    def root(self, ctx: bytes) -> bytes:
        """The 32-byte name of this commitment under ``ctx``."""
        c, s = self._cells, self._ships
        if isinstance(c, bytes) and isinstance(s, bytes):
            return hashlib.sha256(_ROOT + ctx + c + s).digest()
        return root_of(ctx, self.cells, self.ships)

    def check_shape(self, rules: RuleSet) -> None:
        """Refuse a leaf list of the wrong size or with malformed leaves (``BAD_COMMITMENT``)."""
        n_cells, n_ships = self._count(self._cells), self._count(self._ships)
        if n_cells != rules.cells or n_ships != len(rules.fleet):
            raise RemoteProtocolError(
                ErrorCode.BAD_COMMITMENT,
                f"expected {rules.cells} cell leaves and {len(rules.fleet)} ship leaves, "
                f"got {n_cells} and {n_ships}",
            )
        if not isinstance(self._cells, bytes) or not isinstance(self._ships, bytes):
            raise RemoteProtocolError(ErrorCode.BAD_COMMITMENT, "every leaf is 32 bytes")

    def check_cell(self, ctx: bytes, o: CellOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens this commitment's leaf ``o.index``."""
        i, c = o.index, self._cells
        if isinstance(c, bytes):  # the leaf inline: this runs for every opening
            if not 0 <= i < len(c) >> 5:
                raise _bad(f"cell index {i} is off the grid")
            leaf = c[i << 5 : (i + 1) << 5]
        else:
            if not 0 <= i < len(c):
                raise _bad(f"cell index {i} is off the grid")
            leaf = c[i]
        if not hmac.compare_digest(cell_leaf(ctx, i, o.occupied, o.salt), leaf):
            raise _bad(f"opening of cell {i} does not match the commitment")

    def check_ship(self, ctx: bytes, o: ShipOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens this commitment's ship leaf ``o.ship``."""
        if not 0 <= o.ship < self._ship_count():
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
        return {"cells": list(self.cells), "ships": list(self.ships)}

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
        return cls(d["cells"], d["ships"])


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
        own = isinstance(commitment, _Derived) and commitment._opened_by(self, ctx)
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
        if own:
            assert isinstance(commitment, _Derived)
            commitment._keep(b"".join(digests), b"".join(ship_leaves))
            return occ
        packed = commitment._cells
        if isinstance(packed, bytes) and b"".join(digests) == packed[: 32 * len(digests)]:
            return occ
        leaves = commitment.cells
        for i, d in enumerate(digests):
            if d != leaves[i]:
                raise RemoteProtocolError(
                    ErrorCode.BAD_REVEAL, f"revealed cell {i} does not match the commitment"
                )
        return occ


def _leaf_lists(
    ctx: bytes, fleet: Fleet, occupancy: bytes | list[int], secret: bytes
) -> tuple[bytes, bytes]:
    """The cell leaves and the ship leaves of a fleet, each list packed into one string."""
    cell_salts = _salts(secret, b"cell", len(occupancy))
    ship_salts = _salts(secret, b"ship", len(fleet.placements))
    sha256, prefix, u16 = hashlib.sha256, _CELL + ctx, _U16.pack
    cells = b"".join(
        [
            sha256(prefix + u16(i) + (b"\x01" if o > 0 else b"\x00") + cell_salts[i]).digest()
            for i, o in enumerate(occupancy)
        ]
    )
    ships = b"".join([ship_leaf(ctx, k, p, ship_salts[k]) for k, p in enumerate(fleet.placements)])
    return cells, ships


class _Derived(Commitment):
    """The commitment of a fleet whose secret is at hand: its leaves can be dropped and derived
    again when read.

    A custody referee holds one per seat for a whole game, and reads the leaf list (3.4 KB for
    10x10) only at the end (the reveal, the record) or for a snapshot: it drops it once both
    fleets are committed (:meth:`Committed.drop_leaves`). Checking an opening then compares it
    with the fleet and the salt it derives (no leaf needed); the reveal of its own fleet keeps
    the leaves it computes (:meth:`Reveal.check`), so a finished game reads them at no cost.
    """

    __slots__ = ("_ctx", "_fleet", "_leaves", "_occ", "_opened", "_secret")
    _ctx: bytes
    _fleet: Fleet
    _leaves: tuple[bytes, bytes] | None
    _occ: bytes | list[int]
    _opened: tuple[int, bytes] | None  #: the cell last opened, and its salt
    _secret: bytes

    def __init__(
        self, ctx: bytes, fleet: Fleet, occupancy: bytes | list[int], secret: bytes
    ) -> None:
        put = object.__setattr__
        put(self, "_ctx", ctx)
        put(self, "_fleet", fleet)
        put(self, "_occ", occupancy)
        put(self, "_secret", secret)
        put(self, "_leaves", _leaf_lists(ctx, fleet, occupancy, secret))
        put(self, "_opened", None)

    def _packed(self) -> tuple[bytes, bytes]:
        leaves = self._leaves
        return (
            leaves
            if leaves is not None
            else _leaf_lists(self._ctx, self._fleet, self._occ, self._secret)
        )

    # The base class's leaf lists, read through these: held, or derived again.
    @property
    def _cells(self) -> bytes | tuple[Any, ...]:  # type: ignore[override]
        return self._packed()[0]

    @property
    def _ships(self) -> bytes | tuple[Any, ...]:  # type: ignore[override]
        return self._packed()[1]

    def _drop(self) -> None:
        object.__setattr__(self, "_leaves", None)

    def _keep(self, cells: bytes, ships: bytes) -> None:
        object.__setattr__(self, "_leaves", (cells, ships))

    def _opened_by(self, reveal: Reveal, ctx: bytes) -> bool:
        """Whether the leaves are dropped and ``reveal`` under ``ctx`` is what they derive from."""
        return (
            self._leaves is None
            and ctx == self._ctx
            and reveal.secret == self._secret
            and reveal.fleet == self._fleet
        )

    def _open(self, i: int) -> bytes:
        """The salt of cell ``i``, remembered for :meth:`check_cell` (which follows an opening)."""
        salt = _salt(self._secret, b"cell", i)
        object.__setattr__(self, "_opened", (i, salt))
        return salt

    def _ship_count(self) -> int:
        return len(self._fleet.placements)

    def cell_leaf(self, i: int) -> bytes:
        """Cell leaf ``i``, derived alone when the leaves are dropped."""
        if self._leaves is not None:
            return super().cell_leaf(i)
        if not 0 <= i < len(self._occ):
            raise IndexError("cell leaf index out of range")
        return cell_leaf(self._ctx, i, self._occ[i] > 0, _salt(self._secret, b"cell", i))

    def ship_leaf(self, k: int) -> bytes:
        """Ship leaf ``k``, derived alone when the leaves are dropped."""
        if self._leaves is not None:
            return super().ship_leaf(k)
        if not 0 <= k < len(self._fleet.placements):
            raise IndexError("ship leaf index out of range")
        salt = _salt(self._secret, b"ship", k)
        return ship_leaf(self._ctx, k, self._fleet.placements[k], salt)

    def check_cell(self, ctx: bytes, o: CellOpening) -> None:
        """Raise ``BAD_PROOF`` unless ``o`` opens leaf ``o.index``.

        Without hashing: the leaf under ``ctx`` equals the one the opening makes exactly when the
        context, the occupied bit and the salt are the fleet's (SHA-256 being collision resistant).
        """
        i, occ = o.index, self._occ
        if not 0 <= i < len(occ):
            raise _bad(f"cell index {i} is off the grid")
        opened = self._opened
        salt = (
            opened[1] if opened is not None and opened[0] == i else _salt(self._secret, b"cell", i)
        )
        if (
            o.occupied != (occ[i] > 0)
            or not hmac.compare_digest(o.salt, salt)
            or not (ctx is self._ctx or ctx == self._ctx)
        ):
            raise _bad(f"opening of cell {i} does not match the commitment")


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

    __slots__ = ("commitment", "ctx", "fleet", "occupancy", "root", "rules", "secret")

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
        self.commitment = _Derived(self.ctx, fleet, self.occupancy, secret)
        self.root = self.commitment.root(self.ctx)

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
        return CellOpening(index, occupied, self.commitment._open(at))

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
