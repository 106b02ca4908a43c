"""What the tests share: a referee server on port 0, test clients and bots that play whole
matches through it, peer matches, a recording peer for the lobby, and sample wire values.

Plain functions and classes; the fixtures built on them are in ``conftest.py``. Test modules
import from here, never from one another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import itertools
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
from seabattle.protocol.fleet import Fleet, Placement, random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.match import Match
from seabattle.protocol.rules import MatchFormat, RuleSet, preset
from seabattle.protocol.seat import Bend, Out, Seat
from seabattle.protocol.seat_events import GameStarted, MatchEvent, Resumed, ShotResult, YourTurn
from seabattle.protocol.session import Connection, Role, auth_payload
from seabattle.protocol.verdict import Defender, Shot, Verdict

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
    """An honest player over a raw test connection that plays whole matches: a thin driver of a
    :class:`~seabattle.protocol.seat.Seat`, which decides everything an honest seat sends
    (commitment or placement, answers, reveal, co-signature, what it owes after a resume).

    The bot plays the player's part only: it places a random fleet when a game starts, and when
    it is its turn fires at cells in order, skipping those known to be closed (and any the
    server refuses as already fired or crossed out). It is bent through the seat's hooks:
    ``lie`` answers a hit with a forged miss, ``reveal=False`` never reveals, ``place=False``
    draws its fleet (:attr:`committed`) but never sends it, ``auto_fire=False`` never fires,
    and :attr:`bend` is a test's own (see :data:`~seabattle.protocol.seat.Bend`). Every message
    the seat sends goes through :meth:`send`.
    """

    def __init__(self, c: TC, mode: str, seed: int = 0) -> None:
        self.c = c
        self.mode = mode
        self.rng = random.Random(seed)
        #: The seat machine, made at ``start``.
        self.machine: Seat | None = None
        self.match = b""
        self.targets: list[int] = []  # cells of the current game in firing order, by index
        self.closed: set[int] = set()  # the opponent's cells known fired or crossed out
        self.seq = 0
        self.pending: dict[int, tuple[int, ...]] = {}  # seq -> the cells it called
        self.outcomes: list[dict[str, Any]] = []
        self.errors: list[m.Error] = []
        self.result: m.MatchOver | None = None
        self.lie = False  # answer a hit with a forged "miss"
        self.reveal = True
        self.place = True
        self.auto_fire = True
        self.bend: Bend | None = None  # a test's own bending, after the flags'
        self._count = 1  # how many cells this turn calls
        self._conn = c  # the connection the seat's epoch counts

    # -- what the seat knows ----------------------------------------------------------------

    @property
    def seat(self) -> int:
        """Our seat (-1 before ``start``)."""
        s = self.machine.seat if self.machine is not None else None
        return -1 if s is None else s

    @property
    def game(self) -> int:
        return self.machine.game_no if self.machine is not None else 0

    @property
    def rules(self) -> RuleSet | None:
        return self.machine.rules if self.machine is not None else None

    @property
    def committed(self) -> Committed | None:
        """The fleet and secret of the current game (drawn even with ``place=False``)."""
        return self.machine.committed if self.machine is not None else None

    # -- the bends ----------------------------------------------------------------------------

    def _tamper(self, shot: Shot, verdict: Verdict) -> Verdict:
        d = verdict.to_dict()
        if not self.lie or not any(r["r"] != "miss" for r in d["results"]):
            return verdict
        for r in d["results"]:
            r["r"], r["open"]["occ"], r["sunk"] = "miss", False, None
        return Verdict.from_dict(d)

    def _bend(self, msg: m.Message) -> m.Message | None:
        if isinstance(msg, m.Commit | m.Place) and not self.place:
            return None
        if isinstance(msg, m.RevealMsg) and not self.reveal:
            return None
        return msg if self.bend is None else self.bend(msg)

    # -- the shell ----------------------------------------------------------------------------

    def _epoch(self) -> Seat:
        """The seat, told of a new connection (a test swaps ``c`` to reconnect)."""
        assert self.machine is not None
        if self.c is not self._conn:
            self._conn = self.c
            self.machine.epoch += 1
        return self.machine

    async def send(self, msg: m.Message) -> None:
        """Send one message the seat gave, and tell the seat it went."""
        seat = self._epoch()
        await self.c.send(msg)
        seat.carried(msg, seat.epoch)

    async def _play(self, out: Out) -> None:
        """Send what the seat says to, then play the player's part in its events."""
        for msg in out.sends:
            await self.send(msg)
        for ev in out.events:
            await self._react(ev)

    async def _react(self, ev: MatchEvent) -> None:
        seat = self.machine
        assert seat is not None and seat.rules is not None
        r = seat.rules
        if isinstance(ev, GameStarted):
            self.targets = list(range(r.cells))
            self.closed = set()
            self.pending.clear()
            fleet = random_fleet(r, self.rng)
            await self._play(seat.place(fleet, self.rng.randbytes(32)))
        elif isinstance(ev, YourTurn):
            self._count = ev.count
            await self.fire()
        elif isinstance(ev, ShotResult):
            self.closed.update(c.row * r.cols + c.col for c in ev.cells + ev.crossed)
        elif isinstance(ev, Resumed) and ev.game is not None and seat.seat is not None:
            board = ev.view["boards"][1 - seat.seat]
            self.closed |= {i for i, _ in board["fired"]} | set(board["crossed"])

    def _next(self, count: int) -> tuple[int, ...]:
        """The next ``count`` cells in order that are not known to be closed."""
        seat = self.machine
        assert seat is not None and seat.rules is not None and seat.seat is not None
        closed = set(self.closed)
        if seat.mirror is not None:
            board = seat.mirror.boards[1 - seat.seat]
            closed |= set(board.fired) | set(board.crossed)
        picked: list[int] = []
        while len(picked) < count:
            if not self.targets:
                # Cells dropped with a refused salvo may still be open: try them again.
                left = range(seat.rules.cells)
                self.targets = [i for i in left if i not in closed and i not in picked]
                if not self.targets:
                    break
            i = self.targets.pop(0)
            if i not in closed:
                picked.append(i)
        return tuple(picked)

    async def fire(self) -> None:
        """Call the next cells (as many as the turn calls), unless ``auto_fire`` is off."""
        if not self.auto_fire or self.machine is None or self.machine.rules is None:
            return
        cols = self.machine.rules.cols
        cells = self._next(self._count)
        self.seq += 1
        self.pending[self.seq] = cells
        await self._play(self.machine.fire([Cell(*divmod(i, cols)) for i in cells], self.seq))

    async def on(self, msg: Any) -> None:
        """Handle one message the connection brought."""
        if isinstance(msg, m.Start) and (self.machine is None or msg.match != self.match):
            self.match = msg.match
            self.machine = Seat(msg.match, self.c.key, self.c.player)
            self.machine.tamper, self.machine.bend = self._tamper, self._bend
        if isinstance(msg, m.Error):
            cells = self.pending.get(msg.ref) if msg.ref is not None else None
            if cells is not None and msg.code in (ErrorCode.ALREADY_FIRED, ErrorCode.CROSSED_OUT):
                self.targets[:0] = cells[1:]  # the first goes: some cell of it was closed
                await self.fire()
            else:
                self.errors.append(msg)
            return
        if self.machine is None or getattr(msg, "match", None) != self.match:
            return
        if isinstance(msg, m.GameOver):
            self.outcomes.append(msg.outcome)
        elif isinstance(msg, m.MatchOver):
            self.result = msg
        if isinstance(msg, m.Snapshot):
            await self.resume(msg.view)
        else:
            await self._play(self.machine.receive(msg, trio.current_time()))

    async def resume(self, view: dict[str, Any]) -> None:
        """Carry on from a snapshot (on a new connection: the seat sends again what it owes)."""
        seat = self._epoch()
        await self._play(seat.receive(m.Snapshot(self.match, self.seat, view), trio.current_time()))

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
    nursery: trio.Nursery, db: str, tmp_path: Path, name: str, **timing: float
) -> tuple[tuple[str, int], trio.Event]:
    """Node ``name`` of the cluster on ``db`` in ``nursery`` (port 0, :data:`CLUSTER_TIMING`,
    with ``timing``'s changes: ``sweep=30.0``); every node signs with the one key in
    ``tmp_path``. Its address, and its shutdown event."""
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
            cluster_config=ClusterConfig(name, **{**CLUSTER_TIMING, **timing}),
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
        self.people = False
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
    into the field's range), but the second of two fields of which exactly one holds a value
    (``m.EXACTLY_ONE``, spec 2.4), which is nil."""

    def clamp(v: Any, lo: int, hi: int) -> Any:
        if isinstance(v, list):
            return [clamp(x, lo, hi) for x in v]
        return min(max(v, lo), hi) if type(v) is int else v

    wire = {
        "t": cls.TAG,
        **{
            name: clamp(sample(tp), *m.int_range(cls.TAG, name)) for name, tp in fields(cls).items()
        },
    }
    pair = m.EXACTLY_ONE.get(cls.TAG)
    return wire if pair is None else wire | {pair[1]: None}


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


# Signed records with no server: fixed keys and honest matches played in memory.

SEAT0, SEAT1, REFEREE, OTHER = (
    Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (1, 2, 3, 4)
)
PLAYERS = [SEAT0.public_key(), SEAT1.public_key()]
BEST_OF_3 = preset("classic-8x8").replace(match=MatchFormat(games=3))


def play_in_memory(
    m: Match, rng: random.Random, games: int | None = None, stop_at: int = 0
) -> Match:
    """Honest players fire at random until the match ends (or ``stop_at`` shots into a game)."""
    while not m.over and (games is None or len(m.games) < games):
        g = m.new_game(rng.randrange(2) if m.needs_lot() else None)
        rules = m.rules
        ds = []
        for seat in (0, 1):
            c = Committed(
                rules, random_fleet(rules, rng), rng.randbytes(32), m.match_id, g.number, seat
            )
            ds.append(Defender(c))
            g.commit(seat, c.commitment, c.seat_sig((SEAT0, SEAT1)[seat]))
        if not fire_honestly(g, ds, rng, stop_at):
            return m
        for seat in (0, 1):
            g.reveal(seat, ds[seat].committed.reveal())
        m.game_over()
    return m


def match_of(rules: RuleSet, seed: int) -> Match:
    """A whole honest match of ``rules``, the same for the same ``seed``."""
    rng = random.Random(seed)
    return play_in_memory(Match(rules, rng.randbytes(16)), rng)


def every_fleet(rules: RuleSet) -> list[Fleet]:
    """Every legal fleet of a small rule set, counted by brute force."""
    spots = []
    for spec in rules.fleet:
        spots.append(
            [
                Placement(r, c, v)
                for v in (False, True)
                for r in range(rules.rows - (spec.length - 1 if v else 0))
                for c in range(rules.cols - (0 if v else spec.length - 1))
            ]
        )
    out = []
    for combo in itertools.product(*spots):
        fleet = Fleet(combo)
        try:
            fleet.validate(rules)
        except Exception:
            continue
        out.append(fleet)
    return out


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key, as PEM files in ``tmp_path``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(k.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(k, hashes.SHA256())
    )
    cp, kp = tmp_path / "cert.pem", tmp_path / "key.pem"
    cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kp.write_bytes(
        k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cp, kp
