"""Match records: the canonical transcript of a match, signed, verifiable from itself alone.

Theory of operation (``spec/protocol.md`` section "Records"):

* A *record* is a map::

      {"v": 2, "match": id16, "rules": RuleSet.to_dict(), "players": [key0, key1],
       "referee": key | None, "games": [game, ...], "result": Match.to_dict()}
      game = {"number": n, "first": seat, "transcript": Game.transcript,
              "roots": [root0, root1], "outcome": {"winner", "reason", "detail": ""} | None}

  A team match (spec 6.8) also carries ``"teams": [[key, ...], [key, ...]]``, each seat's
  members by member number (``teams[s][0]`` is ``players[s]``), so that the ``member`` of every
  shot entry names the player who called it.

  The outcome in a record carries its machine-readable ``reason`` only: ``detail`` is ``""``,
  since its prose is this implementation's and another could not sign the same head (the prose
  travels unsigned, in ``game_over``). Version 1 records kept the prose, and their ``commit``
  entries carry no seat signature; a verifier reads them only when asked to (below).

  Keys are raw 32-byte Ed25519 public keys; ``referee`` is ``None`` in peer play. The transcript is
  the list of inputs the referee's :class:`~.game.Game` accepted, in order, in their wire form: the
  commitments, every shot and verdict with its openings, clock expiries, and the reveals.

* Its *head* is ``SHA-256("seabattle/v1/record" 0x00 || canonical_pack(record))``. A
  *signed record* is ``{"record": record, "sigs": [{"key", "sig", "role"}, ...]}``: every signature
  is Ed25519 over the head, ``role`` is ``referee``, ``seat0`` or ``seat1``. In refereed play the
  referee MUST sign and the players MAY co-sign the same head, so that a referee that published an
  altered transcript lacks their signatures; in peer play both seats MUST sign.

* :func:`verify_record` needs nothing but the signed record. It checks the shape (the form of a
  ``commit`` entry follows ``v``: version 2 with its seat signature ``sig``, version 1 without;
  a mix is malformed), the signatures, then replays every transcript through a fresh
  :class:`~.match.Match` (so who fires first is checked too) and compares the recorded first
  player, roots, outcomes and match result with what the replay says. The signatures say who
  vouches for the record; the replay says whether what they vouch for is true. A referee that
  signs a false outcome is caught by anyone holding the record. :func:`verify_bytes` does the
  same from the record's bytes, which must be its canonical encoding.

  A version-1 record is refused (``old_version``) unless the caller accepts version 1: its seats
  are bound to no key, and its ``v`` is signed by the referee alone, so a referee could rewrite a
  version-2 record as version 1 with the players swapped. Accepted, it is reported with its
  seats unbound. The report's reason is the first problem in the order of
  :data:`~.verify.REASONS`, whatever order the checks found them in.

Building, signing, packing and loading live here; verification lives in :mod:`.verify`, whose
:func:`verify_record`, :func:`verify_bytes`, :class:`VerifyReport` and :class:`GameSummary` this
module re-exports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import canonical, canonical_pack
from .errors import ErrorCode, LocalProtocolError, ProtocolError
from .match import Match

__all__ = [
    "RECORD_VERSION",
    "ROLES",
    "GameSummary",
    "RecordError",
    "VerifyReport",
    "build_record",
    "cosign",
    "dump_record",
    "dump_signed",
    "head_of_bytes",
    "load_record",
    "pack_built",
    "pack_record",
    "record_head",
    "seal",
    "sign_as",
    "sign_record",
    "signed_outcome",
    "verify_bytes",
    "verify_record",
]

RECORD_VERSION = 2
"""The record format this code writes (``v``); :func:`verify_record` reads version 1 only when
asked to (``accept_v1``)."""
ROLES = ("referee", "seat0", "seat1")
_HEAD_PREFIX = b"seabattle/v1/record\x00"


class RecordError(ProtocolError):
    """A record or signed record that is not well formed (``RECORD_INVALID``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(ErrorCode.RECORD_INVALID, detail)


# -- building and signing --------------------------------------------------------------------------


def _key_bytes(key: bytes | Ed25519PublicKey, what: str) -> bytes:
    raw = key.public_bytes_raw() if isinstance(key, Ed25519PublicKey) else key
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise LocalProtocolError(ErrorCode.RECORD_INVALID, f"{what} is a 32-byte Ed25519 key")
    return raw


def build_record(
    match: Match,
    players: Iterable[bytes | Ed25519PublicKey],
    referee: bytes | Ed25519PublicKey | None,
    teams: Iterable[Iterable[bytes | Ed25519PublicKey]] | None = None,
) -> dict[str, Any]:
    """The record of ``match`` as played so far, between ``players`` and under ``referee``
    (``teams``: each seat's members, in a team match with one player per member).

    ``referee`` is ``None`` in peer play. The shell calls :meth:`Match.game_over` after every game
    it finishes, as in live play; the replay does the same, so the recorded ``result`` agrees.
    The returned map is a deep copy in canonical key order: later play does not change it.
    """
    keys = [_key_bytes(k, f"player {i}") for i, k in enumerate(players)]
    if len(keys) != 2:
        raise LocalProtocolError(ErrorCode.RECORD_INVALID, "a record has two players")
    # Built in canonical key order: the transcripts, nearly all of a record, are rebuilt as new
    # maps in that order already, and copying them all again through canonical() cost more than
    # rebuilding them (a classic match's record: 3.3 -> 1.2 ms). What is not canonical as it
    # stands (an entry kept as logged, a rule set's map) is copied into that form on its own.
    record: dict[str, Any] = {
        "games": [
            {
                "first": g.first,
                "number": g.number,
                "outcome": canonical(signed_outcome(g.outcome.to_dict())) if g.outcome else None,
                "roots": list(g.roots),
                "transcript": g.transcript.canonical_entries(),
            }
            for g in match.games
        ],
        "match": match.match_id,
        "players": keys,
        "referee": None if referee is None else _key_bytes(referee, "referee"),
        "result": canonical(match.to_dict()),
        "rules": canonical(match.rules.to_dict()),
    }
    if teams is not None:
        record["teams"] = [
            [_key_bytes(k, f"seat {s} member {i}") for i, k in enumerate(team)]
            for s, team in enumerate(teams)
        ]
    record["v"] = RECORD_VERSION
    return record


def signed_outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """``outcome`` as a version-2 record holds it: what every implementation computes alike (the
    winner and the reason), with the prose ``detail`` left out (``""``)."""
    return {**outcome, "detail": ""}


_PLAIN = frozenset({bytes, str, int, bool, type(None)})
# Key tuples seen to be strings in canonical order. A record has a dozen shapes of map, repeated
# for every shot: remembering them spares sorting each map's keys again. Bounded, so that records
# with many shapes cannot grow it.
_SORTED_KEYS: set[tuple[str, ...]] = set()


def _is_canonical(value: Any) -> bool:
    """Whether plain ``msgpack.packb`` of ``value`` already gives its canonical bytes."""
    # A loaded or built record is canonical already; checking that is several times cheaper than
    # rebuilding it with canonical(), which would cost a verification about as much as a replay.
    # Python orders str keys by code point, which is the order of their UTF-8 bytes.
    plain, known = _PLAIN, _SORTED_KEYS
    t = type(value)
    if t is not dict and t is not list:
        return t in plain
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        x = pop()
        if type(x) is dict:
            keys = tuple(x)
            if keys not in known:
                try:
                    "".join(keys)  # raises unless every key is a string, at C speed
                except TypeError:
                    return False
                if list(keys) != sorted(keys):
                    return False
                if len(known) < 256:
                    known.add(keys)
            items = x.values()
        else:
            items = x
        for v in items:
            t = type(v)
            if t in plain:
                continue
            if t is dict:
                if not _plain_shot_entry(v):
                    push(v)
            elif t is list:
                push(v)
            else:
                return False
    return True


# The key orders of the two entries of nearly every shot, and of the maps inside a verdict.
_FIRE_ORDER = ("cells", "in", "member", "seat")
_ANSWER_ORDER = ("in", "seat", "verdict")
_VERDICT_ORDER = ("found", "n", "results", "sunk", "total")
_RESULT_ORDER = ("open", "r", "sunk")
_OPENING_ORDER = ("i", "occ", "salt")


def _plain_shot_entry(e: dict[Any, Any]) -> bool:
    """Whether ``e`` is a called shot or a cell-by-cell verdict without a sunk claim, canonical
    (keys in order, exact types); ``False`` says nothing: the general walk then judges ``e``.

    Most of a record is these two maps, and checking one in a single frame is about twice as
    fast as walking it.
    """
    keys = tuple(e)
    if keys == _FIRE_ORDER:
        cells = e["cells"]
        if type(e["in"]) is not str or type(e["member"]) is not int:
            return False
        if type(e["seat"]) is not int or type(cells) is not list:
            return False
        if len(cells) == 1:  # a single shot: no generator
            return type(cells[0]) is str
        return all(type(c) is str for c in cells)
    if keys != _ANSWER_ORDER:
        return False
    v = e["verdict"]
    if type(e["in"]) is not str or type(e["seat"]) is not int:
        return False
    if type(v) is not dict or tuple(v) != _VERDICT_ORDER:
        return False
    if v["found"] is not None or v["total"] is not None or type(v["n"]) is not int:
        return False
    sunk, results = v["sunk"], v["results"]
    if type(sunk) is not list or sunk or type(results) is not list:
        return False
    for res in results:
        if type(res) is not dict or tuple(res) != _RESULT_ORDER:
            return False
        o = res["open"]
        if type(res["r"]) is not str or res["sunk"] is not None:
            return False
        if type(o) is not dict or tuple(o) != _OPENING_ORDER:
            return False
        if type(o["i"]) is not int or type(o["occ"]) is not bool or type(o["salt"]) is not bytes:
            return False
    return True


def _pack(value: Any) -> bytes:
    if _is_canonical(value):
        packed: bytes = msgpack.packb(value, use_bin_type=True)
        return packed
    return canonical_pack(value)


def pack_record(record: Any) -> bytes:
    """The canonical msgpack bytes of ``record``: what its head hashes.

    Packing a classic record costs about as much as everything else at the end of a match. A
    caller that needs the head, signatures and the stored bytes packs once and passes the bytes
    on: ``packed = pack_record(record)``, ``head = head_of_bytes(packed)``,
    ``sign_as(record, key, role, head=head)``, ``dump_signed(packed, sigs)``.
    """
    return _pack(record)


def pack_built(record: dict[str, Any]) -> bytes:
    """:func:`pack_record` of a map :func:`build_record` returned, as it returned it.

    A built record is made in canonical key order with canonical values
    (``tests/core/test_record.py`` holds that for every kind of entry), so its plain packing is its
    canonical bytes, and the check :func:`pack_record` makes of any other map (some 60 % of the
    time it takes to pack a classic record) is left out. A record changed since it was built must
    go through :func:`pack_record`.
    """
    packed: bytes = msgpack.packb(record, use_bin_type=True)
    return packed


def head_of_bytes(packed: bytes) -> bytes:
    """The head of the record whose canonical bytes (:func:`pack_record`) are ``packed``."""
    return hashlib.sha256(_HEAD_PREFIX + packed).digest()


def record_head(record: Any) -> bytes:
    """The 32-byte head that every signature of ``record`` signs."""
    return head_of_bytes(_pack(record))


def sign_record(record: Any, key: Ed25519PrivateKey) -> bytes:
    """The 64-byte Ed25519 signature of ``record``'s head by ``key``."""
    return key.sign(record_head(record))


def sign_as(
    record: Any, key: Ed25519PrivateKey, role: str, *, head: bytes | None = None
) -> dict[str, Any]:
    """A signature entry ``{"key", "role", "sig"}`` of ``record`` by ``key`` in ``role``.

    ``head``, when the caller has it already (:func:`head_of_bytes`), is ``record``'s head.
    """
    if role not in ROLES:
        raise LocalProtocolError(ErrorCode.RECORD_INVALID, f"role {role!r}: one of {ROLES}")
    # Keys in canonical order, so that a signed record packs without being rebuilt.
    return {
        "key": key.public_key().public_bytes_raw(),
        "role": role,
        "sig": key.sign(record_head(record) if head is None else head),
    }


def seal(
    record: Any,
    signers: Iterable[tuple[str, Ed25519PrivateKey]],
    *,
    head: bytes | None = None,
) -> dict[str, Any]:
    """The signed record ``{"record", "sigs"}`` with a signature by each ``(role, key)``, in role
    order (11.2: one signed record, one encoding).

    The record is packed once for all the signatures (or not at all, given its ``head``).
    """
    sigs = []
    for role, key in signers:
        if head is None and role in ROLES:
            head = record_head(record)
        sigs.append(sign_as(record, key, role, head=head))
    return {"record": record, "sigs": _in_role_order(sigs)}


def _in_role_order(sigs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # An unknown role (which verification refuses) sorts last rather than raising here.
    return sorted(sigs, key=lambda s: ROLES.index(s["role"]) if s["role"] in ROLES else 3)


def cosign(
    signed: dict[str, Any], key: Ed25519PrivateKey, role: str, *, head: bytes | None = None
) -> dict[str, Any]:
    """A copy of ``signed`` with one more signature (a player co-signing the referee's record)."""
    sigs = [*signed["sigs"], sign_as(signed["record"], key, role, head=head)]
    return {"record": signed["record"], "sigs": _in_role_order(sigs)}


def dump_record(signed: Any) -> bytes:
    """The canonical msgpack bytes of a signed record, for the wire and the disk."""
    return _pack(signed)


# A map of two entries, "record" then "sigs" (canonical order), as msgpack writes them.
_SIGNED_RECORD = b"\x82\xa6record"
_SIGNED_SIGS = b"\xa4sigs"


def dump_signed(packed: bytes, sigs: Any) -> bytes:
    """``dump_record({"record": record, "sigs": sigs})``, from ``packed = pack_record(record)``.

    The record is not packed again: only the signatures are.
    """
    return _SIGNED_RECORD + packed + _SIGNED_SIGS + _pack(sigs)


def _no_ext(code: int, data: bytes) -> Any:
    raise RecordError(f"msgpack extension type {code} is not allowed in a record")


def load_record(data: bytes, *, canonical: bool = False) -> dict[str, Any]:
    """Decode a signed record from msgpack; raises :class:`RecordError` if it cannot be one.

    With ``canonical``, bytes that are not the canonical encoding of what they decode to are
    refused too (one signed record has one encoding, spec 11.2). Either way the content is not
    judged: :func:`verify_bytes` judges both the encoding and the content, :func:`verify_record`
    the content.
    """
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_no_ext)
    except RecordError:
        raise
    except Exception as e:  # msgpack raises a zoo of types for bad input; all mean the same
        raise RecordError(f"not msgpack: {type(e).__name__}: {e}") from None
    if not isinstance(value, dict):
        raise RecordError("a signed record is a map {record, sigs}")
    if canonical:
        try:
            same = dump_record(value) == data
        except (TypeError, ValueError, OverflowError) as e:  # a float, a non-string key
            raise RecordError(f"no canonical encoding: {e}") from None
        if not same:
            raise RecordError("the bytes are not canonically encoded (spec 3)")
    return value


# Re-exported last: .verify imports RecordError, record_head and the packing from this module,
# which must be complete by then.
from .verify import GameSummary, VerifyReport, verify_bytes, verify_record  # noqa: E402
