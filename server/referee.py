"""One task per match: feeds the pure core (:class:`Match`, :class:`Game`), runs its clocks and
tells the players and spectators what happened (``spec/protocol.md`` 5.6, steps 3-12).

Theory of operation. Inputs from players arrive as method calls from their connection tasks
(:meth:`Referee.handle`); each is applied to the game at once, without awaiting, so inputs are
atomic with respect to each other and to the clock. The referee's own task (:meth:`Referee.run`)
sequences the games and owns time: it sleeps until the running clock or a disconnect grace period
runs out, or until an input wakes it, and feeds ``expire`` / ``abandon`` to the game when they do.

Trust modes. *Blind*: the players commit, answer and reveal; the game checks every opening.
*Custody*: the players hand their fleet and secret to the referee (``place``), which commits,
answers shots with :class:`~seabattle.protocol.verdict.Defender` and reveals both fleets itself.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Commitment, Committed, Reveal
from seabattle.protocol.errors import (
    ErrorCode,
    LocalProtocolError,
    ProtocolError,
    Refused,
    RemoteProtocolError,
)
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Deadline, Event, Game, Phase
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.match import Match
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.session import MAX_S2C_FRAME
from seabattle.protocol.verdict import Defender, Verdict

from .config import ContextLog, Peer, Timers, peer_context
from .events import event_message
from .metrics import Metrics

__all__ = ["MODES", "Referee", "Seat"]

MODES = ("blind", "custody")

_ABANDONABLE = (Phase.SETUP, Phase.FIRING, Phase.ANSWER)

_log = logging.getLogger("seabattle.server.referee")

#: What a referee nobody watches, or nobody co-signed, holds: one empty set shared by all.
_NOBODY: frozenset[Any] = frozenset()

#: Game inputs a seated player may send, by message type.
GAME_MESSAGES = (m.Commit, m.Place, m.Fire, m.Radar, m.Answer, m.RevealMsg, m.Resign)


@dataclass(slots=True)
class Seat:
    """A player's seat in a match and the connection currently playing it (``None``: away)."""

    player: str
    name: str
    peer: Peer | None = None
    gone_at: float | None = None  #: trio time the peer left; the grace period runs from here
    left: bool = False  #: the player left the match: every remaining game is forfeited
    #: Seqs of the shots (fire, radar) applied in game ``applied_game``. Seqs only repeat within
    #: a game, so the set is emptied when the next game starts rather than kept for the match.
    applied: set[int] = field(default_factory=set)
    applied_game: int = 0  #: the game ``applied`` belongs to (games are numbered from 1)


def _broadcast(msg: m.Message, peers: list[Peer]) -> None:
    """Queue ``msg`` for ``peers``, encoded once for all of them.

    A peer that can take a ready-made frame (:meth:`~.session.Client.send_frame`) gets the shared
    frame; any other (a test's fake peer) gets ``msg``. Errors, and a message that cannot be framed
    (too large, a server bug), go through each peer's ``send``, which reports them.
    """
    if len(peers) < 2 or isinstance(msg, m.Error):
        for p in peers:
            p.send(msg)
        return
    try:
        frame = m.frame(msg, max_frame=MAX_S2C_FRAME)
    except LocalProtocolError:
        frame = None
    for p in peers:
        send_frame = getattr(p, "send_frame", None)
        if frame is None or send_frame is None:
            p.send(msg)
        else:
            send_frame(frame, msg)


def _cork(peer: Peer) -> Callable[[], None] | None:
    """Cork ``peer`` if it can be (a :class:`~.session.Client`; a test's fake peer cannot);
    returns what uncorks it, or ``None`` if this call did not cork it."""
    cork = getattr(peer, "cork", None)
    if cork is None or not cork():
        return None
    client: Any = peer
    uncork: Callable[[], None] = client.uncork
    return uncork


