"""One task per match: a trio shell over the pure referee (:mod:`seabattle.protocol.referee`).

Theory of operation. The rules of refereed play live in the pure referee; this shell owns only
connections, time and the record. Inputs from players arrive as method calls from their
connection tasks (:meth:`Referee.handle`); each is fed to the pure referee at once, without
awaiting, so inputs are atomic with respect to each other and to the clock, and what the pure
referee says is written at once (:meth:`Referee._send`). The match task (:meth:`Referee.run`)
sleeps until the time the pure referee names (:attr:`~seabattle.protocol.referee.Referee.wake_at`)
or until an input moves that time earlier, and feeds the time to it then. When the match is over
it hands the match to ``finish`` (record, store, ladder).
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from seabattle.protocol import messages as m
from seabattle.protocol import referee as pure
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, Refused, RemoteProtocolError
from seabattle.protocol.game import Game
from seabattle.protocol.match import Match
from seabattle.protocol.referee import (
    ALL,
    LEAN_SPECTATORS,
    MODES,
    SEAT0,
    SEAT1,
    SPECTATORS,
    Send,
)
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.session import MAX_S2C_FRAME

from .config import ContextLog, Peer, Timers, peer_context
from .journal import Clock, Journal, entry, replay
from .metrics import Metrics
from .outbox import Outbox
from .schema import Fenced
from .store_rows import Fence

__all__ = ["GAME_MESSAGES", "MODES", "Referee", "Seat"]

_log = logging.getLogger("seabattle.server.referee")

#: What a referee nobody watches, or nobody co-signed, holds: one empty set shared by all.
_NOBODY: frozenset[Any] = frozenset()

#: What ends the wait for a pending shot's verdict (for the shot latency metric).
_ENDS_A_SHOT = frozenset({m.VerdictMsg, m.ShotLost, m.GameOver})

#: Game inputs a seated player may send, by message type.
GAME_MESSAGES = (m.Commit, m.Place, m.Fire, m.Radar, m.Answer, m.RevealMsg, m.Resign)

#: Both audiences of spectators (lean or not).
_WATCHERS = SPECTATORS | LEAN_SPECTATORS

#: How long a finished match waits for the courtesy reveals of its last game still owed by a
#: connected seat before its record is made and ``match_over`` sent (spec 7.3 decision 20): an
#: honest seat sends its reveal as soon as ``game_over`` comes, so they arrive first.
COURTESY_WAIT = 2.0

#: How long a match taken over from a node whose lease ran out stands still, its clocks stopped,
#: for its players to find it (spec 4.10): a node that died broke their connections, but one that
#: froze (SIGSTOP, a paused VM) holds them open, and a client notices only after 60 seconds of
#: silence (spec 4.6). Each grace period starts again after it, as after any restart.
HOLD_FOR_PLAYERS = 60.0


@dataclass(slots=True)
class Seat:
    """A player's seat in a match and the connection currently playing it (``None``: away)."""

    player: str
    name: str
    peer: Peer | None = None
    #: the player's rating when the match began, rounded (``None``: not known), for ``seated``
    rating: int | None = None


