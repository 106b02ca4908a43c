"""The scripting API: play, watch and fetch records from a seabattle server with ``async with``.

Theory of operation. :func:`connect` opens one TCP (or TLS) stream, runs the handshake of
``spec/FLOW.md`` step 1 and yields a :class:`Client`. Inside the ``async with`` one reader task owns
the receiving side of the stream; every send goes through one lock (:class:`Wire`), so the reader
itself may send (automatic answers, reveals, co-signatures) without racing the script.

The reader routes each message: ``ok``/``error`` with a ``ref`` wake the request that carries that
id; everything naming a match goes to its :class:`MatchHandle`, which turns it into typed events
(:class:`GameStarted`, :class:`YourTurn`, ...) on an unbounded channel that
:meth:`MatchHandle.events` drains. Work that must happen whatever the script does happens in the
reader: in blind mode a shot at us is answered at once with :class:`~seabattle.protocol.verdict.
Defender` (with its openings), ``reveal_now`` is answered with the reveal, and ``match_over`` with
our co-signature of the record head.

Trust nobody: every match keeps a *mirror* :class:`~seabattle.protocol.game.Game`, fed with both
commitments from ``firing`` and with every ``shot``/``verdict``/``revealed`` the server relays. The
mirror checks each opening the moment it arrives and each reveal at the end, exactly as a referee
would; a failure is surfaced as :class:`LieDetected` (naming the seat, or ``None`` when the server's
own relay was inconsistent).

Framing uses :mod:`seabattle.protocol.codec` directly rather than ``session.Connection``, so that
the same :class:`Wire` serves peer play, where both sides send messages the session table marks as
client-to-server (``commit``, ``fire``, ``answer``). The handshake order is the session's.
"""

from __future__ import annotations

import builtins
import math
import os
import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.commit import Commitment, Committed, Reveal
from seabattle.protocol.errors import ErrorCode, ProtocolError, RemoteProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Deadline, EndReason, Event, Game, Phase
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet, SunkReport, rules_from_dict
from seabattle.protocol.session import SUPPORTED_VERSIONS, auth_payload
from seabattle.protocol.verdict import Defender, Result, Shot, Verdict

__all__ = [
    "AGENT",
    "BotResult",
    "Client",
    "ConnectionClosed",
    "GameEnded",
    "GameStarted",
    "IncomingShot",
    "Info",
    "LieDetected",
    "MatchEnded",
    "MatchEvent",
    "MatchHandle",
    "Refused",
    "RequestFailed",
    "ShotResult",
    "Wire",
    "YourTurn",
    "connect",
    "feed_view",
    "load_key",
    "play_bot",
    "play_match",
    "public_key",
]

AGENT = "seabattle-client/0.1"

#: How a test or a scripted liar may alter the verdict the client would send (blind mode only).
Tamper = Callable[[Shot, Verdict], Verdict]


# ================================================================================================
# Errors
# ================================================================================================


class ConnectionClosed(Exception):
    """The server closed the connection (or it broke) while something was waiting on it."""