class _Alarm:
    """A sleeping match's wake-up call, in the server's timer heap (:class:`~.config.Timed`)."""

    __slots__ = ("event",)

    def __init__(self, event: trio.Event) -> None:
        self.event = event

    def tick(self, now: float) -> None:
        """Wake the match (once: the alarm leaves the heap)."""
        self.event.set()


class Referee:
    """Referees one match between two seats; see the module docstring."""

    def __init__(
        self,
        *,
        match_id: bytes,
        rules: RuleSet,
        mode: str,
        seats: list[Seat],
        public: bool,
        finish: Callable[[Referee], Awaitable[None]],
        timers: Timers,
        metrics: Metrics | None = None,
    ) -> None:
        self.match_id = match_id
        self.hex = match_id.hex()
        self.rules = rules
        self.mode = mode
        self.seats = seats
        self.public = public
        # A server holds thousands of referees, most never watched nor co-signed: the set of
        # spectators, the co-signatures and the ``done`` event are made when first needed.
        self._spectators: set[Peer] | None = None
        self.match = Match(rules, match_id)
        #: Custody mode: each seat's fleet under fire, answered for by the referee (per game).
        self.defenders: list[Defender | None] | None = None
        self.clock: tuple[Deadline, float] | None = None
        self._clock_key: tuple[Any, ...] | None = None
        self._wake = trio.Event()
        #: Trio time the match task sleeps until (``-inf``: it is awake, and will look again).
        self._sleep_until = -math.inf
        self._finish = finish
        self.over = False
        self._done: trio.Event | None = None
        self._ended = False  #: ``done`` is set (or will be, once made)
        self.head = b""
        self.signed: dict[str, Any] | None = None
        #: The seats whose co-signature of the record is stored.
        self.cosigned: AbstractSet[int] = _NOBODY
        self.metrics = metrics if metrics is not None else Metrics()
        self._shot_at: float | None = None  #: trio time the pending blind-mode shot was called
        self._first: int | None = None  #: the seat the events being applied matter to first
        self._timers = timers
        self.log = ContextLog(_log, {"match": self.hex})

    @property
    def done(self) -> trio.Event:
        """Set when the match is over and its record stored (``head`` and ``signed`` filled in)."""
        if self._done is None:
            self._done = trio.Event()
            if self._ended:
                self._done.set()
        return self._done

    @property
    def spectators(self) -> AbstractSet[Peer]:
        """The peers watching the match (:meth:`watch`, :meth:`unwatch`)."""
        return self._spectators if self._spectators is not None else _NOBODY

    # -- who is who -------------------------------------------------------------------------------

    @property
    def game(self) -> Game | None:
        """The current (or last) game."""
        return self.match.game

    @property
    def players(self) -> list[str]:
        """Both players' ids, by seat."""
        return [s.player for s in self.seats]

    def seat_of(self, peer: Peer) -> int | None:
        """The seat ``peer`` plays, or ``None`` if it plays none in this match."""
        for i, s in enumerate(self.seats):
            if s.peer is peer:
                return i
        return None

    def seat_of_player(self, player: str) -> int | None:
        """The seat of ``player``, connected or not."""
        return next((i for i, s in enumerate(self.seats) if s.player == player), None)

    # -- sending ----------------------------------------------------------------------------------

    def to_players(self, msg: m.Message) -> None:
        """Queue ``msg`` for both seated players that are connected."""
        _broadcast(msg, [s.peer for s in self.seats if s.peer is not None])

    def to_all(self, msg: m.Message) -> None:
        """Queue ``msg`` for the players and every spectator (public events only)."""
        _broadcast(msg, self._audience())

    def _audience(self) -> list[Peer]:
        """The connected players and the spectators: who public events go to."""
        peers = [s.peer for s in self.seats if s.peer is not None]
        if self._spectators:
            peers += self._spectators
        return peers

    def view(self) -> dict[str, Any]:
        """The public view of the match: the current game's view and the match score."""
        g = self.game
        view: dict[str, Any] = g.view() if g else {}
        view.update(self.match.to_dict())
        view["mode"] = self.mode
        # SHOULD (6.6): a spectator gets no start, and reads the boards with these.
        view["rules"] = self.rules.to_dict()
        view["players"] = list(self.players)
        if g is not None and None not in g.commitments:
            # A client resuming mid-game checks the opponent's openings against these.
            view["commitments"] = [c.to_dict() for c in g.commitments if c is not None]
        if self.clock is not None:
            kind, at = self.clock
            view["clock"] = {
                "kind": kind.value,
                "left": max(0, math.ceil(at - trio.current_time())),
            }
        return view

    def start_message(self, seat: int) -> m.Start:
        """The ``start`` message for ``seat``."""
        return m.Start(self.match_id, seat, self.rules.to_dict(), self.mode, tuple(self.players))

    # -- attaching connections ------------------------------------------------------------------

    def attach(self, seat: int, peer: Peer) -> None:
        """``peer`` (re)takes ``seat``: it gets ``start`` and a snapshot, the opponent is told."""
        s = self.seats[seat]
        old, s.peer, s.gone_at = s.peer, peer, None
        if old is not None and old is not peer:
            old.close("replaced")
        peer.send(self.start_message(seat))
        peer.send(m.Snapshot(self.match_id, seat, self.view()))
        other = self.seats[1 - seat].peer
        if other is not None:
            other.send(m.OpponentStatus(self.match_id, seat, True, 0))
        self.log.info(
            "seat %d attached (%s)",
            seat,
            peer.player[:12],
            extra=peer_context(peer, seat=seat),
        )
        self._wake.set()

    def detach(self, peer: Peer) -> None:
        """``peer``'s connection ended: free its seat (the grace period starts) or its watch."""
        self.unwatch(peer)
        seat = self.seat_of(peer)
        if seat is None:
            return
        s = self.seats[seat]
        s.peer, s.gone_at = None, trio.current_time()
        if not self.over:
            grace = self.rules.clocks.grace
            other = self.seats[1 - seat].peer
            if other is not None:
                other.send(m.OpponentStatus(self.match_id, seat, False, grace))
            self.log.info(
                "seat %d disconnected; %ds grace",
                seat,
                grace,
                extra=peer_context(peer, seat=seat),
            )
        self._wake.set()

    def watch(self, peer: Peer) -> None:
        """Add a spectator: a snapshot of the public view, then live public events."""
        if self._spectators is None:
            self._spectators = set()
        self._spectators.add(peer)
        peer.send(m.Snapshot(self.match_id, None, self.view()))

    def unwatch(self, peer: Peer) -> bool:
        """Stop sending ``peer`` the match's events; whether it was watching."""
        watching = self._spectators
        if watching is None or peer not in watching:
            return False
        watching.discard(peer)
        return True

    # -- inputs -----------------------------------------------------------------------------------

    def handle(self, seat: int, msg: m.Message) -> None:
        """Apply one game message from ``seat``; raises :class:`ProtocolError` to refuse it."""
        if self.over:
            raise Refused(ErrorCode.GAME_OVER, "the match is over")
        g = self.game
        if g is None:
            raise Refused(ErrorCode.WRONG_PHASE, "no game is running")
        if getattr(msg, "game", g.number) != g.number:
            raise Refused(ErrorCode.WRONG_PHASE, f"game {g.number} is being played")
        if isinstance(msg, m.Fire | m.Radar):
            s = self.seats[seat]
            if s.applied_game != g.number:
                s.applied.clear()
                s.applied_game = g.number
            if msg.seq in s.applied:
                return  # a resend after a drop: it applied once already
            events = self._shoot(g, seat, msg)
            s.applied.add(msg.seq)
        elif isinstance(msg, m.Commit):
            self._need(self.mode == "blind", "custody mode: send 'place'")
            events = g.commit(seat, Commitment.from_dict(msg.commitment))
        elif isinstance(msg, m.Place):
            self._need(self.mode == "custody", "blind mode: send 'commit'")
            events = self._place(g, seat, msg)
        elif isinstance(msg, m.Answer):
            self._need(self.mode == "blind", "custody mode: the referee answers")
            # The transcript logs the map as received (it is what from_dict accepted, exactly).
            events = g.answer(seat, Verdict.from_dict(msg.verdict), wire=msg.verdict)
        elif isinstance(msg, m.RevealMsg):
            self._need(self.mode == "blind", "custody mode: the referee reveals")
            events = g.reveal(seat, Reveal.from_dict(msg.reveal))
        elif isinstance(msg, m.Resign):
            events = g.resign(seat)
        else:
            raise RemoteProtocolError(ErrorCode.UNEXPECTED_MESSAGE, f"{msg.TAG!r} is not a move")
        self.apply(events)

    @staticmethod
    def _need(ok: bool, why: str) -> None:
        if not ok:
            raise Refused(ErrorCode.UNEXPECTED_MESSAGE, why)

    def _shoot(self, g: Game, seat: int, msg: m.Fire | m.Radar) -> list[Event]:
        r = self.rules
        events: list[Event]
        if isinstance(msg, m.Radar):
            events = g.radar(seat, parse_cell(msg.at, r.rows, r.cols), msg.member)
        else:
            cells: list[Cell] = [parse_cell(c, r.rows, r.cols) for c in msg.cells]
            events = g.fire(seat, cells, msg.member)
        return events

    def _place(self, g: Game, seat: int, msg: m.Place) -> list[Event]:
        if g.phase is not Phase.SETUP:
            raise Refused(ErrorCode.WRONG_PHASE, "placing is over")
        if g.commitments[seat] is not None:
            raise Refused(ErrorCode.ALREADY_COMMITTED, "your fleet is placed")
        if len(msg.secret) != 32:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "the secret is 32 bytes")
        # An illegal fleet raises IllegalFleet (ILLEGAL_FLEET) and nothing changes: 000 lets the
        # player place again.
        fleet = Fleet.from_list(list(msg.fleet))
        committed = Committed(self.rules, fleet, msg.secret, self.match_id, g.number, seat)
        events: list[Event] = g.commit(seat, committed.commitment)
        defenders = self.defenders
        if defenders is None:
            defenders = self.defenders = [None, None]
        defenders[seat] = Defender(committed)
        if defenders[1 - seat] is not None:
            # Both committed (the mirror check read the leaves): from here on the game reads
            # them only at its end, and each seat's fleet and secret give them again.
            for d in defenders:
                assert d is not None
                d.committed.drop_leaves()
        return events

    # -- events out -------------------------------------------------------------------------------

    def apply(self, events: Iterable[Event]) -> None:
        """Announce ``events``, let the referee act for custody seats, and re-arm the clock.

        Everything one input makes a peer receive leaves in one write per peer, and the peer
        who waits for it (the defender owing a verdict on a called shot, the shooter a verdict
        answers) is written to first: the others' copies are not on the critical path.
        """
        peers = self._audience()
        corked = [(p, u) for p in peers if (u := _cork(p)) is not None]
        queue = list(events)
        try:
            while queue:
                ev = queue.pop(0)
                self._announce(ev, peers)
                queue.extend(self._custody_follow_up(ev))
        finally:
            # Whatever failed, the clock must follow the game and the match task must look at
            # it: otherwise a failure here could leave the match waiting on nothing. It is woken
            # only if it would otherwise sleep too long (its wake-up time moved earlier) or the
            # game is over; a later deadline is found when it wakes at the earlier one. Waking
            # it on every input cost a task switch, an Event and a tick per input.
            try:
                self._rearm_clock()
            finally:
                if corked:
                    self._uncork(corked)
            g = self.game
            if g is None or g.phase is Phase.OVER or self._wake_at() < self._sleep_until:
                self._wake.set()

    def _uncork(self, corked: list[tuple[Peer, Callable[[], None]]]) -> None:
        first = self.seats[self._first].peer if self._first is not None else None
        self._first = None
        # sorted() is stable: the waiting peer first, the others in the order they were corked.
        for _, uncork in sorted(corked, key=lambda pu: pu[0] is not first):
            uncork()

    def _custody_follow_up(self, ev: Event) -> list[Event]:
        g = self.game
        if self.mode != "custody" or g is None or g.phase is Phase.OVER:
            return []
        defenders = self.defenders
        if defenders is None:  # nobody placed yet: only the game's end can have happened
            return []
        if ev.kind == "shot" and ev.shot is not None:
            defender = defenders[1 - ev.shot.seat]
            assert defender is not None
            answered: list[Event] = g.answer(1 - ev.shot.seat, defender.answer(ev.shot))
            return answered
        if ev.kind == "reveal":
            out: list[Event] = []
            for s, d in enumerate(defenders):
                assert d is not None
                if g.phase is Phase.REVEAL:
                    out += g.reveal(s, d.committed.reveal())
            return out
        return []

    def _announce(self, ev: Event, peers: list[Peer]) -> None:
        """Tell ``peers`` (the connected players and the spectators) about ``ev``."""
        g = self.game
        assert g is not None
        kind = ev.kind
        if ev.shot is not None:
            # Who waits for this event: a called shot's defender owes the verdict; a verdict
            # answers its shooter. Written to first (see apply).
            self._first = 1 - ev.shot.seat if kind == "shot" else ev.shot.seat
        if kind == "shot":
            self.metrics.shots += 1
            if self.mode == "blind":
                self._shot_at = trio.current_time()
        elif self._shot_at is not None and kind in ("verdict", "shot_lost", "over"):
            # Only a verdict is an answer; a lost shot or the game's end leaves nothing to time.
            if kind == "verdict":
                self.metrics.shot_latency.observe(trio.current_time() - self._shot_at)
            self._shot_at = None
        if ev.kind == "over" and ev.outcome is not None:
            self.log.info("game %d over: %s", g.number, ev.outcome.to_dict())
        msg = event_message(g, self.match_id, ev)
        if msg is None:  # pragma: no cover - a new event kind in the core
            self.log.warning("unknown game event %r", ev.kind)
            return
        _broadcast(msg, peers)

    # -- clocks -----------------------------------------------------------------------------------

    def _rearm_clock(self) -> None:
        g = self.game
        d = g.deadline() if g is not None else None
        if g is None or d is None:
            self.clock, self._clock_key = None, None
            return
        kind, seconds = d
        # The setup and reveal clocks run once per game; a shot clock restarts with every turn
        # (every applied input), an answer clock with every shot.
        key: tuple[Any, ...] = (g.number, kind)
        if kind is Deadline.SHOT:
            key += (len(g.transcript),)
        elif kind is Deadline.ANSWER and g.pending is not None:
            key += (g.pending.n,)
        if key == self._clock_key:
            return
        self._clock_key = key
        self.clock = (kind, trio.current_time() + seconds)
        if kind is Deadline.ANSWER:
            # The answer clock is a fixed protocol deadline (``clocks.reveal`` from the rules both
            # players hold) that starts with every ``shot``: announcing it cost two (plus one per
            # spectator) ``clock`` frames on every blind shot, a third of the frames out, to say
            # nothing the ``shot`` does not. It is armed silently; snapshots still show it.
            return
        seat = g.turn if kind is Deadline.SHOT else None
        self.to_all(m.Clock(self.match_id, g.number, kind.value, seconds, seat))

    def _wake_at(self) -> float:
        at = self.clock[1] if self.clock else math.inf
        g = self.game
        if g is None or g.phase not in _ABANDONABLE:
            # Absence only counts where the game can be abandoned; a missing reveal has its clock.
            return at
        grace = self.rules.clocks.grace
        for s in self.seats:
            if s.left:
                at = min(at, trio.current_time())
            elif s.peer is None and s.gone_at is not None:
                at = min(at, s.gone_at + grace)
        return at

    def _tick(self, g: Game) -> None:
        """Apply whatever time has decided: an expired clock, a seat gone beyond its grace."""
        now = trio.current_time()
        if self.clock is not None and now >= self.clock[1]:
            kind = self.clock[0]
            self.clock, self._clock_key = None, None
            self.apply(g.expire(kind))
        grace = self.rules.clocks.grace
        gone = [
            (s.gone_at or 0.0, i)
            for i, s in enumerate(self.seats)
            if s.left or (s.peer is None and s.gone_at is not None and now >= s.gone_at + grace)
        ]
        if gone and g.phase in _ABANDONABLE:
            # Both gone: the one who left first forfeits.
            self.apply(g.abandon(min(gone)[1]))

    # -- the match task ---------------------------------------------------------------------------

    def _start(self) -> None:
        # A plain function, not run()'s body: logging materialises the frame that calls it,
        # and run()'s would keep that object for the whole match.
        for i in (0, 1):
            peer = self.seats[i].peer
            ctx = {"seat": i, "player": self.seats[i].player}
            if peer is not None:
                peer.send(self.start_message(i))
                ctx = peer_context(peer, seat=i)
            self.log.info("seat %d: %s", i, self.seats[i].player[:12], extra=ctx)

    async def run(self) -> None:
        """Play the match to its end, then hand it to ``finish`` (record, store, ladder)."""
        try:
            self._start()
            while not self.match.over:
                first = secrets.randbelow(2) if self.match.needs_lot() else None
                g = self.match.new_game(first)
                self.defenders = None
                self.to_all(m.GameStart(self.match_id, g.number, g.first))
                self._rearm_clock()
                await self._play(g)
                self.match.game_over()
            self.over = True
            await self._finish(self)
        except Exception:
            self.log.exception("referee failed")
            self.over = True
            self.to_all(m.Error(int(ErrorCode.INTERNAL_ERROR), "the match was aborted", None))
        finally:
            self.over = True
            self._ended = True
            if self._done is not None:
                self._done.set()

    async def _play(self, g: Game) -> None:
        failures = 0
        while g.phase is not Phase.OVER:
            self._sleep_until = at = self._wake_at()
            # An alarm in the server's timer heap rather than a cancel scope of its own (~0.6 KB
            # per sleeping match). A stale alarm sets an Event nobody waits on.
            if at < math.inf:
                self._timers.add(_Alarm(self._wake), at)
            await self._wake.wait()
            self._sleep_until = -math.inf
            self._wake = trio.Event()
            try:
                self._tick(g)
            except ProtocolError as e:
                # The core refused what the clock decided: log it and stop that clock, so that a
                # disagreement between shell and core cannot spin this loop.
                self.log.warning("time input refused: %s", e)
                self.clock, failures = None, failures + 1
                if failures > 3:
                    raise

    # -- co-signatures ----------------------------------------------------------------------------

    def check_cosign(self, seat: int, msg: m.CoSign) -> None:
        """Refuse a co-signature that is not ``seat``'s Ed25519 signature of this record's head."""
        if not self.head or self.signed is None:
            raise Refused(ErrorCode.WRONG_PHASE, "the record is not ready")
        if msg.head != self.head:
            raise RemoteProtocolError(ErrorCode.BAD_SIGNATURE, "that is not this record's head")
        try:
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(self.players[seat])).verify(
                msg.sig, self.head
            )
        except Exception:
            raise RemoteProtocolError(
                ErrorCode.BAD_SIGNATURE, "the signature does not verify"
            ) from None
