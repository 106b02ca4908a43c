"""One match seen from one seat: place, fire, and a stream of checked events.

Work that must happen whatever the script does happens here, on the client's reader task: in blind
mode a shot at us is answered at once with :class:`~seabattle.protocol.verdict.Defender` (with its
openings), ``reveal_now`` is answered with the reveal, and ``match_over`` with our co-signature of
the record head, once the record it carries checks out (:meth:`MatchHandle._check_record`).

Trust nobody: every match keeps a *mirror* :class:`~seabattle.protocol.game.Game`, fed with both
commitments from ``firing`` and with every ``shot``/``verdict``/``revealed`` the server relays. The
mirror checks each opening the moment it arrives and each reveal at the end, exactly as a referee
would; a failure is surfaced as :class:`~seabattle.client.events.LieDetected` (naming the seat, or
``None`` when the server's own relay was inconsistent).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Commitment, Committed, Reveal, sign_seat
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Deadline, EndReason, Game, Phase
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.inputs import Fire, GameEvent, GameOver, Radar
from seabattle.protocol.record import head_of_bytes, load_record, pack_record
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.session import LEAN
from seabattle.protocol.verdict import Defender, Shot, Verdict
from seabattle.protocol.verify import verify_record

from .events import (
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
from .wire import ConnectionClosed

if TYPE_CHECKING:
    from .api import Client

__all__ = ["MatchHandle", "RunningClock", "Tamper"]

#: How a test or a scripted liar may alter the verdict the client would send (blind mode only).
Tamper = Callable[[Shot, Verdict], Verdict]


@dataclass(frozen=True, slots=True)
class RunningClock:
    """The clock the server started last (``clock``): ``kind`` runs ``seconds`` for ``seat``.

    ``seat`` is ``None`` for a clock that runs for both (setup). ``started`` is the
    ``trio.current_time()`` at which the message arrived: the server's clock started a little
    earlier, so :meth:`remaining` errs on the side of too little time rather than too much.
    """

    game: int
    kind: str
    seconds: int
    seat: int | None
    started: float

    def remaining(self) -> float:
        """Seconds left (never below zero)."""
        return max(0.0, self.started + self.seconds - trio.current_time())


#: The first pause before sending again what a rate limit dropped, and the longest (seconds).
_BACKOFF = 0.05
_MAX_BACKOFF = 2.0


@dataclass(slots=True)
class _Move:
    """A ``fire`` or ``radar`` of ours not yet known to be applied (spec 4.7: after a resume it
    MAY go again with its ``seq``)."""

    msg: m.Fire | m.Radar
    #: the :attr:`Client.epoch` of the connection it went out on (``None``: not sent yet)
    epoch: int | None
    #: shots of its game with a verdict when it was made: a snapshot that counts more has seen
    #: it applied (and answered), one that counts as many and gives us the turn has not
    shots: int


@dataclass(slots=True)
class _Shown:
    """What we were shown of one game, to hold the record's transcript to (spec 5.5)."""

    #: the mirror that followed the game (``None``: it stopped on a lie, or we missed the game)
    game: Game | None
    #: what ``game_over`` announced (``None``: the game ended while we were away)
    outcome: dict[str, Any] | None
    roots: dict[int, bytes] = field(default_factory=dict)  # ``committed`` roots, in order
    #: (entries the mirror held, the snapshot's view) at each resume the mirror followed across:
    #: there the record may hold entries we were away for, if the snapshot agrees with them
    gaps: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: the mirror stopped at a resume (out of step with the snapshot): the record must hold the
    #: first ``cut`` of its entries, and what follows is the replay's to check
    cut: int | None = None
    #: whether the order of the commitments is known (``committed`` seen for all but the last)
    ordered: bool = True
    #: the transcript entries our own unanswered ``fire`` or ``radar`` would make: a lean session
    #: gets no copy of its move, so a game that ended before its verdict (the opponent abandoned,
    #: or its clock ran out) holds an entry of ours we were never shown
    unanswered: list[dict[str, Any]] = field(default_factory=list)


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


