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
from dataclasses import dataclass
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
        self._seen: dict[int, tuple[Game | None, dict[str, Any], dict[int, bytes]]] = {}
        self._roots: dict[int, bytes] = {}  # the current game's ``committed`` roots, by seat
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
        self._moves_sent: dict[int, m.Message] = {}  # seq -> fire/radar, to resend the same seq
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
                m.Place(self.id, game, tuple(fleet.to_list()), secret, self._seat_sig())
            )
        else:
            commitment = self.committed.commitment.to_dict()
            await self._send_unacked(m.Commit(self.id, game, commitment, self._seat_sig()))
        return fleet

    def _seat_sig(self) -> bytes:
        """Our seat signature for the fleet just committed (spec 10.10): it binds our key to the
        seat in the record, whoever else signs it."""
        assert self.committed is not None
        return sign_seat(self.client.key, self.committed.ctx, self.committed.root)

    async def fire(self, cells: str | Cell | Sequence[str | Cell]) -> None:
        """Call one cell (``"E5"``) or a salvo (a list); the answer comes as events."""
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
        await self._send_unacked(m.Resign(self.id, self.game_no))

    async def events(self) -> AsyncIterator[MatchEvent]:
        """The match's events, in order, until :class:`MatchEnded` (or the connection ends)."""
        async for ev in self._recv:
            yield ev
            if isinstance(ev, MatchEnded):
                return

    # -- sending, and sending again what a rate limit dropped ------------------------------------

    async def _send_move(self, seq: int, msg: m.Message) -> None:
        self._moves_sent[seq] = msg
        await self.client.wire.send(msg)

    async def _send_unacked(self, msg: m.Message) -> None:
        self._unacked.append(msg)
        await self.client.wire.send(msg)

    def _ack(self, kind: type[m.Message]) -> None:
        self._unacked = [u for u in self._unacked if not isinstance(u, kind)]
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
                msgs = [self._moves_sent[seq]] if seq in self._moves_sent else []
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
            self._unacked.clear()
            self._moves_sent.clear()
            self._roots = {}
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
            self._unacked.clear()
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
            self._seen[msg.game] = (self.mirror, dict(msg.outcome), dict(self._roots))
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
            self._emit(Resumed(None, view, all(s[0] is not None for s in self._seen.values())))
            return
        g = self.mirror
        if game != self.game_no:
            # Games began (and maybe ended) while we were away: this one is new to us.
            self.game_no, self.first = game, view.get("first")
            self.committed = self.defender = None
            self._unacked.clear()
            self._moves_sent.clear()
            self._roots = {}
            ev, self._game_event = self._game_event, trio.Event()
            ev.set()
            fresh = phase == "setup" and not any(view.get("committed", ()))
            self.mirror = Game(self.rules, self.id, game) if fresh else None
            self._emit(GameStarted(game, self.first))
        elif g is not None and (g.phase.value != phase or len(g.shots) != view.get("shots")):
            self.mirror = None  # out of step: the gap's proofs are checked on the record
        self._emit(Resumed(game, view, self.mirror is not None))
        committed = view.get("committed") or (False, False)
        if phase == "setup" and not committed[me] and self.placed_game == game:
            with suppress(ConnectionClosed):  # our placement was lost with the connection
                for u in list(self._unacked):
                    await self.client.wire.send(u)
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
            self._maybe_turn(me, named=self.team_play and callers[me] == self.member)

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
        for n, (mirror, outcome, roots) in sorted(self._seen.items()):
            gd = games[n - 1]
            if {k: gd["outcome"].get(k) for k in ("winner", "reason")} != {
                k: outcome.get(k) for k in ("winner", "reason")
            }:
                return f"game {n}: the record's outcome is not the one game_over announced"
            if mirror is None:
                continue  # a game we missed part of: the replay above is all there is to check
            seen, got = _entries(mirror.transcript), _entries(gd["transcript"])
            if got[: len(seen)] != seen:
                return f"game {n}: the record's transcript is not the one we were shown"
            rest = got[len(seen) :]
            if mirror.phase is Phase.SETUP:
                # The game ended before ``firing`` relayed the commitments: each commit entry must
                # be of the root ``committed`` named, in the order those came.
                left = _drop_commits(rest, roots, mirror)
                if left is None:
                    return f"game {n}: the record's commitments are not the ones announced"
                rest = left
            unseen = all(e["in"] in ("expire", "resign", "abandon") for e in rest)
            if rest and (mirror.phase is Phase.OVER or len(rest) > 1 or not unseen):
                return f"game {n}: the record holds entries we were never shown"
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
        self._applied = (game, shot.n)
        self._emit(IncomingShot(game, shot.n, shot.cells, shot.radar, verdict))
        self._maybe_turn(nxt)

    def _on_verdict(self, msg: m.VerdictMsg) -> None:
        assert self.rules is not None
        if msg.seat != self.seat:
            self._ack(m.Answer)  # the verdict relayed is ours: our answer arrived
            if (msg.game, msg.n) == self._applied:
                # A copy of the verdict we gave and applied ourselves (lean: a session resumed
                # while it was on its way): nothing new, and applying it twice would be refused.
                return
        else:
            self._moves_sent.clear()  # our move applied: nothing of this turn to send again
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


def _drop_commits(
    rest: list[dict[str, Any]], roots: dict[int, bytes], g: Game
) -> list[dict[str, Any]] | None:
    """``rest`` without its leading commit entries, if they commit to ``roots`` (seat -> root) in
    that order, else ``None``."""
    order = list(roots)
    commits = rest[: len(order)]
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
