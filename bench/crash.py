"""``python -m bench.crash``: kill the server with SIGKILL, again and again, and
check that no acknowledged move is lost.

Theory of operation. A ``seabattle serve`` process runs on a store in a temporary folder. Pairs of
players (blind and custody) play matches through it over TCP; each player remembers every verdict
it was told (what the server acknowledged). At a random moment (after a random number of
verdicts, or a random fraction of a second) the server is killed with SIGKILL and started again on
the same store; the players reconnect with their keys, get their seats back with ``start`` and a
snapshot, and play on. After the last kill the matches are played to their ends, every record is
fetched and verified (:func:`~seabattle.protocol.record.verify_record`), and every verdict a
player was ever told must stand in the record, in its place.

It prints one line per kill and a JSON summary; the exit status is 0 only if every check held.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import GameStarted, Resumed, ShotResult, YourTurn
from seabattle.protocol.session import LEAN, Connection, Role, auth_payload

__all__ = ["Aborted", "Moved", "Player", "Server", "check_record", "crash_run", "main"]

RULES = {"preset": "classic"}
_PACE = 0.012  #: seconds between a player's shots
_HANDSHAKE = 10.0  #: seconds a connection's handshake may take before the node counts as gone
_PROBE = 77  #: the request id of a reconnecting player's "is my match over?" get_record
_SERVE = [sys.executable, "-c", "from seabattle.cli.main import main; main()", "serve"]


class _Gone(Exception):
    """The connection ended (the server was killed), or could not be opened."""


class Aborted(Exception):
    """The server told the player "the match was aborted" (raised only for a player made with
    ``leave_aborted``: the harness then goes and asks where the match stands)."""


class Moved(Exception):
    """The server sent the player to another node (``redirect``, spec 4.10)."""

    def __init__(self, redirect: m.Redirect) -> None:
        super().__init__("redirected")
        self.redirect = redirect


class _Link:
    """One connection of a player: TCP through the sans-IO client ``Connection``."""

    def __init__(self, stream: trio.SocketStream, addr: tuple[str, int] = ("", 0)) -> None:
        self.stream = stream
        #: where it leads, and when it was opened: a harness that kills a node knows by these
        #: which connections the kill cut
        self.addr = addr
        self.opened = time.monotonic()
        self.conn = Connection(Role.CLIENT)
        self.queue: list[Any] = []
        #: the player's number for this connection (its seat's epoch), and whether the server
        #: agreed ``lean`` on it
        self.epoch = 0
        self.lean = False

    async def send(self, msg: m.Message) -> None:
        try:
            await self.stream.send_all(self.conn.send(msg))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            raise _Gone from None

    async def recv(self) -> Any:
        while not self.queue:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                raise _Gone from None
            if not data:
                raise _Gone
            self.queue.extend(self.conn.receive_data(data))
        return self.queue.pop(0)


@dataclass
class Player:
    """One player of one match, across every connection it needs.

    What it sends as a seat (the placement, the answer to a shot at it, the reveal, the
    co-signature, and after a reconnect whatever the snapshot says it still owes) is its pure
    :class:`~seabattle.protocol.seat.Seat`'s (:attr:`core`), which checks every proof and the
    record as any honest client does. The player is the shell: it connects, picks the fleet and
    the cells, paces its shots, answers pings, and keeps what the harnesses judge."""

    key: Ed25519PrivateKey
    mode: str
    rng: random.Random
    name: str
    match: bytes = b""
    seat: int = -1
    rules: RuleSet | None = None
    game: int = 0
    fired: set[int] = field(default_factory=set)
    seq: int = 0
    told: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    over: bool = False
    verdicts: int = 0  #: verdicts told since the last (re)connection
    #: offer ``lean`` (spec 5.7): no copy of its own moves comes back, its own answer says
    #: whose turn follows
    lean: bool = False
    #: when each verdict in ``told`` arrived (``time.monotonic``): when play stopped and resumed
    told_at: list[float] = field(default_factory=list)
    #: every ``game_over`` outcome it was shown (this harness's players never resign: any end
    #: but ``fleet_sunk`` is the server's or a fault's doing)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    #: how many times it was told "the match was aborted"
    told_aborted: int = 0
    #: requests of its own the server refused, by the server's words (a cell fired at twice
    #: after a crash, a move out of phase)
    refused: dict[str, int] = field(default_factory=dict)
    #: raise :class:`Aborted` when told the match was aborted, rather than wait on the connection
    leave_aborted: bool = False
    #: seconds of silence (pings aside) after which a connection counts as gone: a server that
    #: dropped the match without a word would otherwise hold the player for ever
    idle: float = math.inf
    #: the seat it plays (``None`` before its match's ``start``)
    core: Seat | None = None
    #: connections opened so far: the number of the newest (its seat's epoch)
    links: int = 0

    async def connect(self, addr: tuple[str, int], caps: tuple[str, ...] = ()) -> _Link:
        try:
            link = _Link(await trio.open_tcp_stream(*addr), addr)
        except OSError:
            raise _Gone from None
        self.links += 1
        link.epoch = self.links
        pub = self.key.public_key().public_bytes_raw()
        # Bounded, as the reference client's handshake is: a node that accepts but does not
        # answer (stopped, overloaded) is as good as gone.
        with trio.move_on_after(_HANDSHAKE) as handshake:
            await link.send(m.Hello((2,), "crash", caps + (LEAN,) * self.lean))
            w = await link.recv()
            assert isinstance(w, m.Welcome), w
            link.lean = LEAN in w.caps
            sig = self.key.sign(auth_payload(w.challenge, w.server, pub))
            await link.send(m.Auth(pub, sig, self.name, None))
            while not isinstance(await link.recv(), m.Authed):
                pass
        if handshake.cancelled_caught:
            await link.stream.aclose()
            raise _Gone
        self.verdicts = 0
        if self.match:
            # The match may have ended while this player was away (the kill cut its
            # match_over): a finished match is not taken up again, but its record is there.
            await link.send(m.GetRecord(_PROBE, self.match))
        return link

    async def fire(self, link: _Link) -> None:
        assert self.rules is not None and self.core is not None
        # Paced under the server's default per-peer rate (100 messages/s).
        await trio.sleep(_PACE)
        free = [i for i in range(self.rules.cells) if i not in self.fired]
        if not free:
            return  # nothing left to fire at: whatever the server thinks, wait for its word
        i = self.rng.choice(free)
        self.fired.add(i)
        self.seq += 1
        label = Cell(*divmod(i, self.rules.cols)).label()
        await self._carry(link, self.core.fire(label, self.seq))

    async def _carry(self, link: _Link, out: Out) -> None:
        """Send what the seat says to send, telling it which connection carried each, then act
        on its events: a fleet when a game begins, a shot when the turn is ours."""
        core = self.core
        assert core is not None and self.rules is not None
        for msg in out.sends:
            await link.send(msg)
            core.carried(msg, link.epoch)
        for ev in out.events:
            if isinstance(ev, GameStarted):
                self.game, self.fired = ev.game, set()
                fleet = random_fleet(self.rules, self.rng)
                await self._carry(link, core.place(fleet, self.rng.randbytes(32)))
            elif isinstance(ev, Resumed) and ev.game is not None:
                # What was fired at while the player was away is on the snapshot's board (a
                # move of ours the server lost is open again, unless the seat sends it again:
                # then its verdict closes it, below).
                self.game = ev.game
                self.fired = {i for i, _ in ev.view["boards"][1 - self.seat]["fired"]}
            elif isinstance(ev, ShotResult):
                self.fired.update(c.row * self.rules.cols + c.col for c in ev.cells)
            elif isinstance(ev, YourTurn):
                await self.fire(link)

    async def play(self, link: _Link) -> None:
        """Play on this connection until the match is over (or the connection goes)."""
        while not self.over:
            msg = await self._next(link)
            if isinstance(msg, m.Start):
                if self.core is None or self.core.id != msg.match:
                    self.core = Seat(msg.match, self.key)
                self.match, self.seat = msg.match, msg.seat
                self.rules = rules_from_dict(msg.rules)
            elif isinstance(msg, m.VerdictMsg):
                self.told.append((msg.game, msg.n, msg.verdict))
                self.told_at.append(time.monotonic())
                self.verdicts += 1
            elif isinstance(msg, m.GameOver):
                self.outcomes.append(msg.outcome)
            elif isinstance(msg, m.Ok):
                if msg.ref == _PROBE:
                    self.over = True  # its match ended while it was away
                continue
            elif isinstance(msg, m.Error):
                await self._refused(link, msg)
                continue
            elif isinstance(msg, m.Redirect):
                raise Moved(msg)
            core = self.core
            if core is not None and getattr(msg, "match", None) == core.id:
                core.epoch, core.lean = link.epoch, link.lean
                await self._carry(link, core.receive(msg, time.monotonic()))
            if isinstance(msg, m.MatchOver):
                self.over = True

    async def _refused(self, link: _Link, msg: m.Error) -> None:
        if msg.ref is None and "aborted" in msg.msg:
            self.told_aborted += 1
            if self.leave_aborted:
                raise Aborted(msg.msg)
        elif msg.ref != _PROBE:
            self.refused[msg.msg] = self.refused.get(msg.msg, 0) + 1
            if msg.ref == self.seq and msg.code == ErrorCode.ALREADY_FIRED:
                # A move the player never saw acknowledged stood after all (a crash cut its
                # verdict): fire elsewhere. Any other refusal is waited out: firing again
                # into a phase that refuses it only repeats the refusal.
                await self.fire(link)

    async def _next(self, link: _Link) -> Any:
        """The next message that is not a ping (pings are answered here); :class:`_Gone` after
        ``idle`` seconds without one."""
        with trio.move_on_after(self.idle):
            while True:
                msg = await link.recv()
                if not isinstance(msg, m.Ping):
                    return msg
                await link.send(m.Pong(msg.n))
        raise _Gone


class Server:
    """``seabattle serve`` in a child process, on one store, started again after every kill
    (``extra``: more options, e.g. a node of a cluster)."""

    def __init__(self, folder: Path, db: str | None = None, extra: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.db = db if db is not None else str(folder / "db.sqlite")
        self.extra = extra
        self.proc: subprocess.Popen[str] | None = None
        self.addr: tuple[str, int] = ("", 0)

    def start(self) -> tuple[str, int]:
        key = self.folder / "server.key"
        args = [*_SERVE, "--port", "0", "--db", self.db, "--key", str(key), "--json", *self.extra]
        # The server's log, kept beside its store for a failed run to be read.
        with open(self.folder / "server.log", "a") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.proc = None
            raise RuntimeError(f"the server did not start: see {self.folder}/server.log")
        #: the start line ``serve --json`` printed (its addresses, its key)
        self.status: dict[str, Any] = json.loads(line)
        host, port = self.status["listening"].rsplit(":", 1)
        self.addr = (host, int(port))
        return self.addr

    @property
    def alive(self) -> bool:
        """Whether the process runs."""
        return self.proc is not None

    def kill(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
            self.proc = None


async def _setup(pair: list[Player], mode: str, addr: tuple[str, int]) -> list[_Link]:
    a, b = pair
    la, lb = await a.connect(addr), await b.connect(addr)
    await la.send(m.Create(1, RULES, mode, False))
    while not isinstance(ok := await la.recv(), m.Ok):
        pass
    await lb.send(m.Join(1, None, ok.data["invite"]))
    return [la, lb]


def _pair(mode: str, rng: random.Random, n: int) -> list[Player]:
    """Two players, the first lean and the second not, so that every match has both kinds."""
    return [
        Player(
            Ed25519PrivateKey.generate(),
            mode,
            random.Random(rng.random()),
            f"{mode}{n}{s}",
            lean=s == "a",
        )
        for s in "ab"
    ]


async def crash_run(
    kills: int, *, pairs: int = 2, seed: int = 0, max_pause: float = 0.4, log: Any = print
) -> dict[str, Any]:
    """Kill the server ``kills`` times under ``pairs`` blind and ``pairs`` custody matches; a
    pair whose match ended is checked and starts a new one, so that every kill finds matches
    running."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="seabattle-crash-"))
    server = Server(folder)
    players = [_pair(mode, rng, i) for mode in ("blind", "custody") for i in range(pairs)]
    problems: list[str] = []
    checked: list[str] = []
    acknowledged = 0
    started = time.monotonic()
    addr = await trio.to_thread.run_sync(server.start)
    try:
        links = [await _setup(pair, pair[0].mode, addr) for pair in players]
        for round_ in range(kills + 1):
            everyone = [
                (p, link)
                for pair, ls in zip(players, links, strict=True)
                for p, link in zip(pair, ls, strict=True)
            ]
            last = round_ == kills
            async with trio.open_nursery() as n:
                for p, link in everyone:
                    n.start_soon(_play_until_gone, p, link)
                if not last:
                    # A random moment: some verdicts in, then a random part of a pause.
                    want = rng.randint(0, 6)
                    with trio.move_on_after(5):
                        while sum(p.verdicts for p, _ in everyone) < want:
                            await trio.sleep(0.005)
                    await trio.sleep(rng.random() * max_pause)
                    await trio.to_thread.run_sync(server.kill)
                    running = sum(not pair[0].over for pair in players)
                    log(f"kill {round_ + 1}/{kills}: {running} matches running")
            if last:
                break
            addr = await trio.to_thread.run_sync(server.start)
            for i, pair in enumerate(players):
                if pair[0].over and pair[1].over:
                    acknowledged += await _check(pair, addr, problems)
                    checked.append(pair[0].match.hex())
                    players[i] = pair = _pair(pair[0].mode, rng, len(checked) + 100)
                    links[i] = await _setup(pair, pair[0].mode, addr)
                else:
                    links[i] = [await p.connect(addr) for p in pair]
        for pair in players:
            acknowledged += await _check(pair, addr, problems)
            checked.append(pair[0].match.hex())
    finally:
        await trio.to_thread.run_sync(server.stop)
    return {
        "kills": kills,
        "matches": len(checked),
        "verdicts_acknowledged": acknowledged,
        "seconds": round(time.monotonic() - started, 1),
        "ok": not problems,
        "problems": problems,
    }


