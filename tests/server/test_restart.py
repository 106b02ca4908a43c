"""Matches survive the server: a restart on the same store takes every running match up from its
journal, and the players who come back finish it, with a record that verifies.

What an operator relies on: a deploy (a graceful shutdown) or a crash loses no acknowledged move;
a journal that cannot be replayed ends its match as aborted, with the reason, and the others go on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, TC, Bot, connect, pair, play_both, play_some, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import rules_from_dict
from seabattle.server.journal_file import SUFFIX, frame
from seabattle.server.store import Store


def _verdicts(seen: list[Any]) -> int:
    return sum(isinstance(x, m.VerdictMsg) for x in seen)


class Recorder(Bot):
    """A bot that remembers every verdict it was told: what it was acknowledged."""

    def __init__(self, c: TC, mode: str, seed: int = 0) -> None:
        super().__init__(c, mode, seed)
        self.told: list[m.VerdictMsg] = []

    async def on(self, msg: Any) -> None:
        if isinstance(msg, m.VerdictMsg):
            self.told.append(msg)
        await super().on(msg)


async def _record(addr: tuple[str, int], nursery: trio.Nursery, mid: bytes) -> dict[str, Any]:
    c = await connect(addr, nursery)
    ok = await c.request(m.GetRecord(1, mid))
    assert isinstance(ok, m.Ok), ok
    return load_record(ok.data["record"])


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_a_match_goes_on_after_a_graceful_restart(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, mode: str
) -> None:
    async with trio.open_nursery() as first:
        addr, shutdown = await start_server(first, tmp_path)
        a, b, mid = await pair(addr, nursery, SMALL, mode)
        ba, bb = Recorder(a, mode, 1), Recorder(b, mode, 2)
        await play_some(ba, bb, 4)
        shutdown.set()  # a deploy: SIGTERM
        assert (await a.expect(m.Bye, skip=(m.Clock, m.ShotCalled, m.VerdictMsg))).reason == (
            "shutdown"
        )
    async with Store.open(tmp_path / "db.sqlite") as store:
        (row,) = await store.running_matches()  # not aborted: it is to go on
        assert row.id == mid.hex() and await store.journal(row.id)
    told = [v for v in ba.told]
    addr2, _ = await start_server(nursery, tmp_path)
    # The same players, on new connections: each gets its seat back, with start and a snapshot;
    # a resume token from before the restart is still good (the store keeps its hash).
    ba.c = await connect(addr2, nursery, key=a.key, name="alice", resume=a.token)
    assert ba.c.token == a.token
    bb.c = await connect(addr2, nursery, key=b.key, name="bob")
    await play_both(ba, bb)
    assert ba.result is not None and bb.result is not None
    signed = await _record(addr2, nursery, mid)
    report = verify_record(signed)
    assert report.ok, report.problems
    # Every verdict a player was told before the restart is in the record, in its place.
    shots = [e for e in signed["record"]["games"][0]["transcript"] if e["in"] == "answer"]
    assert [e["verdict"] for e in shots[: len(told)]] == [v.verdict for v in told]


def _damage_a_row(db: Path, bad: bytes) -> None:
    # A damaged row, as an operator might find one after a disk fault.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE journal SET entry = x'c1' WHERE match_id = ? AND n = 2", (bad.hex(),))


def _damage_the_file(db: Path, bad: bytes) -> None:
    # Both journals back in the server's log file, where a killed server leaves its latest rows,
    # with one frame of one match damaged by a disk fault.
    with sqlite3.connect(db) as conn:
        query = "SELECT match_id, n, entry FROM journal ORDER BY n, match_id"
        rows = conn.execute(query).fetchall()
        conn.execute("DELETE FROM journal")
    frames = [frame((mid, n, bytes(e))) for mid, n, e in rows]
    at = [(mid, n) for mid, n, _ in rows].index((bad.hex(), 2))
    frames[at] = frames[at][:-1] + bytes([frames[at][-1] ^ 1])
    Path(str(db) + SUFFIX).write_bytes(b"".join(frames))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_damage_a_row, "entry 2: "),  # replayed, and refused by the referee
        (_damage_the_file, "entry 2 of the journal is missing"),  # lost by the file
    ],
)
async def test_a_journal_that_cannot_be_replayed_aborts_its_match_with_the_reason(
    tmp_path: Path,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    damage: Callable[[Path, bytes], None],
    reason: str,
) -> None:
    async with trio.open_nursery() as first:
        addr, shutdown = await start_server(first, tmp_path)
        a, b, bad = await pair(addr, nursery, SMALL, "custody")
        c, d, good = await pair(addr, nursery, SMALL, "custody")
        bots = [Bot(x, "custody", i) for i, x in enumerate((a, b, c, d))]
        await play_some(bots[0], bots[1], 2)
        await play_some(bots[2], bots[3], 2)
        shutdown.set()
        await a.expect(m.Bye, skip=(m.Clock, m.ShotCalled, m.VerdictMsg))
    damage(tmp_path / "db.sqlite", bad)
    addr2, _ = await start_server(nursery, tmp_path)
    async with Store.open(tmp_path / "db.sqlite") as store:
        aborted = await store.get_match(bad.hex())
        assert aborted is not None and aborted.status == "aborted"
        assert aborted.result["aborted"].startswith(reason)
    bots[2].c = await connect(addr2, nursery, key=c.key)
    bots[3].c = await connect(addr2, nursery, key=d.key)
    await play_both(bots[2], bots[3])  # the other match goes on
    assert verify_record(await _record(addr2, nursery, good)).ok


async def test_a_node_takes_up_its_own_matches_only(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Nodes that share one database never referee one match twice: each restart takes up the
    # matches that node refereed.
    async with trio.open_nursery() as first:
        addr, shutdown = await start_server(first, tmp_path, node="a")
        a, b, mid = await pair(addr, nursery, SMALL, "custody")
        await play_some(Bot(a, "custody", 1), Bot(b, "custody", 2), 2)
        shutdown.set()
        await a.expect(m.Bye, skip=(m.Clock, m.ShotCalled, m.VerdictMsg))
    async with trio.open_nursery() as other:
        addr_b, stop_b = await start_server(other, tmp_path, node="b")
        c = await connect(addr_b, nursery, key=a.key)
        ok = await c.request(m.Watch(1, mid))
        assert isinstance(ok, m.Error)  # node b does not run it
        stop_b.set()
    async with Store.open(tmp_path / "db.sqlite") as store:
        assert [r.id for r in await store.running_matches("a")] == [mid.hex()]
        assert await store.running_matches("b") == []
    addr_a, _ = await start_server(nursery, tmp_path, node="a")
    back = await connect(addr_a, nursery, key=a.key)
    assert (await back.expect(m.Start, skip=(m.Clock, m.Snapshot))).match == mid


class _Latecomer(Recorder):
    """A bot that joins a match whose game began before it connected: the snapshot, not a
    ``game`` message, tells it to place."""

    async def resume(self, view: dict[str, Any]) -> None:
        if view["phase"] == "setup" and not view["committed"][self.seat]:
            await self.on(m.GameStart(self.match, view["game"], None))
        else:
            await super().resume(view)


async def test_a_match_stored_as_playing_with_nothing_journaled_starts_afresh(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A node that died between pairing two players (the match stored as playing, its id told
    # to them) and journaling the match's start leaves exactly this; nobody was told more.
    keys = [Ed25519PrivateKey.generate() for _ in range(2)]
    ids = [k.public_key().public_bytes_raw().hex() for k in keys]
    mid = bytes(range(16))
    async with Store.open(tmp_path / "db.sqlite") as store:
        for player, name in zip(ids, ("alice", "bob"), strict=True):
            await store.upsert_player(player, name, 0)
        rules = canonical_pack(rules_from_dict(SMALL).to_dict())
        await store.create_match(
            mid.hex(), rules, "blind", ids[0], ids[1], 0, status="playing", node="main"
        )
    addr, _ = await start_server(nursery, tmp_path)
    a = await connect(addr, nursery, key=keys[0], name="alice")
    b = await connect(addr, nursery, key=keys[1], name="bob")
    ba, bb = _Latecomer(a, "blind", 1), _Latecomer(b, "blind", 2)
    with trio.fail_after(300):
        await play_both(ba, bb)
    assert ba.match == bb.match == mid
    assert ba.result is not None and bb.result is not None
    assert verify_record(await _record(addr, nursery, mid)).ok
