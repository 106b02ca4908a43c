"""The load generator: scenarios, the state shared by the players of one run, and the cheap
players themselves (:class:`_Player` against a server, :class:`_BarePlayer` against a
baseline), one trio task per connection driving the sans-IO ``Connection`` directly, and at
human pace one more (:class:`_Pacer`) that fires every match's shots on their slots.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import click
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.common.netio import DirectSocket, direct
from seabattle.protocol import messages as m
from seabattle.protocol.codec import encode_frame
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import GameStarted, YourTurn
from seabattle.protocol.session import LEAN, Connection, Role, State, auth_payload

from .children import _read_exact

__all__ = ["Scenario"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """M matches in one mode at bot speed (``pace`` 0) or one shot every ``pace`` s per match."""

    mode: str
    matches: int
    pace: float = 0.0
    duration: float = 10.0
    shots: int | None = None  #: stop each match after this many shots (None: run the duration)
    #: the players do not offer ``lean``: the server copies each one's own moves back to it
    echo: bool = False

    @property
    def label(self) -> str:
        """Short name for tables."""
        speed = "bot speed" if self.pace <= 0 else f"1 shot/{self.pace:g}s"
        return f"{self.mode}, {self.matches} matches, {speed}" + (", echo" if self.echo else "")


@dataclass(slots=True)
class _Pace:
    """Per-match shot schedule and count; ``next_at`` is set when the run gives the go."""

    phase: float = 0.0  #: offset of this match's first shot after the go (spreads the load)
    next_at: float = math.inf
    shots: int = 0


class _Pacer:
    """Fires the human-paced matches' shots when they are due, all from one task.

    Why. A seat that waits for its slot could wait in its own read, under a cancel scope with
    the slot as its deadline; but entering, cancelling and leaving a scope per shot cost the
    generator ~15 % of its CPU at 5,000 matches, and a busier generator adds its own queueing
    to the round trips it measures. One heap and one sleep serve every match instead; the
    seats' own tasks no longer wait for their slots (they read, and write their answers).
    The shape is the server's heartbeat (``server/timers.py``), which the client may not
    import."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Shooter]] = []
        self._count = itertools.count()
        self._wake = trio.Event()
        self._next = math.inf

    def add(self, shooter: _Shooter, at: float) -> None:
        """Have ``shooter`` act (its ``_wake``) at trio time ``at``."""
        heapq.heappush(self._heap, (at, next(self._count), shooter))
        if at < self._next:
            self._wake.set()

    async def run(self) -> None:
        """Act for every seat as its time comes, until cancelled."""
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                shooter = heapq.heappop(heap)[2]
                # A seat whose connection is gone: its own task finds out and counts it.
                with contextlib.suppress(*_LOST):
                    await shooter._wake()
            self._next = heap[0][0] if heap else math.inf
            self._wake = trio.Event()
            with trio.move_on_at(self._next):
                await self._wake.wait()


@dataclass(slots=True)
class _Run:
    """State shared by every player of one run."""

    scenario: Scenario
    rules: RuleSet
    fleets: list[Fleet]
    labels: list[str]
    measuring: bool = False
    stopping: bool = False
    rtts: list[float] = field(default_factory=list)
    shots: int = 0
    shots_total: int = 0
    skipped: int = 0  #: human-pace slots that passed while a match was behind, not fired
    matches_done: int = 0
    finished: list[bytes] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    done_matches: int = 0
    go: bool = False  #: nobody fires before every match is set up
    paces: list[_Pace] = field(default_factory=list)
    held: list[_Shooter] = field(default_factory=list)
    #: the custody baseline copies each verdict to a second, defending connection (echo-copies)
    defender_copy: bool = False
    #: acts for the seats at human pace (the caller runs :meth:`_Pacer.run`)
    pacer: _Pacer = field(default_factory=_Pacer)
    #: where a seat's write that has to wait for its socket runs (set by the caller)
    nursery: trio.Nursery | None = None

    def start_firing(self) -> None:
        """Give the go: every match fires from now on, each at its own phase."""
        self.go = True
        now = trio.current_time()
        for pace in self.paces:
            pace.next_at = now + pace.phase
        held, self.held = self.held, []
        for shooter in held:
            shooter.release()

    def shot_done(self, rtt: float) -> None:
        self.shots_total += 1
        if self.measuring:
            self.shots += 1
            self.rtts.append(rtt)


