"""Match records: the canonical transcript of a match, signed, verifiable from itself alone.

Theory of operation (``spec/protocol.md`` section "Records"):

* A *record* is a map::

      {"v": 1, "match": id16, "rules": RuleSet.to_dict(), "players": [key0, key1],
       "referee": key | None, "games": [game, ...], "result": Match.to_dict()}
      game = {"number": n, "first": seat, "transcript": Game.transcript,
              "roots": [root0, root1], "outcome": Outcome.to_dict() | None}

  Keys are raw 32-byte Ed25519 public keys; ``referee`` is ``None`` in peer play. The transcript is
  the list of inputs the referee's :class:`~.game.Game` accepted, in order, in their wire form: the
  commitments, every shot and verdict with its openings, clock expiries, and the reveals.

* Its *head* is ``SHA-256("seabattle/v1/record" 0x00 || canonical_pack(record))``. A
  *signed record* is ``{"record": record, "sigs": [{"key", "sig", "role"}, ...]}``: every signature
  is Ed25519 over the head, ``role`` is ``referee``, ``seat0`` or ``seat1``. In refereed play the
  referee MUST sign and the players MAY co-sign the same head, so that a referee that published an
  altered transcript lacks their signatures; in peer play both seats MUST sign.

* :func:`verify_record` needs nothing but the signed record. It checks the signatures, then replays
  every transcript through a fresh :class:`~.match.Match` (so who fires first is checked too) and
  compares the recorded first player, roots, outcomes and match result with what the replay says.
  The signatures say who vouches for the record; the replay says whether what they vouch for is
  true. A referee that signs a false outcome is caught by anyone holding the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import canonical, canonical_pack
from .errors import ErrorCode, LocalProtocolError, ProtocolError
from .game import Game, Phase
from .inputs import input_from_entry
from .match import Match
from .rules import BadRules, rules_from_dict

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
    "pack_record",
    "record_head",
    "seal",
    "sign_as",
    "sign_record",
    "verify_record",
]

RECORD_VERSION = 1
ROLES = ("referee", "seat0", "seat1")
_HEAD_PREFIX = b"seabattle/v1/record\x00"
_RECORD_KEYS = frozenset({"v", "match", "rules", "players", "referee", "games", "result"})
_GAME_KEYS = frozenset({"number", "first", "transcript", "roots", "outcome"})
_SIG_KEYS = frozenset({"key", "sig", "role"})


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
) -> dict[str, Any]:
    """The record of ``match`` as played so far, between ``players`` and under ``referee``.

    ``referee`` is ``None`` in peer play. The shell calls :meth:`Match.game_over` after every game
    it finishes, as in live play; the replay does the same, so the recorded ``result`` agrees.
    The returned map is a deep copy in canonical key order: later play does not change it.
    """
    keys = [_key_bytes(k, f"player {i}") for i, k in enumerate(players)]
    if len(keys) != 2:
        raise LocalProtocolError(ErrorCode.RECORD_INVALID, "a record has two players")
    record = {
        "v": RECORD_VERSION,
        "match": match.match_id,
        "rules": match.rules.to_dict(),
        "players": keys,
        "referee": None if referee is None else _key_bytes(referee, "referee"),
        "games": [
            {
                "number": g.number,
                "first": g.first,
                "transcript": list(g.transcript),
                "roots": list(g.roots),
                "outcome": g.outcome.to_dict() if g.outcome else None,
            }
            for g in match.games
        ],
        "result": match.to_dict(),
    }
    built: dict[str, Any] = canonical(record)
    return built


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
            if t is dict or t is list:
                push(v)
            else:
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
    """The signed record ``{"record", "sigs"}`` with a signature by each ``(role, key)``.

    The record is packed once for all the signatures (or not at all, given its ``head``).
    """
    sigs = []
    for role, key in signers:
        if head is None and role in ROLES:
            head = record_head(record)
        sigs.append(sign_as(record, key, role, head=head))
    return {"record": record, "sigs": sigs}


def cosign(
    signed: dict[str, Any], key: Ed25519PrivateKey, role: str, *, head: bytes | None = None
) -> dict[str, Any]:
    """A copy of ``signed`` with one more signature (a player co-signing the referee's record)."""
    return {
        "record": signed["record"],
        "sigs": [*signed["sigs"], sign_as(signed["record"], key, role, head=head)],
    }


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


def load_record(data: bytes) -> dict[str, Any]:
    """Decode a signed record from msgpack; raises :class:`RecordError` if it cannot be one.

    Only the encoding is checked here; :func:`verify_record` judges the content.
    """
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_no_ext)
    except RecordError:
        raise
    except Exception as e:  # msgpack raises a zoo of types for bad input; all mean the same
        raise RecordError(f"not msgpack: {type(e).__name__}: {e}") from None
    if not isinstance(value, dict):
        raise RecordError("a signed record is a map {record, sigs}")
    return value


# -- verification ----------------------------------------------------------------------------------