class MatchHandle:
    """One match we play: place, fire, and iterate its events. Made by :class:`Client`."""

    def __init__(self, client: Client, match_id: bytes) -> None:
        self.client = client
        self.id = match_id
        self.seat: int | None = None
        self.rules: RuleSet | None = None
        self.mode = "blind"
        self.players: tuple[str, ...] = ()
        #: Team play (spec 6.8): each seat's members' ids (from ``team``), our member number
        #: (0: the captain, who places, answers, reveals and co-signs), and who calls each
        #: seat's next shot (from ``turn``)
        self.teams: dict[int, tuple[str, ...]] = {}
        self.member = 0
        self.callers: dict[int, int] = {}
        #: the invitation to each seat's team, for the host of a team match (``create``)
        self.team_invites: tuple[str, str] | None = None
        self.game_no = 0
        self.first: int | None = None
        self.mirror: Game | None = None
        self.committed: Committed | None = None
        self.defender: Defender | None = None
        self.placed_game = 0
        self.result: dict[str, Any] | None = None
        self.head: bytes | None = None
        self.lies: list[LieDetected] = []
        #: Why the referee's account cannot be co-signed (spec 5.5), or ``None``
        self.disputed: str | None = None
        #: Each game's mirror once the game ended (``None``: it missed part of the game), and the
        #: outcome ``game_over`` announced: what the record ``match_over`` carries must hold
        self._seen: dict[int, _Shown] = {}
        self._roots: dict[int, bytes] = {}  # the current game's ``committed`` roots, by seat
        #: The current game across resumes: the gaps the mirror followed across, the mirror
        #: that stopped at one (and how many of its entries the record must hold), and whether
        #: the order of the commitments is known
        self._gaps: list[tuple[int, dict[str, Any]]] = []
        self._partial: tuple[Game, int] | None = None
        self._ordered = True
        #: shots of the current game with a verdict, as far as we know (the snapshot's ``shots``)
        self._answered = 0
        #: the mirror's length right after it took our own answer as sent (``lean``), which the
        #: referee may not have received when the connection dropped
        self._own_answer_at: int | None = None
        #: Test hook: alter the verdict we send (a scripted liar). Blind mode only.
        self.tamper: Tamper | None = None
        self._started = trio.Event()
        self._game_event = trio.Event()
        #: The last clock the server started in this match (``None`` between games).
        self.clock: RunningClock | None = None
        #: Our custody/blind placement is sent but the referee has not yet said ``committed``.
        self.awaiting_commit = False
        #: Game messages that carry no ``ref`` (placement, answers, reveal, resignation), sent but
        #: not yet acknowledged: what a ``RATE_LIMITED`` refusal without a ``ref`` may have dropped.
        self._unacked: list[m.Message] = []
        #: id() of an unacknowledged message -> the epoch of the connection that carried it
        self._carried: dict[int, int] = {}
        self._moves_sent: dict[int, _Move] = {}  # seq -> fire/radar, to resend the same seq
        #: (game, n) of the last verdict of ours applied as sent (``lean``), not to apply twice
        self._applied: tuple[int, int] | None = None
        self._backoff = _BACKOFF
        self._send, self._recv = trio.open_memory_channel[MatchEvent](math.inf)
        self._done = False

    # -- script side -----------------------------------------------------------------------------

    @property
    def team_play(self) -> bool:
        """Whether this is a team match with one session per member (spec 6.8)."""
        return bool(self.rules and self.rules.team_size > 1 and self.teams)

    @property
    def lean(self) -> bool:
        """Whether the session agreed ``lean`` (spec 4.2): no copy of our own moves comes back,
        so our shot is known from its verdict and our verdict is applied as we send it."""
        return LEAN in self.client.wire.caps

    @property
    def captain(self) -> bool:
        """Whether we place, answer, reveal and co-sign for our seat (always, without teams)."""
        return self.member == 0

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
        The fleet and secret stay here (:attr:`committed`) to answer shots and to reveal. In team
        play a member who is not the captain places nothing (the fleet is the captain's): the
        fleet is returned unsent.
        """
        await self.wait_started()
        assert self.rules is not None and self.seat is not None
        rng = rng or random.SystemRandom()
        if fleet is None:
            fleet = random_fleet(self.rules, rng)
        fleet.validate(self.rules)
        if not self.captain:
            return fleet
        secret = os.urandom(32)
        game = self.game_no
        self.committed = Committed(self.rules, fleet, secret, self.id, game, self.seat)
        self.defender = Defender(self.committed)
        self.placed_game = game
        self.awaiting_commit = True
        if self.mode == "custody":
            await self._send_unacked(
                m.Place(self.id, game, tuple(fleet.to_list()), secret, self._seat_sig()),
                wait=True,
            )
        else:
            commitment = self.committed.commitment.to_dict()
            await self._send_unacked(
                m.Commit(self.id, game, commitment, self._seat_sig()), wait=True
            )
        return fleet

    def _seat_sig(self) -> bytes:
        """Our seat signature for the fleet just committed (spec 10.10): it binds our key to the
        seat in the record, whoever else signs it."""
        assert self.committed is not None
        return sign_seat(self.client.key, self.committed.ctx, self.committed.root)

    async def fire(self, cells: str | Cell | Sequence[str | Cell]) -> None:
        """Call one cell (``"E5"``) or a salvo (a list); the answer comes as events.

        During a reconnect it waits for the new connection instead of failing, and the shot goes
        out then if the match's snapshot says it is still wanted (our turn, not yet applied);
        otherwise the events say what happened meanwhile. Raises
        :class:`~.wire.ConnectionLost` once the client gave up getting back in. The same holds
        for :meth:`radar`, :meth:`place` and :meth:`resign`.
        """
        seq = self.client._move_seq(self)
        await self._send_move(seq, m.Fire(self.id, self.game_no, _labels(cells), self._me(), seq))

    async def radar(self, at: str | Cell) -> None:
        """Scan the radar area whose top-left cell is ``at`` instead of firing."""
        seq = self.client._move_seq(self)
        await self._send_move(seq, m.Radar(self.id, self.game_no, _labels(at)[0], self._me(), seq))

    def _me(self) -> int:
        """The ``member`` our shots carry: ours in team play, else the rotation's (8.4)."""
        if self.team_play:
            return self.member
        return self.mirror.caller(self.seat) if self.mirror and self.seat is not None else 0

    async def resign(self) -> None:
        """Give up the current game."""
        await self._send_unacked(m.Resign(self.id, self.game_no), wait=True)

    async def events(self) -> AsyncIterator[MatchEvent]:
        """The match's events, in order, until :class:`MatchEnded` (or the connection ends)."""
        async for ev in self._recv:
            yield ev
            if isinstance(ev, MatchEnded):
                return

    # -- sending, and sending again what a rate limit dropped ------------------------------------

    async def _send_move(self, seq: int, msg: m.Fire | m.Radar) -> None:
        move = self._moves_sent[seq] = _Move(msg, None, self._answered)
        move.epoch = await self.client._deliver(msg, wait=True)

    async def _send_unacked(self, msg: m.Message, *, wait: bool = False) -> None:
        """Send ``msg`` and keep it until acknowledged. ``wait``: the script's own (see
        :meth:`fire`); the reader's sends fail at once on a dropped connection, since the reader
        is the task that gets back in, and the snapshot then says what is owed."""
        self._unacked.append(msg)
        self._carried.pop(id(msg), None)
        epoch = await self.client._deliver(msg, wait=wait)
        if epoch is not None:
            self._carried[id(msg)] = epoch

    def _uncarried(self) -> list[m.Message]:
        """The unacknowledged messages the current connection has not carried."""
        epoch = self.client.epoch
        return [u for u in self._unacked if self._carried.get(id(u)) != epoch]

    def _clear_unacked(self) -> None:
        self._unacked.clear()
        self._carried.clear()

    def _ack(self, kind: type[m.Message]) -> None:
        self._unacked = [u for u in self._unacked if not isinstance(u, kind)]
        kept = {id(u) for u in self._unacked}
        self._carried = {k: e for k, e in self._carried.items() if k in kept}
        self._backoff = _BACKOFF

    def _rate_limited(self, seq: int | None) -> None:
        """The server dropped a message of ours for rate (spec 2.5): send it again, later.

        ``seq`` names a dropped move. Without it, the dropped message is one of those still
        unacknowledged, or none of ours (a pong); whatever is still unacknowledged after the pause
        goes again, since in-order processing has acknowledged everything sent before it by then.
        """
        delay, self._backoff = self._backoff, min(self._backoff * 2, _MAX_BACKOFF)
        game = self.game_no

        async def again() -> None:
            await trio.sleep(delay)
            if self._done or self.game_no != game:
                return
            if seq is not None:
                move = self._moves_sent.get(seq)
                msgs: list[m.Message] = [move.msg] if move is not None else []
            else:
                msgs = list(self._unacked)
            with suppress(ConnectionClosed):
                for msg in msgs:
                    await self.client.wire.send(msg)

        self.client._spawn(again)

    # -- reader side -----------------------------------------------------------------------------

    def _emit(self, ev: MatchEvent) -> None:
        if isinstance(ev, LieDetected):
            self.lies.append(ev)
            if ev.seat is None and self.disputed is None:
                self.disputed = ev.detail  # the referee's own relay is at fault
        if not self._done:
            self._send.send_nowait(ev)

    def _close(self) -> None:
        self._done = True
        self._send.close()

    def _mirror_apply(
        self, fn: Callable[[], list[GameEvent]], blame: int | None
    ) -> list[GameEvent]:
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
            if isinstance(ev, GameOver) and ev.outcome.reason is EndReason.FALSE_PROOF:
                o = ev.outcome
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
            self.clock = None
            self.awaiting_commit = False
            self._new_game()
            ev = self._game_event
            self._game_event = trio.Event()
            ev.set()
            self._emit(GameStarted(msg.game, msg.first))
        elif isinstance(msg, m.Firing):
            await self._on_firing(msg)
        elif isinstance(msg, m.ShotCalled):
            if self._unacked:
                self._ack(m.Answer)  # lean: what follows our answer says it arrived
            if self.clock is not None and self.clock.kind == "shot":
                # The shot was called: the mover's clock stopped. The answer clock that starts
                # now is not announced (spec 5.4), so nothing is shown counting in its place.
                self.clock = None
            await self._on_shot(msg)
        elif isinstance(msg, m.VerdictMsg):
            self._on_verdict(msg)
        elif isinstance(msg, m.ShotLost):
            if self._unacked:
                self._ack(m.Answer)
            g = self.mirror
            if g is not None and g.phase is Phase.FIRING and g.turn == msg.seat:
                if msg.why == "clock":
                    self._mirror_apply(lambda: g.expire(Deadline.SHOT), None)
                else:
                    # A wasted repeat: the cells it called again, as the transcript has them, by
                    # the member ``turn`` named (team play) or the rotation's.
                    again = _cells(msg.cells, g.rules)
                    who = self.callers.get(msg.seat, g.caller(msg.seat))
                    self._mirror_apply(lambda: g.feed(Fire(msg.seat, who, again)), None)
            self._emit(Info(msg))
            self._maybe_turn(msg.next)
        elif isinstance(msg, m.RevealNow):
            if self._unacked:
                self._ack(m.Answer)
            if self.mode != "custody" and self.committed is not None:
                reveal = self.committed.reveal().to_dict()
                await self._send_unacked(m.RevealMsg(self.id, msg.game, reveal))
            self._emit(Info(msg))
        elif isinstance(msg, m.Revealed):
            self._on_revealed(msg)
        elif isinstance(msg, m.Snapshot) and msg.seat == self.seat:
            await self._on_snapshot(dict(msg.view))
        elif isinstance(msg, m.GameOver):
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
        elif isinstance(msg, m.MatchOver):
            self.result = dict(msg.result)
            self.head = msg.head
            problem = None if self.disputed is not None else self._check_record(msg)
            if problem is not None:
                self._emit(LieDetected(self.game_no, None, problem, "referee"))
            if self.disputed is None and self.captain:
                # Spec 5.5: a client whose checks failed MUST NOT co-sign; in team play the
                # captain co-signs for the team (6.8).
                sig = self.client.key.sign(msg.head)
                with suppress(ConnectionClosed):
                    await wire.send(m.CoSign(self.id, msg.head, sig))
            w = msg.result.get("winner")
            won = None if w is None else w == self.seat
            self._emit(MatchEnded(dict(msg.result), msg.ratings, msg.head, won))
            self._close()
            self.client._forget_moves(self)
        elif isinstance(msg, m.Team):
            self.teams[msg.seat] = msg.members
            if msg.seat == self.seat:
                me = self.client.player
                if me not in msg.members:
                    self.disputed = "the referee's team for our seat does not hold us"
                    self._emit(LieDetected(self.game_no, None, self.disputed, "referee"))
                else:
                    self.member = msg.members.index(me)
            self._emit(Info(msg))
        elif isinstance(msg, m.Turn):
            self.callers[msg.seat] = msg.member
            self._emit(Info(msg))
            if msg.game == self.game_no and msg.seat == self.seat and msg.member == self.member:
                self._maybe_turn(msg.seat, named=True)
        else:
            if isinstance(msg, m.Clock):
                now = trio.current_time()
                self.clock = RunningClock(msg.game, msg.kind, msg.seconds, msg.seat, now)
            elif isinstance(msg, m.Committed) and msg.game == self.game_no:
                self._roots[msg.seat] = msg.root
            if isinstance(msg, m.Committed) and msg.seat == self.seat:
                self.awaiting_commit = False
                self._ack(m.Commit)
                self._ack(m.Place)
            self._emit(Info(msg))

    def _new_game(self) -> None:
        """Forget what belonged to the game before (a new one began)."""
        self._clear_unacked()
        self._moves_sent.clear()
        self._roots = {}
        self._gaps = []
        self._partial = None
        self._ordered = True
        self._answered = 0
        self._own_answer_at = None

    def _shown(self, game: int, outcome: dict[str, Any] | None) -> _Shown:
        """What we were shown of the current game, numbered ``game``, now that it ended."""
        shown = _Shown(self.mirror, outcome, dict(self._roots), list(self._gaps))
        shown.ordered = self._ordered
        if self.seat is not None:
            shown.unanswered = [
                _move_entry(mv.msg, self.seat)
                for mv in self._moves_sent.values()
                if mv.msg.game == game
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
            self._seen.setdefault(n, _Shown(None, None))

    def _stop_mirror(self) -> None:
        """The mirror cannot follow the game across a gap: keep what it was shown (the record
        must hold it) and stop checking live; the rest is checked on the record's replay."""
        g = self.mirror
        if g is None:
            return
        cut = len(_entries(g.transcript))
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
        elif _agrees(g.view(), view):
            self._gaps.append((len(_entries(g.transcript)), view))
        else:
            self._stop_mirror()

    async def _on_snapshot(self, view: dict[str, Any]) -> None:
        """Back in the match after a reconnect (spec 4.7): pick up from the server's view.

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
            ev, self._game_event = self._game_event, trio.Event()
            ev.set()
            fresh = phase == "setup" and not any(view.get("committed", ()))
            self.mirror = Game(self.rules, self.id, game) if fresh else None
            self._emit(GameStarted(game, self.first))
        else:
            self._follow_gap(view)
        if isinstance(view.get("shots"), int):
            self._answered = view["shots"]
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
        for u in owed:  # lost with the connection, or made while it was down
            with suppress(ConnectionClosed):
                await self.client.wire.send(u)
                self._carried[id(u)] = self.client.epoch
        pending = view.get("pending")
        blind = self.mode != "custody"
        if phase == "answer" and isinstance(pending, dict) and pending.get("seat") != me:
            if blind and self.defender is not None:
                cells = _cells(pending.get("cells", ()), self.rules)
                shot = Shot(pending["n"], 1 - me, cells, bool(pending.get("radar")))
                await self._answer(game, shot)
        elif phase == "reveal" and blind and self.committed is not None:
            await self._send_unacked(m.RevealMsg(self.id, game, self.committed.reveal().to_dict()))
        elif phase == "firing" and view.get("turn") == me:
            callers = view.get("callers") or (0, 0)
            named = self.team_play and callers[me] == self.member
            if not await self._send_owed_move(game, view.get("shots")):
                self._maybe_turn(me, named=named)
            return
        self._moves_sent.clear()  # not our turn: the move we made was applied, or is moot

    async def _send_owed_move(self, game: int, shots: Any) -> bool:
        """Our turn after a resume: send again the move we made for it that the referee has not
        applied (the snapshot counts no more shots than when we made it), with its ``seq`` (spec
        4.7), unless this connection already carried it. ``True``: such a move is on its way,
        so the turn needs no ``YourTurn`` (the script answered it already)."""
        owed = [mv for mv in self._moves_sent.values() if mv.msg.game == game and mv.shots == shots]
        if not owed:
            self._moves_sent.clear()
            return False
        epoch = self.client.epoch
        for mv in owed:
            if mv.epoch != epoch:
                mv.epoch = epoch
                with suppress(ConnectionClosed):
                    await self.client.wire.send(mv.msg)
        return True

    def _check_record(self, msg: m.MatchOver) -> str | None:
        """What is wrong with the record ``msg`` asks us to co-sign (spec 5.5), or ``None``.

        It must be canonical bytes whose head is ``msg.head``, name this match and our key on our
        seat, replay (signatures aside: the referee's is not sent), and hold every game we saw:
        each game's entries as our mirror entered them, in place (``set_first`` aside, whose place
        11.1 fixes, and commit signatures, which ``firing`` does not relay), then at most the one
        entry no other message shows (an ``expire``, ``resign`` or ``abandon``) when the game ended
        before our mirror did, and the outcome ``game_over`` announced. A game that ended in setup
        showed only the roots of its commitments (``committed``): its commit entries must be of
        those roots, in that order.

        Where we were away (a reconnect, a failover) the record may hold entries we were never
        shown, and they are no lie if the snapshot we got on resuming agrees with them: replayed
        up to the resume, the record gives the snapshot's view (:func:`_held`). A game whose end
        we missed is held to what we saw of it; the replay checks the rest.
        """
        try:
            rec = load_record(msg.record)
            canonical = pack_record(rec) == msg.record
        except (ValueError, TypeError, ProtocolError) as e:
            return f"the record in match_over does not decode: {e}"
        if not canonical or head_of_bytes(msg.record) != msg.head:
            return "match_over's head is not the head of the record it carries"
        report = verify_record({"record": rec, "sigs": []})
        problems = [p for p in report.problems if not p.startswith("missing_signature")]
        if problems:
            return f"the record does not verify: {problems[0]}"
        if rec["match"] != self.id or self.seat is None:
            return "the record is of another match"
        mine = self.client.key.public_key().public_bytes_raw()
        if self.team_play:
            team = (rec.get("teams") or [[], []])[self.seat]
            if len(team) <= self.member or team[self.member] != mine:
                return "the record puts another key in our place on our team"
        elif rec["players"][self.seat] != mine:
            return "the record puts another key on our seat"
        games = rec["games"]
        if len(games) != len(self._seen):
            return f"the record holds {len(games)} games, we played {len(self._seen)}"
        for n, shown in sorted(self._seen.items()):
            gd = games[n - 1]
            outcome = shown.outcome
            if outcome is not None and {k: gd["outcome"].get(k) for k in ("winner", "reason")} != {
                k: outcome.get(k) for k in ("winner", "reason")
            }:
                return f"game {n}: the record's outcome is not the one game_over announced"
            if shown.game is None:
                continue  # a game we missed, or whose mirror stopped on a lie: the replay checks
            problem = _held(gd, shown)
            if problem is not None:
                return f"game {n}: {problem}"
        return None

    async def _on_firing(self, msg: m.Firing) -> None:
        g = self.mirror
        self.first = msg.first
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
                    # Spec 5.5: each relayed commitment must hash to the root ``committed`` named.
                    if s in (0, 1) and coms[s].root(g.ctx[s]) != root:
                        self._emit(LieDetected(self.game_no, None, f"seat {s}'s root differs"))
                # In the order the referee accepted them (spec 11.1): the order of ``committed``.
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
        count = g.shot_count(nxt) if g is not None else 1
        radar = bool(self.rules and self.rules.radar and g and not g.boards[1 - nxt].radar_used)
        self._emit(YourTurn(self.game_no, count, radar))

    async def _on_shot(self, msg: m.ShotCalled) -> None:
        assert self.rules is not None
        cells = _cells(msg.cells, self.rules)
        g = self.mirror
        if g is not None:
            if msg.radar:
                self._mirror_apply(lambda: g.feed(Radar(msg.seat, msg.member, cells[0])), None)
            else:
                self._mirror_apply(lambda: g.feed(Fire(msg.seat, msg.member, cells)), None)
        if msg.seat == self.seat or self.mode == "custody" or self.defender is None:
            return
        shot = Shot(msg.n, msg.seat, cells, msg.radar)
        await self._answer(msg.game, shot)

    async def _answer(self, game: int, shot: Shot) -> None:
        """Answer ``shot`` on our fleet; with ``lean`` no verdict on it comes back, so it is
        applied here as sent, and whose turn follows is ours to know (8.4)."""
        assert self.defender is not None and self.seat is not None
        verdict = self.defender.answer(shot)
        if self.tamper is not None:
            verdict = self.tamper(shot, verdict)
        await self._send_unacked(m.Answer(self.id, game, verdict.to_dict()))
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
        self._applied = (game, shot.n)
        self._answered = max(self._answered, shot.n)
        self._emit(IncomingShot(game, shot.n, shot.cells, shot.radar, verdict))
        self._maybe_turn(nxt)

    def _on_verdict(self, msg: m.VerdictMsg) -> None:
        assert self.rules is not None
        if msg.seat != self.seat:
            self._ack(m.Answer)  # the verdict relayed is ours: our answer arrived
            self._answered = max(self._answered, msg.n)
            if (msg.game, msg.n) == self._applied:
                # A copy of the verdict we gave and applied ourselves (lean: a session resumed
                # while it was on its way): nothing new, and applying it twice would be refused.
                return
        else:
            self._moves_sent.clear()  # our move applied: nothing of this turn to send again
            self._answered = max(self._answered, msg.n)
            if self.clock is not None and self.clock.kind == "shot":
                self.clock = None  # lean: no ``shot`` came to stop it
        cells = _cells(msg.cells, self.rules)
        try:
            v = Verdict.from_dict(msg.verdict)
        except ProtocolError as e:
            self._emit(LieDetected(self.game_no, 1 - msg.seat, f"malformed verdict: {e}"))
            return
        g = self.mirror
        crossed: tuple[Cell, ...] = ()
        if g is not None and g.phase is Phase.FIRING and g.turn == msg.seat:
            # No ``shot`` came before it (``lean``): the verdict repeats the shot's fields.
            called = g
            if msg.radar:
                self._mirror_apply(lambda: called.feed(Radar(msg.seat, msg.member, cells[0])), None)
            else:
                self._mirror_apply(lambda: called.feed(Fire(msg.seat, msg.member, cells)), None)
            g = self.mirror
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


def _move_entry(msg: m.Fire | m.Radar, seat: int) -> dict[str, Any]:
    """The transcript entry our ``msg`` makes once the referee applies it (spec 11.1)."""
    if isinstance(msg, m.Radar):
        return {"in": "radar", "seat": seat, "member": msg.member, "at": msg.at}
    return {"in": "fire", "seat": seat, "member": msg.member, "cells": list(msg.cells)}


def _entries(transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript as a client can compare it: without ``set_first`` (whether a first player
    is an entry depends on the lot, and 11.1 fixes where it sits) and commit signatures (a seat
    signature is not relayed; the replay checks it against the record's keys)."""
    out = []
    for e in transcript:
        if e["in"] == "set_first":
            continue
        if e["in"] == "commit" and "sig" in e:
            e = {k: v for k, v in e.items() if k != "sig"}
        out.append(e)
    return out


#: What a snapshot's view and a game's own view must agree on for the game to be in step with it
#: (``first``, ``roots`` and ``callers`` follow from these, or are the match's to say).
_STEP_KEYS = ("phase", "turn", "shots", "expiries", "committed", "pending", "boards", "outcome")


def _plain(v: Any) -> Any:
    """``v`` with every tuple a list: a decoded view and a game's own view compare equal."""
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _agrees(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether two views of one game (6.6) show the same state."""
    return all(_plain(mine.get(k)) == _plain(theirs.get(k)) for k in _STEP_KEYS)


def _unordered(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` with its leading commit entries in seat order: for a game whose commitments
    both came while we were away, in an order we cannot know."""
    k = 0
    while k < len(entries) and entries[k].get("in") == "commit":
        k += 1
    return sorted(entries[:k], key=lambda e: repr(e.get("seat"))) + entries[k:]


def _held(gd: dict[str, Any], shown: _Shown) -> str | None:
    """What is wrong with the record's game ``gd`` against what we were shown of it, or
    ``None`` (see :meth:`MatchHandle._check_record`).

    Our mirror's entries come in pieces, split where we were away (``shown.gaps``). The first
    piece must open the transcript. Each later piece must follow, after any entries that bring
    the game (replayed from the record) to the view the snapshot of that resume showed: entries
    the referee accepted while we were away, which that snapshot reflects. After the last piece,
    at most the one entry that ends a game unseen (spec 5.5) may follow, unless the mirror
    stopped at a resume (``cut``), where the replay alone checks the rest.
    """
    g = shown.game
    assert g is not None
    seen, got = _entries(g.transcript), _entries(gd["transcript"])
    if shown.cut is not None:
        seen = seen[: shown.cut]
    if not shown.ordered:
        seen, got = _unordered(seen), _unordered(got)
    marks = [pos for pos, _ in shown.gaps] + [len(seen)]
    at = marks[0]
    if got[:at] != seen[:at]:
        return "the record's transcript is not the one we were shown"
    if shown.gaps:
        replay = _Replay(g, gd)
        for k, (pos, view) in enumerate(shown.gaps):
            piece = seen[pos : marks[k + 1]]
            for j in range(at, len(got) - len(piece) + 1):
                if replay.agrees(j, view) and got[j : j + len(piece)] == piece:
                    at = j + len(piece)
                    break
            else:
                return "the record does not hold what we were shown after we resumed"
    rest = got[at:]
    if shown.cut is not None:
        return None
    if g.phase is Phase.SETUP:
        # The game ended before ``firing`` relayed the commitments: each commit entry must be of
        # the root ``committed`` named, in the order those came.
        left = _drop_commits(rest, shown.roots, g, ordered=shown.ordered)
        if left is None:
            return "the record's commitments are not the ones announced"
        rest = left
    if rest and rest[0] in shown.unanswered:
        rest = rest[1:]  # our own move, whose copy a lean session is not sent
    unseen = all(e["in"] in ("expire", "resign", "abandon") for e in rest)
    if rest and (g.phase is Phase.OVER or len(rest) > 1 or not unseen):
        return "the record holds entries we were never shown"
    return None


class _Replay:
    """The record's game replayed entry by entry, to see its view after the first ``j`` entries
    that :func:`_entries` keeps (asked for in rising ``j``)."""

    def __init__(self, mirror: Game, gd: dict[str, Any]) -> None:
        raw = list(gd["transcript"])
        # A first player the rules decide is no entry; one the lot decides is (11.1).
        lot = any(e.get("in") == "set_first" for e in raw)
        self.game = Game(mirror.rules, mirror.match_id, mirror.number, None if lot else gd["first"])
        self.raw = raw
        self.fed = 0  # raw entries fed
        self.kept = 0  # of which :func:`_entries` keeps
        self.broken = False

    def agrees(self, j: int, view: dict[str, Any]) -> bool:
        """Whether the game after ``j`` kept entries (and whatever ``_entries`` drops before the
        next) shows ``view``."""
        while not self.broken and self.fed < len(self.raw):
            e = self.raw[self.fed]
            kept = e.get("in") != "set_first"
            if kept and self.kept == j:
                break
            try:
                self.game.replay(e)
            except ProtocolError:
                self.broken = True  # the verifier has said so already; nothing agrees here
            self.fed += 1
            self.kept += kept
        return not self.broken and self.kept == j and _agrees(self.game.view(), view)


def _drop_commits(
    rest: list[dict[str, Any]], roots: dict[int, bytes], g: Game, *, ordered: bool = True
) -> list[dict[str, Any]] | None:
    """``rest`` without its leading commit entries, if they commit to ``roots`` (seat -> root) in
    that order (in any order, unless ``ordered``), else ``None``."""
    order = list(roots)
    commits = rest[: len(order)]
    if not ordered:
        order = [s for e in commits for s in roots if e.get("seat") == s]
        if len(order) != len(commits):
            return None
    if [e.get("in") for e in commits] != ["commit"] * len(order):
        return None
    for e, seat in zip(commits, order, strict=True):
        try:
            root = Commitment.from_dict(e["commitment"]).root(g.ctx[seat])
        except (ProtocolError, KeyError, IndexError):
            return None
        if e.get("seat") != seat or root != roots[seat]:
            return None
    return rest[len(order) :]
