"""What the tests share: a referee server on port 0, test clients and bots that play whole
matches through it, peer matches, a recording peer for the lobby, and sample wire values.

Plain functions and classes; the fixtures built on them are in ``conftest.py``. Test modules
import from here, never from one another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import random
import signal
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.client.peer import PeerResult, Player, host, join
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.session import Connection, Role, auth_payload
from seabattle.protocol.verdict import Defender, Shot

# -- the referee server over TCP ------------------------------------------------------------------

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
    """Open a TCP connection and run the handshake."""
    c = await raw(addr, nursery, key)
    await handshake(c, name, resume)
    return c


async def raw(
    addr: tuple[str, int], nursery: trio.Nursery, key: Ed25519PrivateKey | None = None
) -> TC:
    """A TCP connection that has not shaken hands; the test writes frames itself."""
    return TC(await trio.open_tcp_stream(*addr), key or Ed25519PrivateKey.generate(), nursery)


async def handshake(c: TC, name: str = "p", resume: bytes | None = None) -> m.Authed:
    """``hello``, then ``auth`` signed with ``c``'s key; ``c`` learns its player id and token."""
    await c.send(m.Hello((2,), "test", ()))
    w = await c.expect(m.Welcome)
    sig = c.key.sign(auth_payload(w.challenge, w.server, c.pub))
    await c.send(m.Auth(c.pub, sig, name, resume))
    a: m.Authed = await c.expect(m.Authed)
    c.player, c.token = a.player, a.resume
    return a


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
            sig = self.committed.seat_sig(c.key)
            if self.mode == "blind":
                commitment = self.committed.commitment.to_dict()
                await c.send(m.Commit(self.match, msg.game, commitment, sig))
            else:
                await c.send(m.Place(self.match, msg.game, tuple(fleet.to_list()), secret, sig))
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
                m.ShotCalled(self.match, self.game, p["n"], p["seat"], 0, p["cells"], False)
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
    """A referee server in ``nursery`` on 127.0.0.1, port 0, its store and key in ``tmp_path``;
    ``kw`` goes to :func:`seabattle.server.app.serve`. Its address, and the event that shuts it
    down gracefully."""
    from seabattle.server.app import serve  # here: the client's tests run without the server

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


