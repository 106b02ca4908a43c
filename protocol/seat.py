"""One seat of a match, pure: the player's machine (``spec/protocol.md`` 5.5, 5.6, 4.7).

Theory of operation. The referee (:mod:`.referee`) is one machine; this is the other. A
:class:`Seat` is fed what the referee sends to one seat, :meth:`Seat.receive`, with the shell's
``now`` (seconds on any monotonic clock; the seat reads none of its own), and the player's own
choices: :meth:`Seat.place`, :meth:`Seat.fire`, :meth:`Seat.radar`, :meth:`Seat.resign`. Each
call returns an :class:`Out`: the messages an honest seat sends now, in order, and the typed
events (:mod:`.seat_events`) for its player. Whatever an honest seat must do whatever its player
does happens here, so that every shell does it the same way:

* in blind mode a called shot at us is answered at once, with its openings
  (:class:`~.verdict.Defender`); ``reveal_now`` is answered with the reveal;
* a game that reached ``firing`` and ended before ``reveal`` (a resignation, a clock) is
  answered in blind mode with our *courtesy reveal* of it, where the rules show fleets at the
  end (spec 7.3 decision 20), and the other seat's is checked as any reveal (:class:`FleetShown`,
  or a :class:`LieDetected` that blocks nothing: no record holds it);
* ``match_over`` is answered with our co-signature of the record head, once the record it
  carries holds what we were shown (:func:`~.seat_check.check_record`); a record that does not
  is never co-signed;
* after a resume (``snapshot``, 4.7) whatever we still owe goes again: the placement, the answer
  to a pending shot, the reveal, or the move we made for this turn, with its ``seq``.

Trust nobody: the seat keeps a *mirror* :class:`~.game.Game`, fed with both commitments from
``firing`` and with every ``shot``/``verdict``/``shot_lost``/``revealed`` the referee relays (the
inverse of :func:`~.announce.announce`). It checks each opening the moment it arrives and each
reveal at the end, exactly as a referee would; a failure is a
:class:`~.seat_events.LieDetected` naming the seat (``None``: the referee's own relay).

Lean sessions (4.2) are sent no copy of their own moves: the seat knows its shot from its
verdict and applies its own verdict as it sends it (:attr:`Seat.lean`, set by the shell from
the capabilities the connection agreed).

Connections are the shell's. It tells the seat which connection carried each message
(:meth:`Seat.carried`, with any number that changes when the connection does) and which
connection a ``snapshot`` came on (:attr:`Seat.epoch`), so that after a resume nothing is sent
twice on one connection and nothing owed is left unsent.

Bending. A test, the conformance suite's lying seats and the fuzz target make a seat lie
through two hooks, never by writing a seat of their own: :attr:`Seat.tamper` alters the verdict
we give (and a lean seat applies the altered one), :attr:`Seat.bend` alters or drops any message
before it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import messages as m
from .commit import Commitment, Committed, Reveal, sign_seat
from .errors import ErrorCode, LocalProtocolError, ProtocolError
from .fleet import Fleet
from .game import Deadline, EndReason, Game, Phase
from .grid import Cell, parse_cell
from .inputs import Fire, GameEvent, GameOver, Radar
from .rules import RuleSet, ShotMode, rules_from_dict
from .seat_check import Shown, check_record, entries, in_step, move_entry
from .seat_events import (
    FleetShown,
    GameEnded,
    GameStarted,
    IncomingShot,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    Resumed,
    ShotResult,
    YourTurn,
)
from .verdict import Defender, Shot, Verdict, new_shot

__all__ = ["Bend", "Clock", "Out", "Seat", "Tamper", "labels"]

#: How a test or a scripted liar alters the verdict the seat would give (blind mode only).
Tamper = Callable[[Shot, Verdict], Verdict]
#: How a test or a scripted liar alters (or, returning ``None``, drops) a message the seat sends.
Bend = Callable[[m.Message], m.Message | None]

#: The first pause before sending again what a rate limit dropped, and the longest (seconds).
BACKOFF = 0.05
MAX_BACKOFF = 2.0


class Out(NamedTuple):
    """What one input to a seat gives: the messages to send, in order, and the player's events."""

    sends: list[m.Message]
    events: list[MatchEvent]


@dataclass(frozen=True, slots=True)
class Clock:
    """The clock the referee started last (``clock``): ``kind`` runs ``seconds`` for ``seat``
    (``None``: both, in setup), from ``started``, the shell's time when the message came. The
    referee's clock started a little earlier, so :meth:`remaining` errs on too little time."""

    game: int
    kind: str
    seconds: int
    seat: int | None
    started: float

    def remaining(self, now: float) -> float:
        """Seconds left at ``now`` (never below zero)."""
        return max(0.0, self.started + self.seconds - now)


@dataclass(slots=True)
class _Move:
    """A ``fire`` or ``radar`` of ours not yet known to be applied (4.7: after a resume it MAY go
    again with its ``seq``)."""

    msg: m.Fire | m.Radar
    #: the connection that carried it (``None``: none yet)
    epoch: int | None
    #: shots of its game with a verdict when it was made: a snapshot that counts more has seen
    #: it applied (and answered), one that counts as many and gives us the turn has not
    shots: int


