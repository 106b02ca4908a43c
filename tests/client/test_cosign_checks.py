"""The reference client checks the record ``match_over`` carries before it co-signs (spec 5.5).

Over real TCP against the real server: an honest match whose transcript holds a clock loss, a
wasted repeat and a resignation (entries the players see only through ``shot_lost`` and
``game_over``) is co-signed by both players; a record the server altered after the match (an
entry changed, an ``expire`` nobody was shown inserted) is co-signed by neither, although it
replays and its head is the one announced.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing
from helpers import place_msg, player_id, quick_pair
from seabattle.client.api import (
    Client,
    GameEnded,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    MatchHandle,
    RequestFailed,
    YourTurn,
    connect,
)
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical, canonical_pack
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.match import Match
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.referee import Referee
from seabattle.protocol.rules import rules_from_dict
from seabattle.server import records

pytest.importorskip("seabattle.server.app")

#: Classic with a 30-second shot clock and wasted repeats: a clock loss and a repeat each take a
#: turn, and both enter the transcript.
RULES: dict[str, Any] = {
    "preset": "classic",
    "repeat": "wasted",
    "clocks": {"setup": None, "shot": 30, "max_expiries": 3, "reveal": 60, "grace": 60},
}

Tamper = Callable[[list[dict[str, Any]]], None]


class Seat:
    """One player's handle and its event stream, read one event at a time."""

    def __init__(self, h: MatchHandle) -> None:
        self.h = h
        self._events: AsyncIterator[MatchEvent] = h.events().__aiter__()
        self.seen: list[MatchEvent] = []

    async def until(self, kind: type[MatchEvent]) -> MatchEvent:
        while True:
            ev = await self._events.__anext__()
            self.seen.append(ev)
            if isinstance(ev, kind):
                return ev


Fetch = Callable[[Client, MatchHandle], Awaitable[dict[str, Any]]]


async def _get_record(client: Client, h: MatchHandle) -> dict[str, Any]:
    return await client.get_record(h.id)


async def _play(
    server: tuple[str, int], mode: str, fetch: Fetch = _get_record
) -> tuple[Seat, Seat, dict[str, Any]]:
    """The first mover lets its clock run out; then each calls cells in turn until the first
    mover calls B1 again (wasted), and the other resigns. Returns the first mover, the other,
    and the stored signed record (as ``fetch`` gets it) once both have handled ``match_over``."""
    host, port = server
    async with connect(host, port, name="a") as a, connect(host, port, name="b") as b:
        ha, hb = await quick_pair(a, b, RULES, mode)
        await ha.place()
        await hb.place()
        sa, sb = Seat(ha), Seat(hb)
        while ha.first is None or ha.mirror is None or ha.mirror.phase.value != "firing":
            await sa.until(Info)
        first, other = (sa, sb) if ha.first == ha.seat else (sb, sa)
        await first.until(YourTurn)  # and let the 30 s run out
        calls = [("A1", "B1"), ("A2", "B2"), ("A3", "B1")]
        for theirs, ours in calls:
            await other.until(YourTurn)
            await other.h.fire(theirs)
            await first.until(YourTurn)
            await first.h.fire(ours)
        await other.until(YourTurn)
        await other.h.resign()
        for s in (first, other):
            await s.until(GameEnded)
            await s.until(MatchEnded)
        # Each client co-signed (or not) while handling match_over, before this request.
        signed = await fetch(a, ha)
        return first, other, signed


def _roles(signed: dict[str, Any]) -> list[str]:
    return sorted(s["role"] for s in signed["sigs"])


