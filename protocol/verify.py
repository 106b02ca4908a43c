"""Verifying a signed match record from itself alone: :func:`verify_record`, :func:`verify_bytes`
and their report.

The record format, its head and its signatures are :mod:`.record`'s, with the theory of operation
(``spec/protocol.md`` section "Records"); :mod:`.record` re-exports what is defined here. The
verifier checks the shape (the form of each ``commit`` entry follows the record's version), then
the signatures, then replays every transcript through a fresh :class:`~.match.Match` and compares
what the record claims with what the replay says. :func:`verify_bytes` judges a record as it
arrives (a file, ``match_over.record``, ``get_record``): bytes that are not the canonical
encoding of what they decode to are ``malformed`` before anything else is looked at.

A version-1 record binds no seat to a key (spec 10.10), and its version is signed by the referee
alone: a referee can rewrite a version-2 record as version 1 with the seats swapped. So version 1
is refused (``old_version``) unless the caller asks for it (``accept_v1``), and the report then
says the seats are unbound (:attr:`VerifyReport.seats_bound`).

The report's ``reason`` is the first problem in the order of :data:`REASONS`, whatever order the
checks found them in: every implementation names the same reason for the same record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .commit import check_seat
from .errors import ErrorCode, ProtocolError
from .game import Game, Phase
from .match import Match
from .record import (
    RECORD_VERSION,
    ROLES,
    RecordError,
    _is_canonical,
    _pack,
    dump_record,
    load_record,
    record_head,
    signed_outcome,
)
from .rules import BadRules, RuleSet, rules_from_dict

__all__ = ["REASONS", "GameSummary", "VerifyReport", "verify_bytes", "verify_record"]

#: The record versions this verifier reads (``v``): version 1 kept the outcome's prose ``detail``
#: in the head and has no seat signatures; version 2 leaves the prose out and signs each seat's
#: commitment (``spec/protocol.md`` 11.1, 10.10). Version 1 is read only when asked for.
VERSIONS = (1, RECORD_VERSION)

#: Why a record fails verification: the slug that starts each problem, by rank: a report's
#: ``reason`` is its first problem in this order, whatever order the checks found them in
#: (``spec/protocol.md`` 11.3 is generated from this). The slugs are normative; the text after
#: the colon is not.
REASONS: dict[str, str] = {
    "malformed": "The signed record does not have the shape of 11.1 and 11.2 (key sets, `v`, "
    "sizes of ids, keys and signatures, roles, a `commit` entry in its version's form: with a "
    "64-byte `sig` in version 2, without one in version 1), or has no canonical encoding, or "
    "its bytes are not the canonical encoding of what they decode to.",
    "old_version": "A version-1 record (revision 2 and before): its seats are bound to no key "
    "(10.10), and its version is signed by the referee alone, so it cannot be told from a "
    "version-2 record rewritten with its seats swapped. Refused unless the verifier was asked "
    "to accept version 1, which it then reports with its seats unbound.",
    "missing_signature": "A required signature is absent: the referee's in refereed play, both "
    "seats' in peer play.",
    "wrong_key": "A signature is by another key than the record names for its role (or is a "
    "referee signature on a peer-play record).",
    "bad_signature": "A signature does not verify over the head.",
    "untrusted_referee": "The verifier was told which referee key to trust, and the record names "
    "another (or none).",
    "bad_rules": "The rule set cannot be built, or `rules` is not its full form exactly, or a "
    "team match's `teams` do not have `team_size` members each.",
    "transcript_invalid": "A game's transcript does not replay: an entry the game refuses, an "
    "entry not in the form the game logs, a game numbered out of order, or a game after one that "
    "did not end.",
    "seat_unbound": "A version-2 record's `commit` entry has a `sig` that does not verify under "
    "the key the record names for its seat (10.10): whoever played that seat, the record cannot "
    "say it was this player.",
    "first_mismatch": "A game's recorded `first` differs from the replay's.",
    "roots_mismatch": "A game's recorded `roots` differ from the committed ones.",
    "outcome_mismatch": "A game's recorded outcome differs from the replay's (version 2: winner "
    "and reason, and `detail` is empty; version 1: the whole outcome).",
    "result_mismatch": "The match `result` differs from the replay's.",
}

_RECORD_KEYS = frozenset({"v", "match", "rules", "players", "referee", "games", "result"})
_GAME_KEYS = frozenset({"number", "first", "transcript", "roots", "outcome"})
_SIG_KEYS = frozenset({"key", "sig", "role"})
_RANK = {slug: i for i, slug in enumerate(REASONS)}


def _rank(problem: str) -> int:
    return _RANK.get(problem.partition(":")[0], len(_RANK))


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

    ``reason`` is the first of ``problems`` (empty when ``ok``); it starts with a stable slug, one
    of :data:`REASONS`. ``problems`` lists every problem found, by the rank of its slug in
    :data:`REASONS` (spec 11.3), and within a rank in the order found (within the replay, entry
    by entry). ``seats_bound`` says whether the record binds each seat to its player's key with
    seat signatures (spec 10.10): true for a version-2 record, false for a version-1 record (read
    only when asked for) and for a record too malformed to say.
    """

    ok: bool
    reason: str = ""
    problems: list[str] = field(default_factory=list)
    games: list[GameSummary] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    seats_bound: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain form for ``--json`` reports (keys as hex)."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "problems": list(self.problems),
            "games": [g.to_dict() for g in self.games],
            "signatures": [dict(s) for s in self.signatures],
            "seats_bound": self.seats_bound,
        }


