"""Cases on one honest blind game, played once and shared: the game (``spec/protocol.md`` 8),
its openings (10.7), a spectator's view (6.5) and the signed record (11.2).

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from typing import Any

from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import (
    RecordError,
    head_of_bytes,
    load_record,
    pack_record,
    record_head,
    verify_record,
)

from .probe import Probe, Table, _short, describe
from .results import CaseFailed, NotImplementedCase, Trace
from .suite import Suite, case, check_verdict, expect_game_over, fire_and_answer


async def _blind_game(s: Suite, t: Trace) -> dict[str, Any]:
    """Play one honest blind game to its end, with a spectator; return what was observed."""
    obs: dict[str, Any] = {"trace": t}
    tb = await s.table(t, public=True)  # public, so that a spectator may watch
    obs["table"] = tb
    if tb.first not in (0, 1):
        raise CaseFailed("in refereed play game.first is the seat the referee's lot chose")
    await s.commit_both(tb, t)
    watcher = await s.player(t, "W")
    await watcher.ok(lambda i: m.Watch(i, tb.match))
    snap = await watcher.expect(m.Snapshot)
    assert isinstance(snap, m.Snapshot)
    obs["watch_snapshot"] = snap
    # Each shooter opens with a miss, then sinks the other fleet, cell by cell.
    targets = [
        [*tb.water(1)[:1], *tb.ship_cells(1)],
        [*tb.water(0)[:1], *tb.ship_cells(0)],
    ]
    mover, n, openings, verdicts = tb.first, 0, 0, 0
    while True:
        n += 1
        cell = targets[mover].pop(0)
        v = await fire_and_answer(tb, mover, cell, n, watchers=[watcher])
        verdicts += 1
        openings += check_verdict(tb, v, mover, [cell])
        if v.next is None:
            break
        if v.next != 1 - mover:
            raise CaseFailed(f"verdict.next is {v.next}; without hit_again the turn passes")
        mover = v.next
    winner = mover
    obs.update(openings=openings, verdicts=verdicts, winner=winner)
    for q in (*tb.seats, watcher):
        rn = await q.expect(m.RevealNow)
        assert isinstance(rn, m.RevealNow)
        if rn.winner != winner:
            raise CaseFailed(f"{q.name}: reveal_now.winner {rn.winner}, the shooter was {winner}")
    for p in tb.seats:
        await p.give(m.RevealMsg)  # each seat reveals on reveal_now
    for q in (*tb.seats, watcher):
        seen = set()
        for _ in range(2):
            rv = await q.expect(m.Revealed)
            assert isinstance(rv, m.Revealed)
            if rv.fault is not None:
                raise CaseFailed(f"{q.name}: seat {rv.seat}'s honest reveal has fault {rv.fault}")
            if rv.reveal != tb.committed[rv.seat].reveal().to_dict():
                raise CaseFailed(f"{q.name}: revealed carries another reveal than seat sent")
            seen.add(rv.seat)
        if seen != {0, 1}:
            raise CaseFailed(f"{q.name}: revealed for seats {seen}")
    await expect_game_over([*tb.seats, watcher], winner, "fleet_sunk")
    heads = set()
    for q in (*tb.seats, watcher):
        mo = await q.expect(m.MatchOver)
        assert isinstance(mo, m.MatchOver)
        res = mo.result
        if res.get("over") is not True or res.get("winner") != winner:
            raise CaseFailed(f"{q.name}: match_over.result {_short(res)}")
        if len(mo.head) != 32:
            raise CaseFailed(f"{q.name}: match_over.head is not 32 bytes")
        if head_of_bytes(mo.record) != mo.head:
            raise CaseFailed(f"{q.name}: match_over.head is not the head of match_over.record")
        heads.add(mo.head)
        obs["record"] = mo.record
    if len(heads) != 1:
        raise CaseFailed("players and spectators were sent different record heads")
    obs["head"] = heads.pop()
    obs["watcher"] = watcher
    for q in (*tb.seats, watcher):
        q.keep = True
    return obs


async def _shared_game(s: Suite, t: Trace) -> dict[str, Any]:
    # The first case that needs the game plays it (its trace shows the messages); later cases
    # reuse what it saw, or fail with the same reason.
    cached = s.cache.get("blind")
    if cached is None:
        try:
            s.cache["blind"] = await _blind_game(s, t)
        except CaseFailed as e:
            s.cache["blind"] = e
            raise
        return dict(s.cache["blind"])
    if isinstance(cached, CaseFailed):
        raise CaseFailed(f"the shared blind game failed: {cached}")
    t.notes.append("uses the blind game played by case 8-blind-game")
    return dict(cached)


@case(
    "8-blind-game",
    "8 The game",
    "A whole honest blind game",
    "When a verdict brings the hits on a grid to the number of ship cells of the fleet [...] the "
    "referee sends `verdict` with `next: nil` and `reveal_now{winner}`. [...] The referee sends "
    "`game_over{outcome}` to all.",
    "start, game, committed x2, firing, (shot, verdict)*, reveal_now, revealed x2, game_over "
    "fleet_sunk, match_over",
)
async def _game(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    t.notes.append(f"{obs['verdicts']} verdicts; seat {obs['winner']} won")


@case(
    "10.7-openings",
    "10.7 What is proved when",
    "Every relayed opening verifies",
    "At once, when a verdict arrives, the referee (and every blind-mode client, on `verdict`) "
    "MUST check [...] the opening is valid for the defender's commitment, and `occ` is `true` "
    "exactly when `r` is `hit` or `sunk`",
    "every opening in every verdict (to both seats and the spectator) verifies against firing's "
    "commitments",
)
async def _openings(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    if obs["openings"] < obs["verdicts"]:
        raise CaseFailed("a verdict carried no opening")
    t.notes.append(f"{obs['openings']} openings checked by the suite")


@case(
    "6.5-watch",
    "6.5 Spectators",
    "A spectator's snapshot and events",
    "**`watch`**: [...] Answer `ok`, then `snapshot{seat: nil, view}`, then every public event of "
    "the match.",
    "ok, snapshot{seat: nil} with no fleet or secret, then shot, verdict, reveal_now, revealed, "
    "game_over, match_over",
)
async def _watch(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    snap: m.Snapshot = obs["watch_snapshot"]
    t.got.append(f"W: {describe(snap)}")
    if snap.seat is not None:
        raise CaseFailed(f"a spectator's snapshot has seat {snap.seat}")
    _check_view(snap.view, t, spectator=True)
    if snap.view.get("phase") != "firing":
        raise CaseFailed(f"view.phase is {snap.view.get('phase')!r} during firing")


def _check_view(view: dict[str, Any], t: Trace, *, spectator: bool) -> None:
    required = {
        "mode", "games", "scores", "wins", "over", "winner", "game", "phase", "turn", "first",
        "committed", "roots", "boards", "pending", "shots", "expiries", "callers", "outcome",
    }  # fmt: skip
    missing = required - set(view)
    if missing:
        raise CaseFailed(f"snapshot view lacks {sorted(missing)} (section 6.6)")
    for secret_key in ("fleet", "secret", "secrets", "fleets"):
        if spectator and secret_key in view:
            raise CaseFailed(f"a spectator's view holds {secret_key!r}")
    for key in ("rules", "players"):
        if key not in view:
            t.notes.append(f"view has no {key!r} (SHOULD, section 6.6)")


async def record_bytes(p: Probe, match: bytes) -> bytes:
    """The signed record of ``match`` as ``get_record`` answers it: its bytes (spec 6.2)."""
    data = await p.ok(lambda i: m.GetRecord(i, match))
    raw = data.get("record")
    if not isinstance(raw, bytes):
        raise CaseFailed(f"ok.data.record is not bin (canonical record bytes): {_short(raw)}")
    return raw


@case(
    "11-record",
    "11.2 The head and the signed record",
    "The signed record verifies, and co-signatures are added",
    "The head of a finished match's record is sent in `match_over.head` and the record itself, "
    "canonically encoded, in `match_over.record`, [...] `get_record` returns the signed record.",
    "ok{record: bin}, canonical bytes that verify (section 11.3) with the referee's signature over "
    "match_over.head; a bad cosign BAD_SIGNATURE; a good one added as seat<N>",
)
async def _record(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    tb: Table = obs["table"]
    p = tb.seats[0]
    p.trace = t  # report this case's own messages
    raw = await record_bytes(p, tb.match)
    try:
        signed = load_record(raw, canonical=True)
    except RecordError as e:
        raise CaseFailed(f"the record bytes are not a canonical signed record: {e}") from None
    report = verify_record(signed)
    if not report.ok:
        raise CaseFailed(f"verify_record: {report.reason}")
    if record_head(signed["record"]) != obs["head"]:
        raise CaseFailed("the record's head differs from match_over.head")
    if pack_record(signed["record"]) != obs["record"]:
        raise CaseFailed("the stored record is not the one match_over carried")
    server_key = p.welcome.server if p.welcome is not None else b""
    if signed["record"].get("referee") != server_key:
        raise CaseFailed("record.referee is not welcome.server")
    t.notes.append(f"record verified: {len(raw)} bytes, {len(signed['sigs'])} signature(s)")
    # A co-signature over another head is refused; the right one is stored with the record.
    await p.send(m.CoSign(tb.match, obs["head"], p.key.sign(b"not the head")))
    await p.expect_error(ErrorCode.BAD_SIGNATURE)
    await p.send(m.CoSign(tb.match, obs["head"], p.key.sign(obs["head"])))
    await p.quiet()
    data = await p.ok(lambda i: m.GetRecord(i, tb.match))
    signed = load_record(data["record"])
    roles = sorted(sg["role"] for sg in signed["sigs"])
    if "seat0" not in roles:
        raise NotImplementedCase(f"co-signature not stored (roles {roles})")
    if not verify_record(signed).ok:
        raise CaseFailed("the co-signed record does not verify")