def _broadcast(msg: m.Message, peers: list[Peer]) -> None:
    """Queue ``msg`` for ``peers``, encoded once for all of them.

    A connection of this server (an :class:`~.outbox.Outbox`: a :class:`~.session.Client`) is
    handed the shared frame (:meth:`~.outbox.Outbox.send_frame`); any other peer (the watch page's
    spectator, :mod:`.watch`) takes messages, and is sent ``msg``. Errors, and a message that
    cannot be framed (too large, a server bug), go through each peer's ``send``, which reports
    them.
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
        if frame is not None and isinstance(p, Outbox):
            p.send_frame(frame, msg)
        else:
            p.send(msg)


#: Messages with the peers each is for, resolved when the pure referee said them: (peers,
#: message, whether it is one member's own: its start, snapshot or a copy).
_Addressed: TypeAlias = list[tuple[list[Peer], m.Message, bool]]


def _union(addressed: _Addressed) -> list[Peer]:
    """Every peer of ``addressed``, once each, in order."""
    return list(dict.fromkeys(p for peers, _, _ in addressed for p in peers))


def _cork(peer: Peer) -> Outbox | None:
    """Cork ``peer`` if it is a connection of this server (an :class:`~.outbox.Outbox`; any
    other peer takes each message as it comes); returns it if this call corked it (its
    :meth:`~.outbox.Outbox.uncork` is then the caller's), ``None`` otherwise."""
    if isinstance(peer, Outbox) and peer.cork():
        return peer
    return None


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
        journal: Journal | None = None,
        clock: Clock | None = None,
        lot: bytes | None = None,
        teams: list[list[Seat]] | None = None,
        fence: Fence | None = None,
    ) -> None:
        """``journal``: store every accepted input before sending what it caused (``clock``
        maps trio time to the journal's wall-clock time). ``lot``: the secret the lots are drawn
        from (a match taken up from its journal, :meth:`replay`); a fresh one otherwise.
        ``teams``: team play (spec 6.8), each seat's members by member number, ``teams[s][0]``
        being ``seats[s]``. ``fence``: the node and ownership epoch this server referees the
        match under; every write for it is checked against it (a node that lost the match to
        another writes nothing more, and sends nothing more)."""
        self.match_id = match_id
        self.hex = match_id.hex()
        self.rules = rules
        self.mode = mode
        self.seats = seats
        #: Team play: each seat's members (``None``: one player a seat).
        self.teams = teams
        self.public = public
        self.core = pure.Referee(
            match_id=match_id,
            rules=rules,
            mode=mode,
            players=(seats[0].player, seats[1].player),
            names=(seats[0].name, seats[1].name),
            lot=lot if lot is not None else secrets.token_bytes(32),
            teams=None if teams is None else self.team_ids(),
        )
        for i, team in enumerate(self.roster()):
            for k, s in enumerate(team):
                if s.peer is not None and s.peer.lean:
                    self.core.set_lean(i, True, k)
        self._journal = journal
        self._clock = clock if clock is not None else (Clock() if journal is not None else None)
        self._jn = 0  #: the number of the next journal entry
        self._failed = False  #: an input could not be journaled: the match cannot go on
        self.fence = fence
        #: another node referees the match now: this one lets go of it, quietly
        self.fenced = False
        #: seconds the match stood still while its inputs could not be stored: its time is
        #: trio time less this (its clocks stopped meanwhile)
        self._shift = 0.0
        #: seconds the match is to stand still for its players once taken up (a failover)
        self.hold = 0.0
        #: trio time since which it stands still for its players (``None``: it does not)
        self._held_since: float | None = None
        self._hold_until = 0.0  #: trio time at which that stops, whoever is back
        self._begun = False  #: its task has started it (journaled its start, or taken it up)
        # A server holds thousands of referees, most never watched nor co-signed: the set of
        # spectators, the co-signatures and the ``done`` event are made when first needed.
        self._spectators: set[Peer] | None = None
        self._wake = trio.Event()
        #: Trio time the match task sleeps until (``-inf``: it is awake, and will look again).
        self._sleep_until = -math.inf
        self._finish = finish
        self.over = False
        self._done: trio.Event | None = None
        self._ended = False  #: ``done`` is set (or will be, once made)
        self.head = b""  #: the record's head, once the record is stored
        self.recorded = False  #: the signed record is stored (the match finished, not aborted)
        #: The seats whose co-signature of the record is stored.
        self.cosigned: AbstractSet[int] = _NOBODY
        self.metrics = metrics if metrics is not None else Metrics()
        self._shot_at: float | None = None  #: trio time the pending blind-mode shot was called
        self._timers = timers
        self.log = ContextLog(_log, {"match": self.hex})
        #: called once the match has started (sent its start, or taken up its journal)
        self.on_start: Callable[[Referee], None] | None = None

    @property
    def done(self) -> trio.Event:
        """Set when the match is over and its record stored (``head`` and ``recorded`` set)."""
        if self._done is None:
            self._done = trio.Event()
            if self._ended:
                self._done.set()
        return self._done

    @property
    def spectators(self) -> AbstractSet[Peer]:
        """The peers watching the match (:meth:`watch`, :meth:`unwatch`)."""
        return self._spectators if self._spectators is not None else _NOBODY

    def _now(self) -> float:
        """The match's time: trio time less what it stood still, standing still while the
        journal is stalled (the store is away: the match's clocks stop) or while it waits for
        its players after a failover (:attr:`hold`)."""
        now = trio.current_time()
        if self._journal is not None:
            now = self._journal.frozen(now)
        if self._held_since is not None:
            now = min(now, self._held_since)
        return now - self._shift

    def resumed(self, stood: float) -> None:
        """The journal was stalled for ``stood`` seconds, and the match stood still: its clocks
        go on from where they stopped (journaled, so that a replay goes on alike)."""
        if self.over or self._failed or self.fenced or not self._begun:
            return  # (a match not begun yet journals its start after the stall: nothing stood)
        if self._held_since is not None:
            # Still held for its players: only the part of the stall before the hold is over.
            stood = max(0.0, self._held_since - (trio.current_time() - stood))
        self._stand(stood)

    def _stand(self, stood: float) -> None:
        """The match stood still ``stood`` seconds: its time goes on from where it stopped."""
        if stood > 0:
            self._shift += stood
            self._out([], ("shift", stood, self._now()))
        self._wake.set()

    def _hold_ends(self) -> None:
        """Stop standing still for the players (all are back, or the hold is over)."""
        held = self._held_since
        if held is None:
            return
        self._held_since = None
        journal = self._journal
        stalled = journal.stalled_since if journal is not None else None
        # While the journal is stalled too the match stands on; only the part of the hold
        # before the stall is over.
        end = trio.current_time() if stalled is None else max(held, stalled)
        self._stand(end - held)

    def _all_back(self) -> bool:
        return all(s.peer is not None for s in self.everyone())

    # -- who is who -------------------------------------------------------------------------------

    @property
    def match(self) -> Match:
        """The match the pure referee plays."""
        return self.core.match

    @property
    def game(self) -> Game | None:
        """The current (or last) game."""
        return self.core.match.game

    @property
    def players(self) -> list[str]:
        """Both players' ids, by seat (in team play, the captains')."""
        return [s.player for s in self.seats]

    def roster(self) -> list[list[Seat]]:
        """Each seat's members, by member number (one each, the seat, without team play)."""
        return self.teams if self.teams is not None else [[s] for s in self.seats]

    def team_ids(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Each seat's members' ids (one each without team play)."""
        teams = self.roster()
        return (tuple(s.player for s in teams[0]), tuple(s.player for s in teams[1]))

    def everyone(self) -> list[Seat]:
        """Every member of both seats (the two seats without team play)."""
        return self.seats if self.teams is None else self.teams[0] + self.teams[1]

    def seat_of(self, peer: Peer) -> int | None:
        """The seat ``peer`` plays, or ``None`` if it plays none in this match."""
        found = self.member_of(peer)
        return None if found is None else found[0]

    def member_of(self, peer: Peer) -> tuple[int, int] | None:
        """The seat and member number ``peer`` plays (member 0 without team play)."""
        if self.teams is None:
            for i, s in enumerate(self.seats):
                if s.peer is peer:
                    return i, 0
            return None
        for i, team in enumerate(self.teams):
            for k, s in enumerate(team):
                if s.peer is peer:
                    return i, k
        return None

    def seat_of_player(self, player: str) -> int | None:
        """The seat of ``player``, connected or not."""
        found = self.member_of_player(player)
        return None if found is None else found[0]

    def member_of_player(self, player: str) -> tuple[int, int] | None:
        """The seat and member number of ``player``, connected or not."""
        for i, team in enumerate(self.roster()):
            for k, s in enumerate(team):
                if s.player == player:
                    return i, k
        return None

    def slot(self, seat: int, member: int) -> Seat:
        """The place of ``member`` of ``seat`` (the seat itself without team play)."""
        return self.seats[seat] if self.teams is None else self.teams[seat][member]

    # -- sending ----------------------------------------------------------------------------------

    def to_all(self, msg: m.Message) -> None:
        """Queue ``msg`` for the players and every spectator (public events only)."""
        _broadcast(msg, self._audience(ALL))

    def _audience(self, to: int) -> list[Peer]:
        """The connected peers of audience ``to`` (a bit set of the pure referee's)."""
        peers = []
        if self.teams is None:
            p0, p1 = self.seats[0].peer, self.seats[1].peer
            if to & SEAT0 and p0 is not None:
                peers.append(p0)
            if to & SEAT1 and p1 is not None:
                peers.append(p1)
        else:
            for bit, team in ((SEAT0, self.teams[0]), (SEAT1, self.teams[1])):
                if to & bit:
                    peers += [s.peer for s in team if s.peer is not None]
        watching = self._spectators
        if watching and to & _WATCHERS:
            if to & _WATCHERS == _WATCHERS:
                peers += watching
            else:  # spectators sorted by the capability lean (spec 5.7)
                lean = to & LEAN_SPECTATORS != 0
                peers += [p for p in watching if p.lean == lean]
        return peers

    def _out(self, sends: list[Send], what: tuple[Any, ...] | None) -> None:
        """Carry out what one call of the pure referee said: journal ``what`` (the call, as an
        entry; ``None`` if it changed nothing), then write ``sends``; wake the match task if its
        time moved earlier."""
        urgent = self.core.urgent
        journal = self._journal
        # Addressed now, written once journaled: a peer that comes (back) meanwhile is sent a
        # snapshot that shows what these say already, and must not get them after it.
        addressed = self._addressed(sends) if sends else []
        if journal is None:
            if sends:
                self._write(addressed, urgent)
        elif self._failed or self.fenced:
            # Its journal is done with: a row now would follow a hole, or go to a match that is
            # another node's. Nothing it causes is sent.
            pass
        elif self.over:
            # Over (a player leaving after the end): nothing to journal, the record has it all.
            if sends:
                journal.after(partial(self._write, addressed, urgent))
        elif what is not None:
            assert self._clock is not None
            n, self._jn = self._jn, self._jn + 1
            row = (self.hex, n, entry(*what[:-1], self._clock.wall(what[-1])))
            journal.append(row, partial(self._write, addressed, urgent), self._lost, self.fence)
        elif sends:
            journal.after(partial(self._write, addressed, urgent))
        # It is woken only if it would otherwise sleep too long (its wake-up time moved earlier)
        # or the match is over; a later time is found when it wakes at the earlier one. Waking
        # it on every input cost a task switch, an Event and a tick per input.
        if self.core.over or self.core.wake_at < self._sleep_until:
            self._wake.set()

    def _addressed(self, sends: list[Send]) -> _Addressed:
        """``sends`` with each audience resolved to the peers it is now: (peers, message,
        whether it is one member's own: its start, snapshot or a copy)."""
        every = self._audience(ALL)
        out: _Addressed = []
        for to, msg, member in sends:
            if member is not None:
                peer = self.slot(0 if to & SEAT0 else 1, member).peer
                out.append(([] if peer is None else [peer], msg, True))
            else:
                out.append((every if to == ALL else self._audience(to), msg, False))
        return out

    def _write(self, addressed: _Addressed, urgent: int | None) -> None:
        """Write each message to the peers it was addressed to (the pure referee's audiences
        already leave out what a lean session is not sent, spec 5.7): what one input makes a
        peer receive leaves in one write per peer, and the peer who waits for it (the defender
        owing a verdict on a called shot, the shooter a verdict answers: ``urgent``) is written
        to first; the others are off the critical path."""
        if self.fenced:
            return  # another node referees the match: only what it sends counts
        corked = [c for p in _union(addressed) if (c := _cork(p)) is not None]
        try:
            for peers, msg, own in addressed:
                self._observe(msg)
                if own:
                    for peer in peers:
                        peer.send(msg)
                        if type(msg) is m.Start and peer.people:
                            peer.send(self.seated())
                    continue
                _broadcast(msg, peers)
                if type(msg) is m.Start:
                    # Right after start, to the sessions that agreed people (6.9): a strict
                    # client keeps the closed start it knows.
                    for peer in peers:
                        if peer.people:
                            peer.send(self.seated())
        finally:
            if corked:
                first: object = self.seats[urgent].peer if urgent is not None else None
                # sorted() is stable: the waiting peer first, the others in corking order.
                for p in sorted(corked, key=lambda p: p is not first):
                    p.uncork()

    def let_go(self) -> None:
        """Another node referees the match now (this node's lease was taken): stop here, send
        nothing more, and leave the rest to the lobby."""
        self._lost(True)

    def _lost(self, fenced: bool) -> None:
        """An input could not be journaled: what it caused is never sent. ``fenced``: another
        node took the match over, and this one lets go of it; otherwise the match ends."""
        if fenced:
            if not self.fenced:
                self.log.warning("another node referees the match now: letting go of it")
            self.fenced = True
        else:
            self._failed = True
        self._wake.set()

    def shed(self) -> None:
        """Let go of what a finished match no longer needs in memory (its games, transcripts and
        fleets: its record is in the store), keeping who played, the rules and the head, for
        co-signatures and rematches. What a kept finished match costs is then small and the
        same for every match, so the lobby's bound on their number bounds their bytes too."""
        self.core.shed()

    @property
    def failed(self) -> bool:
        """Whether a move could not be journaled (the match was ended for it)."""
        return self._failed

    def replay(self, entries: list[bytes]) -> None:
        """Take the match up from its journal ``entries`` (a restart), before :meth:`run`;
        raises :class:`~.journal.ReplayError` if they cannot be replayed."""
        assert self._clock is not None and self._jn == 0
        self._shift = replay(self.core, entries, self._clock)
        self._jn = len(entries)

    async def _flushed(self) -> None:
        """Wait until everything this match said has been journaled and written."""
        if self._journal is not None and not self._journal.idle:
            done = trio.Event()
            self._journal.after(done.set)
            await done.wait()

    def _observe(self, msg: m.Message) -> None:
        """Metrics and logs of what the match says."""
        kind = type(msg)
        if kind is m.ShotCalled:
            self.metrics.shots += 1
            if self.mode == "blind":
                self._shot_at = trio.current_time()
            return
        if self._shot_at is not None and kind in _ENDS_A_SHOT:
            # Only a verdict is an answer; a lost shot or the game's end leaves nothing to time.
            if kind is m.VerdictMsg:
                self.metrics.shot_latency.observe(trio.current_time() - self._shot_at)
            self._shot_at = None
        if kind is m.GameOver:
            assert isinstance(msg, m.GameOver)
            self.log.info("game %d over: %s", msg.game, msg.outcome)

    def view(self) -> dict[str, Any]:
        """The public view of the match: the current game's view and the match score."""
        return self.core.view(self._now())

    def start_message(self, seat: int) -> m.Start:
        """The ``start`` message for ``seat``."""
        return self.core.start_message(seat)

    def seated(self) -> m.Seated:
        """The ``seated`` message (spec 6.9): the seats' names and, in a rated match whose
        players' ratings are known, their ratings when it began."""
        ratings = [s.rating for s in self.seats]
        known = self.teams is None and None not in ratings
        names = (self.seats[0].name, self.seats[1].name)
        return m.Seated(
            self.match_id, names, tuple(max(0, r or 0) for r in ratings) if known else ()
        )

    # -- attaching connections ------------------------------------------------------------------

    def attach(self, seat: int, peer: Peer, member: int = 0) -> None:
        """``peer`` (re)takes ``seat`` (as ``member`` of its team): it gets ``start`` and a
        snapshot, the opponent is told."""
        s = self.slot(seat, member)
        old, s.peer = s.peer, peer
        if old is not None and old is not peer:
            old.close("replaced")
        self.core.set_lean(seat, peer.lean, member)
        now = self._now()
        self._out(self.core.seat_back(seat, now, member), self._presence("back", seat, member, now))
        self.log.info(
            "seat %d attached (%s)", seat, peer.player[:12], extra=peer_context(peer, seat=seat)
        )
        if self._held_since is not None and self._all_back():
            self._hold_ends()
        self._wake.set()

    def detach(self, peer: Peer) -> None:
        """``peer``'s connection ended: free its seat (the grace period starts) or its watch."""
        self.unwatch(peer)
        found = self.member_of(peer)
        if found is None:
            return
        seat, member = found
        self.slot(seat, member).peer = None
        now = self._now()
        self._out(self.core.seat_gone(seat, now, member), self._presence("gone", seat, member, now))
        if not self.over:
            self.log.info(
                "seat %d disconnected; %ds grace",
                seat,
                self.rules.clocks.grace,
                extra=peer_context(peer, seat=seat),
            )
        self._wake.set()

    def _presence(self, kind: str, seat: int, member: int, now: float) -> tuple[Any, ...]:
        """The journal entry of a presence change (a member's own, in team play)."""
        return (kind, seat, now) if self.teams is None else (kind, seat, member, now)

    def watch(self, peer: Peer) -> None:
        """Add a spectator: a snapshot of the public view, then live public events."""
        if self._spectators is None:
            self._spectators = set()
        self._spectators.add(peer)
        told = [self.core.snapshot(None, self._now()), *self.core.team_messages()]
        if self._journal is None:
            for msg in told:
                peer.send(msg)
        else:  # behind what is still being journaled, which the snapshot already shows
            for msg in told:
                self._journal.after(partial(peer.send, msg))

    def unwatch(self, peer: Peer) -> bool:
        """Stop sending ``peer`` the match's events; whether it was watching."""
        watching = self._spectators
        if watching is None or peer not in watching:
            return False
        watching.discard(peer)
        return True

    # -- inputs -----------------------------------------------------------------------------------

    def handle(self, seat: int, msg: m.Message, member: int | None = None) -> None:
        """Apply one game message from ``seat`` (in team play, from its ``member``); raises
        :class:`ProtocolError` to refuse it."""
        core, now = self.core, self._now()
        sends = core.receive(seat, msg, now, member)
        self._out(sends, ("in", seat, m.encode(msg), now) if core.accepted else None)

    def leave(self, seat: int) -> None:
        """``seat``'s player left the match: it forfeits the game in play and every later one."""
        now = self._now()
        self._out(self.core.leave(seat, now), ("leave", seat, now))
        self._wake.set()

    # -- the match task ---------------------------------------------------------------------------

    def _start(self) -> None:
        # A plain function, not run()'s body: logging materialises the frame that calls it,
        # and run()'s would keep that object for the whole match.
        now = self._now()
        self._begun = True
        if self._jn:
            self.log.info("taken up from %d journal entries", self._jn)
        else:
            lot = self.core.lot_secret
            ids = [] if self.teams is None else [[list(t) for t in self.team_ids()]]
            self._out(self.core.start(now), ("start", lot, self.public, *ids, now))
        teams = self.roster()
        for i, team in enumerate(teams):
            for s in team:
                ctx = {"seat": i, "player": s.player}
                if s.peer is not None:
                    ctx = peer_context(s.peer, seat=i)
                self.log.info("seat %d: %s", i, s.player[:12], extra=ctx)
        for i, team in enumerate(teams):
            for k, s in enumerate(team):
                if s.peer is None:
                    # Gone while the match was being stored (or the server was down): its grace
                    # period runs from the start.
                    self._out(self.core.seat_gone(i, now, k), self._presence("gone", i, k, now))
        if self.on_start is not None:
            self.on_start(self)
        if self.hold > 0 and not self._all_back():
            self._held_since = trio.current_time()
            self._hold_until = self._held_since + self.hold
            self.log.info("stands still for its players for %gs (a failover)", self.hold)

    async def run(self) -> None:
        """Play the match to its end, then hand it to ``finish`` (record, store, ladder).

        A match another node took over (:attr:`fenced`) ends here quietly: nothing is sent,
        aborted or recorded for it; the lobby sends its players where it runs now."""
        try:
            self._start()
            core = self.core
            while not core.over:
                if self._failed:
                    raise RuntimeError("an input could not be journaled")
                if self.fenced:
                    return
                if self._held_since is not None and trio.current_time() >= self._hold_until:
                    self._hold_ends()
                self._sleep_until = at = core.wake_at
                standing = self._standing()
                if standing or at > self._now():
                    # An alarm in the server's timer heap rather than a cancel scope of its own
                    # (~0.6 KB per sleeping match). A stale alarm sets an Event nobody waits on.
                    # None while the match stands still: :meth:`resumed` wakes it (or the end
                    # of its hold for the players).
                    if at < math.inf and not standing:
                        self._timers.add(_Alarm(self._wake), at + self._shift)
                    if self._held_since is not None:
                        self._timers.add(_Alarm(self._wake), self._hold_until)
                    await self._wake.wait()
                    self._wake = trio.Event()
                self._sleep_until = -math.inf
                if self._standing() or self.fenced:
                    continue
                now = self._now()
                sends = core.tick(now)
                self._out(sends, ("tick", now) if sends else None)
            self.over = True
            await self._courtesy()
            await self._flushed()
            if self.fenced:
                return
            await self._finish(self)
        except Fenced as e:
            self.log.warning("another node referees the match now: letting go of it (%s)", e)
            self.fenced = True
        except Exception:
            if self.fenced:
                return
            self.log.exception("referee failed")
            self.over = True
            self.to_all(m.Error(int(ErrorCode.INTERNAL_ERROR), "the match was aborted", None))
        finally:
            self.over = True
            self._ended = True
            if self._done is not None:
                self._done.set()

    async def _courtesy(self) -> None:
        """Wait at most :data:`COURTESY_WAIT` for the courtesy reveals of the match's last game
        that connected seats still owe, so that they reach the players before ``match_over``.
        Each comes through :meth:`handle` (no journal entry: it changes no state), which wakes
        this task since the match is over."""
        with trio.move_on_after(COURTESY_WAIT):
            while any(self.slot(s, 0).peer is not None for s in self.core.courtesy_owed):
                if self._failed or self.fenced:
                    return
                await self._wake.wait()
                self._wake = trio.Event()

    def _standing(self) -> bool:
        """Whether the match stands still (the journal is stalled, or it waits for its players
        after a failover)."""
        if self._held_since is not None:
            return True
        return self._journal is not None and self._journal.stalled_since is not None

    # -- co-signatures ----------------------------------------------------------------------------

    def check_cosign(self, seat: int, msg: m.CoSign) -> None:
        """Refuse a co-signature that is not ``seat``'s Ed25519 signature of this record's head."""
        if not self.head or not self.recorded:
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