def _is_key(v: Any) -> bool:
    return isinstance(v, bytes) and len(v) == 32


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_shape(signed: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(signed, dict) or set(signed) != {"record", "sigs"}:
        raise RecordError("a signed record is a map {record, sigs}")
    rec, sigs = signed["record"], signed["sigs"]
    if not isinstance(rec, dict) or set(rec) - {"teams"} != _RECORD_KEYS:
        raise RecordError(
            f"a record is a map of {', '.join(sorted(_RECORD_KEYS))} (and teams, spec 6.8)"
        )
    if not _is_int(rec["v"]) or rec["v"] not in VERSIONS:
        raise RecordError(
            f"record version {rec['v']!r}; this verifier reads {', '.join(map(str, VERSIONS))}"
        )
    if not isinstance(rec["match"], bytes) or len(rec["match"]) != 16:
        raise RecordError("match is a 16-byte id")
    players = rec["players"]
    if not isinstance(players, list) or len(players) != 2 or not all(map(_is_key, players)):
        raise RecordError("players are two 32-byte keys")
    teams = rec.get("teams")
    if teams is not None and (
        not isinstance(teams, list)
        or len(teams) != 2
        or not all(isinstance(t, list) and t and all(map(_is_key, t)) for t in teams)
        or [t[0] for t in teams] != players
    ):
        raise RecordError("teams are two lists of 32-byte keys, each headed by its seat's player")
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
        _check_commit_forms(g["transcript"], rec["v"], i)
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


def _check_commit_forms(transcript: list[dict[str, Any]], version: int, game: int) -> None:
    """The version decides the form of a ``commit`` entry (spec 11.1): version 2 carries the seat
    signature, version 1 has none. A mix is no record of either version, so it is malformed, and
    ``seat_unbound`` is left to mean one thing: a ``sig`` that does not verify."""
    for j, e in enumerate(transcript, 1):
        if e.get("in") != "commit":
            continue
        sig = e.get("sig")
        if version >= 2 and (not isinstance(sig, bytes) or len(sig) != 64):
            raise RecordError(
                f"game {game} entry {j}: a version-{version} commit entry carries a 64-byte sig"
            )
        if version < 2 and "sig" in e:
            raise RecordError(f"game {game} entry {j}: a version-1 commit entry has no sig")


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


# Rule sets built from records, by the canonical bytes of their map: records of one server share
# a few rule sets, and building one (with its checks) costs a tenth of a game's replay. Only maps
# of exact plain types are kept: their bytes then say everything rules_from_dict() reads.
_RULES: dict[bytes, RuleSet] = {}


def _rules_of(d: Any) -> RuleSet:
    if type(d) is not dict or not _is_canonical(d):
        return rules_from_dict(d)
    key: bytes = msgpack.packb(d, use_bin_type=True)
    rules = _RULES.get(key)
    if rules is None:
        rules = rules_from_dict(d)
        if len(_RULES) >= 32:
            _RULES.clear()
        _RULES[key] = rules
    return rules


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
    m: Match,
    gd: dict[str, Any],
    number: int,
    problems: list[str],
    version: int,
    players: list[bytes],
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
    logged = g.transcript if g.plain_log is None else g.plain_log
    ended = 0
    for j, entry in enumerate(gd["transcript"], 1):
        try:
            g.replay(entry)
            # The game logs exactly what it accepted: anything else in the record is not what
            # the referee's game saw, even when it parses to the same input.
            if logged[-1] != entry:
                raise RecordError("not in the form the game logs")
            if g.outcome and not ended:
                ended = j
            if version >= 2 and entry["in"] == "commit":
                _check_seat_entry(g, entry, players, number, problems)
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
    # What the head holds: in version 2 the prose is not signed (the report still shows it).
    signed = signed_outcome(replayed) if version >= 2 and replayed is not None else replayed
    start = len(problems)
    if gd["first"] != g.first:
        problems.append(
            f"first_mismatch: game {number} recorded first seat {gd['first']!r}, "
            f"replay says {g.first!r}"
        )
    if gd["roots"] != list(g.roots):
        problems.append(f"roots_mismatch: game {number} recorded roots are not the committed ones")
    if not _same(gd["outcome"], signed):
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


def _check_seat_entry(
    g: Game, entry: dict[str, Any], players: list[bytes], number: int, problems: list[str]
) -> None:
    """A version-2 commit entry carries its player's seat signature (spec 10.10)."""
    seat = entry["seat"]
    sig, root = entry["sig"], g.roots[seat]  # the shape check saw a 64-byte sig
    try:
        if root is None:  # the game accepted the commit, so it holds its root
            raise ProtocolError(ErrorCode.BAD_SIGNATURE, "no committed root to check it over")
        check_seat(players[seat], g.ctx[seat], root, sig)
    except ProtocolError as e:
        problems.append(f"seat_unbound: game {number} seat {seat}'s commitment: {e.detail}")


def _malformed(why: str) -> VerifyReport:
    problem = f"malformed: {why}"
    return VerifyReport(False, problem, [problem])


def verify_bytes(
    data: bytes, *, referee_key: bytes | None = None, accept_v1: bool = False
) -> VerifyReport:
    """Verify a signed record as it was stored or sent: its msgpack bytes (spec 11.3).

    Bytes that do not decode to a map are ``malformed``; so are bytes that decode but are not
    the canonical encoding (spec 3) of what they decode to (a 16-bit header for a small map, a
    long form of a small integer, unsorted or repeated keys): one signed record has one
    encoding (11.2). The decoded record is then judged by :func:`verify_record` (same
    ``referee_key`` and ``accept_v1``), so the report still lists every other problem.
    """
    try:
        signed = load_record(data)
    except RecordError as e:
        return _malformed(e.detail)
    try:
        canonical = dump_record(signed) == data
    except (TypeError, ValueError, OverflowError) as e:  # a float, a non-string key
        return _malformed(f"no canonical encoding: {e}")
    report = verify_record(signed, referee_key=referee_key, accept_v1=accept_v1)
    if not canonical:
        problem = (
            "malformed: the bytes are not the canonical encoding (spec 3) of the signed record "
            "they decode to"
        )
        report.problems.insert(0, problem)
        report.ok, report.reason = False, problem
    return report


def verify_record(
    signed: Any, *, referee_key: bytes | None = None, accept_v1: bool = False
) -> VerifyReport:
    """Verify a signed record from itself alone: signatures, then a replay of every game.

    ``referee_key`` pins the referee: a record that names another referee (or none: peer play)
    fails with ``untrusted_referee``. A version-1 record fails with ``old_version`` unless
    ``accept_v1``; accepted, it is reported with ``seats_bound`` false, since nothing in it ties
    a seat to a key. Never raises on bad input: every problem is named in the report, and its
    ``reason`` is the first by the rank of :data:`REASONS`.

    ``signed`` is the decoded map: its encoding is not judged here (see :func:`verify_bytes`).
    """
    try:
        rec, sigs = _check_shape(signed)
    except RecordError as e:
        return _malformed(e.detail)
    problems: list[str] = []
    try:
        signatures = _check_signatures(rec, sigs, problems)
    except (TypeError, ValueError, OverflowError) as e:  # no canonical form: cannot be signed
        return _malformed(str(e))
    if rec["v"] < 2 and not accept_v1:
        # The other checks still run, so that the report says everything else too.
        problems.append(
            "old_version: a version-1 record binds its seats to no key (spec 10.10), and a "
            "referee can rewrite a version-2 record as one with the seats swapped; it is read "
            "only when asked to accept version 1, with its seats unbound"
        )
    if referee_key is not None and rec["referee"] != referee_key:
        named = "no referee" if rec["referee"] is None else f"referee {rec['referee'].hex()}"
        problems.append(f"untrusted_referee: the record names {named}, not {referee_key.hex()}")
    games: list[GameSummary] = []
    try:
        rules = _rules_of(rec["rules"])
    except BadRules as e:
        problems.append(f"bad_rules: {e.detail}")
    else:
        if rules.to_dict() != rec["rules"]:
            problems.append("bad_rules: the rules are not in their full canonical form")
        teams = rec.get("teams")
        if teams is not None and any(len(t) != rules.team_size for t in teams):
            problems.append(f"bad_rules: teams of {rules.team_size} members, the rules say")
        m = Match(rules, rec["match"], compact=False)
        for number, gd in enumerate(rec["games"], 1):
            summary, go_on = _replay_game(m, gd, number, problems, rec["v"], rec["players"])
            games.append(summary)
            if not go_on:
                if number < len(rec["games"]):
                    # Where game `number`'s own transcript did not replay, that problem ranks
                    # with this one and comes first; otherwise the game stopped unfinished, and
                    # a game after it is a failure of its own, ranked before any mismatch.
                    problems.append(
                        f"transcript_invalid: games after game {number} not replayed"
                        if summary.reason.startswith("transcript_invalid")
                        else f"transcript_invalid: game {number + 1} follows a game that did "
                        "not end"
                    )
                break
        if len(games) == len(rec["games"]) and all(s.ok for s in games):
            replayed = m.to_dict()
            if not _same(rec["result"], replayed):
                problems.append(
                    f"result_mismatch: recorded {rec['result']!r}, replay says {replayed!r}"
                )
    problems.sort(key=_rank)  # stable: within a rank, the order found
    return VerifyReport(
        not problems,
        problems[0] if problems else "",
        problems,
        games,
        signatures,
        seats_bound=rec["v"] >= 2,
    )