def _tamper(monkeypatch: pytest.MonkeyPatch, change: Tamper) -> None:
    """Make the server alter each record's first transcript before it packs and signs it."""
    honest = records.build_record

    def build(*args: Any, **kw: Any) -> dict[str, Any]:
        record = honest(*args, **kw)
        change(record["games"][0]["transcript"])
        # In canonical form again, as any server must sign it: the server packs what it built
        # as it stands (pack_built), so a record altered out of that form would not verify.
        return canonical(record)

    monkeypatch.setattr(records, "build_record", build)


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_an_honest_record_with_a_timeout_a_repeat_and_a_resignation_is_cosigned(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    first, other, signed = await _play(server, mode)
    for s in (first, other):
        assert s.h.disputed is None and s.h.lies == []
    kinds = [e["in"] for e in signed["record"]["games"][0]["transcript"]]
    assert "expire" in kinds and kinds[-1] == "resign"
    lost = [e.message for e in first.seen if isinstance(e, Info)]
    assert any(isinstance(x, m.ShotLost) and x.why == "clock" and x.cells == () for x in lost)
    assert any(isinstance(x, m.ShotLost) and x.why == "repeat" and x.cells == ("B1",) for x in lost)
    assert verify_record(signed).ok
    assert _roles(signed) == ["referee", "seat0", "seat1"]


def _change_the_repeat(transcript: list[dict[str, Any]]) -> None:
    # The wasted repeat named another cell already fired at: the game replays the same.
    repeat = [e for e in transcript if e["in"] == "fire" and e["cells"] == ["B1"]][-1]
    repeat["cells"] = ["B2"]


def _insert_an_expire(transcript: list[dict[str, Any]]) -> None:
    # A shot clock that ran out just before the resignation: the same resignation still ends it.
    transcript.insert(len(transcript) - 1, {"in": "expire", "clock": "shot"})


@pytest.mark.parametrize("change", [_change_the_repeat, _insert_an_expire])
async def test_a_record_the_server_altered_is_not_cosigned(
    server: tuple[str, int],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    change: Tamper,
) -> None:
    _tamper(monkeypatch, change)
    first, other, signed = await _play(server, "custody")
    # The altered record is a valid one: only what the players were shown gives it away.
    assert verify_record(signed).ok
    for s in (first, other):
        assert s.h.disputed is not None
        assert any(isinstance(x, LieDetected) and x.seat is None for x in s.h.lies)
    assert _roles(signed) == ["referee"]


async def test_a_game_lost_to_the_setup_clock_is_cosigned_and_its_commitment_checked(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the ``committed`` root and game_over tell of this game: the record's commit entry must
    # be of that root, and its expire is the one entry no message shows.
    host, port = server
    rules = {**RULES, "clocks": {**RULES["clocks"], "setup": 60}}

    async def play() -> tuple[MatchHandle, MatchHandle, dict[str, Any]]:
        async with connect(host, port, name="a") as a, connect(host, port, name="b") as b:
            ha, hb = await quick_pair(a, b, rules, "blind")
            await ha.place()  # b never places
            for s in (Seat(ha), Seat(hb)):
                ended = await s.until(GameEnded)
                assert isinstance(ended, GameEnded) and ended.outcome["reason"] == "setup_timeout"
                await s.until(MatchEnded)
            return ha, hb, await a.get_record(ha.id)

    ha, hb, signed = await play()
    kinds = [e["in"] for e in signed["record"]["games"][0]["transcript"]]
    assert kinds[-2:] == ["commit", "expire"]
    assert ha.disputed is None and hb.disputed is None
    assert _roles(signed) == ["referee", "seat0", "seat1"]

    def another_commitment(transcript: list[dict[str, Any]]) -> None:
        # The placer's commitment with one cell leaf changed: an entry of the right form, of
        # another root than the one announced (and that the placer signed).
        commit = next(e for e in transcript if e["in"] == "commit")
        commit["commitment"]["cells"][0] = bytes(32)

    _tamper(monkeypatch, another_commitment)
    ha, hb, signed = await play()
    assert ha.disputed is not None and hb.disputed is not None
    assert _roles(signed) == ["referee"]


def test_shot_verdict_and_shot_lost_carry_what_their_transcript_entries_hold() -> None:
    # Teams of two (the caller rotates) and wasted repeats, refereed in custody: every `shot` and
    # `verdict` names the member of its fire entry, every repeat's `shot_lost` its cells.
    rules = rules_from_dict({"preset": "classic", "team_size": 2, "repeat": "wasted"})
    mid = bytes(range(16))
    ref = Referee(
        match_id=mid,
        rules=rules,
        mode="custody",
        players=(player_id("a"), player_id("b")),
        lot=bytes(32),
    )
    out = [s.msg for s in ref.start(0.0)]
    g = ref.game
    assert g is not None
    rng = random.Random(5)
    for seat in (0, 1):
        fleet = tuple(random_fleet(rules, rng).to_list())
        out += [
            s.msg
            for s in ref.receive(
                seat, place_msg(mid, 1, fleet, bytes(32), seat, rules, "ab"[seat]), 0.0
            )
        ]
    for seq in range(1, 13):
        s = g.turn
        assert s is not None
        # Each seat calls A1 twice (calls 4, 5 and 10, 11): the second time is a wasted turn.
        cell = Cell(0, 0) if seq % 6 in (4, 5) else Cell(1 + seq // 2, seq % 2)
        fire = m.Fire(mid, 1, (cell.label(),), g.caller(s), seq)
        out += [x.msg for x in ref.receive(s, fire, 0.0)]
    fires = [e for e in g.transcript if e["in"] == "fire"]
    told = [x for x in out if isinstance(x, (m.ShotCalled, m.ShotLost))]
    assert len(fires) == len(told) == 12
    for e, x in zip(fires, told, strict=True):
        if isinstance(x, m.ShotCalled):
            assert (x.seat, x.member, list(x.cells)) == (e["seat"], e["member"], e["cells"])
        else:
            assert (x.seat, x.why, list(x.cells)) == (e["seat"], "repeat", e["cells"])
    verdicts = [x for x in out if isinstance(x, m.VerdictMsg)]
    shots = [x for x in out if isinstance(x, m.ShotCalled)]
    assert [(v.n, v.member) for v in verdicts] == [(x.n, x.member) for x in shots]
    assert {x.member for x in shots} == {0, 1} and any(isinstance(x, m.ShotLost) for x in told)


def _map16(packed: bytes) -> bytes:
    """A record's canonical bytes (a fixmap of its 7 or 8 keys) with a 16-bit map header."""
    assert 0x80 <= packed[0] <= 0x8F
    return bytes([0xDE, 0, packed[0] & 0x0F]) + packed[1:]


@pytest.mark.parametrize("head", ["of the bytes sent", "of the record"])
async def test_a_record_that_is_not_canonically_encoded_is_not_cosigned(
    server: tuple[str, int],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    head: str,
) -> None:
    # The server sends (and stores) the right record in another encoding, with match_over.head
    # the head of those bytes, or the true head: either way no player co-signs (spec 11.3, 5.5).
    honest_pack, honest_head = records.pack_built, records.head_of_bytes
    monkeypatch.setattr(records, "pack_built", lambda record: _map16(honest_pack(record)))
    if head == "of the record":
        monkeypatch.setattr(
            records, "head_of_bytes", lambda data: honest_head(canonical_pack(load_record(data)))
        )

    async def fetch(client: Client, h: MatchHandle) -> dict[str, Any]:
        # The client's get_record refuses bytes that are not canonical (spec 6.2); what they
        # decode to is read here from the raw answer, to see who signed.
        with pytest.raises(RequestFailed) as refused:
            await client.get_record(h.id)
        assert refused.value.code == ErrorCode.RECORD_INVALID
        assert "not canonically encoded" in refused.value.msg
        data = await client._request(lambda i: m.GetRecord(i, h.id))
        return load_record(data["record"])

    first, other, signed = await _play(server, "custody", fetch)
    # What the bytes decode to is the honest record; signed over the head of the bytes sent, it
    # carries a signature no verifier can check, as a co-signature of that head would be.
    report = verify_record(signed)
    assert report.ok if head == "of the record" else report.reason.startswith("bad_signature")
    for s in (first, other):
        assert s.h.disputed is not None and "not canonically encoded" in s.h.disputed
    assert _roles(signed) == ["referee"]


async def test_a_version_1_record_is_not_cosigned(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server sends the true record as version 1 (the outcomes' prose in the head, no seat
    # signatures): it verifies only for a verifier asked to accept version 1, which a player
    # about to co-sign is not (spec 11.3, old_version).
    honest = records.build_record

    def build(match: Match, *args: Any, **kw: Any) -> dict[str, Any]:
        record = honest(match, *args, **kw)
        record["v"] = 1
        for g, gd in zip(match.games, record["games"], strict=True):
            assert g.outcome is not None
            gd["outcome"] = g.outcome.to_dict()
            for entry in gd["transcript"]:
                entry.pop("sig", None)
        return canonical(record)

    monkeypatch.setattr(records, "build_record", build)
    first, other, signed = await _play(server, "custody")
    assert verify_record(signed, accept_v1=True).ok
    for s in (first, other):
        assert s.h.disputed is not None and "old_version" in s.h.disputed
    assert _roles(signed) == ["referee"]
