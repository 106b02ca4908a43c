"""The server end to end over real TCP: full matches in both trust modes, every preset, cheats,
clocks, absence and resumption, and the signed record left behind.

Players are driven by :class:`Bot`, an honest client built from the core (``Committed``,
``Defender``); each test then bends one thing (a lie, a missing reveal, a dropped connection).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import PRESETS, RuleSet, rules_from_dict
from seabattle.protocol.session import Connection, Role, auth_payload
from seabattle.protocol.verdict import Defender, Shot
from seabattle.server.app import serve

SMALL = {"preset": "classic", "rows": 5, "cols": 5, "fleet": [["Boat", 2], ["Raft", 1]]}


class Closed(Exception):
    """The server closed the connection."""


class TC:
    """A test client: one TCP connection speaking through ``Connection(Role.CLIENT)``.

    A background reader answers pings (so idle timeouts never fire in virtual time) and queues
    every other message for :meth:`recv`.
    """

    def __init__(self, stream: trio.abc.Stream, key: Ed25519PrivateKey, nursery: trio.Nursery):
        self.stream = stream
        self.key = key
        self.pub = key.public_key().public_bytes_raw()
        self.conn = Connection(Role.CLIENT)
        self.lock = trio.Lock()
        self.inbox, self._out = trio.open_memory_channel[Any](10_000)
        self.player = ""
        self.token = b""
        self.scope = trio.CancelScope()
        self.answer_pings = True
        nursery.start_soon(self._reader)

    async def _reader(self) -> None:
        with self.scope:
            try:
                while True:
                    data = await self.stream.receive_some(65536)
                    if not data:
                        break
                    for item in self.conn.receive_data(data):
                        if isinstance(item, m.Ping) and self.answer_pings:
                            await self.send(m.Pong(item.n))
                        else:
                            await self.inbox.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        self.inbox.close()

    async def send(self, msg: m.Message) -> None:
        async with self.lock:
            await self.stream.send_all(self.conn.send(msg))

    async def send_raw(self, data: bytes) -> None:
        async with self.lock:
            await self.stream.send_all(data)

    async def recv(self) -> Any:
        try:
            return await self._out.receive()
        except trio.EndOfChannel:
            raise Closed from None

    async def expect(self, cls: type[Any], skip: tuple[type[Any], ...] = (m.Clock,)) -> Any:
        """The next message of type ``cls``, skipping only ``skip`` types on the way."""
        while True:
            msg = await self.recv()
            if isinstance(msg, cls):
                return msg
            if not isinstance(msg, skip):
                raise AssertionError(f"expected {cls}, got {msg!r}")

    async def request(self, msg: m.Message) -> Any:
        """Send a lobby request; return its ``ok`` or ``error``, skipping any game traffic."""
        await self.send(msg)
        while True:
            r = await self.recv()
            if isinstance(r, m.Ok | m.Error) and r.ref == msg.id:  # type: ignore[attr-defined]
                return r

    async def close(self) -> None:
        self.scope.cancel()
        await self.stream.aclose()


async def connect(
    addr: tuple[str, int],
    nursery: trio.Nursery,
    key: Ed25519PrivateKey | None = None,
    name: str = "p",
    resume: bytes | None = None,
) -> TC:
    """Open a connection and run the handshake."""
    stream = await trio.open_tcp_stream(*addr)
    c = TC(stream, key or Ed25519PrivateKey.generate(), nursery)
    await c.send(m.Hello((1,), "test", ()))
    w = await c.expect(m.Welcome)
    sig = c.key.sign(auth_payload(w.challenge, w.server, c.pub))
    await c.send(m.Auth(c.pub, sig, name, resume))
    a = await c.expect(m.Authed)
    c.player, c.token = a.player, a.resume
    return c


class Bot:
    """An honest player (optionally bent by ``lie``/``reveal``/``place``) that plays whole matches.

    It fires at cells in order, skipping any the server refuses as already fired or crossed out.
    """

    def __init__(self, c: TC, mode: str, seed: int = 0) -> None:
        self.c = c
        self.mode = mode
        self.rng = random.Random(seed)
        self.rules: RuleSet | None = None
        self.match = b""
        self.seat = -1
        self.game = 0
        self.committed: Committed | None = None
        self.defender: Defender | None = None
        self.targets: list[str] = []
        self.seq = 0
        self.pending: dict[int, str] = {}
        self.outcomes: list[dict[str, Any]] = []
        self.errors: list[m.Error] = []
        self.result: m.MatchOver | None = None
        self.lie = False  # answer the first hit with a forged "miss"
        self.reveal = True
        self.place = True
        self.auto_fire = True

    async def fire(self) -> None:
        if not self.auto_fire:
            return
        cell = self.targets.pop(0)
        self.seq += 1
        self.pending[self.seq] = cell
        await self.c.send(m.Fire(self.match, self.game, (cell,), 0, self.seq))

    async def on(self, msg: Any) -> None:
        c = self.c
        if isinstance(msg, m.Start):
            self.rules = rules_from_dict(msg.rules)
            self.match, self.seat = msg.match, msg.seat
        elif isinstance(msg, m.GameStart):
            assert self.rules is not None
            r = self.rules
            self.game = msg.game
            self.targets = [Cell(i // r.cols, i % r.cols).label() for i in range(r.cells)]
            fleet = random_fleet(r, self.rng)
            secret = self.rng.randbytes(32)
            self.committed = Committed(r, fleet, secret, self.match, msg.game, self.seat)
            self.defender = Defender(self.committed)
            if not self.place:
                return
            if self.mode == "blind":
                await c.send(m.Commit(self.match, msg.game, self.committed.commitment.to_dict()))
            else:
                await c.send(m.Place(self.match, msg.game, tuple(fleet.to_list()), secret))
        elif isinstance(msg, m.Firing):
            if msg.first == self.seat:
                await self.fire()
        elif isinstance(msg, m.VerdictMsg | m.ShotLost):
            if msg.next == self.seat:
                await self.fire()
        elif isinstance(msg, m.ShotCalled) and self.mode == "blind" and msg.seat != self.seat:
            await self.answer(msg)
        elif isinstance(msg, m.RevealNow) and self.mode == "blind" and self.reveal:
            assert self.committed is not None
            await c.send(m.RevealMsg(self.match, self.game, self.committed.reveal().to_dict()))
        elif isinstance(msg, m.Snapshot):
            await self.resume(msg.view)
        elif isinstance(msg, m.GameOver):
            self.outcomes.append(msg.outcome)
        elif isinstance(msg, m.MatchOver):
            self.result = msg
        elif isinstance(msg, m.Error):
            cell = self.pending.get(msg.ref) if msg.ref is not None else None
            if cell is not None and msg.code in (ErrorCode.ALREADY_FIRED, ErrorCode.CROSSED_OUT):
                await self.fire()
            else:
                self.errors.append(msg)

    async def resume(self, view: dict[str, Any]) -> None:
        """Carry on from a snapshot: answer the shot we owe, or fire if it is our turn."""
        p = view["pending"]
        if view["phase"] == "answer" and p["seat"] != self.seat and self.mode == "blind":
            await self.answer(
                m.ShotCalled(self.match, self.game, p["n"], p["seat"], p["cells"], False)
            )
        elif view["phase"] == "firing" and view["turn"] == self.seat:
            await self.fire()

    async def answer(self, msg: m.ShotCalled) -> None:
        assert self.rules is not None and self.defender is not None
        cells = tuple(parse_cell(x, self.rules.rows, self.rules.cols) for x in msg.cells)
        v = self.defender.answer(Shot(msg.n, msg.seat, cells, msg.radar))
        d = v.to_dict()
        if self.lie and any(r["r"] != "miss" for r in d["results"]):
            for r in d["results"]:
                r["r"], r["open"]["occ"], r["sunk"] = "miss", False, None
        await self.c.send(m.Answer(self.match, self.game, d))

    async def play(self, until: Callable[[Any], bool] = lambda msg: False) -> Any:
        """Handle messages until the match is over (or ``until`` says stop); return the last."""
        while True:
            msg = await self.c.recv()
            await self.on(msg)
            if isinstance(msg, m.MatchOver) or until(msg):
                return msg


async def start_server(
    nursery: trio.Nursery, tmp_path: Path, **kw: Any
) -> tuple[tuple[str, int], trio.Event]:
    shutdown = trio.Event()
    addr = await nursery.start(
        partial(
            serve,
            "127.0.0.1",
            0,
            db_path=tmp_path / "db.sqlite",
            key_path=tmp_path / "server.key",
            shutdown=shutdown,
            **kw,
        )
    )
    return addr, shutdown


async def pair(
    addr: tuple[str, int], nursery: trio.Nursery, rules: dict[str, Any], mode: str
) -> tuple[TC, TC, bytes]:
    """Two connected players in a fresh match (create + join by invitation)."""
    a = await connect(addr, nursery, name="alice")
    b = await connect(addr, nursery, name="bob")
    ok = await a.request(m.Create(1, rules, mode, True))
    assert isinstance(ok, m.Ok), ok
    ok2 = await b.request(m.Join(1, None, ok.data["invite"]))
    assert isinstance(ok2, m.Ok), ok2
    assert ok2.data["match"] == ok.data["match"]
    return a, b, ok.data["match"]


async def play_both(a: Bot, b: Bot) -> None:
    async with trio.open_nursery() as n:
        n.start_soon(a.play)
        n.start_soon(b.play)


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> tuple[str, int]:
    addr, _ = await start_server(nursery, tmp_path)
    return addr


# -- whole matches -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_full_classic_match_and_its_record(
    server: tuple[str, int], nursery: trio.Nursery, mode: str
) -> None:
    a, b, mid = await pair(server, nursery, {"preset": "classic"}, mode)
    ba, bb = Bot(a, mode, 1), Bot(b, mode, 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == []
    assert ba.result is not None and bb.result is not None
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "fleet_sunk"
    assert ba.result.result["over"] and ba.result.result["winner"] == outcome["winner"]
    assert set(ba.result.ratings or {}) == {a.player, b.player}
    assert ba.result.head == bb.result.head and len(ba.result.head) == 32

    # Both co-sign; the stored record then verifies and carries three signatures.
    for c in (a, b):
        await c.send(m.CoSign(mid, ba.result.head, c.key.sign(ba.result.head)))
    ok = await a.request(m.GetRecord(7, mid))
    assert isinstance(ok, m.Ok) and ok.ref == 7, ok
    signed = load_record(ok.data["record"])
    report = verify_record(signed)
    assert report.ok, report.reason
    assert sorted(s["role"] for s in signed["sigs"]) == ["referee", "seat0", "seat1"]

    ladder = await b.request(m.Ladder(8))
    assert {r["player"] for r in ladder.data["rows"]} == {a.player, b.player}


@pytest.mark.parametrize("name", sorted(PRESETS))
async def test_every_preset_plays_to_the_end_in_custody(
    server: tuple[str, int], nursery: trio.Nursery, name: str
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": name}, "custody")
    ba, bb = Bot(a, "custody", 3), Bot(b, "custody", 4)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == []
    assert ba.result is not None and ba.result.result["over"]
    assert all(o["reason"] == "fleet_sunk" for o in ba.outcomes)


async def test_quick_match_pairs_two_players(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a = await connect(server, nursery)
    b = await connect(server, nursery)
    await a.send(m.Quick(5, SMALL, "custody"))
    await b.send(m.Quick(6, SMALL, "custody"))
    oka, okb = await a.expect(m.Ok), await b.expect(m.Ok)
    assert (oka.ref, okb.ref) == (5, 6) and oka.data["match"] == okb.data["match"]
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None


# -- cheats ---------------------------------------------------------------------------------------


async def test_a_forged_opening_loses_false_proof(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 5), Bot(b, "blind", 6)
    bb.lie = True
    with trio.fail_after(10):
        await play_both(ba, bb)
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "false_proof"
    assert outcome["winner"] == ba.seat


async def test_illegal_fleet_is_refused_then_placed_again(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, mid = await pair(server, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody", 7), Bot(b, "custody", 8)
    ba.place = False
    await ba.play(until=lambda msg: isinstance(msg, m.GameStart))
    overlapping = ([0, 0, False], [0, 1, False])  # the raft lies on the boat
    await a.send(m.Place(mid, 1, overlapping, bytes(32)))
    err = await a.expect(m.Error)
    assert err.code == ErrorCode.ILLEGAL_FLEET and err.ref is None
    assert ba.committed is not None
    await a.send(m.Place(mid, 1, tuple(ba.committed.fleet.to_list()), ba.committed.secret))
    committed = await a.expect(m.Committed)
    assert committed.seat == ba.seat
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None and ba.errors == []


# -- clocks ---------------------------------------------------------------------------------------


async def test_missing_reveal_loses_no_reveal(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 9), Bot(b, "blind", 10)
    bb.reveal = False
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "no_reveal" and outcome["winner"] == ba.seat


@pytest.mark.parametrize("placers", [1, 0])
async def test_setup_clock_004(
    server: tuple[str, int],
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    placers: int,
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": "sea-battle"}, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    bb.place = False
    ba.place = placers == 1
    start = trio.current_time()
    await ba.play(until=lambda msg: isinstance(msg, m.GameOver))
    # Virtual time also jumps while the store works in a thread, hence the slack.
    assert 120 <= trio.current_time() - start < 125
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    if placers:
        assert outcome == {
            "winner": ba.seat,
            "reason": "setup_timeout",
            "detail": outcome["detail"],
        }
    else:
        assert outcome["winner"] is None and outcome["reason"] == "nobody_placed"
        assert ba.result is not None and ba.result.result["winner"] is None


# -- absence and resumption -----------------------------------------------------------------------


async def test_absence_beyond_grace_abandons(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    await bb.play(until=lambda msg: isinstance(msg, m.GameStart))
    await b.close()
    status = await ba.play(until=lambda msg: isinstance(msg, m.OpponentStatus))
    assert (status.present, status.grace) == (False, 60)
    start = trio.current_time()
    await ba.play(until=lambda msg: isinstance(msg, m.GameOver))
    assert 60 <= trio.current_time() - start < 62
    await ba.play()
    (outcome,) = ba.outcomes
    assert outcome["reason"] == "abandoned" and outcome["winner"] == ba.seat


async def test_resume_with_token_gets_a_snapshot_and_finishes(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b, mid = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 11), Bot(b, "blind", 12)

    async def a_until_firing() -> None:
        await ba.play(until=lambda msg: isinstance(msg, m.Firing))

    async with trio.open_nursery() as n:
        n.start_soon(a_until_firing)
        await bb.play(until=lambda msg: isinstance(msg, m.Firing))
    # b drops before anyone fires, then comes back with its key and token.
    await b.close()
    b2 = await connect(server, nursery, key=b.key, name="bob", resume=b.token)
    start = await b2.expect(m.Start)
    snap = await b2.expect(m.Snapshot)
    assert (start.match, start.seat, snap.seat) == (mid, bb.seat, bb.seat)
    assert snap.view["phase"] in ("firing", "answer") and len(snap.view["commitments"]) == 2
    bb.c = b2
    with trio.fail_after(10):
        await bb.resume(snap.view)
        await play_both(ba, bb)
    assert ba.result is not None and bb.result is not None
    assert ba.outcomes[0]["reason"] == "fleet_sunk"


async def test_best_of_three_plays_every_game_and_records_them(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    rules = {**SMALL, "match": {"kind": "best-of", "games": 3}, "first_player": "loser"}
    a, b, mid = await pair(server, nursery, rules, "blind")
    ba, bb = Bot(a, "blind", 13), Bot(b, "blind", 14)
    with trio.fail_after(10):
        await play_both(ba, bb)
    assert ba.result is not None and 2 <= len(ba.outcomes) <= 3
    assert max(ba.result.result["wins"]) == 2
    ok = await a.request(m.GetRecord(1, mid))
    report = verify_record(load_record(ok.data["record"]))
    assert report.ok, report.reason
    assert len(report.games) == len(ba.outcomes)


async def test_shot_clock_passes_the_turn_then_forfeits(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, {"preset": "sea-battle"}, "custody")
    ba, bb = Bot(a, "custody"), Bot(b, "custody")
    ba.auto_fire = bb.auto_fire = False
    async with trio.open_nursery() as n:
        n.start_soon(bb.play, lambda msg: isinstance(msg, m.Firing))
        firing = await ba.play(lambda msg: isinstance(msg, m.Firing))
    start = trio.current_time()
    lost = []
    while True:
        msg = await a.recv()
        if isinstance(msg, m.ShotLost):
            lost.append((msg.seat, msg.why, msg.next))
        if isinstance(msg, m.GameOver):
            break
    # 30 s a turn; the first player's third expiry in a row forfeits (rules.clocks.max_expiries).
    assert 150 <= trio.current_time() - start < 151
    f = firing.first
    assert lost == [(f, "clock", 1 - f), (1 - f, "clock", f)] * 2
    assert msg.outcome["reason"] == "shot_timeouts" and msg.outcome["winner"] == 1 - f


async def test_unanswered_shot_loses_no_answer(
    server: tuple[str, int], nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, b, _ = await pair(server, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 15), Bot(b, "blind", 16)

    async def no_answer(msg: m.ShotCalled) -> None:
        return None

    ba.answer = bb.answer = no_answer  # type: ignore[method-assign]
    await play_both(ba, bb)
    (outcome,) = ba.outcomes
    # The first shot is never answered: its caller wins.
    assert outcome["reason"] == "no_answer" and outcome["detail"].endswith("shot 1")
