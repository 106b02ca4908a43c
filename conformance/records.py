"""Cases on records (spec 11): what a server's signed records hold and how they are encoded."""

from __future__ import annotations

from seabattle.protocol.record import load_record, verify_bytes

from .game import _shared_game, record_bytes
from .probe import Table, _short
from .results import CaseFailed, Trace
from .suite import Suite, case


@case(
    "11.3-record-bytes",
    "11.3 Verifying a record",
    "get_record answers canonical bytes of a version-2 record that verifies",
    "a signed record whose bytes are not canonical is malformed (`RECORD_INVALID`) [...] each "
    "`commit` entry in the form of its version: with a 64-byte `sig` in version 2 [...] refuse "
    "a version-1 record (`old_version`) unless it was explicitly asked to accept version 1",
    "ok{record: bin}: the canonical encoding of a signed record of version 2 whose every commit "
    "entry carries a 64-byte sig, and that verifies from its bytes without version 1 accepted",
)
async def _record_bytes(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    tb: Table = obs["table"]
    p = tb.seats[1]
    p.trace = t  # report this case's own messages
    raw = await record_bytes(p, tb.match)
    # Said plainly first, for a server that gets one of them wrong; verify_bytes then judges all.
    try:
        record = load_record(raw).get("record")
    except Exception as e:
        raise CaseFailed(f"the record bytes do not decode: {e}") from None
    if not isinstance(record, dict) or record.get("v") != 2:
        v = record.get("v") if isinstance(record, dict) else None
        raise CaseFailed(f"the record has v {_short(v)}: a revision-5 server writes version 2")
    commits = [
        entry
        for g in record.get("games") or []
        for entry in (g.get("transcript") or [] if isinstance(g, dict) else [])
        if isinstance(entry, dict) and entry.get("in") == "commit"
    ]
    if not commits:
        raise CaseFailed("the record of a finished blind game holds no commit entry")
    for entry in commits:
        sig = entry.get("sig")
        if not isinstance(sig, bytes) or len(sig) != 64:
            seat = entry.get("seat")
            raise CaseFailed(f"seat {seat}'s commit entry has no 64-byte sig (10.10)")
    report = verify_bytes(raw)  # version 1 not accepted, no referee pinned
    if not report.ok:
        raise CaseFailed(f"the record bytes do not verify: {report.reason}")
    if not report.seats_bound:
        raise CaseFailed("the record's seats are not bound to keys (10.10)")
    t.notes.append(f"{len(raw)} canonical bytes, version 2, {len(commits)} signed commit entries")