async def _check(pair: list[Player], addr: tuple[str, int], problems: list[str]) -> int:
    """Verify the record of ``pair``'s finished match, and that it holds every verdict either
    player was told; returns how many verdicts they were told."""
    return check_record(pair, await _fetch_record(pair[0], addr), problems)


def check_record(pair: list[Player], signed: dict[str, Any], problems: list[str]) -> int:
    """Verify ``signed``, the record of ``pair``'s match, and that it holds every verdict either
    player was told, in its place; each failure is a line in ``problems``. Returns how many
    verdicts the players were told."""
    report = verify_record(signed)
    if not report.ok:
        problems.append(f"{pair[0].match.hex()}: {report.reason}")
    recorded = [
        (g["number"], k + 1, e["verdict"])
        for g in signed["record"]["games"]
        for k, e in enumerate([x for x in g["transcript"] if x["in"] == "answer"])
    ]
    for p in pair:
        lost = [t for t in p.told if t not in recorded]
        if lost:
            problems.append(f"{p.match.hex()}: {len(lost)} acknowledged verdicts lost")
    return sum(len(p.told) for p in pair)


async def _play_until_gone(p: Player, link: _Link) -> None:
    with contextlib.suppress(_Gone):
        await p.play(link)


async def _fetch_record(p: Player, addr: tuple[str, int]) -> dict[str, Any]:
    link = await p.connect(addr)
    await link.send(m.GetRecord(9, p.match))
    while True:
        msg = await link.recv()
        if isinstance(msg, m.Ok) and msg.ref == 9:
            return load_record(msg.data["record"])
        if isinstance(msg, m.Error) and msg.ref == 9:
            raise RuntimeError(f"no record for {p.match.hex()}: {msg.msg}")


@click.command()
@click.option("--kills", type=int, default=50, show_default=True, help="SIGKILLs in a row.")
@click.option("--pairs", type=int, default=2, show_default=True, help="Matches per trust mode.")
@click.option("--seed", type=int, default=0, show_default=True)
def main(kills: int, pairs: int, seed: int) -> None:
    """Kill the server again and again under running matches; check nothing acknowledged is lost."""
    summary = trio.run(lambda: crash_run(kills, pairs=pairs, seed=seed))
    click.echo(json.dumps(summary))
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