def from_json(value: Any) -> Any:
    """Undo the vectors' JSON encoding (``spec/vectors``): ``{"$bin": hex}`` stands for bytes,
    ``{"$int": "123"}`` for an integer beyond what a JSON reader keeps exact."""
    if isinstance(value, dict):
        if list(value) == ["$bin"]:
            return bytes.fromhex(value["$bin"])
        if list(value) == ["$int"]:
            return int(value["$int"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


#: Short cluster timings, so that failover happens in a few (virtual) seconds.
CLUSTER_TIMING = {"lease": 4.0, "poll": 0.02, "sweep": 0.5}


async def cluster_node(
    nursery: trio.Nursery, db: str, tmp_path: Path, name: str
) -> tuple[tuple[str, int], trio.Event]:
    """Node ``name`` of the cluster on ``db`` in ``nursery`` (port 0, :data:`CLUSTER_TIMING`);
    every node signs with the one key in ``tmp_path``. Its address, and its shutdown event."""
    from seabattle.server.app import serve
    from seabattle.server.cluster import ClusterConfig

    stop = trio.Event()
    addr = await nursery.start(
        partial(
            serve,
            "127.0.0.1",
            0,
            db_path=db,
            key_path=tmp_path / "cluster.key",
            node=name,
            cluster=True,
            cluster_config=ClusterConfig(name, **CLUSTER_TIMING),
            shutdown=stop,
        )
    )
    return addr, stop


async def play_some(a: Bot, b: Bot, verdicts: int) -> None:
    """Both bots play on until ``a`` has been told ``verdicts`` verdicts."""
    seen = 0

    def enough(msg: Any) -> bool:
        nonlocal seen
        seen += isinstance(msg, m.VerdictMsg)
        return seen >= verdicts

    async with trio.open_nursery() as n:
        n.start_soon(b.play)
        await a.play(enough)
        n.cancel_scope.cancel()


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
    """Both bots play until the match is over."""
    async with trio.open_nursery() as n:
        n.start_soon(a.play)
        n.start_soon(b.play)


async def quick_bot(
    addr: tuple[str, int], rules: dict[str, Any], mode: str, rng: random.Random
) -> BotResult:
    """A ``random`` bot, through the client library: a quick match on the server at ``addr``
    under ``rules``, played to the end."""
    async with api.connect(*addr, name="bot") as c:
        match = await c.quick(rules, mode)
        return await play_match(match, make_strategy("random"), rng)


# -- peer play ------------------------------------------------------------------------------------


async def peer_match(
    rules: RuleSet, hosting: Player, joining: Player, **join_kw: Any
) -> tuple[PeerResult, PeerResult]:
    """A peer match over TCP: ``hosting`` hosts it on port 0 (seat 0), ``joining`` joins it (seat
    1, ``join_kw`` going to :func:`~seabattle.client.peer.join`). Their results, the host's
    first."""
    box: list[PeerResult] = []
    async with trio.open_nursery() as nursery:

        async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            box.append(await host(hosting, rules=rules, port=0, task_status=task_status))

        addr = await nursery.start(serve)
        joined = await join(joining, addr[0], addr[1], **join_kw)
    return box[0], joined


# -- the lobby without connections ----------------------------------------------------------------


def player_key(tag: str) -> Ed25519PrivateKey:
    """A fixed key for the player a test calls ``tag`` (seats are bound to keys, spec 10.10)."""
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(tag.encode()).digest())


def player_id(tag: str) -> str:
    """The player id (the public key in hex) of :func:`player_key`."""
    return player_key(tag).public_key().public_bytes_raw().hex()


def place_msg(
    match: bytes, game: int, fleet: Any, secret: bytes, seat: int, rules: Any, tag: str
) -> m.Place:
    """A custody ``place`` by the player ``tag`` in ``seat``, with its seat signature."""
    c = Committed(rules, Fleet.from_list(list(fleet)), secret, match, game, seat)
    return m.Place(match, game, tuple(fleet), secret, c.seat_sig(player_key(tag)))


class FakePeer:
    """A connection as the lobby and its referees see it (a ``Peer``), recording what it is sent;
    ``connected=False`` makes one that is already gone."""

    def __init__(self, player: str, connected: bool = True) -> None:
        self.player, self.name, self.connected = player, player[:4], connected
        self.follows = False
        self.teams = True
        self.lean = False
        self.got: list[m.Message] = []
        self.closed: str | None = None

    def send(self, msg: m.Message) -> None:
        self.got.append(msg)

    def close(self, reason: str) -> None:
        self.connected, self.closed = False, reason

    def of(self, kind: type[m.Message], match: bytes | None = None) -> list[Any]:
        """What it was sent of type ``kind`` (about ``match``, if given), in order."""
        return [
            x for x in self.got if isinstance(x, kind) and match in (None, getattr(x, "match", 0))
        ]


# -- sample wire values ---------------------------------------------------------------------------


def sample(tp: Any) -> Any:
    """A valid wire value for the annotation ``tp`` (lists where the wire has arrays)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in typing.get_args(tp) if a is not type(None)))
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return [sample(item), sample(item)] if item is not Any else [1, "x"]
    if tp is Any:
        return {"k": [1, 2]}
    return {bool: True, int: 7, str: "E5", bytes: bytes(16)}.get(tp, {"a": 1})


def fields(cls: type[m.Message]) -> dict[str, Any]:
    """A message type's fields and their annotations, in order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def wire_of(cls: type[m.Message]) -> dict[str, Any]:
    """A valid wire map of a ``cls`` message, every field a :func:`sample` (its integers moved
    into the field's range)."""

    def clamp(v: Any, lo: int, hi: int) -> Any:
        if isinstance(v, list):
            return [clamp(x, lo, hi) for x in v]
        return min(max(v, lo), hi) if type(v) is int else v

    return {
        "t": cls.TAG,
        **{
            name: clamp(sample(tp), *m.int_range(cls.TAG, name)) for name, tp in fields(cls).items()
        },
    }


async def quick_pair(
    a: api.Client, b: api.Client, rules: dict[str, Any], mode: str
) -> list[api.MatchHandle]:
    """Both clients ask for a quick match with ``rules`` in ``mode`` at once: their handles."""
    handles: list[Any] = [None, None]

    async def q(i: int, c: api.Client) -> None:
        handles[i] = await c.quick(rules, mode)

    async with trio.open_nursery() as n:
        n.start_soon(q, 0, a)
        n.start_soon(q, 1, b)
    return handles


def fire_honestly(g: Game, defenders: list[Defender], rng: random.Random, stop_at: int = 0) -> bool:
    """Both seats of ``g`` fire at random open cells (a radar scan now and then, where the rules
    have one) and answer honestly, until the firing ends; ``False`` if it stopped at ``stop_at``
    shots instead (0: never)."""
    rules = g.rules
    while g.phase is Phase.FIRING:
        if stop_at and len(g.shots) == stop_at:
            return False
        s = g.turn
        assert s is not None
        b, cols = g.boards[1 - s], rules.cols
        if rules.radar and not b.radar_used and rng.random() < 0.1:
            shot = g.radar(s, Cell(rng.randrange(rules.rows - 1), 0), g.caller(s))[0].shot
        else:
            open_ = [i for i in range(rules.cells) if i not in b.fired and i not in b.crossed]
            cells = [Cell(i // cols, i % cols) for i in rng.sample(open_, g.shot_count(s))]
            shot = g.fire(s, cells, g.caller(s))[0].shot
        assert shot is not None
        g.answer(1 - s, defenders[1 - s].answer(shot))
    return True


@contextlib.contextmanager
def server_process(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -c CODE ARGS...``: a server started as its users start it, in a process of its
    own, its output on text pipes, unbuffered; killed on the way out if it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """SIGINT to ``proc`` (a graceful stop); its exit code (waited for up to 20 s) and the rest
    of its stdout and stderr."""
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=20)
    out, err = proc.communicate(timeout=5)
    return rc, out, err
