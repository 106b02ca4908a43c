"""The end of a match: its signed record, the store, the ladder, and players' co-signatures.

The store keeps a record immutable once written (``Store.put_record`` refuses other bytes for the
same slot), which is right for the referee's signed record but leaves no room for co-signatures
added later. So a co-signed copy is stored beside it, in a slot numbered past any real game:
``COSIGNED + mask`` where bit ``s`` of ``mask`` says seat ``s`` has co-signed. Readers take the
copy with the most signatures (:func:`load_signed`). Every copy carries the same record and head.
"""

from __future__ import annotations

import time
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.record import build_record, dump_record, load_record, record_head, sign_as

from .referee import Referee
from .store import Store

__all__ = ["COSIGNED", "add_cosign", "conclude", "load_signed"]

#: First store slot of co-signed copies (real games are numbered from 1; 0 is the match record).
COSIGNED = 1 << 20


def _now() -> int:
    return int(time.time())


def _score(winner: int | None) -> float:
    # A drawn match (or a match nobody won) rates as a draw for both.
    return 0.5 if winner is None else (1.0 if winner == 0 else 0.0)


async def conclude(ref: Referee, store: Store, key: Ed25519PrivateKey) -> None:
    """Record, sign and store ``ref``'s finished match, rate it, and send ``match_over``."""
    record = build_record(
        ref.match, [bytes.fromhex(p) for p in ref.players], key.public_key().public_bytes_raw()
    )
    ref.head = record_head(record)
    sig = sign_as(record, key, "referee")
    ref.signed = {"record": record, "sigs": [sig]}
    result = ref.match.to_dict()
    now = _now()
    await store.put_record(ref.hex, 0, dump_record(ref.signed), sig["sig"], now)
    await store.finish_match(ref.hex, result, now)
    ratings: dict[str, Any] | None = None
    try:
        (old0, new0), (old1, new1) = await store.apply_result(
            ref.hex, ref.players[0], ref.players[1], _score(ref.match.winner), now
        )
        # The codec carries no floats: ratings travel rounded to whole points.
        ratings = {
            ref.players[0]: {"old": round(old0.rating), "new": round(new0.rating)},
            ref.players[1]: {"old": round(old1.rating), "new": round(new1.rating)},
        }
    except Exception:
        ref.log.exception("rating the match failed; the result stands unrated")
    ref.log.info("match over: %s", result)
    ref.to_all(m.MatchOver(ref.match_id, result, ratings, ref.head))


async def add_cosign(ref: Referee, store: Store, seat: int, msg: m.CoSign) -> None:
    """Add ``seat``'s checked co-signature to the record and store the co-signed copy."""
    ref.check_cosign(seat, msg)
    if seat in ref.cosigned or ref.signed is None:
        return
    key = bytes.fromhex(ref.players[seat])
    ref.signed = {
        "record": ref.signed["record"],
        "sigs": [*ref.signed["sigs"], {"key": key, "sig": msg.sig, "role": f"seat{seat}"}],
    }
    ref.cosigned.add(seat)
    mask = sum(1 << s for s in ref.cosigned)
    await store.put_record(ref.hex, COSIGNED + mask, dump_record(ref.signed), msg.sig, _now())


async def load_signed(store: Store, match_hex: str) -> dict[str, Any] | None:
    """The stored signed record of a match with the most signatures, or ``None``."""
    for slot in (COSIGNED + 3, COSIGNED + 2, COSIGNED + 1, 0):
        row = await store.get_record(match_hex, slot)
        if row is not None:
            signed: dict[str, Any] = load_record(row.record)
            return signed
    return None