class RequestFailed(Exception):
    """A lobby request was refused: ``code`` from the error registry and the server's message."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{_slug(code)}: {msg}")
        self.code = code
        self.msg = msg


def _slug(code: int) -> str:
    try:
        return str(ErrorCode(code).slug)
    except ValueError:
        return str(code)


# ================================================================================================
# Keys
# ================================================================================================


def load_key(path: str | os.PathLike[str] | None, *, create: bool = True) -> Ed25519PrivateKey:
    """The Ed25519 identity key at ``path`` (PEM, or 32 raw bytes); a fresh guest key for ``None``.

    With ``create`` a missing file is created (PEM, mode 0600), so that ``--key me.pem`` gives a
    stable identity from the first run on.
    """
    if path is None:
        return Ed25519PrivateKey.generate()
    p = Path(path)
    if not p.exists():
        if not create:
            raise FileNotFoundError(p)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        p.write_bytes(pem)
        p.chmod(0o600)
        return key
    data = p.read_bytes()
    if len(data) == 32:
        return Ed25519PrivateKey.from_private_bytes(data)
    loaded = serialization.load_pem_private_key(data, password=None)
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError(f"{p} does not hold an Ed25519 private key")
    return loaded


def public_key(key: Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``key``'s public half (the player id is their hex)."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# ================================================================================================
# The wire
# ================================================================================================


class Wire:
    """One framed message stream: serialised sends, one receiver.

    ``recv`` returns a message, a :class:`RemoteProtocolError` for a frame that held no valid
    message (the session goes on), or ``None`` at the end of the stream.
    """

    def __init__(self, stream: trio.abc.Stream, max_frame: int = 65536) -> None:
        self.stream = stream
        self.max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._lock = trio.Lock()
        self._eof = False
        self.closed = False

    async def send(self, msg: m.Message) -> None:
        """Send one message; sends from several tasks never interleave."""
        frame = encode_frame(m.encode(msg), max_frame=self.max_frame)
        async with self._lock:
            if self.closed:
                raise ConnectionClosed("the connection is closed")
            try:
                await self.stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from None

    async def recv(self) -> m.Message | RemoteProtocolError | None:
        """The next message (see the class docstring)."""
        while True:
            try:
                d = self._decoder.next_frame()
            except RemoteProtocolError:
                self.closed = True
                raise
            if d is not None:
                try:
                    return m.decode(d)
                except RemoteProtocolError as e:
                    return e
            if self._eof:
                return None
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._eof = True
                self.closed = True
                self._decoder.eof()
            else:
                self._decoder.feed(data)

    async def expect(self, *types: type[m.Message]) -> m.Message:
        """The next message, which must be one of ``types`` (heartbeats are answered on the way)."""
        while True:
            msg = await self.recv()
            if msg is None:
                raise ConnectionClosed("the peer closed the connection")
            if isinstance(msg, RemoteProtocolError):
                raise msg
            if isinstance(msg, m.Ping):
                await self.send(m.Pong(msg.n))
                continue
            if isinstance(msg, m.Pong):
                continue
            if isinstance(msg, types):
                return msg
            if isinstance(msg, m.Error):
                raise RequestFailed(msg.code, msg.msg)
            if isinstance(msg, m.Bye):
                raise ConnectionClosed(f"the peer said bye: {msg.reason}")
            raise RemoteProtocolError(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"expected {'/'.join(t.TAG for t in types)}, got {msg.TAG!r}",
            )

    async def aclose(self) -> None:
        """Close the stream (idempotent)."""
        self.closed = True
        await self.stream.aclose()


async def client_handshake(wire: Wire, key: Ed25519PrivateKey, name: str) -> tuple[str, bytes]:
    """Run FLOW step 1 as the client; return (player id, the server's public key)."""
    await wire.send(m.Hello(SUPPORTED_VERSIONS, AGENT, ()))
    welcome = await wire.expect(m.Welcome)
    assert isinstance(welcome, m.Welcome)
    pub = public_key(key)
    sig = key.sign(auth_payload(welcome.challenge, welcome.server, pub))
    await wire.send(m.Auth(pub, sig, name, None))
    authed = await wire.expect(m.Authed)
    assert isinstance(authed, m.Authed)
    return authed.player, welcome.server


# ================================================================================================
# Events
# ================================================================================================


@dataclass(frozen=True, slots=True)
class MatchEvent:
    """Base of every event a :class:`MatchHandle` yields."""


@dataclass(frozen=True, slots=True)
class GameStarted(MatchEvent):
    """Game ``game`` of the match begins; place a fleet for it (``first`` may not be known yet)."""

    game: int
    first: int | None


@dataclass(frozen=True, slots=True)
class YourTurn(MatchEvent):
    """It is our move: call ``count`` cells (or the radar, when ``radar`` is still available)."""

    game: int
    count: int
    radar: bool


@dataclass(frozen=True, slots=True)
class ShotResult(MatchEvent):
    """The checked verdict on our shot ``n`` (``crossed``: cells the rules now cross out)."""

    game: int
    n: int
    cells: tuple[Cell, ...]
    radar: bool
    verdict: Verdict
    crossed: tuple[Cell, ...] = ()

    @property
    def results(self) -> list[Result]:
        """Per-cell results (empty for salvo totals and radar)."""
        return [r.result for r in self.verdict.results]


@dataclass(frozen=True, slots=True)
class IncomingShot(MatchEvent):
    """The opponent's shot ``n`` at us and its verdict (ours in blind mode, the referee's else)."""

    game: int
    n: int
    cells: tuple[Cell, ...]
    radar: bool
    verdict: Verdict | None


@dataclass(frozen=True, slots=True)
class Refused(MatchEvent):
    """The server refused one of our moves: registry ``code`` and its message; we keep the move."""

    code: int
    msg: str

    @property
    def slug(self) -> str:
        """The error's lower-case name, e.g. ``already_fired``."""
        return _slug(self.code)


@dataclass(frozen=True, slots=True)
class LieDetected(MatchEvent):
    """``seat`` lied or cheated (``None``: the server's relay itself was inconsistent).

    ``source`` is ``"mirror"`` when our own game mirror caught it from the proofs it received, and
    ``"referee"`` when the referee ended the game for it without relaying the false verdict (the
    signed record then holds the proof: ``seabattle verify`` replays it).
    """

    game: int
    seat: int | None
    detail: str
    source: str = "mirror"


@dataclass(frozen=True, slots=True)
class GameEnded(MatchEvent):
    """Game ``game`` ended: ``outcome`` is ``{winner, reason, detail}``; ``won``: did we win."""

    game: int
    outcome: dict[str, Any]
    won: bool | None


@dataclass(frozen=True, slots=True)
class MatchEnded(MatchEvent):
    """The match ended: the result, rating changes, and the record head we co-signed."""

    result: dict[str, Any]
    ratings: dict[str, Any] | None
    head: bytes
    won: bool | None


@dataclass(frozen=True, slots=True)
class Info(MatchEvent):
    """Any other match message (clock, opponent presence, snapshot, reveals), as received."""

    message: m.Message


# ================================================================================================
# Feeding a bot's view
# ================================================================================================


def feed_view(view: Any, rules: RuleSet, cells: Sequence[Cell], radar: bool, v: Verdict) -> None:
    """Tell a :class:`~seabattle.client.bots.TargetView` what verdict ``v`` on ``cells`` showed."""
    if radar:
        if v.found is not None:
            view.radar(cells[0], rules.radar_size, v.found)
        return
    if v.total is not None:
        view.salvo_total(list(cells), v.total)
        return
    for c, res in zip(cells, v.results, strict=True):
        if res.result is Result.MISS:
            view.miss(c)
        elif res.result is Result.HIT:
            view.hit(c)
        else:
            claim = res.sunk
            shown = None
            ship = None
            if claim is not None and rules.sunk is not SunkReport.SILENT:
                ship = claim.ship
                if claim.opening is not None:
                    shown = claim.opening.placement.cells(rules.fleet[claim.ship].length)
            view.sunk(c, ship, shown)


def _cells(texts: Sequence[str], rules: RuleSet) -> tuple[Cell, ...]:
    return tuple(parse_cell(t, rules.rows, rules.cols) for t in texts)


def _labels(cells: str | Cell | Sequence[str | Cell]) -> tuple[str, ...]:
    if isinstance(cells, str | Cell):
        cells = [cells]
    return tuple(c.label() if isinstance(c, Cell) else c.strip().upper() for c in cells)


#: Game-end reasons that mean the loser lied or cheated (and the record can show it).
_FAULTS = frozenset(
    r.value
    for r in (
        EndReason.FALSE_PROOF,
        EndReason.FALSE_VERDICT,
        EndReason.BAD_REVEAL,
        EndReason.ILLEGAL_FLEET,
    )
)


# ================================================================================================
# A match seen from one seat
# ================================================================================================


class MatchHandle:
    """One match we play: place, fire, and iterate its events. Made by :class:`Client`."""

    def __init__(self, client: Client, match_id: bytes) -> None:
        self.client = client
        self.id = match_id
        self.seat: int | None = None
        self.rules: RuleSet | None = None
        self.mode = "blind"
        self.players: tuple[str, ...] = ()
        self.game_no = 0
        self.first: int | None = None
        self.mirror: Game | None = None
        self.committed: Committed | None = None
        self.defender: Defender | None = None
        self.placed_game = 0
        self.result: dict[str, Any] | None = None
        self.head: bytes | None = None
        self.lies: list[LieDetected] = []
        #: Test hook: alter the verdict we send (a scripted liar). Blind mode only.
        self.tamper: Tamper | None = None
        self._started = trio.Event()
        self._game_event = trio.Event()
        self._seq = 0
        self._send, self._recv = trio.open_memory_channel[MatchEvent](math.inf)
        self._done = False

    # -- script side -----------------------------------------------------------------------------

    @property
    def placed(self) -> bool:
        """Whether a fleet is placed for the current game."""
        return self.game_no > 0 and self.placed_game == self.game_no

    @property
    def match_id_hex(self) -> str:
        """The match id as hex (what ``get_record`` and the CLI print)."""
        return self.id.hex()

    async def wait_started(self) -> None:
        """Wait until the match (``start``) and its first game (``game``) have begun."""
        await self._started.wait()
        while self.game_no == 0:
            await self._game_event.wait()

    async def place(self, fleet: Fleet | None = None, rng: random.Random | None = None) -> Fleet:
        """Place ``fleet`` (``None``: a random legal fleet) for the current game.

        Blind mode sends the commitment only; custody mode hands fleet and secret to the referee.
        The fleet and secret stay here (:attr:`committed`) to answer shots and to reveal.
        """
        await self.wait_started()
        assert self.rules is not None and self.seat is not None
        rng = rng or random.SystemRandom()
        if fleet is None:
            fleet = random_fleet(self.rules, rng)
        fleet.validate(self.rules)
        secret = os.urandom(32)
        game = self.game_no
        self.committed = Committed(self.rules, fleet, secret, self.id, game, self.seat)
        self.defender = Defender(self.committed)
        self.placed_game = game
        if self.mode == "custody":
            await self.client.wire.send(m.Place(self.id, game, tuple(fleet.to_list()), secret))
        else:
            await self.client.wire.send(
                m.Commit(self.id, game, self.committed.commitment.to_dict())
            )
        return fleet

    async def fire(self, cells: str | Cell | Sequence[str | Cell]) -> None:
        """Call one cell (``"E5"``) or a salvo (a list); the answer comes as events."""
        self._seq += 1
        member = self.mirror.caller(self.seat) if self.mirror and self.seat is not None else 0
        await self.client.wire.send(
            m.Fire(self.id, self.game_no, _labels(cells), member, self._seq)
        )

    async def radar(self, at: str | Cell) -> None:
        """Scan the radar area whose top-left cell is ``at`` instead of firing."""
        self._seq += 1
        member = self.mirror.caller(self.seat) if self.mirror and self.seat is not None else 0
        await self.client.wire.send(
            m.Radar(self.id, self.game_no, _labels(at)[0], member, self._seq)
        )

    async def resign(self) -> None:
        """Give up the current game."""
        await self.client.wire.send(m.Resign(self.id, self.game_no))

    async def events(self) -> AsyncIterator[MatchEvent]:
        """The match's events, in order, until :class:`MatchEnded` (or the connection ends)."""
        async for ev in self._recv:
            yield ev
            if isinstance(ev, MatchEnded):
                return

    # -- reader side -----------------------------------------------------------------------------

    def _emit(self, ev: MatchEvent) -> None:
        if isinstance(ev, LieDetected):
            self.lies.append(ev)
        if not self._done:
            self._send.send_nowait(ev)

    def _close(self) -> None:
        self._done = True
        self._send.close()

    def _mirror_apply(self, fn: Callable[[], list[Event]], blame: int | None) -> list[Event]:
        """Run one mirror input; a refusal means the server relayed what a referee must not."""
        if self.mirror is None:
            return []
        try:
            events = fn()
        except ProtocolError as e:
            self._emit(LieDetected(self.game_no, blame, f"mirror refused: {e}"))
            self.mirror = None  # out of step with the server: stop checking rather than cry wolf
            return []
        for ev in events:
            o = ev.outcome
            if ev.kind == "over" and o is not None and o.reason is EndReason.FALSE_PROOF:
                self._emit(
                    LieDetected(self.game_no, None if o.winner is None else 1 - o.winner, o.detail)
                )
        return events

    async def _handle(self, msg: m.Message) -> None:
        wire = self.client.wire
        if isinstance(msg, m.Start):
            self.seat = msg.seat
            self.rules = rules_from_dict(msg.rules)
            self.mode = msg.mode
            self.players = msg.players
            self._started.set()
        elif isinstance(msg, m.GameStart):
            assert self.rules is not None
            self.game_no = msg.game
            self.first = msg.first
            self.mirror = Game(self.rules, self.id, msg.game)
            self.committed = None
            self.defender = None
            ev = self._game_event
            self._game_event = trio.Event()
            ev.set()
            self._emit(GameStarted(msg.game, msg.first))
        elif isinstance(msg, m.Firing):
            await self._on_firing(msg)
        elif isinstance(msg, m.ShotCalled):
            await self._on_shot(msg)
        elif isinstance(msg, m.VerdictMsg):
            self._on_verdict(msg)
        elif isinstance(msg, m.ShotLost):
            g = self.mirror
            if g is not None and g.phase is Phase.FIRING and g.turn == msg.seat:
                # The repeated cells never reach us, so the mirror applies the loss as told.
                if msg.why == "clock":
                    self._mirror_apply(lambda: g.expire(Deadline.SHOT), None)
                else:
                    g._lose_shot(msg.seat, msg.why)
            self._emit(Info(msg))
            self._maybe_turn(msg.next)
        elif isinstance(msg, m.RevealNow):
            if self.mode != "custody" and self.committed is not None:
                reveal = self.committed.reveal().to_dict()
                await wire.send(m.RevealMsg(self.id, msg.game, reveal))
            self._emit(Info(msg))
        elif isinstance(msg, m.Revealed):
            self._on_revealed(msg)
        elif isinstance(msg, m.GameOver):
            w = msg.outcome.get("winner")
            reason = msg.outcome.get("reason")
            if reason in _FAULTS and isinstance(w, int) and w == self.seat:
                known = any(x.game == msg.game and x.seat == 1 - w for x in self.lies)
                if not known:
                    detail = f"referee: {reason}: {msg.outcome.get('detail', '')}"
                    self._emit(LieDetected(msg.game, 1 - w, detail, "referee"))
            self._emit(
                GameEnded(msg.game, dict(msg.outcome), None if w is None else w == self.seat)
            )
        elif isinstance(msg, m.MatchOver):
            self.result = dict(msg.result)
            self.head = msg.head
            sig = self.client.key.sign(msg.head)
            with suppress(ConnectionClosed):
                await wire.send(m.CoSign(self.id, msg.head, sig))
            w = msg.result.get("winner")
            won = None if w is None else w == self.seat
            self._emit(MatchEnded(dict(msg.result), msg.ratings, msg.head, won))
            self._close()
        else:
            self._emit(Info(msg))

    async def _on_firing(self, msg: m.Firing) -> None:
        g = self.mirror
        self.first = msg.first
        if g is not None:
            try:
                coms = [Commitment.from_dict(c) for c in msg.commitments]
            except ProtocolError as e:
                self._emit(LieDetected(self.game_no, None, f"bad commitment relayed: {e}"))
                self.mirror = None
                coms = []
            if len(coms) == 2 and self.committed is not None and self.seat is not None:
                mine = coms[self.seat].root(g.ctx[self.seat])
                if mine != self.committed.root:
                    self._emit(
                        LieDetected(self.game_no, None, "the relayed commitment is not ours")
                    )
            if len(coms) == 2:
                for s in (0, 1):
                    self._mirror_apply(lambda s=s: g.commit(s, coms[s]), s)  # type: ignore[misc]
                self._mirror_apply(lambda: g.set_first(msg.first), None)
        self._maybe_turn(msg.first)

    def _maybe_turn(self, nxt: int | None) -> None:
        if nxt is None or nxt != self.seat:
            return
        g = self.mirror
        count = g.shot_count(nxt) if g is not None else 1
        radar = bool(self.rules and self.rules.radar and g and not g.boards[1 - nxt].radar_used)
        self._emit(YourTurn(self.game_no, count, radar))

    async def _on_shot(self, msg: m.ShotCalled) -> None:
        assert self.rules is not None
        cells = _cells(msg.cells, self.rules)
        g = self.mirror
        if g is not None:
            if msg.radar:
                self._mirror_apply(lambda: g.radar(msg.seat, cells[0]), None)
            else:
                self._mirror_apply(lambda: g.fire(msg.seat, list(cells)), None)
        if msg.seat == self.seat or self.mode == "custody" or self.defender is None:
            return
        shot = Shot(msg.n, msg.seat, cells, msg.radar)
        verdict = self.defender.answer(shot)
        if self.tamper is not None:
            verdict = self.tamper(shot, verdict)
        await self.client.wire.send(m.Answer(self.id, msg.game, verdict.to_dict()))

    def _on_verdict(self, msg: m.VerdictMsg) -> None:
        assert self.rules is not None
        cells = _cells(msg.cells, self.rules)
        try:
            v = Verdict.from_dict(msg.verdict)
        except ProtocolError as e:
            self._emit(LieDetected(self.game_no, 1 - msg.seat, f"malformed verdict: {e}"))
            return
        g = self.mirror
        crossed: tuple[Cell, ...] = ()
        if g is not None:
            before = set(g.boards[1 - msg.seat].crossed)
            self._mirror_apply(lambda: g.answer(1 - msg.seat, v), 1 - msg.seat)
            if self.mirror is not None:
                cols = self.rules.cols
                crossed = tuple(
                    Cell(*divmod(i, cols)) for i in sorted(g.boards[1 - msg.seat].crossed - before)
                )
        if msg.seat == self.seat:
            self._emit(ShotResult(msg.game, msg.n, cells, msg.radar, v, crossed))
        else:
            self._emit(IncomingShot(msg.game, msg.n, cells, msg.radar, v))
        self._maybe_turn(msg.next)

    def _on_revealed(self, msg: m.Revealed) -> None:
        g = self.mirror
        if g is not None and g.phase is Phase.REVEAL:
            try:
                reveal = Reveal.from_dict(msg.reveal)
            except ProtocolError as e:
                self._emit(LieDetected(self.game_no, msg.seat, f"bad reveal: {e}"))
            else:
                self._mirror_apply(lambda: g.reveal(msg.seat, reveal), None)
                fault = g.faults[msg.seat]
                if fault is not None and msg.seat != self.seat:
                    self._emit(LieDetected(self.game_no, msg.seat, fault[1]))
        self._emit(Info(msg))


# ================================================================================================
# The client
# ================================================================================================


class Client:
    """An authenticated connection to a server. Made by :func:`connect`."""

    def __init__(self, wire: Wire, key: Ed25519PrivateKey, player: str, server_key: bytes) -> None:
        self.wire = wire
        self.key = key
        self.player = player
        self.server_key = server_key
        self.matches: dict[bytes, MatchHandle] = {}
        self._watchers: dict[bytes, trio.MemorySendChannel[m.Message]] = {}
        self._pending: dict[int, tuple[trio.Event, list[m.Ok | m.Error]]] = {}
        self._ids = 0
        self.errors: list[m.Error] = []

    # -- requests --------------------------------------------------------------------------------

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def _request(self, make: Callable[[int], m.Message]) -> dict[str, Any]:
        rid = self._next_id()
        done = trio.Event()
        box: list[m.Ok | m.Error] = []
        self._pending[rid] = (done, box)
        try:
            await self.wire.send(make(rid))
            await done.wait()
        finally:
            self._pending.pop(rid, None)
        if not box:
            raise ConnectionClosed("the connection closed before the answer")
        ans = box[0]
        if isinstance(ans, m.Error):
            raise RequestFailed(ans.code, ans.msg)
        return dict(ans.data)

    def _handle_for(self, match_id: bytes) -> MatchHandle:
        h = self.matches.get(match_id)
        if h is None:
            h = self.matches[match_id] = MatchHandle(self, match_id)
        return h

    async def create(
        self, rules: dict[str, Any] | None = None, mode: str = "blind", public: bool = True
    ) -> tuple[MatchHandle, str | None]:
        """Open a match; returns its handle and the private invitation code."""
        data = await self._request(
            lambda i: m.Create(i, rules or {"preset": "classic"}, mode, public)
        )
        h = self._handle_for(data["match"])
        return h, data.get("invite")

    async def join(self, match: bytes | str) -> MatchHandle:
        """Take the free seat of a match: by id (bytes or 32 hex digits) or by invitation code."""
        mid: bytes | None = None
        invite: str | None = None
        if isinstance(match, bytes):
            mid = match
        else:
            try:
                raw = bytes.fromhex(match)
            except ValueError:
                raw = b""
            if len(raw) == 16:
                mid = raw
            else:
                invite = match
        data = await self._request(lambda i: m.Join(i, mid, invite))
        return self._handle_for(data["match"])

    async def quick(self, rules: dict[str, Any] | None = None, mode: str = "blind") -> MatchHandle:
        """Pair with the next player asking for the same rules and mode (waits for one)."""
        data = await self._request(lambda i: m.Quick(i, rules or {"preset": "classic"}, mode))
        return self._handle_for(data["match"])

    async def list(self) -> builtins.list[dict[str, Any]]:
        """The open public matches."""
        data = await self._request(lambda i: m.ListMatches(i))
        return list(data.get("matches", []))

    async def ladder(self) -> builtins.list[dict[str, Any]]:
        """The rating ladder rows."""
        data = await self._request(lambda i: m.Ladder(i))
        return list(data.get("rows", []))

    async def get_record(self, match_id: bytes | str) -> dict[str, Any]:
        """The signed record of a finished match (verify it with ``protocol.record``)."""
        mid = bytes.fromhex(match_id) if isinstance(match_id, str) else match_id
        data = await self._request(lambda i: m.GetRecord(i, mid))
        rec = data["record"]
        if isinstance(rec, bytes):
            # A record nests deeper than a message may, so servers send its canonical bytes.
            from seabattle.protocol.record import load_record

            rec = load_record(rec)
        if not isinstance(rec, dict):
            raise RequestFailed(ErrorCode.RECORD_INVALID, "the record is neither bytes nor a map")
        return rec

    @asynccontextmanager
    async def watch(
        self, match_id: bytes | str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[m.Message]]:
        """Spectate: yields a channel of the snapshot, then the match's public events."""
        mid = bytes.fromhex(match_id) if isinstance(match_id, str) else match_id
        send, recv = trio.open_memory_channel[m.Message](math.inf)
        self._watchers[mid] = send
        try:
            await self._request(lambda i: m.Watch(i, mid))
            yield recv
        finally:
            self._watchers.pop(mid, None)
            send.close()

    # -- the reader ------------------------------------------------------------------------------

    async def _reader(self) -> None:
        try:
            while True:
                msg = await self.wire.recv()
                if msg is None:
                    return
                if isinstance(msg, RemoteProtocolError):
                    continue  # the server sent something we cannot read; skip it and go on
                await self._dispatch(msg)
        except (RemoteProtocolError, ConnectionClosed):
            return
        finally:
            for done, _ in list(self._pending.values()):
                done.set()
            for h in self.matches.values():
                h._close()
            for w in self._watchers.values():
                w.close()

    async def _dispatch(self, msg: m.Message) -> None:
        if isinstance(msg, m.Ok | m.Error) and msg.ref is not None and msg.ref in self._pending:
            done, box = self._pending[msg.ref]
            box.append(msg)
            done.set()
            return
        if isinstance(msg, m.Error):
            # A refused move (ref = its seq) or a refused placement (ref None): we cannot tell
            # which match from the message, so every running match hears of it.
            self.errors.append(msg)
            for h in self.matches.values():
                if not h._done:
                    h._emit(Refused(msg.code, msg.msg))
            return
        if isinstance(msg, m.Ping):
            await self.wire.send(m.Pong(msg.n))
            return
        mid = getattr(msg, "match", None)
        if not isinstance(mid, bytes):
            return
        w = self._watchers.get(mid)
        if w is not None and mid not in self.matches:
            w.send_nowait(msg)
            return
        h = self._handle_for(mid)
        await h._handle(msg)


@asynccontextmanager
async def connect(
    host: str,
    port: int,
    *,
    key: Ed25519PrivateKey | str | os.PathLike[str] | None = None,
    name: str = "bot",
    tls: bool = False,
    stream: trio.abc.Stream | None = None,
) -> AsyncIterator[Client]:
    """Connect, authenticate (a fresh guest key when ``key`` is ``None``) and yield a client.

    ``stream`` replaces the TCP connection (tests pass an in-memory stream). One reader task runs
    for as long as the ``async with`` body does.
    """
    if stream is None:
        if tls:
            stream = await trio.open_ssl_over_tcp_stream(host, port)
        else:
            stream = await trio.open_tcp_stream(host, port)
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    wire = Wire(stream)
    try:
        player, server_key = await client_handshake(wire, k, name)
        client = Client(wire, k, player, server_key)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._reader)
            try:
                yield client
            finally:
                if not wire.closed:
                    with (
                        trio.move_on_after(1),
                        suppress(ConnectionClosed, trio.BrokenResourceError),
                    ):
                        await wire.send(m.Bye("done"))
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await wire.aclose()