def _cells(texts: Sequence[str], rules: RuleSet) -> tuple[Cell, ...]:
    return tuple(parse_cell(t, rules.rows, rules.cols) for t in texts)


def labels(cells: str | Cell | Sequence[str | Cell]) -> tuple[str, ...]:
    """Cells as the wire names them: one cell (``"e5"``, a :class:`~.grid.Cell`) or several."""
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

#: Game-end reasons of a game that can end after ``firing`` began and before ``reveal``: the
#: games whose fleets courtesy reveals show (spec 7.3 decision 20).
_EARLY = frozenset(
    r.value
    for r in (
        EndReason.RESIGNED,
        EndReason.ABANDONED,
        EndReason.SHOT_TIMEOUTS,
        EndReason.NO_ANSWER,
        EndReason.FALSE_PROOF,
    )
)


class Seat:
    """One seat of match ``match_id``, played honestly with ``key`` by ``player`` (its id, for
    team play), as the shell feeds it. See the module's theory of operation."""

    def __init__(
        self,
        match_id: bytes,
        key: Ed25519PrivateKey,
        player: str = "",
        *,
        lean: bool = False,
        checking: bool = True,
        quiet: bool = False,
        courtesy: bool = True,
    ) -> None:
        self.id = match_id
        #: Whether we reveal our fleet after a game that ended early, where the rules show fleets
        #: at the end (blind mode, spec 7.3 decision 20). Peer play (6.7) exchanges none.
        self.courtesy = courtesy
        #: Whether the seat keeps a mirror and checks the record before co-signing. Only a
        #: load generator, which trusts its own server, turns this off: it then plays from what
        #: the verdicts say, as after a gap, and co-signs what it is given.
        self.checking = checking
        #: With ``checking`` off and single shots, tell the player only whose turn it is: no
        #: verdict is parsed and no ``ShotResult``/``IncomingShot`` made (a load generator's
        #: seat, where they cost 5 µs a verdict that nothing reads).
        self.quiet = quiet and not checking
        self.key = key
        self.player = player
        #: Whether the connection agreed ``lean`` (4.2); the shell keeps it current.
        self.lean = lean
        #: The shell's number for the connection the messages come on (see :meth:`carried`).
        self.epoch = 0
        #: Our seat (``start``), the match's rules, trust mode and players' ids.
        self.seat: int | None = None
        self.rules: RuleSet | None = None
        self.mode = "blind"
        self.players: tuple[str, ...] = ()
        #: Team play (6.8): each seat's members' ids (``team``), our member number (0: the
        #: captain, who places, answers, reveals and co-signs), who calls each seat's next shot.
        self.teams: dict[int, tuple[str, ...]] = {}
        self.member = 0
        self.callers: dict[int, int] = {}
        #: The current game's number (0: none yet) and first player, if known.
        self.game_no = 0
        self.first: int | None = None
        #: Our copy of the current game (``None``: it stopped following, after a lie or a gap).
        self.mirror: Game | None = None
        #: Our fleet and secret for the current game, and what answers shots with them.
        self.committed: Committed | None = None
        self.defender: Defender | None = None
        self.placed_game = 0
        #: The match's result, record head, and every lie seen.
        self.result: dict[str, Any] | None = None
        self.head: bytes | None = None
        self.lies: list[LieDetected] = []
        #: Why the referee's account cannot be co-signed (5.5), or ``None``.
        self.disputed: str | None = None
        #: The last clock the referee started (``None`` between games, and once it stopped).
        self.clock: Clock | None = None
        #: Our placement is sent and the referee has not said ``committed`` yet.
        self.awaiting_commit = False
        #: The match is over (``match_over`` came): nothing more comes or goes.
        self.done = False
        self.tamper: Tamper | None = None
        self.bend: Bend | None = None
        # What we were shown of each game that ended, to hold the record to.
        self._seen: dict[int, Shown] = {}
        self._roots: dict[int, bytes] = {}  # the current game's ``committed`` roots, by seat
        self._fired = 0  # the last game we saw reach ``firing`` (its ``firing``, or a snapshot)
        # The current game across resumes: the gaps the mirror followed across, the mirror that
        # stopped at one (and how many of its entries the record must hold), and whether the
        # order of the commitments is known.
        self._gaps: list[tuple[int, dict[str, Any]]] = []
        self._partial: tuple[Game, int] | None = None
        self._ordered = True
        self._answered = 0  # shots of the current game with a verdict, as far as we know
        # The mirror's length right after it took our own answer as sent (lean), which the
        # referee may not have received when the connection dropped.
        self._own_answer_at: int | None = None
        # Messages with no ``ref`` (placement, answers, reveal, resignation) sent but not yet
        # acknowledged: what a RATE_LIMITED refusal without a ``ref`` may have dropped; and
        # id() of each -> the connection that carried it.
        self._unacked: list[m.Message] = []
        self._carried: dict[int, int] = {}
        self._moves: dict[int, _Move] = {}  # seq -> fire/radar, to send again with its seq
        # (game, n) of the last verdict of ours applied as sent (lean), not to apply twice.
        self._applied: tuple[int, int] | None = None
        self._backoff = BACKOFF
        # Once a gap stopped the mirror: our ships sunk and the opponent's cells closed (fired
        # or crossed out), from the snapshot and the verdicts since, for the size of our shots.
        self._lost: set[int] = set()
        self._closed: set[int] = set()
        self._sends: list[m.Message] = []
        self._events: list[MatchEvent] = []

    # -- what the seat knows -----------------------------------------------------------------

    @property
    def team_play(self) -> bool:
        """Whether this is a team match with one session per member (6.8)."""
        return bool(self.rules and self.rules.team_size > 1 and self.teams)

    @property
    def captain(self) -> bool:
        """Whether we place, answer, reveal and co-sign for our seat (always, without teams)."""
        return self.member == 0

    @property
    def placed(self) -> bool:
        """Whether a fleet is placed for the current game."""
        return self.game_no > 0 and self.placed_game == self.game_no

    # -- the player's choices ----------------------------------------------------------------

    def place(self, fleet: Fleet, secret: bytes) -> Out:
        """Place ``fleet`` with the 32-byte ``secret`` for the current game.

        Blind mode sends the commitment only; custody mode hands fleet and secret to the referee
        (``place``). In team play a member who is not the captain places nothing."""
        self._in_game("place a fleet for")
        assert self.rules is not None and self.seat is not None
        fleet.validate(self.rules)
        if not self.captain:
            return self._out()
        game = self.game_no
        self.committed = Committed(self.rules, fleet, secret, self.id, game, self.seat)
        self.defender = Defender(self.committed)
        self.placed_game = game
        self.awaiting_commit = True
        sig = sign_seat(self.key, self.committed.ctx, self.committed.root)
        if self.mode == "custody":
            self._send(m.Place(self.id, game, tuple(fleet.to_list()), secret, sig), unacked=True)
        else:
            commitment = self.committed.commitment.to_dict()
            self._send(m.Commit(self.id, game, commitment, sig), unacked=True)
        return self._out()

    def fire(self, cells: str | Cell | Sequence[str | Cell], seq: int) -> Out:
        """Call one cell or a salvo, as move ``seq`` (unique on the connection)."""
        self._in_game("fire in")
        return self._move(m.Fire(self.id, self.game_no, labels(cells), self._me(), seq))

    def radar(self, at: str | Cell, seq: int) -> Out:
        """Scan the radar area whose top-left cell is ``at``, as move ``seq``."""
        self._in_game("scan in")
        return self._move(m.Radar(self.id, self.game_no, labels(at)[0], self._me(), seq))

    def resign(self) -> Out:
        """Give up the current game."""
        self._in_game("resign")
        self._send(m.Resign(self.id, self.game_no), unacked=True)
        return self._out()

    def _in_game(self, what: str) -> None:
        """Refuse a choice made before the match's first game began (a player's mistake)."""
        if self.rules is None or self.seat is None or self.game_no == 0:
            raise LocalProtocolError(ErrorCode.WRONG_PHASE, f"no game to {what} yet")

    def _move(self, msg: m.Fire | m.Radar) -> Out:
        self._moves[msg.seq] = _Move(msg, None, self._answered)
        self._send(msg)
        return self._out()

    def _me(self) -> int:
        """The ``member`` our shots carry: ours in team play, else the rotation's (8.4)."""
        if self.team_play:
            return self.member
        return self.mirror.caller(self.seat) if self.mirror and self.seat is not None else 0

    # -- connections and rate limits ---------------------------------------------------------

    def carried(self, msg: m.Message, epoch: int) -> None:
        """The shell's connection ``epoch`` carried ``msg`` (one this seat gave it to send)."""
        for u in self._unacked:  # a loop, not any(): every message sent passes here
            if u is msg:
                self._carried[id(msg)] = epoch
                break
        if isinstance(msg, m.Fire | m.Radar):
            mv = self._moves.get(msg.seq)
            if mv is not None and mv.msg is msg:
                mv.epoch = epoch

    def rate_limited(self) -> float:
        """The referee dropped a message of ours for rate (2.5): how long to wait before sending
        it again with :meth:`again` (doubling, up to :data:`MAX_BACKOFF`, until an ack)."""
        delay, self._backoff = self._backoff, min(self._backoff * 2, MAX_BACKOFF)
        return delay

    def again(self, seq: int | None, game: int) -> list[m.Message]:
        """What to send again after a rate limit met in game ``game``: the move ``seq`` names,
        or (``None``) whatever is still unacknowledged, since in-order processing acknowledged
        everything sent before the dropped one by now. Nothing once the game or match moved on."""
        if self.done or self.game_no != game:
            return []
        if seq is not None:
            move = self._moves.get(seq)
            return [move.msg] if move is not None else []
        return list(self._unacked)

    def owes_moves(self) -> bool:
        """Whether a move of ours made for the current game is not yet known to be applied."""
        return bool(self._moves)

    # -- what the referee sends --------------------------------------------------------------

    def receive(self, msg: m.Message, now: float = 0.0) -> Out:
        """Feed one message the referee sent to this seat (or to everyone), at ``now``. A
        message of another match (a shell that plays several over one connection) is ignored."""
        if getattr(msg, "match", self.id) != self.id:
            return self._out()
        if self.done and type(msg) is not m.Revealed:  # a courtesy reveal may come after the end
            return self._out()
        if isinstance(msg, m.Start):
            self.seat = msg.seat
            self.rules = rules_from_dict(msg.rules)
            self.mode = msg.mode
            self.players = msg.players
        elif isinstance(msg, m.GameStart) and msg.game == self.game_no:
            # A game a snapshot began already (the lot came after it): nothing new but who
            # fires first, and a second GameStarted would ask the player to place again.
            self.first = msg.first
            self._emit(Info(msg))
        elif isinstance(msg, m.GameStart):
            assert self.rules is not None
            self.game_no = msg.game
            self.first = msg.first
            self.mirror = Game(self.rules, self.id, msg.game) if self.checking else None
            self.committed = self.defender = None
            self.clock = None
            self.awaiting_commit = False
            self._new_game()
            self._emit(GameStarted(msg.game, msg.first))
        elif isinstance(msg, m.Firing):
            self._on_firing(msg)
        elif isinstance(msg, m.ShotCalled):
            if self._unacked:
                self._ack(m.Answer)  # lean: what follows our answer says it arrived
            if self.clock is not None and self.clock.kind == "shot":
                # The shot was called: the mover's clock stopped. The answer clock that starts
                # now is not announced (5.4), so nothing is shown counting in its place.
                self.clock = None
            self._on_shot(msg)
        elif isinstance(msg, m.VerdictMsg):
            self._on_verdict(msg)
        elif isinstance(msg, m.ShotLost):
            self._on_shot_lost(msg)
        elif isinstance(msg, m.RevealNow):
            if self._unacked:
                self._ack(m.Answer)
            if self.mode != "custody" and self.committed is not None:
                reveal = self.committed.reveal().to_dict()
                self._send(m.RevealMsg(self.id, msg.game, reveal), unacked=True)
            self._emit(Info(msg))
        elif isinstance(msg, m.Revealed):
            self._on_revealed(msg)
        elif isinstance(msg, m.Snapshot) and msg.seat == self.seat:
            self._on_snapshot(dict(msg.view))
        elif isinstance(msg, m.GameOver):
            self._on_game_over(msg)
        elif isinstance(msg, m.MatchOver):
            self._on_match_over(msg)
        elif isinstance(msg, m.Team):
            self._on_team(msg)
        elif isinstance(msg, m.Turn):
            self.callers[msg.seat] = msg.member
            self._emit(Info(msg))
            if msg.game == self.game_no and msg.seat == self.seat and msg.member == self.member:
                self._maybe_turn(msg.seat, named=True)
        else:
            if isinstance(msg, m.Clock):
                self.clock = Clock(msg.game, msg.kind, msg.seconds, msg.seat, now)
            elif isinstance(msg, m.Committed) and msg.game == self.game_no:
                self._roots[msg.seat] = msg.root
            if isinstance(msg, m.Committed) and msg.seat == self.seat:
                self.awaiting_commit = False
                self._ack(m.Commit)
                self._ack(m.Place)
            self._emit(Info(msg))
        return self._out()

    # -- outputs -----------------------------------------------------------------------------

    def _out(self) -> Out:
        out = Out(self._sends, self._events)
        self._sends, self._events = [], []
        return out

    def _send(self, msg: m.Message, *, unacked: bool = False) -> None:
        if self.bend is not None:
            bent = self.bend(msg)
            if bent is None:
                return
            msg = bent
        if unacked:
            self._unacked.append(msg)
            self._carried.pop(id(msg), None)
        self._sends.append(msg)

    def _emit(self, ev: MatchEvent) -> None:
        if isinstance(ev, LieDetected):
            self.lies.append(ev)
            if ev.seat is None and self.disputed is None:
                self.disputed = ev.detail  # the referee's own relay is at fault
        self._events.append(ev)

    def _uncarried(self) -> list[m.Message]:
        """The unacknowledged messages the current connection has not carried."""
        return [u for u in self._unacked if self._carried.get(id(u)) != self.epoch]

    def _clear_unacked(self) -> None:
        self._unacked.clear()
        self._carried.clear()

    def _ack(self, kind: type[m.Message]) -> None:
        unacked = [u for u in self._unacked if not isinstance(u, kind)]
        if len(unacked) < len(self._unacked):
            self._unacked = unacked
            kept = {id(u) for u in unacked}
            self._carried = {k: e for k, e in self._carried.items() if k in kept}
        self._backoff = BACKOFF

    # -- the mirror --------------------------------------------------------------------------

    def _mirror_apply(
        self, fn: Callable[[], list[GameEvent]], blame: int | None
    ) -> list[GameEvent]:
        """Run one mirror input; a refusal means the referee relayed what a referee must not."""
        if self.mirror is None:
            return []
        try:
            events = fn()
        except ProtocolError as e:
            self._emit(LieDetected(self.game_no, blame, f"mirror refused: {e}"))
            self.mirror = None  # out of step with the referee: stop checking, not cry wolf
            return []
        for ev in events:
            if isinstance(ev, GameOver) and ev.outcome.reason is EndReason.FALSE_PROOF:
                o = ev.outcome
                loser = None if o.winner is None else 1 - o.winner
                self._emit(LieDetected(self.game_no, loser, o.detail))
        return events

    def _mirror_call(self, seat: int, member: int, cells: tuple[Cell, ...], radar: bool) -> None:
        """The mirror takes a called shot (a ``shot``, or a lean verdict that repeats it)."""
        g = self.mirror
        if g is None:
            return
        if radar:
            self._mirror_apply(lambda: g.feed(Radar(seat, member, cells[0])), None)
        else:
            self._mirror_apply(lambda: g.feed(Fire(seat, member, cells)), None)

    def _on_firing(self, msg: m.Firing) -> None:
        g = self.mirror
        self.first = msg.first
        self._fired = self.game_no
        if g is not None:
            try:
                coms = [Commitment.from_dict(c) for c in msg.commitments]
                for c in coms:
                    # Before any hashing: a relayed commitment of the wrong shape is a lie too.
                    c.check_shape(g.rules)
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
                for s, root in self._roots.items():
                    # 5.5: each relayed commitment must hash to the root ``committed`` named.
                    if s in (0, 1) and coms[s].root(g.ctx[s]) != root:
                        self._emit(LieDetected(self.game_no, None, f"seat {s}'s root differs"))
                # In the order the referee accepted them (11.1): the order of ``committed``.
                order = [s for s in self._roots if s in (0, 1)]
                for s in order + [s for s in (0, 1) if s not in order]:
                    self._mirror_apply(lambda s=s: g.commit(s, coms[s]), s)  # type: ignore[misc]
                self._mirror_apply(lambda: g.set_first(msg.first), None)
        self._emit(Info(msg))
        self._maybe_turn(msg.first)

    def _maybe_turn(self, nxt: int | None, named: bool = False) -> None:
        if nxt is None or nxt != self.seat or (self.team_play and not named):
            return  # in team play only ``turn`` says whether we call (6.8)
        g = self.mirror
        count = g.shot_count(nxt) if g is not None else self._shot_count()
        radar = bool(self.rules and self.rules.radar and g and not g.boards[1 - nxt].radar_used)
        self._emit(YourTurn(self.game_no, count, radar))

    def _shot_count(self) -> int:
        """How many cells our next shot calls, known without the mirror (after a gap)."""
        r = self.rules
        assert r is not None
        if r.shots is ShotMode.SINGLE:
            n = 1
        elif r.shots is ShotMode.SALVO_FIXED:
            n = r.salvo_size
        else:
            n = len(r.fleet) - len(self._lost)
        return max(1, min(n, r.cells - len(self._closed)))

    def _unmirrored(self, seat: int, cells: tuple[Cell, ...], v: Verdict) -> None:
        """Keep what :meth:`_shot_count` needs from a verdict the mirror did not take."""
        if seat == self.seat:
            cols = self.rules.cols if self.rules else 1
            self._closed.update(c.row * cols + c.col for c in cells)
        else:
            self._lost.update(x.sunk.ship for x in v.results if x.sunk is not None)
            self._lost.update(x.ship for x in v.sunk)

    def _on_shot(self, msg: m.ShotCalled) -> None:
        assert self.rules is not None
        cells = _cells(msg.cells, self.rules)
        self._mirror_call(msg.seat, msg.member, cells, msg.radar)
        if msg.seat == self.seat or self.mode == "custody" or self.defender is None:
            return
        self._answer(msg.game, new_shot(msg.n, msg.seat, cells, msg.radar))

    def _answer(self, game: int, shot: Shot) -> None:
        """Answer ``shot`` on our fleet; with ``lean`` no verdict on it comes back, so it is
        applied here as sent, and whose turn follows is ours to know (8.4)."""
        assert self.defender is not None and self.seat is not None
        verdict = self.defender.answer(shot)
        if self.tamper is not None:
            verdict = self.tamper(shot, verdict)
        self._send(m.Answer(self.id, game, verdict.to_dict()), unacked=True)
        if not self.lean:
            return
        g = self.mirror
        nxt = self.defender.turn_after(shot)
        if g is not None:
            try:
                g.answer(self.seat, verdict)
                nxt = g.turn
            except ProtocolError:
                # Our own answer is one the referee refuses too (a test's tampering): its error
                # follows, and our copy of the game no longer follows the referee's.
                self.mirror = None
                return
            if g.phase is Phase.OVER:
                return  # it ended the game (a tampered proof): game_over says so
            self._own_answer_at = len(g.transcript)
        elif not self.quiet:
            self._unmirrored(shot.seat, shot.cells, verdict)
        self._applied = (game, shot.n)
        self._answered = max(self._answered, shot.n)
        if not self.quiet:
            self._emit(IncomingShot(game, shot.n, shot.cells, shot.radar, verdict))
        self._maybe_turn(nxt)

    def _on_verdict(self, msg: m.VerdictMsg) -> None:
        assert self.rules is not None
        if msg.seat != self.seat:
            if self._unacked:
                self._ack(m.Answer)  # the verdict relayed is ours: our answer arrived
            self._answered = max(self._answered, msg.n)
            if (msg.game, msg.n) == self._applied:
                # A copy of the verdict we gave and applied ourselves (lean: a session resumed
                # while it was on its way): nothing new, and applying it twice would be refused.
                return
        else:
            self._moves.clear()  # our move applied: nothing of this turn to send again
            self._answered = max(self._answered, msg.n)
            if self.clock is not None and self.clock.kind == "shot":
                self.clock = None  # lean: no ``shot`` came to stop it
        if self.quiet and self.rules.shots is ShotMode.SINGLE:
            self._maybe_turn(msg.next)  # whose turn is all a quiet seat tells: nothing to parse
            return
        cells = _cells(msg.cells, self.rules)
        try:
            v = Verdict.from_dict(msg.verdict)
        except ProtocolError as e:
            self._emit(LieDetected(self.game_no, 1 - msg.seat, f"malformed verdict: {e}"))
            return
        g = self.mirror
        if g is not None and g.phase is Phase.FIRING and g.turn == msg.seat:
            # No ``shot`` came before it (lean): the verdict repeats the shot's fields.
            self._mirror_call(msg.seat, msg.member, cells, msg.radar)
            g = self.mirror
        crossed: tuple[Cell, ...] = ()
        if g is not None:
            before = set(g.boards[1 - msg.seat].crossed)
            self._mirror_apply(lambda: g.answer(1 - msg.seat, v), 1 - msg.seat)
            if self.mirror is not None:
                cols = self.rules.cols
                after = g.boards[1 - msg.seat].crossed - before
                crossed = tuple(Cell(*divmod(i, cols)) for i in sorted(after))
        if self.mirror is None:
            self._unmirrored(msg.seat, cells, v)
        if msg.seat == self.seat:
            self._emit(ShotResult(msg.game, msg.n, cells, msg.radar, v, crossed))
        else:
            self._emit(IncomingShot(msg.game, msg.n, cells, msg.radar, v))
        self._maybe_turn(msg.next)

    def _on_shot_lost(self, msg: m.ShotLost) -> None:
        if self._unacked:
            self._ack(m.Answer)
        g = self.mirror
        if g is not None and g.phase is Phase.FIRING and g.turn == msg.seat:
            if msg.why == "clock":
                self._mirror_apply(lambda: g.expire(Deadline.SHOT), None)
            else:
                # A wasted repeat: the cells it called again, as the transcript has them, by the
                # member ``turn`` named (team play) or the rotation's.
                again = _cells(msg.cells, g.rules)
                who = self.callers.get(msg.seat, g.caller(msg.seat))
                self._mirror_apply(lambda: g.feed(Fire(msg.seat, who, again)), None)
        self._emit(Info(msg))
        self._maybe_turn(msg.next)

    def _on_revealed(self, msg: m.Revealed) -> None:
        if msg.seat == self.seat:
            self._ack(m.RevealMsg)
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
            return
        self._emit(Info(msg))
        self._on_courtesy(msg)

    def _on_courtesy(self, msg: m.Revealed) -> None:
        """A ``revealed`` of a game after its ``game_over``: a courtesy reveal (spec 7.3 decision
        20), checked as any reveal (10.8) against that game as our mirror saw it. It is no entry
        of the transcript: the mirror does not take it, so the record check ignores it, and a
        false one is a lie told, never a reason not to co-sign."""
        shown = self._seen.get(msg.game)
        g = shown.game if shown is not None else None
        if g is None or msg.seat not in (0, 1) or not g.fired_unrevealed():
            # No game we followed to ``firing`` and its end (the mirror takes no ``game_over``:
            # it stays in the phase the end found it in): nothing to hold it to.
            return
        try:
            reveal = Reveal.from_dict(msg.reveal)
        except ProtocolError as e:
            self._emit(LieDetected(msg.game, msg.seat, f"courtesy reveal: {e}"))
            return
        fault = g.check_reveal(msg.seat, reveal)
        if fault is not None:
            self._emit(LieDetected(msg.game, msg.seat, f"courtesy reveal: {fault[1]}"))
            return
        self._emit(FleetShown(msg.game, msg.seat, reveal.fleet))

    def _on_team(self, msg: m.Team) -> None:
        self.teams[msg.seat] = msg.members
        if msg.seat == self.seat:
            if self.player not in msg.members:
                self.disputed = "the referee's team for our seat does not hold us"
                self._emit(LieDetected(self.game_no, None, self.disputed, "referee"))
            else:
                self.member = msg.members.index(self.player)
        self._emit(Info(msg))

    # -- the end -----------------------------------------------------------------------------

    def _on_game_over(self, msg: m.GameOver) -> None:
        self._clear_unacked()
        w = msg.outcome.get("winner")
        reason = msg.outcome.get("reason")
        mo = self.mirror.outcome if self.mirror is not None else None
        if mo is not None and (mo.winner, mo.reason.value) != (w, reason) and not self.disputed:
            # Our own copy of the game ended otherwise: the record would not be true.
            self.disputed = f"game {msg.game} ended {mo.reason.value} here, {reason} there"
        if reason in _FAULTS and isinstance(w, int) and w == self.seat:
            known = any(x.game == msg.game and x.seat == 1 - w for x in self.lies)
            if not known:
                detail = f"referee: {reason}: {msg.outcome.get('detail', '')}"
                self._emit(LieDetected(msg.game, 1 - w, detail, "referee"))
        self.clock = None
        self._seen[msg.game] = self._shown(msg.game, dict(msg.outcome))
        fleet = self.committed.fleet if self.committed is not None else None
        won = None if w is None else w == self.seat
        self._emit(GameEnded(msg.game, dict(msg.outcome), won, self.mirror, fleet))
        if (
            self.courtesy
            and self.mode != "custody"
            and self.captain
            and self.rules is not None
            and self.rules.reveals_cross
            and self.committed is not None
            and self.placed_game == msg.game
            and self._fired == msg.game
            and reason in _EARLY
        ):
            # 7.3 decision 20: show our fleet, as 000 and 002 show both at the end. Not owed
            # (no clock, no fault without it), so it is not kept to send again.
            self._send(m.RevealMsg(self.id, msg.game, self.committed.reveal().to_dict()))

    def _on_match_over(self, msg: m.MatchOver) -> None:
        self.result = dict(msg.result)
        self.head = msg.head
        problem = None
        if self.disputed is None and self.checking:
            pub = self.key.public_key().public_bytes_raw()
            member = self.member if self.team_play else None
            problem = check_record(
                msg, self._seen, match_id=self.id, seat=self.seat, key=pub, member=member
            )
        if problem is not None:
            self._emit(LieDetected(self.game_no, None, problem, "referee"))
        if self.disputed is None and self.captain:
            # 5.5: a seat whose checks failed MUST NOT co-sign; in team play the captain
            # co-signs for the team (6.8).
            self._send(m.CoSign(self.id, msg.head, self.key.sign(msg.head)))
        w = msg.result.get("winner")
        won = None if w is None else w == self.seat
        self._emit(MatchEnded(dict(msg.result), msg.ratings, msg.head, won))
        self.done = True

    # -- games, and the gaps a resume leaves ---------------------------------------------------

    def _new_game(self) -> None:
        """Forget what belonged to the game before (a new one began)."""
        self._clear_unacked()
        self._moves.clear()
        self._roots = {}
        self._gaps = []
        self._partial = None
        self._ordered = True
        self._answered = 0
        self._own_answer_at = None
        self._lost, self._closed = set(), set()

    def _shown(self, game: int, outcome: dict[str, Any] | None) -> Shown:
        """What we were shown of the current game, numbered ``game``, now that it ended."""
        shown = Shown(self.mirror, outcome, dict(self._roots), list(self._gaps))
        shown.ordered = self._ordered
        if self.seat is not None:
            shown.unanswered = [
                move_entry(mv.msg, self.seat) for mv in self._moves.values() if mv.msg.game == game
            ]
        if self.mirror is None and self._partial is not None:
            shown.game, shown.cut = self._partial
        return shown

    def _missed_until(self, game: int) -> None:
        """The snapshot shows game ``game`` while we were in an earlier one: that one ended while
        we were away, and so did any between (we saw neither end)."""
        if self.game_no and self.game_no not in self._seen:
            self._stop_mirror()
            self._seen[self.game_no] = self._shown(self.game_no, None)
        for n in range(self.game_no + 1, game):
            self._seen.setdefault(n, Shown(None, None))

    def _stop_mirror(self) -> None:
        """The mirror cannot follow the game across a gap: keep what it was shown (the record
        must hold it) and stop checking live; the rest is checked on the record's replay."""
        g = self.mirror
        if g is None:
            return
        cut = len(entries(g.transcript))
        if self._own_answer_at is not None and self._own_answer_at == len(g.transcript):
            cut -= 1  # our answer, taken as sent: the drop may have lost it before the referee
        self._partial, self.mirror = (g, cut), None

    def _follow_gap(self, view: dict[str, Any]) -> None:
        """A resume into the same game: keep the mirror only if it is in step with the snapshot
        (what changed while we were away is in the view, not in events)."""
        g = self.mirror
        if g is None:
            return
        phase = view.get("phase")
        if phase == "setup" and g.phase is Phase.SETUP:
            # The mirror takes both commitments at ``firing``; what it missed here is who
            # committed (``committed``), which the view's roots tell.
            roots = view.get("roots") or (None, None)
            missed = {
                s: r
                for s, r in enumerate(roots[:2])
                if s not in self._roots and isinstance(r, bytes)
            }
            if len(missed) == 2:
                self._ordered = False  # both came while we were away: in which order is unknown
            # After every root we did see: ``committed`` comes in the order of acceptance.
            self._roots.update(missed)
        elif in_step(g.view(), view):
            self._gaps.append((len(entries(g.transcript)), view))
        else:
            self._stop_mirror()

    def _on_snapshot(self, view: dict[str, Any]) -> None:
        """Back in the match after a reconnect (4.7): pick up from the referee's view.

        What happened while we were away is in the view, not in events. If our mirror missed any
        of it, it stops checking this game (the whole record is checked before co-signing). Then
        whatever we owe is done again: the placement, the answer to a pending shot, the reveal,
        or our move.
        """
        assert self.rules is not None and self.seat is not None
        me, game, phase = self.seat, view.get("game"), view.get("phase")
        if not isinstance(game, int):
            checked = all(s.game is not None and s.cut is None for s in self._seen.values())
            self._emit(Resumed(None, view, checked))
            return
        if game != self.game_no:
            # Games began (and maybe ended) while we were away: this one is new to us.
            self._missed_until(game)
            self.game_no, self.first = game, view.get("first")
            self.committed = self.defender = None
            self._new_game()
            fresh = self.checking and phase == "setup" and not any(view.get("committed", ()))
            self.mirror = Game(self.rules, self.id, game) if fresh else None
            self._emit(GameStarted(game, self.first))
        else:
            self._follow_gap(view)
        if phase in ("firing", "answer"):
            self._fired = game
        if isinstance(view.get("shots"), int):
            self._answered = view["shots"]
        self._count_from(view)
        self._emit(Resumed(game, view, self.mirror is not None))
        if phase == "over" and game not in self._seen:
            # It ended while we were away, and no ``game_over`` will come for it.
            self._stop_mirror()
            outcome = view.get("outcome")
            self._seen[game] = self._shown(game, outcome if isinstance(outcome, dict) else None)
            if isinstance(outcome, dict):
                w = outcome.get("winner")
                fleet = self.committed.fleet if self.committed is not None else None
                self._emit(GameEnded(game, outcome, None if w is None else w == me, None, fleet))
        committed = view.get("committed") or (False, False)
        owed: list[m.Message] = []
        if phase == "setup" and not committed[me] and self.placed_game == game:
            owed += [u for u in self._uncarried() if isinstance(u, m.Place | m.Commit)]
        if phase != "over":
            owed += [u for u in self._uncarried() if isinstance(u, m.Resign) and u.game == game]
        self._sends.extend(owed)  # lost with the connection, or made while it was down
        pending = view.get("pending")
        blind = self.mode != "custody"
        if phase == "answer" and isinstance(pending, dict) and pending.get("seat") != me:
            if blind and self.defender is not None:
                cells = _cells(pending.get("cells", ()), self.rules)
                self._answer(game, Shot(pending["n"], 1 - me, cells, bool(pending.get("radar"))))
        elif phase == "reveal" and blind and self.committed is not None:
            reveal = self.committed.reveal().to_dict()
            self._send(m.RevealMsg(self.id, game, reveal), unacked=True)
        elif phase == "firing" and view.get("turn") == me:
            callers = view.get("callers") or (0, 0)
            named = self.team_play and callers[me] == self.member
            if not self._owed_move(game, view.get("shots")):
                self._maybe_turn(me, named=named)
            return
        self._moves.clear()  # not our turn: the move we made was applied, or is moot

    def _count_from(self, view: dict[str, Any]) -> None:
        """What :meth:`_shot_count` needs, as the snapshot's boards show it."""
        boards = view.get("boards")
        if self.seat is None or not isinstance(boards, list | tuple) or len(boards) != 2:
            return
        mine, theirs = boards[self.seat], boards[1 - self.seat]
        try:
            self._lost = {int(ship) for ship, _ in mine.get("sunk", ())}
            fired = {int(i) for i, _ in theirs.get("fired", ())}
            self._closed = fired | {int(i) for i in theirs.get("crossed", ())}
        except (AttributeError, TypeError, ValueError):
            self._lost, self._closed = set(), set()  # a malformed view: the referee says so

    def _owed_move(self, game: int, shots: Any) -> bool:
        """Our turn after a resume: send again the move we made for it that the referee has not
        applied (the snapshot counts no more shots than when we made it), with its ``seq`` (4.7),
        unless this connection already carried it. ``True``: such a move is on its way, so the
        turn needs no ``YourTurn`` (the player answered it already)."""
        owed = [mv for mv in self._moves.values() if mv.msg.game == game and mv.shots == shots]
        if not owed:
            self._moves.clear()
            return False
        for mv in owed:
            if mv.epoch != self.epoch:
                self._sends.append(mv.msg)
        return True