def _make_run(sc: Scenario, rules: RuleSet, seed: int) -> _Run:
    rng = random.Random(seed)
    fleets = [random_fleet(rules, rng) for _ in range(32)]
    labels = [Cell(i // rules.cols, i % rules.cols).label() for i in range(rules.cells)]
    return _Run(sc, rules, fleets, labels)


class _Shooter:
    """What both kinds of player share: whose turn it is, the pace, the wait for either, and
    the writes."""

    run: _Run
    pace: _Pace
    wake_at: float
    scope: trio.CancelScope | None
    stream: trio.SocketStream | None
    sock: DirectSocket | None
    #: frames the socket did not take at once, oldest first, being written by :meth:`_drain`
    _backlog: list[bytes] | None = None

    def _write(self, frame: bytes | bytearray | memoryview) -> None:
        """Send ``frame`` without waiting: straight to the socket when it takes all of it (the
        usual case), else behind whatever is still waiting, by a task that waits for the
        socket. A seat has two writers at human pace (its own task answers, the pacer fires),
        so neither may be left half-way through a frame when the other writes."""
        if self._backlog is None:
            if self.sock is not None:
                sent = self.sock.try_send(frame)
                if sent == len(frame):
                    return
                frame = frame[sent:]
            self._backlog = [bytes(frame)]  # a copy: ``frame`` may view the shared read buffer
            assert self.run.nursery is not None
            self.run.nursery.start_soon(self._drain)
        else:
            self._backlog.append(bytes(frame))

    async def _drain(self) -> None:
        assert self.stream is not None and self._backlog is not None
        try:
            while self._backlog:
                await self.stream.send_all(self._backlog[0])
                del self._backlog[0]
        except _LOST:
            pass  # the seat's own task finds the connection gone and counts it
        finally:
            self._backlog = None

    def _turn(self) -> None:
        """It is this seat's turn: fire now (bot speed) or when the match's pace says."""
        run, pace = self.run, self.pace
        sc = run.scenario
        if run.stopping:
            return
        if sc.shots is not None and pace.shots >= sc.shots:
            run.done_matches += 1
            return
        if not run.go:
            run.held.append(self)
            return
        self._act_at(max(pace.next_at, trio.current_time()) if sc.pace > 0 else -math.inf)

    def _act_at(self, at: float) -> None:
        """Act (``_wake``) at trio time ``at``: at human pace the run's pacer does it, at bot
        speed this seat's own task (``wake_at``, looked at between reads)."""
        if self.run.scenario.pace > 0:
            self.run.pacer.add(self, at)
        else:
            self.wake_at = at

    def _next_slot(self) -> None:
        """A shot goes now: the match's next one is due one pace later, on its own phase.

        After a stall (of the server or of this process) the slots that passed are skipped and
        counted, not fired back to back: a burst of late shots would deepen the very queue the
        round trips measure, and the run would report the stall twice."""
        step = self.run.scenario.pace
        if step <= 0:
            return
        pace = self.pace
        due = pace.next_at + step
        now = trio.current_time()
        if due < now:
            behind = math.floor((now - due) / step) + 1
            due += behind * step
            if self.run.measuring:
                self.run.skipped += behind
        pace.next_at = due

    def release(self) -> None:
        """The go was given while this seat held its turn: schedule the shot."""
        self._turn()
        if self.scope is not None:
            self.scope.deadline = self.wake_at

    async def _receive(
        self, stream: trio.SocketStream, sock: DirectSocket | None
    ) -> bytes | bytearray | memoryview | None:
        """Bytes from ``stream``, or ``None`` if it is time to act first (a view of a shared
        buffer when read directly: to be consumed before the next await)."""
        if self.wake_at == math.inf and self.run.go:
            # Nothing to act on but the peer's bytes (after the go, only this task changes
            # wake_at): a cancel scope per read would cost the generator ~10 % of its CPU.
            return await (sock.receive() if sock is not None else stream.receive_some(65536))
        with trio.CancelScope(deadline=self.wake_at) as cs:
            self.scope = cs
            data = await (sock.receive() if sock is not None else stream.receive_some(65536))
        self.scope = None
        return None if cs.cancelled_caught else data

    async def _wake(self) -> None:
        """The wake-up time came: fire the next shot."""
        await self._fire()

    async def _loop(self, stream: trio.SocketStream, conn: Connection) -> None:
        """Handle messages, and act when the clock says, until the stream closes."""
        sock = direct(stream)
        while True:
            if self.wake_at <= trio.current_time():
                self.wake_at = math.inf
                await self._wake()
                continue
            data = await self._receive(stream, sock)
            if data is None:
                continue
            if not data:
                return
            for item in conn.receive_data(data):
                if isinstance(item, ProtocolError):
                    self.run.errors[_code_name(item.code)] += 1
                else:
                    await self.on(item)

    async def _fire(self) -> None:
        raise NotImplementedError

    async def on(self, msg: m.Message) -> None:
        """Handle one message from the server (or the baseline)."""
        raise NotImplementedError


class _Player(_Shooter):
    """One seat: an honest, cheap bot over one TCP connection to the real server.

    What an honest seat sends next (the commitment or placement, the answer to a called shot,
    the reveal, whose turn follows its own answer in a lean session) is its pure
    :class:`~seabattle.protocol.seat.Seat`'s, which plays from the verdicts (``checking`` off:
    the generator trusts the server it measures, and its CPU must not become the bottleneck).
    The player is the shell: it picks the fleet and the next cell, fires on its pace, carries
    the frames, answers pings, sends again what the rate limit dropped, counts errors and asks
    for a rematch. Its seat does not co-sign (:func:`_no_cosign`)."""

    def __init__(self, run: _Run, pace: _Pace, rng: random.Random) -> None:
        self.run = run
        self.pace = pace
        self.rng = rng
        self.conn = Connection(Role.CLIENT)
        self.stream: trio.SocketStream | None = None
        self.sock: DirectSocket | None = None
        self.key = Ed25519PrivateKey.generate()
        self.backlog: list[m.Message] = []
        #: the current match's seat (``None`` before its ``start``)
        self.core: Seat | None = None
        self.next_cell = 0
        self.seq = 0
        self.req = 0
        self.sent_at = 0.0
        self.wake_at = math.inf
        self.scope = None
        self.last: bytes = b""  # the last game frame sent, resent if rate limited
        self.resend = False

    async def send(self, msg: m.Message) -> None:
        self._send(msg)

    def _send(self, msg: m.Message) -> None:
        assert self.stream is not None
        frame = self.conn.send(msg)
        if not isinstance(msg, m.Pong):
            self.last = frame
        self._write(frame)

    async def recv_until(self, cls: type[m.Message]) -> m.Message:
        """Read until a message of type ``cls`` arrives; others wait in the backlog."""
        assert self.stream is not None
        while True:
            data = await self.stream.receive_some(65536)
            if not data:
                raise trio.BrokenResourceError("the server closed the connection")
            found: m.Message | None = None
            for item in self.conn.receive_data(data):
                if isinstance(item, ProtocolError):
                    raise item
                if found is None and isinstance(item, cls):
                    found = item
                elif isinstance(item, m.Error):
                    raise click.ClickException(f"server refused: {item.code} {item.msg}")
                else:
                    self.backlog.append(item)
            if found is not None:
                return found

    async def connect(self, addr: tuple[str, int], name: str) -> None:
        self.stream = await trio.open_tcp_stream(*addr)
        self.sock = direct(self.stream)
        caps = () if self.run.scenario.echo else (LEAN,)
        await self.send(m.Hello((2,), "seabattle-bench", caps))
        w = await self.recv_until(m.Welcome)
        assert isinstance(w, m.Welcome)
        pub = self.key.public_key().public_bytes_raw()
        sig = self.key.sign(auth_payload(w.challenge, w.server, pub))
        await self.send(m.Auth(pub, sig, name, None))
        await self.recv_until(m.Authed)

    async def request(self, msg: m.Message) -> m.Ok:
        await self.send(msg)
        ok = await self.recv_until(m.Ok)
        assert isinstance(ok, m.Ok)
        return ok

    # -- the game ---------------------------------------------------------------------------------

    async def _fire(self) -> None:
        run, pace, core = self.run, self.pace, self.core
        if core is None or self.next_cell >= len(run.labels):
            return
        cell = run.labels[self.next_cell]
        self.next_cell += 1
        self.seq += 1
        pace.shots += 1
        self._next_slot()
        self.sent_at = time.perf_counter()
        self._carry(core.fire(cell, self.seq))

    def _carry(self, out: Out) -> None:
        """Send what the seat says to send, then act on its events: place a fleet when a game
        begins, fire when the turn is ours."""
        for msg in out.sends:
            self._send(msg)
        for ev in out.events:
            if isinstance(ev, YourTurn):
                self._turn()
            elif isinstance(ev, GameStarted):
                self.next_cell = 0
                assert self.core is not None
                fleet = self.rng.choice(self.run.fleets)
                self._carry(self.core.place(fleet, self.rng.randbytes(32)))

    async def on(self, msg: m.Message) -> None:
        run = self.run
        if isinstance(msg, m.Ping):
            self._send(m.Pong(msg.n))
            return
        if isinstance(msg, m.Error):
            run.errors[_code_name(msg.code)] += 1
            if msg.code == ErrorCode.RATE_LIMITED and self.last:
                self.resend = True
                self._act_at(trio.current_time() + 0.02)
            elif msg.code in (ErrorCode.ALREADY_FIRED, ErrorCode.CROSSED_OUT):
                self._act_at(-math.inf)
            return
        if isinstance(msg, m.Start):
            lean = not run.scenario.echo
            self.core = Seat(msg.match, self.key, lean=lean, checking=False, quiet=True)
            self.core.bend = _no_cosign
        core = self.core
        if core is None or isinstance(msg, m.Ok):
            return  # a rematch's acknowledgment: its ``start`` follows
        if isinstance(msg, m.VerdictMsg) and msg.seat == core.seat and self.sent_at:
            run.shot_done(time.perf_counter() - self.sent_at)
            self.sent_at = 0.0
        self._carry(core.receive(msg, trio.current_time()))
        if isinstance(msg, m.MatchOver):
            if core.seat == 0:
                run.matches_done += 1
                run.finished.append(msg.match)
            if not run.stopping:
                self.req += 1
                self._send(m.Rematch(self.req, msg.match))

    async def play(self) -> None:
        """Handle messages, and fire when the clock says, until cancelled or closed."""
        assert self.stream is not None
        backlog, self.backlog = self.backlog, []
        for msg in backlog:
            await self.on(msg)
        await self._loop(self.stream, self.conn)

    async def _wake(self) -> None:
        # A frame the server refused for the rate limit goes again as it was (same seq).
        if self.resend:
            assert self.stream is not None
            self.resend = False
            self._write(self.last)
        else:
            await self._fire()


def _no_cosign(msg: m.Message) -> m.Message | None:
    """The bench's seats do not co-sign: a co-signature is checked and stored by the server
    once per match, work the figures have never held (they are a shot's), and the players
    before the seat did not send it."""
    return None if isinstance(msg, m.CoSign) else msg


_LOST = (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError)


async def _guarded(run: _Run, fn: Any) -> None:
    """Run a player task; a lost connection is counted, not fatal to the whole run."""
    try:
        await fn()
    except _LOST as e:
        if not run.stopping:
            run.errors[f"connection lost ({type(e).__name__})"] += 1


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def _setup_match(
    run: _Run, addr: tuple[str, int], i: int, nursery: trio.Nursery, seed: int
) -> None:
    """Connect two players, pair them by invitation, and start their tasks."""
    sc = run.scenario
    pace = _Pace(random.Random(seed).uniform(0, sc.pace) if sc.pace > 0 else 0.0)
    run.paces.append(pace)
    a = _Player(run, pace, random.Random(seed * 2))
    b = _Player(run, pace, random.Random(seed * 2 + 1))
    await a.connect(addr, f"bench-{i}a")
    await b.connect(addr, f"bench-{i}b")
    ok = await a.request(m.Create(1, {"preset": run.rules.name}, sc.mode, False))
    await b.request(m.Join(1, None, ok.data["invite"]))
    nursery.start_soon(_guarded, run, a.play)
    nursery.start_soon(_guarded, run, b.play)


#: The baseline's seats sign what a seat signs (a placement), with a key nobody checks.
_BARE_KEY = Ed25519PrivateKey.from_private_bytes(bytes(32))


class _BarePlayer(_Shooter):
    """One side of a baseline pair: the same messages, through the relay or the echo.

    Its :class:`~seabattle.protocol.seat.Seat` does the seat's share of a shot as a player of
    the real server does (the defender's answer, with its openings; the attacker's move and the
    verdict it reads), so that the ratio isolates the server. What the baseline has no referee
    for, the player frames itself: the attacker sends the ``shot`` the defender would get (or,
    custody, the ``verdict`` the echo gives back), the defender sends its answer as the
    ``verdict`` the attacker would get."""

    def __init__(self, run: _Run, pace: _Pace, seat: int, match: bytes) -> None:
        self.run = run
        self.pace = pace
        self.seat = seat
        self.match = match
        self.conn = Connection(Role.CLIENT)
        self.conn.state = State.READY  # no handshake: the baseline has no identities
        self.stream: trio.SocketStream | None = None
        self.sock: DirectSocket | None = None
        sc = run.scenario
        self.core = Seat(match, _BARE_KEY, lean=not sc.echo, checking=False, quiet=True)
        # The match as a referee would begin it: seat, rules, one game, whoever fires first.
        self.core.receive(m.Start(match, seat, run.rules.to_dict(), sc.mode, ("", "")))
        self.core.receive(m.GameStart(match, 1, 0))
        self.next_cell = 0
        self.n = 0
        self.sent_at = 0.0
        self.wake_at = math.inf
        self.scope = None
        self.salt = bytes(16)

    def place(self, fleet: Fleet, secret: bytes) -> None:
        """Place the defender's fleet (its commitment goes nowhere: the baseline has no game)."""
        self.core.place(fleet, secret)

    def begin(self) -> None:
        """Firing begins (both connected): the attacker's turn comes."""
        self._carry(self.core.receive(m.Firing(self.match, 1, 0, ())))

    async def connect(self, addr: tuple[str, int], token: bytes) -> None:
        self.stream = await trio.open_tcp_stream(*addr)
        self.sock = direct(self.stream)
        await self.stream.send_all(token)
        await _read_exact(self.stream, 1)

    async def _fire(self) -> None:
        assert self.stream is not None
        run, pace = self.run, self.pace
        i = self.next_cell % len(run.labels)
        self.next_cell += 1
        self.n += 1
        pace.shots += 1
        self._next_slot()
        self.sent_at = time.perf_counter()
        (fire,) = self.core.fire(run.labels[i], self.n).sends
        assert isinstance(fire, m.Fire)
        if run.scenario.mode == "blind":
            # What the defender gets from the server: the shot, to answer.
            msg: m.Message = m.ShotCalled(
                self.match, 1, self.n, self.seat, fire.member, fire.cells, False
            )
        else:
            # What the attacker gets back from a custody referee: the verdict (a miss, opened;
            # the turn stays with the attacker, who alone fires here).
            result: dict[str, Any] = {
                "r": "miss",
                "open": {"i": i, "occ": False, "salt": self.salt},
                "sunk": None,
            }
            verdict = {"n": self.n, "results": [result], "total": None, "sunk": [], "found": None}
            msg = m.VerdictMsg(
                self.match, 1, self.n, self.seat, fire.member, fire.cells, False, verdict, self.seat
            )
        self._write(encode_frame(m.encode(msg)))

    def _carry(self, out: Out) -> None:
        """Act on the seat's events: only the attacker fires. What it says to send goes as the
        baseline frames it (:meth:`_fire`, :meth:`on`)."""
        for ev in out.events:
            if isinstance(ev, YourTurn) and self.seat == 0:
                self._turn()

    async def on(self, msg: m.Message) -> None:
        assert self.stream is not None
        core = self.core
        if isinstance(msg, m.ShotCalled):
            d, full = core.defender, self.run.rules.fleet_cells - 1
            if d is not None and msg.seat != self.seat and len(d.hit) >= full:
                d.hit.clear()  # the baseline game never ends
            out = core.receive(msg)
            # The defender's share of a blind shot: decode, answer with openings, encode; the
            # answer goes on as the verdict the attacker gets (its own shot copied back, in the
            # relay-copies baseline, asks for nothing).
            for ans in out.sends:
                if isinstance(ans, m.Answer):
                    verdict = m.VerdictMsg(
                        self.match, 1, msg.n, msg.seat, msg.member, msg.cells, False, ans.verdict,
                        msg.seat,
                    )  # fmt: skip
                    self._write(encode_frame(m.encode(verdict)))
            self._carry(out)
        elif isinstance(msg, m.VerdictMsg):
            if msg.seat == self.seat:
                self.run.shot_done(time.perf_counter() - self.sent_at)
            self._carry(core.receive(msg))

    async def play(self) -> None:
        """Fire and answer until cancelled or closed."""
        assert self.stream is not None
        await self._loop(self.stream, self.conn)


async def _setup_bare(
    run: _Run, addr: tuple[str, int], i: int, nursery: trio.Nursery, seed: int
) -> None:
    sc = run.scenario
    rng = random.Random(seed)
    pace = _Pace(rng.uniform(0, sc.pace) if sc.pace > 0 else 0.0)
    run.paces.append(pace)
    match = rng.randbytes(16)
    attacker = _BarePlayer(run, pace, 0, match)
    if sc.mode == "custody" and not run.defender_copy:
        await attacker.connect(addr, match)
        attacker.begin()
        nursery.start_soon(_guarded, run, attacker.play)
        return
    defender = _BarePlayer(run, pace, 1, match)
    if sc.mode == "blind":
        defender.place(rng.choice(run.fleets), rng.randbytes(32))
    async with trio.open_nursery() as pair:
        pair.start_soon(attacker.connect, addr, match)
        pair.start_soon(defender.connect, addr, match)
    attacker.begin()
    defender.begin()
    nursery.start_soon(_guarded, run, attacker.play)
    nursery.start_soon(_guarded, run, defender.play)