# ================================================================================================
# Bots over the network
# ================================================================================================


@dataclass
class BotResult:
    """One match a bot played: id, our seat, whether we won, the result, lies seen, refusals."""

    match_id: bytes
    seat: int | None
    won: bool | None
    result: dict[str, Any]
    lies: list[LieDetected] = field(default_factory=list)
    refusals: int = 0


async def play_match(
    match: MatchHandle, strategy: Any, rng: random.Random | None = None
) -> BotResult:
    """Play ``match`` to its end with a :class:`~seabattle.client.bots.Strategy`."""
    from seabattle.client.bots import TargetView

    rng = rng or random.SystemRandom()
    await match.wait_started()
    assert match.rules is not None
    rules = match.rules
    if not match.placed:
        await match.place(rng=rng)
    view = TargetView(rules)
    refusals = 0
    last_turn: YourTurn | None = None
    result: dict[str, Any] = {}
    won: bool | None = None
    async for ev in match.events():
        if isinstance(ev, GameStarted):
            view = TargetView(rules)
            if not match.placed:
                await match.place(rng=rng)
        elif isinstance(ev, YourTurn | Refused):
            if isinstance(ev, Refused):
                refusals += 1
                if last_turn is None:
                    continue
                if refusals > 50:
                    # The strategy keeps calling what the referee refuses: give the game up
                    # rather than stall the match until the clock runs out.
                    await match.resign()
                    continue
                turn = last_turn
            else:
                turn = last_turn = ev
            at = strategy.use_radar(view, rng) if turn.radar else None
            if at is not None:
                await match.radar(at)
            else:
                await match.fire(strategy.choose(view, turn.count, rng))
        elif isinstance(ev, ShotResult):
            last_turn = None
            feed_view(view, rules, ev.cells, ev.radar, ev.verdict)
            for c in ev.crossed:
                view.crossed(c)
        elif isinstance(ev, MatchEnded):
            result, won = ev.result, ev.won
    return BotResult(match.id, match.seat, won, result, list(match.lies), refusals)


async def play_bot(
    client: Client,
    strategy: Any,
    rules: dict[str, Any] | None = None,
    mode: str = "blind",
    games: int = 1,
    rng: random.Random | None = None,
) -> list[BotResult]:
    """Play ``games`` quick matches in a row with ``strategy`` (a ``bots.Strategy``)."""
    out = []
    for _ in range(games):
        match = await client.quick(rules, mode)
        out.append(await play_match(match, strategy, rng))
    return out