@dataclass(slots=True)
class GameSummary:
    """What the replay of one recorded game found."""

    number: int
    first: int | None = None
    shots: int = 0
    outcome: dict[str, Any] | None = None
    ok: bool = True
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain form for ``--json`` reports."""
        return {
            "number": self.number,
            "first": self.first,
            "shots": self.shots,
            "outcome": self.outcome,
            "ok": self.ok,
            "reason": self.reason,
        }


@dataclass(slots=True)
class VerifyReport:
    """The verdict on a signed record.

    ``reason`` is the first problem found (empty when ``ok``); it starts with a stable slug:
    ``malformed``, ``missing_signature``, ``wrong_key``, ``bad_signature``, ``bad_rules``,
    ``transcript_invalid``, ``first_mismatch``, ``roots_mismatch``, ``outcome_mismatch`` or
    ``result_mismatch``. ``problems`` lists every problem found, in that order.
    """

    ok: bool
    reason: str = ""
    problems: list[str] = field(default_factory=list)
    games: list[GameSummary] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain form for ``--json`` reports (keys as hex)."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "problems": list(self.problems),
            "games": [g.to_dict() for g in self.games],
            "signatures": [dict(s) for s in self.signatures],
        }


def _is_key(v: Any) -> bool:
    return isinstance(v, bytes) and len(v) == 32


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_shape(signed: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(signed, dict) or set(signed) != {"record", "sigs"}:
        raise RecordError("a signed record is a map {record, sigs}")
    rec, sigs = signed["record"], signed["sigs"]
    if not isinstance(rec, dict) or set(rec) != _RECORD_KEYS:
        raise RecordError(f"a record is a map of {', '.join(sorted(_RECORD_KEYS))}")
    if rec["v"] != RECORD_VERSION or not _is_int(rec["v"]):
        raise RecordError(f"record version {rec['v']!r}; this verifier reads {RECORD_VERSION}")
    if not isinstance(rec["match"], bytes) or len(rec["match"]) != 16:
        raise RecordError("match is a 16-byte id")
    players = rec["players"]
    if not isinstance(players, list) or len(players) != 2 or not all(map(_is_key, players)):
        raise RecordError("players are two 32-byte keys")
    if rec["referee"] is not None and not _is_key(rec["referee"]):
        raise RecordError("referee is a 32-byte key or nil")
    if not isinstance(rec["games"], list) or not isinstance(rec["result"], dict):
        raise RecordError("games is a list and result a map")
    for i, g in enumerate(rec["games"], 1):
        if not isinstance(g, dict) or set(g) != _GAME_KEYS:
            raise RecordError(f"game {i} is a map of {', '.join(sorted(_GAME_KEYS))}")
        if not isinstance(g["transcript"], list) or not all(
            isinstance(e, dict) for e in g["transcript"]
        ):
            raise RecordError(f"game {i}: the transcript is a list of maps")
    if not isinstance(sigs, list):
        raise RecordError("sigs is a list")
    roles: set[str] = set()
    for s in sigs:
        if not isinstance(s, dict) or set(s) != _SIG_KEYS:
            raise RecordError("a signature is a map {key, sig, role}")
        if not _is_key(s["key"]) or not isinstance(s["sig"], bytes) or len(s["sig"]) != 64:
            raise RecordError("a signature has a 32-byte key and a 64-byte sig")
        if s["role"] not in ROLES:
            raise RecordError(f"signature role {s['role']!r}: one of {', '.join(ROLES)}")
        if s["role"] in roles:
            raise RecordError(f"two signatures for role {s['role']}")
        roles.add(s["role"])
    return rec, sigs


def _check_signatures(
    rec: dict[str, Any], sigs: list[dict[str, Any]], problems: list[str]
) -> list[dict[str, Any]]:
    head = record_head(rec)
    named: dict[str, bytes | None] = {
        "referee": rec["referee"],
        "seat0": rec["players"][0],
        "seat1": rec["players"][1],
    }
    required = ["referee"] if rec["referee"] is not None else ["seat0", "seat1"]
    present = {s["role"] for s in sigs}
    problems.extend(
        f"missing_signature: a {'refereed' if role == 'referee' else 'peer'} record needs "
        f"the {role} signature"
        for role in required
        if role not in present
    )
    out = []
    for s in sigs:
        role, key = s["role"], s["key"]
        want = named[role]
        if want is None:
            problems.append("wrong_key: a referee signature on a peer-play record")
            ok = False
        elif key != want:
            problems.append(
                f"wrong_key: the {role} signature is by key {key.hex()[:16]}..., "
                f"the record names {want.hex()[:16]}..."
            )
            ok = False
        else:
            try:
                Ed25519PublicKey.from_public_bytes(key).verify(s["sig"], head)
                ok = True
            except InvalidSignature:
                problems.append(f"bad_signature: the {role} signature does not verify")
                ok = False
        out.append({"role": role, "key": key.hex(), "ok": ok})
    return out


def _same(a: Any, b: Any) -> bool:
    # Python equates True with 1; the canonical bytes (and so the signatures) do not.
    return _pack(a) == _pack(b)


def _outcome(g: Game) -> dict[str, Any] | None:
    return g.outcome.to_dict() if g.outcome else None


def _describe(o: dict[str, Any] | None) -> str:
    if o is None:
        return "no outcome"
    who = "a draw" if o.get("winner") is None else f"winner {o.get('winner')}"
    detail = f": {o['detail']}" if o.get("detail") else ""
    return f"{who} ({o.get('reason')}{detail})"


def _replay_game(
    m: Match, gd: dict[str, Any], number: int, problems: list[str]
) -> tuple[GameSummary, bool]:
    """Replay one game into ``m``; returns its summary and whether the match replay may go on."""
    summary = GameSummary(number)
    if gd["number"] != number:
        problems.append(f"transcript_invalid: game {number} is numbered {gd['number']!r}")
        summary.ok, summary.reason = False, problems[-1]
        return summary, False
    try:
        g = m.new_game()
    except ProtocolError as e:
        problems.append(f"transcript_invalid: game {number}: {e.detail}")
        summary.ok, summary.reason = False, problems[-1]
        return summary, False
    logged = g.transcript
    rules = m.rules
    ended = 0
    for j, entry in enumerate(gd["transcript"], 1):
        try:
            g.feed(input_from_entry(entry, rules))
            # The game logs exactly what it accepted: anything else in the record is not what
            # the referee's game saw, even when it parses to the same input.
            if logged[-1] != entry:
                raise RecordError("not in the form the game logs")
            if g.outcome and not ended:
                ended = j
            continue
        except ProtocolError as e:
            why = e.detail or str(e)
        except Exception as e:  # untrusted input must never crash the verifier
            why = f"{type(e).__name__}: {e}"
        if ended:
            # Say why the replay ended early: that entry, not this one, is where the record lies.
            why += f"; the replay ended at entry {ended} with {_describe(_outcome(g))}"
        problems.append(f"transcript_invalid: game {number} entry {j}: {why}")
        summary.ok, summary.reason = False, problems[-1]
        summary.first, summary.shots = g.first, len(g.shots)
        return summary, False
    summary.first = g.first
    summary.shots = len(g.shots)
    replayed = _outcome(g)
    summary.outcome = replayed
    start = len(problems)
    if gd["first"] != g.first:
        problems.append(
            f"first_mismatch: game {number} recorded first seat {gd['first']!r}, "
            f"replay says {g.first!r}"
        )
    if gd["roots"] != list(g.roots):
        problems.append(f"roots_mismatch: game {number} recorded roots are not the committed ones")
    if not _same(gd["outcome"], replayed):
        why = "" if g.outcome else f" (the game stopped in phase {g.phase.value})"
        problems.append(
            f"outcome_mismatch: game {number} recorded {_describe(gd['outcome'])}, "
            f"replay says {_describe(replayed)}{why}"
        )
    if len(problems) > start:
        summary.ok, summary.reason = False, problems[start]
    if g.phase is Phase.OVER:
        m.game_over()
        return summary, True
    # An unfinished game can only be the last one of the record.
    return summary, False


def verify_record(signed: Any) -> VerifyReport:
    """Verify a signed record from itself alone: signatures, then a replay of every game.

    Never raises on bad input: every problem is named in the report.
    """
    try:
        rec, sigs = _check_shape(signed)
    except RecordError as e:
        return VerifyReport(False, f"malformed: {e.detail}", [f"malformed: {e.detail}"])
    problems: list[str] = []
    try:
        signatures = _check_signatures(rec, sigs, problems)
    except (TypeError, ValueError, OverflowError) as e:  # no canonical form: cannot be signed
        return VerifyReport(False, f"malformed: {e}", [f"malformed: {e}"])
    games: list[GameSummary] = []
    try:
        rules = rules_from_dict(rec["rules"])
    except BadRules as e:
        problems.append(f"bad_rules: {e.detail}")
    else:
        if rules.to_dict() != rec["rules"]:
            problems.append("bad_rules: the rules are not in their full canonical form")
        m = Match(rules, rec["match"], compact=False)
        for number, gd in enumerate(rec["games"], 1):
            summary, go_on = _replay_game(m, gd, number, problems)
            games.append(summary)
            if not go_on:
                if number < len(rec["games"]):
                    problems.append(
                        f"transcript_invalid: game {number + 1} follows a game that did not end"
                        if summary.ok
                        else f"transcript_invalid: games after game {number} not replayed"
                    )
                break
        if len(games) == len(rec["games"]) and all(s.ok for s in games):
            replayed = m.to_dict()
            if not _same(rec["result"], replayed):
                problems.append(
                    f"result_mismatch: recorded {rec['result']!r}, replay says {replayed!r}"
                )
    return VerifyReport(not problems, problems[0] if problems else "", problems, games, signatures)
