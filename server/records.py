"""The end of a match: its signed record, the store, the ladder, and players' co-signatures.

The referee signs the record and stores it once (``Store.put_record``: a signed record never
changes); a player's co-signature is checked, then added beside it (``Store.add_signature``), and
``Store.get_record`` hands out the record with every signature.
"""

from __future__ import annotations

import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, Refused, RemoteProtocolError
from seabattle.protocol.record import (
    build_record,
    dump_signed,
    head_of_bytes,
    load_record,
    pack_built,
    sign_as,
)

from .referee import Referee
from .store import BadSignature, Conflict, NotFound, Store, stored

__all__ = ["add_cosign", "add_cosign_stored", "conclude", "fired", "load_signed"]


def _now() -> int:
    return int(time.time())


def _score(winner: int | None) -> float:
    # A drawn match (or a match nobody won) rates as a draw for both.
    return 0.5 if winner is None else (1.0 if winner == 0 else 0.0)


async def conclude(ref: Referee, store: Store, key: Ed25519PrivateKey) -> None:
    """Record, sign and store ``ref``'s finished match, rate it, and send ``match_over``."""
    teams = None
    if ref.teams is not None:
        teams = [[bytes.fromhex(p) for p in t] for t in ref.team_ids()]
    record = build_record(
        ref.match,
        [bytes.fromhex(p) for p in ref.players],
        key.public_key().public_bytes_raw(),
        teams,
    )
    # Packing a record costs about as much as the rest of the match's end: pack it once for the
    # head, the signature and the stored bytes.
    packed = pack_built(record)
    head = head_of_bytes(packed)
    sig = sign_as(record, key, "referee", head=head)
    result = ref.match.to_dict()
    now = _now()
    fence, signed = ref.fence, dump_signed(packed, [sig])
    # Each write is fenced: a node that lost the match meanwhile (another took it over) stores
    # nothing of it, and ends here (`Fenced`); the node that has it records it alike.
    await stored(
        lambda: store.put_record(ref.hex, 0, signed, sig["sig"], now, fence=fence),
        f"match {ref.hex}'s record",
    )
    # Only now may players co-sign: a co-signature needs the stored record to go beside.
    ref.head, ref.recorded = head, True
    await stored(
        lambda: store.finish_match(ref.hex, result, now, fence=fence),
        f"match {ref.hex}'s result",
    )
    ratings: dict[str, Any] | None = None
    if ref.teams is not None:
        # The ladder rates players, one a seat: a team's result moves nobody's rating (6.8).
        ref.log.info("match over: %s (teams: unrated)", result)
        ref.to_all(m.MatchOver(ref.match_id, result, None, head, packed))
        return
    try:
        await stored(
            lambda: store.put_figures(ref.hex, fired(ref), fence=fence),
            f"match {ref.hex}'s figures",
        )
    except Exception:
        ref.log.exception("storing the match's shots failed; the players' figures miss it")
    try:
        score = _score(ref.match.winner)
        (old0, new0), (old1, new1) = await stored(
            lambda: store.apply_result(
                ref.hex, ref.players[0], ref.players[1], score, now, fence=fence
            ),
            f"match {ref.hex}'s rating",
        )
        # The codec carries no floats: ratings travel rounded to whole points.
        ratings = {
            ref.players[0]: {"old": round(old0.rating), "new": round(new0.rating)},
            ref.players[1]: {"old": round(old1.rating), "new": round(new1.rating)},
        }
    except Exception:
        ref.log.exception("rating the match failed; the result stands unrated")
    ref.log.info("match over: %s", result)
    ref.to_all(m.MatchOver(ref.match_id, result, ratings, head, packed))


def fired(ref: Referee) -> list[tuple[str, int, int]]:
    """Each seat's ``(player, shots, hits)`` over the match's games: the cells it fired at (a
    salvo's each, a radar scan none) and how many of them hit (spec 6.9's accuracy)."""
    out = []
    for seat, player in enumerate(ref.players):
        boards = [g.boards[1 - seat] for g in ref.match.games]
        out.append((player, sum(len(b.fired) for b in boards), sum(b.hits for b in boards)))
    return out


async def add_cosign(ref: Referee, store: Store, seat: int, msg: m.CoSign) -> None:
    """Check ``seat``'s co-signature of the record and store it beside the referee's."""
    ref.check_cosign(seat, msg)
    if seat in ref.cosigned or not ref.recorded:
        return  # the same player co-signing again: already stored
    key = bytes.fromhex(ref.players[seat])
    await _store_sig(store, ref.hex, f"seat{seat}", key, msg.sig)
    ref.cosigned = ref.cosigned | {seat}


async def add_cosign_stored(store: Store, player: str, msg: m.CoSign) -> None:
    """Co-sign a match that is no longer in memory (an old match, a restarted server).

    The store checks the signature against the record it holds, so nothing else is needed.
    """
    row = await store.get_match(msg.match.hex())
    seats = [] if row is None else [row.seat0, row.seat1]
    if player not in seats:
        raise Refused(ErrorCode.NO_SUCH_MATCH, "no match of yours with that id")
    role = f"seat{seats.index(player)}"
    await _store_sig(store, msg.match.hex(), role, bytes.fromhex(player), msg.sig)


async def _store_sig(store: Store, match_hex: str, role: str, key: bytes, sig: bytes) -> None:
    try:
        await store.add_signature(match_hex, 0, role, key, sig, _now())
    except NotFound:
        raise Refused(ErrorCode.NO_SUCH_RECORD, "that match has no record yet") from None
    except BadSignature as e:
        raise RemoteProtocolError(ErrorCode.BAD_SIGNATURE, str(e)) from None
    except Conflict:
        # Ed25519 admits more than one signature per key and head: the first one stays.
        raise Refused(ErrorCode.BAD_SIGNATURE, "you have co-signed this record already") from None


async def load_signed(store: Store, match_hex: str) -> dict[str, Any] | None:
    """The stored signed record of a match, with every signature, or ``None``."""
    row = await store.get_record(match_hex, 0)
    if row is None:
        return None
    signed: dict[str, Any] = load_record(row.record)
    return signed
