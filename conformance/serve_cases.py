"""The client cases: each names the section it checks, quotes the sentence, and judges what the
client under test sent to the suite's scripted server (or hosting peer).

Cases with ``peer=True`` test a joining peer (6.7); the others a client of a refereed server.
"""

from __future__ import annotations

import contextlib
import random
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.commit import PROTOCOL_VERSION, Committed
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.record import head_of_bytes, load_record, pack_record
from seabattle.protocol.verdict import Shot, Verdict

from .probe import describe
from .results import CaseFailed, NotImplementedCase, Trace
from .serve_script import Lie, PeerHost, RefereedMatch, handshake
from .serve_stage import Remote, Stage

__all__ = ["CLIENT_CASES", "ClientCase", "client_case"]

ClientCaseFn = Callable[[Stage, Trace], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ClientCase:
    """One check of a client: id, section, the sentence quoted, what is expected, the check."""

    id: str
    section: str
    title: str
    quote: str
    expected: str
    run: ClientCaseFn
    peer: bool = False


CLIENT_CASES: list[ClientCase] = []


def client_case(
    id: str, section: str, title: str, quote: str, expected: str, *, peer: bool = False
) -> Callable[[ClientCaseFn], ClientCaseFn]:
    """Register a client case (in the order the spec's sections come)."""

    def deco(fn: ClientCaseFn) -> ClientCaseFn:
        CLIENT_CASES.append(ClientCase(id, section, title, quote, expected, fn, peer))
        return fn

    return deco


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


async def _ready(
    stage: Stage, t: Trace, lean: bool = False
) -> tuple[Remote, bytes, Ed25519PrivateKey]:
    r = await stage.accept()
    key = Ed25519PrivateKey.generate()
    auth = await handshake(r, key, lean=lean)
    return r, auth.key, key


async def _refused_and_alive(stage: Stage, r: Remote, code: ErrorCode, n: int) -> list[m.Message]:
    """After a bad body: ``error{code, ref: nil}``, and ``ping{n}`` gets ``pong{n}``; returns what
    the client sent before that ``pong``."""
    before = await r.alive(n)
    stage.check_alive()
    errors = [x for x in before if isinstance(x, m.Error)]
    if not errors:
        raise CaseFailed(f"no error{{{code.name}}} answered the bad body (2.5)")
    if errors[0].code != code or errors[0].ref is not None:
        raise CaseFailed(f"the bad body was answered {describe(errors[0])}, not {code.name}")
    return before


# -- 2 framing and decoding -------------------------------------------------------------------


@client_case(
    "c2.1-zero-length",
    "2.1 Frames",
    "Zero-length frame in place of welcome",
    "`N = 0` is refused with `BAD_MESSAGE` [...] the receiver MUST fail the session",
    "no auth; at most error{BAD_MESSAGE}; the stream ends; the client does not crash",
)
async def _zero_length(stage: Stage, t: Trace) -> None:
    r = await stage.accept()
    await r.expect(m.Hello)
    await r.send_raw(b"\x00\x00\x00\x00", "header announcing 0 bytes")
    while True:
        msg = await r.recv()
        if msg is None:
            break
        if isinstance(msg, m.Error) and msg.code == ErrorCode.BAD_MESSAGE:
            continue
        raise CaseFailed(f"after a zero-length frame the client sent {describe(msg)} (4.5)")
    await stage.wait_end(stage.timeout)
    stage.check_alive()


@client_case(
    "c2.3-malformed",
    "2.3 Strict decoding",
    "Malformed msgpack after the handshake",
    "The body is well-formed msgpack: no reserved byte (`0xc1`) [...] `MALFORMED_MSGPACK` (1003)",
    "error{MALFORMED_MSGPACK, ref: nil}; then ping -> pong",
)
async def _malformed(stage: Stage, t: Trace) -> None:
    r, _, _ = await _ready(stage, t)
    await r.send_raw(_frame(b"\xc1"), "body c1")
    await _refused_and_alive(stage, r, ErrorCode.MALFORMED_MSGPACK, 11)


@client_case(
    "c2.4-unknown-tag",
    "2.4 From map to message",
    "Unknown tag after the handshake",
    "a tag that names no message of the agreed version: `UNKNOWN_TAG`",
    "error{UNKNOWN_TAG, ref: nil}; then ping -> pong; the client does not crash",
)
async def _unknown_tag(stage: Stage, t: Trace) -> None:
    r, _, _ = await _ready(stage, t)
    await r.send_raw(_frame(canonical_pack({"t": "frobnicate", "n": 1})), "{t: frobnicate}")
    await _refused_and_alive(stage, r, ErrorCode.UNKNOWN_TAG, 12)


@client_case(
    "c2.4-extra-key",
    "2.4 From map to message",
    "A ping with an extra key",
    "a missing key, an extra key, a value of the wrong type [...]: `BAD_MESSAGE`",
    "error{BAD_MESSAGE, ref: nil} and no pong{7}; then ping -> pong",
)
async def _extra_key(stage: Stage, t: Trace) -> None:
    r, _, _ = await _ready(stage, t)
    await r.send_raw(_frame(canonical_pack({"t": "ping", "n": 7, "x": 0})), "ping{n: 7, x: 0}")
    before = await _refused_and_alive(stage, r, ErrorCode.BAD_MESSAGE, 13)
    if any(isinstance(x, m.Pong) and x.n == 7 for x in before):
        raise CaseFailed("the client answered an invalid ping as if it were valid")


# -- 4 session and 5.2 session messages ---------------------------------------------------------


@client_case(
    "c4.1-handshake",
    "4.1 Handshake",
    "Handshake, then a request for a match",
    "The client sends `hello`; the server answers `welcome` [...]; the client proves its own key "
    "with `auth`",
    "hello{versions with 1}; auth signed over challenge, server key and client key; then "
    "quick, create or join",
)
async def _handshake(stage: Stage, t: Trace) -> None:
    r, pub, key = await _ready(stage, t)
    game = RefereedMatch(r, t, key, pub, random.Random(secrets.randbits(64)))
    await game.lobby()


@client_case(
    "c4.2-version",
    "4.2 Version and capabilities",
    "A welcome with a version the client did not offer",
    "A client MUST fail the session with `UNSUPPORTED_VERSION` if `welcome.version` is not one "
    "it offered.",
    "no auth; error{UNSUPPORTED_VERSION} and the end of the stream",
)
async def _version(stage: Stage, t: Trace) -> None:
    r = await stage.accept()
    hello = await r.expect(m.Hello)
    assert isinstance(hello, m.Hello)
    bad = max(hello.versions) + 100
    await r.send(m.Welcome(bad, (), bytes(32), secrets.token_bytes(32), True))
    err = False
    while (msg := await r.recv()) is not None:
        if isinstance(msg, m.Error) and msg.code == ErrorCode.UNSUPPORTED_VERSION:
            err = True
            continue
        raise CaseFailed(f"after welcome{{version: {bad}}} the client sent {describe(msg)}")
    if not err:
        raise CaseFailed("the session ended without error{UNSUPPORTED_VERSION} (4.5 step 1)")
    await stage.wait_end(stage.timeout)
    stage.check_alive()


@client_case(
    "c4.6-heartbeat",
    "4.6 Heartbeat",
    "Ping before welcome and after authed",
    "Either endpoint MAY send `ping{n}` in any state; the receiver MUST answer `pong{n}` with the "
    "same `n` promptly.",
    "pong{n} with the same n, before welcome and after authed",
)
async def _heartbeat(stage: Stage, t: Trace) -> None:
    r = await stage.accept()
    await r.expect(m.Hello)
    await r.alive(21)
    key = Ed25519PrivateKey.generate()
    challenge = secrets.token_bytes(32)
    pub = key.public_key().public_bytes_raw()
    await r.send(m.Welcome(PROTOCOL_VERSION, (), pub, challenge, True))
    auth = await r.expect(m.Auth)
    assert isinstance(auth, m.Auth)
    await r.send(m.Authed(auth.key.hex(), secrets.token_bytes(24)))
    await r.alive(2**32 - 1)  # the largest n 2.4 allows: a uint32, the full width


@client_case(
    "c5.2-unknown-ref",
    "5.2 Receiver rules: session messages",
    "An ok answering no request",
    "**`ok`** (client): match `ref` to a pending request; an `ok` with an unknown `ref` is "
    "ignored.",
    "nothing but the session going on: ping -> pong",
)
async def _unknown_ref(stage: Stage, t: Trace) -> None:
    r, _, _ = await _ready(stage, t)
    await r.send(m.Ok(987654321, {"match": bytes(16)}))
    before = await r.alive(14)
    stage.check_alive()
    if any(isinstance(x, m.Error | m.Bye) for x in before):
        raise CaseFailed("the client did not ignore an ok with an unknown ref")


# -- 5.5, 5.6, 10, 11 a refereed match -------------------------------------------------------------


async def _match(
    stage: Stage, t: Trace, lean: bool = False
) -> tuple[RefereedMatch, list[m.CoSign]]:
    r, pub, key = await _ready(stage, t, lean)
    if lean and not r.lean:
        raise NotImplementedCase("the client does not offer the capability lean (optional)")
    game = RefereedMatch(r, t, key, pub, random.Random(secrets.randbits(64)))
    await game.lobby()
    t.expect(
        "commit (blind) or place (custody), a legal fire on each turn, an answer whose "
        "openings verify on each shot at it, reveal at reveal_now (5.6 steps 5 to 7)"
    )
    await game.play()
    t.expect("after match_over: cosign iff the client found nothing wrong (5.5, 11.2)")
    cosigns = await game.cosigns(stage.settle)
    stage.check_alive()
    return game, cosigns


@client_case(
    "c5.6-game",
    "5.6 Message flow",
    "A whole honest match, co-signed",
    "A client MUST check what it can [...] a player that found no fault SHOULD send `cosign`",
    "a legal game (no refusals), the client's proofs and reveal hold, ids and seqs unique, and "
    "one cosign of the record head",
)
async def _game(stage: Stage, t: Trace) -> None:
    _honest(*await _match(stage, t), t)


def _honest(game: RefereedMatch, cosigns: list[m.CoSign], t: Trace) -> None:
    """The honest match ``game`` went by the rules, and its record was co-signed."""
    assert game.ref is not None
    if game.refused:
        raise CaseFailed(f"the referee refused the client's input: {game.refused[0]}")
    for g in game.ref.match.games:
        o = g.outcome
        if o is None or (o.winner is None and o.reason.value != "fleet_sunk"):
            raise CaseFailed(f"game {g.number} ended {o and o.to_dict()}")
        if o.winner != game.seat and o.reason.value != "fleet_sunk":
            raise CaseFailed(f"game {g.number}: the client lost by {o.reason.value}: {o.detail}")
    if not cosigns:
        raise CaseFailed("the client did not co-sign an honest record (5.5: it SHOULD)")
    game.check_cosign(cosigns[0])
    t.notes.append(f"mode {game.mode}, client in seat {game.seat}")


@client_case(
    "c5.7-lean",
    "5.7 Lean sessions",
    "A whole honest match without copies of the client's own moves",
    "A lean client MUST: [...] take a `verdict` on a shot of its own seat that no `shot` preceded "
    "as that `shot` and then that `verdict` [...] apply its own `answer` as it sends it",
    "lean agreed: a legal game with no shot copy and no verdict copy sent to the client (it fires "
    "on its turn after its own answer), and one cosign of the record head",
)
async def _lean(stage: Stage, t: Trace) -> None:
    _honest(*await _match(stage, t, lean=True), t)


def _forged_opening(seat: Callable[[], int]) -> Lie:
    done = [False]

    def lie(msg: m.Message) -> m.Message:
        # The first verdict on the client's own shot: its first result turned around, the
        # opening's occ with it, so the opening no longer opens the committed leaf.
        if done[0] or not isinstance(msg, m.VerdictMsg) or msg.seat != seat() or msg.radar:
            return msg
        v = dict(msg.verdict)
        results = [dict(x) for x in v.get("results") or []]
        if not results or results[0].get("open") is None:
            return msg
        first = results[0]
        opening = dict(first["open"])
        opening["occ"] = not opening["occ"]
        first["open"] = opening
        first["r"] = "hit" if opening["occ"] else "miss"
        first["sunk"] = None
        v["results"] = results
        done[0] = True
        return replace(msg, verdict=v)

    return lie


@client_case(
    "c10.7-forged-opening",
    "10.7 What is proved when",
    "A relayed verdict whose opening does not open the commitment",
    "At once, when a verdict arrives, the referee (and every blind-mode client, on `verdict`) "
    "MUST check [...] the opening is valid for the defender's commitment",
    "no cosign: the client detects the lie (5.5: if a check fails, MUST NOT co-sign)",
)
async def _forged(stage: Stage, t: Trace) -> None:
    await _lie_case(stage, t, lambda g: _forged_opening(lambda: g.seat))


async def _lie_case(stage: Stage, t: Trace, make: Callable[[RefereedMatch], Lie]) -> None:
    r, pub, key = await _ready(stage, t)
    game = RefereedMatch(r, t, key, pub, random.Random(secrets.randbits(64)))
    game.lie = make(game)
    await game.lobby()
    await game.play()
    t.expect("no cosign after match_over: the client caught the lie (5.5)")
    cosigns = await game.cosigns(stage.settle)
    stage.check_alive()
    if cosigns:
        raise CaseFailed(
            f"the client co-signed the record of a match it was lied to in ({describe(cosigns[0])})"
        )


def _firing_lie(game: RefereedMatch) -> Lie:
    def lie(msg: m.Message) -> m.Message:
        if not isinstance(msg, m.Firing) or game.ref is None:
            return msg
        rules, opp = game.ref.rules, 1 - game.seat
        other = Committed(
            rules,
            random_fleet(rules, random.Random()),
            secrets.token_bytes(32),
            game.ref.match_id,
            msg.game,
            opp,
        )
        coms = list(msg.commitments)
        coms[opp] = other.commitment.to_dict()
        return replace(msg, commitments=tuple(coms))

    return lie


@client_case(
    "c5.5-firing-root",
    "5.5 Receiver rules: events (client)",
    "firing carries an opponent commitment that is not the committed one",
    "A blind-mode client MUST recompute each root with that seat's context (10.2) and compare it "
    "with the `committed` root; a mismatch means the referee is lying.",
    "no cosign after match_over",
)
async def _firing_root(stage: Stage, t: Trace) -> None:
    await _lie_case(stage, t, _firing_lie)


# -- 6.7 peer play ------------------------------------------------------------------------------


async def _peer(stage: Stage, t: Trace) -> PeerHost:
    r = await stage.accept()
    key = Ed25519PrivateKey.generate()
    auth = await handshake(r, key, peer=True)
    host = PeerHost(r, t, key, auth.key, random.Random(secrets.randbits(64)))
    await host.start()
    return host


@client_case(
    "p6.7-match",
    "6.7 Peer play",
    "A whole honest peer match, co-signed by both",
    "each peer runs the game state machine (section 8) for both seats, feeds it the same inputs "
    "in the same order as the other peer does, checks every proof itself (5.5), and so ends with "
    "the same transcript and the same record head",
    "commit, the coin, legal shots, verdicts that verify, the reveal, and a cosign of our head",
    peer=True,
)
async def _peer_match(stage: Stage, t: Trace) -> None:
    host = await _peer(stage, t)
    await host.play()
    await host.cosign()
    stage.check_alive()


@client_case(
    "p10.9-bad-nonce",
    "10.9 The fair coin",
    "The host's nonce does not open its coin hash",
    "on receiving the other seat's nonce, checks it opens that seat's hash (else `BAD_PROOF`, "
    "and the lot fails)",
    "the joiner stops the match: no shot, answer or cosign; the stream ends",
    peer=True,
)
async def _bad_nonce(stage: Stage, t: Trace) -> None:
    host = await _peer(stage, t)
    host.bad_nonce = True
    await host.play(until=lambda: host.coins > 0)  # both committed, our coin{hash} went
    with contextlib.suppress(CaseFailed):  # a joiner may stop before it sends its hash
        await host.play(until=lambda: host.coins > 1)  # our false nonce went
    while (msg := await host.r.recv()) is not None:
        if isinstance(msg, m.Fire | m.Radar | m.Answer | m.CoSign | m.RevealMsg):
            raise CaseFailed(f"the joiner played on after a false coin: {describe(msg)}")
    await stage.wait_end(stage.timeout)
    stage.check_alive()


def _lying_answer(shot: Shot, v: Verdict) -> Verdict:
    d = v.to_dict()
    first = dict(d["results"][0])
    opening = dict(first["open"])
    opening["occ"] = not opening["occ"]
    first.update(open=opening, r="hit" if opening["occ"] else "miss", sunk=None)
    d["results"] = [first, *d["results"][1:]]
    return Verdict.from_dict(d)


@client_case(
    "p6.7-false-proof",
    "6.7 Peer play",
    "The host's verdict carries a false proof",
    "a false proof ends the game `false_proof` on both sides alike",
    "the joiner ends the game false_proof and co-signs the head of that record",
    peer=True,
)
async def _peer_false_proof(stage: Stage, t: Trace) -> None:
    host = await _peer(stage, t)
    host.answer = _lying_answer
    await host.play()
    assert host.ref is not None
    o = host.ref.match.games[0].outcome
    assert o is not None and o.reason.value == "false_proof"
    await host.cosign()
    stage.check_alive()


def _record_lie(game: RefereedMatch) -> Lie:
    def lie(msg: m.Message) -> m.Message:
        # The record match_over carries, with the two commit entries of game 1 swapped and its
        # head recomputed: it replays, but not in the order `committed` announced the commits.
        if not isinstance(msg, m.MatchOver):
            return msg
        record = load_record(msg.record)
        transcript = record["games"][0]["transcript"]
        at = [i for i, e in enumerate(transcript) if e["in"] == "commit"]
        if len(at) != 2:
            return msg
        i, j = at
        transcript[i], transcript[j] = transcript[j], transcript[i]
        packed = pack_record(record)
        return replace(msg, head=head_of_bytes(packed), record=packed)

    return lie


@client_case(
    "c5.5-record-altered",
    "5.5 Receiver rules: events (client)",
    "match_over carries a record (and its head) whose transcript is not what the events showed",
    "the transcript holds, in order, the entries the events of that game stand for",
    "no cosign after match_over",
)
async def _record_altered(stage: Stage, t: Trace) -> None:
    await _lie_case(stage, t, _record_lie)


# -- 11 records: what a client must not co-sign ----------------------------------------------------


def _map16(packed: bytes) -> bytes:
    """``packed``, a map's canonical bytes (a fixmap header), with a 16-bit map header instead."""
    return bytes([0xDE, 0, packed[0] & 0x0F]) + packed[1:]


def _non_canonical_record(game: RefereedMatch) -> Lie:
    def lie(msg: m.Message) -> m.Message:
        # The true record in another encoding of the same map, with match_over.head the head of
        # the bytes sent: a client that hashes them finds the head right, so only the canonical
        # check (re-encoding the decoded record gives other bytes) catches it.
        if not isinstance(msg, m.MatchOver) or not 0x80 <= msg.record[0] <= 0x8F:
            return msg
        record = _map16(msg.record)
        return replace(msg, head=head_of_bytes(record), record=record)

    return lie


@client_case(
    "c11.2-record-not-canonical",
    "11.2 The head and the signed record",
    "match_over carries the true record, not canonically encoded, with the head of its bytes",
    "bytes that decode to a record or a signed record but are not its canonical encoding are "
    "malformed (11.3), whatever they decode to, and a player never co-signs a head over them",
    "no cosign after match_over",
)
async def _record_not_canonical(stage: Stage, t: Trace) -> None:
    await _lie_case(stage, t, _non_canonical_record)


def _version_1_record(game: RefereedMatch) -> Lie:
    def lie(msg: m.Message) -> m.Message:
        # The true record rewritten as version 1 (the seats left where they are, so that only
        # its version gives it away): no seat signatures, each outcome with its prose, as
        # version 1 signed it; its head recomputed.
        if not isinstance(msg, m.MatchOver) or game.ref is None:
            return msg
        record = load_record(msg.record)
        record["v"] = 1
        for g, gd in zip(game.ref.match.games, record["games"], strict=True):
            if g.outcome is not None:
                gd["outcome"] = g.outcome.to_dict()
            for entry in gd["transcript"]:
                entry.pop("sig", None)
        packed = pack_record(record)
        return replace(msg, head=head_of_bytes(packed), record=packed)

    return lie


@client_case(
    "c11.3-record-version-1",
    "11.3 Verifying a record",
    "match_over carries the true record rewritten as version 1",
    "refuse a version-1 record (`old_version`) unless it was explicitly asked to accept version 1",
    "no cosign after match_over: a record whose seats no signature binds is not co-signed",
)
async def _record_version_1(stage: Stage, t: Trace) -> None:
    await _lie_case(stage, t, _version_1_record)
