"""One game as a pure state machine, as the referee sees it.

Theory of operation (``spec/protocol.md`` section "The game"):

The referee (a server, or each peer for the other) never sees a fleet before the reveal. It holds
the two :class:`~.commit.Commitment` values and checks every verdict's openings against them the
moment the verdict arrives; a false opening, or an opening that contradicts the verdict, loses the
game at once. What no opening can show without leaking (salvo totals, radar answers, named
sinkings, silent sinkings) is checked against both :class:`~.commit.Reveal` values at the end.

Inputs are the typed values of :mod:`.inputs`, fed through :meth:`Game.feed` (the methods
:meth:`Game.commit`, :meth:`Game.fire`, ... build one and feed it). Each either raises
(:class:`~.errors.Refused` for a move the rules refuse: nothing changes and the mover keeps its
shot; :class:`~.errors.RemoteProtocolError` for a malformed input: nothing changes) or is applied,
appended to :attr:`Game.transcript`, and returns the typed events (:data:`.inputs.GameEvent`)
that follow. Time is an input too: the shell runs the clock that :meth:`Game.deadline` names and
feeds :class:`~.inputs.Expire` when it runs out. The game never reads a clock.

Every input goes through :meth:`Game.feed`, which enforces the one transition table
:data:`.state.TRANSITIONS`: an input the table lacks in the current phase is refused with
``WRONG_PHASE`` (``GAME_OVER`` once over), naming the phase and the input. Each input's handler
says which of the table's edges its input takes (a :data:`Step`: the phase it leads to, and the
events), and one method, ``Game._enter``, moves the game along that edge: the phase is set nowhere
else (:meth:`Game.replay`'s fast paths included), and an edge the table does not list raises
:class:`LocalProtocolError` with the phase unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, assert_never

from .commit import Commitment, Reveal, context
from .errors import ErrorCode, LocalProtocolError, ProtocolError, Refused, RemoteProtocolError
from .fleet import IllegalFleet
from .grid import Cell, parse_cell
from .inputs import (
    Abandon,
    Answer,
    Commit,
    Committed,
    Expire,
    Fire,
    FiringBegan,
    GameEvent,
    GameInput,
    GameOver,
    Input,
    Radar,
    Resign,
    RevealDue,
    Revealed,
    RevealFleet,
    SetFirst,
    ShotCalled,
    ShotLost,
    VerdictGiven,
    canonical_cells,
    input_from_entry,
    new_shot_called,
    new_verdict_given,
)
from .proofs import check_proofs, check_shape, first_lie
from .rules import RepeatShot, RuleSet, SalvoReport, ShotMode
from .state import TRANSITIONS, Board, Deadline, EndReason, Outcome, Phase
from .transcript import Transcript
from .verdict import (
    VERDICT_KEYS,
    Result,
    Shot,
    Verdict,
    new_shot,
    new_verdict,
    plain_results,
    radar_cells,
)

__all__ = [
    "TRANSITIONS",
    "Board",
    "Deadline",
    "EndReason",
    "Game",
    "Outcome",
    "Phase",
    "Step",
]

#: What an input's handler returns: the phase the input leads to (one of the table's edges out of
#: the phase it came in, which ``Game._enter`` checks before it sets it) and the events that follow.
Step = tuple[Phase, list[GameEvent]]

#: The phases each (phase, input) pair may lead to: :data:`TRANSITIONS` without the prose.
_LEADS: dict[tuple[Phase, str], frozenset[Phase]] = {
    key: frozenset(dst for dst, _ in edges) for key, edges in TRANSITIONS.items()
}
# Enum members read on every shot, bound once: reading one off its class costs ~0.1 us.
_SETUP, _FIRING, _ANSWER, _REVEAL = Phase.SETUP, Phase.FIRING, Phase.ANSWER, Phase.REVEAL
_OVER = Phase.OVER
_FIRE_IN, _ANSWER_IN = Input.FIRE, Input.ANSWER
_MISS, _SUNK, _SINGLE = Result.MISS, Result.SUNK, ShotMode.SINGLE
_ANSWER_ENTRY = frozenset({"in", "seat", "verdict"})
_FIRE_ENTRY = frozenset({"in", "seat", "member", "cells"})
#: The edges :meth:`Game.replay`'s fast paths take: a ``fire`` in ``firing``, an ``answer`` in
#: ``answer`` (each checks its phase first).
_FIRE_LEADS, _ANSWER_LEADS = _LEADS[_FIRING, _FIRE_IN], _LEADS[_ANSWER, _ANSWER_IN]


class Game:
    """One game between seats 0 and 1, refereed from commitments."""

    def __init__(
        self,
        rules: RuleSet,
        match_id: bytes,
        number: int = 1,
        first: int | None = None,
        *,
        compact: bool = True,
    ) -> None:
        """A game in its setup phase.

        ``compact=False`` keeps the transcript and the answered shots as plain lists instead of
        the compact form a referee holding thousands of live games wants: for a replay (the
        record verifier), which reads only the last entry and would compact for nothing.
        """
        self.rules = rules
        self.match_id = match_id
        self.number = number
        self.ctx = (context(match_id, number, 0, rules), context(match_id, number, 1, rules))
        self.phase = Phase.SETUP
        self.first = first
        self.turn: int | None = None
        self.commitments: list[Commitment | None] = [None, None]
        self.roots: list[bytes | None] = [None, None]
        self.boards = (Board(rules), Board(rules))  # boards[s] is seat s's own grid
        self.pending: Shot | None = None
        # Every answered shot is in the transcript; ``shots`` rebuilds them from it. A verdict
        # whose proof failed (the game ended on it) is kept as given, and so is every shot of a
        # game that is not compact.
        self._shot_count = 0
        self._shot_list: list[tuple[Shot, Verdict]] | None = None if compact else []
        self._false_proof: tuple[Shot, Verdict] | None = None
        self._reveal_shots: list[tuple[Shot, Verdict]] | None = None
        self.shots_taken = [0, 0]  # turns each seat has had (team callers rotate on these)
        self.expiries = [0, 0]
        self.reveals: list[Reveal | None] = [None, None]
        self.faults: list[tuple[EndReason, str] | None] = [None, None]
        self.provisional: Outcome | None = None
        self.outcome: Outcome | None = None
        self.transcript = Transcript(rules.rows, rules.cols)
        #: A game that is not compact: the transcript's own list of entries, for a replay that
        #: reads back the entry just logged (``transcript[-1]`` costs a method call).
        self.plain_log: list[dict[str, Any]] | None = None
        if not compact:
            self.plain_log = self.transcript.keep_plain()
        # Derived from the (frozen) rules, read on every shot.
        self._cells = rules.cells
        self._fleet_cells = rules.fleet_cells
        self._totals = rules.is_salvo and rules.salvo_report is SalvoReport.TOTAL

    # -- the one way in --------------------------------------------------------------------------

    def feed(self, inp: GameInput) -> list[GameEvent]:
        """Apply one input; returns the events that follow (see the module docstring)."""
        phase = self.phase
        leads = _LEADS.get((phase, inp.NAME))
        if leads is None:
            code = ErrorCode.GAME_OVER if phase is Phase.OVER else ErrorCode.WRONG_PHASE
            raise Refused(code, f"{inp.NAME.value!r} is not allowed in phase {phase.value!r}")
        # The inputs of every shot first: a match statement tries its cases in order.
        step: Step
        match inp:
            case Fire():
                step = self._fire(inp)
            case Answer():
                step = self._answer(inp)
            case Commit():
                step = self._commit(inp)
            case SetFirst():
                step = self._set_first(inp)
            case Radar():
                step = self._radar(inp)
            case Expire():
                step = self._expire(inp)
            case Resign():
                step = self._resign(inp)
            case Abandon():
                step = self._abandon(inp)
            case RevealFleet():
                step = self._reveal(inp)
            case _:
                assert_never(inp)
        return self._enter(inp.NAME, leads, step)

    def _enter(self, name: Input, leads: frozenset[Phase], step: Step) -> list[GameEvent]:
        """Move the game along the edge ``step`` takes for input ``name``, one of ``leads`` (the
        table's edges out of the current phase for it): the one place the phase is set."""
        phase, events = step
        if phase not in leads:
            raise LocalProtocolError(
                ErrorCode.INTERNAL_ERROR,
                f"{name.value!r} in phase {self.phase.value!r} led to {phase.value!r}, "
                "an edge the transition table does not list",
            )
        self.phase = phase
        return events

    def replay(self, entry: Any) -> list[GameEvent]:
        """Feed the input the transcript entry ``entry`` records: what
        ``self.feed(input_from_entry(entry, self.rules))`` does, for a replay (the record verifier).

        A verdict on a single cell in the form the game logs it, proved and sinking nothing (half
        of any transcript), is checked and applied here in one step, with ``entry`` itself logged
        (the map the general way logs is equal to it). Anything else, and anything the checks
        here do not pass, goes the general way, which judges it afresh: refused, or ending the
        game, exactly as it would have been.
        """
        if type(entry) is dict:
            kind = entry.get("in")
            if kind == "answer" and entry.keys() == _ANSWER_ENTRY:
                step = self._replay_answer(entry)
                if step is not None:
                    return self._enter(_ANSWER_IN, _ANSWER_LEADS, step)
            elif kind == "fire" and entry.keys() == _FIRE_ENTRY:
                step = self._replay_fire(entry)
                if step is not None:
                    return self._enter(_FIRE_IN, _FIRE_LEADS, step)
        return self.feed(input_from_entry(entry, self.rules))

    def _replay_fire(self, e: dict[str, Any]) -> Step | None:
        """:meth:`replay` of a single shot, or ``None`` (nothing changed) to go the general way.

        The checks of that way for a single shot at a cell not fired at, before anything changes:
        the entry's form (:func:`.inputs.input_from_entry`: a canonical label, so that ``entry``
        is the map :meth:`.inputs.Fire.entry` writes), the phase, :meth:`_check_mover` and
        :meth:`_fire`'s.
        """
        seat, member, cells = e["seat"], e["member"], e["cells"]
        if self.phase is not _FIRING or type(e["in"]) is not str:
            return None
        if type(seat) is not int or type(member) is not int or seat != self.turn:
            return None
        r = self.rules
        if not 0 <= member < r.team_size or r.shots is not _SINGLE:
            return None
        if type(cells) is not list or len(cells) != 1 or type(cells[0]) is not str:
            return None
        cell = canonical_cells(r.rows, r.cols).get(cells[0])
        if cell is None:
            return None
        target = self.boards[1 - seat]
        i = cell.row * r.cols + cell.col
        if i in target.fired or i in target.crossed:
            return None  # a repeat or a crossed-out cell: refused or wasted the general way
        self.expiries[seat] = 0
        self.transcript.append(e)
        shot = new_shot(self._shot_count + 1, seat, (cell,))
        self.pending = shot
        return _ANSWER, [new_shot_called(shot)]

    def _replay_answer(self, e: dict[str, Any]) -> Step | None:
        """:meth:`replay` of an answer entry, or ``None`` (nothing changed) to go the general way.

        Every check of that way for such a verdict is made, before anything changes: the entry's
        form (:func:`.inputs.input_from_entry`, :meth:`Verdict.from_dict`), the phase (the
        transition table has ``answer`` in ``answer`` only), :meth:`_answer`'s, then
        :func:`.proofs.check_shape` and :func:`.proofs.check_proofs` for one cell and no claim.
        """
        shot = self.pending
        seat, wire = e["seat"], e["verdict"]
        if self.phase is not _ANSWER or shot is None or type(e["in"]) is not str:
            return None
        if type(seat) is not int or seat != 1 - shot.seat or shot.radar or self._totals:
            return None
        if type(wire) is not dict or wire.keys() != VERDICT_KEYS:
            return None
        n, results, sunk = wire["n"], wire["results"], wire["sunk"]
        if type(n) is not int or n != shot.n or wire["total"] is not None:
            return None
        if wire["found"] is not None or type(sunk) is not list or sunk:
            return None
        cells = shot.cells
        if type(results) is not list or len(results) != 1 or len(cells) != 1:
            return None
        parsed = plain_results(results)
        if parsed is None:
            return None
        res = parsed[0]
        result, opening = res.result, res.opening
        if res.sunk is not None or result is _SUNK:
            return None  # a sinking: its claim is checked the general way
        c = cells[0]
        if opening.index != c.row * self.rules.cols + c.col:
            return None
        if opening.occupied != (result is not _MISS):
            return None
        commitment = self.commitments[seat]
        if commitment is None:
            return None
        try:
            commitment.check_cell(self.ctx[seat], opening)
        except ProtocolError:
            return None  # a false opening ends the game: the general way says how
        self.transcript.append(e)
        return self._apply(shot, new_verdict(n, parsed, None, (), None))

    def inputs(self) -> Iterator[GameInput]:
        """The inputs the game accepted, in order: feeding them to a fresh game replays it."""
        for entry in self.transcript:
            yield input_from_entry(entry, self.rules)

    # Shorthands that build an input and feed it.

    def commit(
        self, seat: int, commitment: Commitment, sig: bytes | None = None
    ) -> list[GameEvent]:
        """Feed :class:`~.inputs.Commit` (``sig``: the player's seat signature, spec 10.10)."""
        return self.feed(Commit(seat, commitment, sig))

    def set_first(self, seat: int) -> list[GameEvent]:
        """Feed :class:`~.inputs.SetFirst`."""
        return self.feed(SetFirst(seat))

    def fire(self, seat: int, cells: list[Cell], member: int = 0) -> list[GameEvent]:
        """Feed :class:`~.inputs.Fire`."""
        return self.feed(Fire(seat, member, tuple(cells)))

    def radar(self, seat: int, top_left: Cell, member: int = 0) -> list[GameEvent]:
        """Feed :class:`~.inputs.Radar`."""
        return self.feed(Radar(seat, member, top_left))

    def answer(
        self, seat: int, verdict: Verdict, *, wire: dict[str, Any] | None = None
    ) -> list[GameEvent]:
        """Feed :class:`~.inputs.Answer` (``wire``: the map ``verdict`` was parsed from)."""
        return self.feed(Answer(seat, verdict, wire))

    def expire(self, kind: Deadline) -> list[GameEvent]:
        """Feed :class:`~.inputs.Expire`."""
        return self.feed(Expire(kind))

    def resign(self, seat: int) -> list[GameEvent]:
        """Feed :class:`~.inputs.Resign`."""
        return self.feed(Resign(seat))

    def abandon(self, seat: int) -> list[GameEvent]:
        """Feed :class:`~.inputs.Abandon`."""
        return self.feed(Abandon(seat))

    def reveal(self, seat: int, reveal: Reveal) -> list[GameEvent]:
        """Feed :class:`~.inputs.RevealFleet`."""
        return self.feed(RevealFleet(seat, reveal))

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _seat(seat: int) -> None:
        if seat not in (0, 1):
            raise Refused(ErrorCode.NOT_ALLOWED, f"seat {seat} does not exist")

    def _log(self, entry: dict[str, Any], rebuild: Any = None) -> None:
        self.transcript.append(entry, rebuild)

    def _add_shot(self, shot: Shot, verdict: Verdict) -> None:
        self._shot_count += 1
        if self._shot_list is not None:
            self._shot_list.append((shot, verdict))

    @property
    def shots(self) -> list[tuple[Shot, Verdict]]:
        """Every answered shot with its verdict, in order (rebuilt from the transcript)."""
        if self._shot_list is not None:
            return self._shot_list
        out = self.transcript.shots(self._parse_called, self._parse_answer)
        if self._false_proof is not None:
            # The verdict the game ended on, as given: its map may not parse back.
            out[self._false_proof[0].n - 1] = self._false_proof
        return out

    def _parse_answer(self, e: dict[str, Any], n: int) -> Verdict:
        if self._false_proof is not None and self._false_proof[0].n == n:
            return self._false_proof[1]
        return Verdict.from_dict(e["verdict"])

    def _parse_called(self, e: dict[str, Any], n: int) -> Shot:
        r = self.rules
        if e["in"] == "radar":
            return Shot(n, e["seat"], (parse_cell(e["at"], r.rows, r.cols),), radar=True)
        return Shot(n, e["seat"], tuple(parse_cell(c, r.rows, r.cols) for c in e["cells"]))

    def _end(self, outcome: Outcome, *before: GameEvent) -> Step:
        """The game ends with ``outcome`` (after the events ``before``)."""
        self._reveal_shots = None
        self.outcome = outcome
        self.pending = None
        return _OVER, [*before, GameOver(outcome)]

    def deadline(self) -> tuple[Deadline, int] | None:
        """The clock that should run now and its length in seconds, or ``None``.

        The shell restarts its timer whenever this value changes after an input.
        """
        c = self.rules.clocks
        if self.phase is _SETUP:
            return (Deadline.SETUP, c.setup) if c.setup else None
        if self.phase is _FIRING:
            return (Deadline.SHOT, c.shot) if c.shot else None
        if self.phase is _ANSWER:
            return Deadline.ANSWER, c.reveal
        if self.phase is _REVEAL:
            return Deadline.REVEAL, c.reveal
        return None

    def caller(self, seat: int) -> int:
        """Which team member of ``seat`` is due to call the next shot: the rotation of 002, one
        member after another, a turn each (the referee skips one who is away, spec 6.8)."""
        return self.shots_taken[seat] % self.rules.team_size

    def shot_count(self, seat: int) -> int:
        """How many cells ``seat`` must call in its next shot."""
        r = self.rules
        if r.shots is _SINGLE:
            n = 1
        elif r.shots is ShotMode.SALVO_FIXED:
            n = r.salvo_size
        else:
            n = self.boards[seat].afloat()
        target = self.boards[1 - seat]
        open_cells = self._cells - len(target.fired)
        crossed = target.crossed
        if crossed and isinstance(crossed, set):  # a set once a cell is crossed out
            open_cells -= len(crossed.difference(target.fired))
        if open_cells < n:
            n = open_cells
        return n if n > 1 else 1  # max(1, min(n, open_cells)), without two calls per shot

    # -- setup -----------------------------------------------------------------------------------

    def _commit(self, inp: Commit) -> Step:
        # Refused if already committed, malformed or mirrored.
        seat, commitment = inp.seat, inp.commitment
        self._seat(seat)
        if self.commitments[seat] is not None:
            raise Refused(ErrorCode.ALREADY_COMMITTED, f"seat {seat} has committed already")
        commitment.check_shape(self.rules)
        other = self.commitments[1 - seat]
        if other is not None and other.shares_leaves(commitment):
            raise RemoteProtocolError(
                ErrorCode.MIRRORED_COMMITMENT, "the commitment repeats the opponent's leaves"
            )
        self.commitments[seat] = commitment
        root = commitment.root(self.ctx[seat])
        self.roots[seat] = root
        # The commitment is kept anyway: the transcript rebuilds the entry from the input.
        self._log(inp.entry(), inp.entry)
        return self._maybe_start([Committed(seat, root)])

    def _set_first(self, inp: SetFirst) -> Step:
        # From the lot or the match's rule; may come before or after the commits.
        self._seat(inp.seat)
        if self.first is not None:
            raise Refused(ErrorCode.WRONG_PHASE, "the first player is already decided")
        self.first = inp.seat
        self._log(inp.entry())
        return self._maybe_start([])

    def _maybe_start(self, events: list[GameEvent]) -> Step:
        """Setup goes on (with ``events``), or firing begins once both fleets and the first
        player are known."""
        if self.first is None or None in self.commitments:
            return _SETUP, events
        self.turn = self.first
        events.append(FiringBegan(self.first))
        return _FIRING, events

    # -- firing ----------------------------------------------------------------------------------

    def _fire(self, inp: Fire) -> Step:
        seat, cells = inp.seat, inp.cells
        self._check_mover(seat, inp.member)
        r = self.rules
        target = self.boards[1 - seat]
        # shot_count() is 1 for single shots whatever the board: spared on nearly every shot.
        want = 1 if r.shots is _SINGLE else self.shot_count(seat)
        if len(cells) != want:
            raise Refused(
                ErrorCode.WRONG_SALVO_SIZE, f"this shot calls {want} cell(s), got {len(cells)}"
            )
        if want > 1 and len(set(cells)) != want:
            raise Refused(ErrorCode.DUPLICATE_IN_SALVO, "a salvo calls different cells")
        repeated = None
        rows, cols = r.rows, r.cols
        fired, crossed = target.fired, target.crossed
        for c in cells:
            row, col = c
            if not (0 <= row < rows and 0 <= col < cols):  # c.on(rows, cols), inline
                raise Refused(ErrorCode.OFF_BOARD, f"({c.row},{c.col}) is off the board")
            i = row * cols + col
            if i in fired:
                repeated = c
            elif i in crossed:
                raise Refused(ErrorCode.CROSSED_OUT, f"{c.label()} is crossed out: only water")
        if repeated is not None:
            # 002 strict play: a repeated single call wastes the turn; otherwise it is re-chosen.
            if r.repeat is RepeatShot.WASTED and not r.is_salvo:
                self._log(inp.entry())
                return self._lose_shot(seat, "repeat")
            raise Refused(ErrorCode.ALREADY_FIRED, f"{repeated.label()} was fired at already")
        self.expiries[seat] = 0
        self.transcript.append(inp.entry())
        shot = new_shot(self._shot_count + 1, seat, cells)
        self.pending = shot
        return _ANSWER, [new_shot_called(shot)]

    def _radar(self, inp: Radar) -> Step:
        # Instead of firing, once per game.
        seat, top_left = inp.seat, inp.at
        self._check_mover(seat, inp.member)
        r = self.rules
        if not r.radar:
            raise Refused(ErrorCode.RADAR_NOT_ALLOWED, "these rules have no radar")
        if self.boards[1 - seat].radar_used:
            raise Refused(ErrorCode.RADAR_USED, "the radar is used once per game")
        if not all(c.on(r.rows, r.cols) for c in radar_cells(r, top_left)):
            raise Refused(ErrorCode.OFF_BOARD, "the radar area must lie on the board")
        self.expiries[seat] = 0
        self._log(inp.entry())
        shot = Shot(self._shot_count + 1, seat, (top_left,), radar=True)
        self.boards[1 - seat].radar_used = True
        self.pending = shot
        return _ANSWER, [ShotCalled(shot)]

    def _check_mover(self, seat: int, member: int) -> None:
        if seat not in (0, 1):  # _seat(seat), inline: every shot
            raise Refused(ErrorCode.NOT_ALLOWED, f"seat {seat} does not exist")
        if seat != self.turn:
            raise Refused(ErrorCode.NOT_YOUR_TURN, f"seat {self.turn} is to move")
        # Which member calls is the referee's rule (spec 6.8: it skips a member who is away, a
        # fact no transcript holds); the game holds the caller to the team.
        if not 0 <= member < self.rules.team_size:
            raise Refused(ErrorCode.NOT_CALLER, f"the team has no member {member}")

    def _lose_shot(self, seat: int, why: str) -> Step:
        self.shots_taken[seat] += 1
        self.turn = nxt = 1 - seat
        return _FIRING, [ShotLost(seat, why, nxt)]

    # -- verdicts --------------------------------------------------------------------------------

    def _answer(self, inp: Answer) -> Step:
        # A verdict of the wrong shape is refused (the defender may send it again). A verdict
        # whose openings do not match the commitment, or contradict what it says, loses the game
        # at once.
        seat, verdict = inp.seat, inp.verdict
        shot = self.pending
        assert shot is not None
        if seat != 1 - shot.seat:
            raise Refused(ErrorCode.NOT_ALLOWED, f"seat {1 - shot.seat} answers shot {shot.n}")
        if verdict.n != shot.n:
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"verdict for shot {verdict.n}, pending shot is {shot.n}"
            )
        check_shape(self.rules, shot, verdict)
        commitment = self.commitments[seat]
        assert commitment is not None
        self.transcript.append(inp.entry())
        try:
            check_proofs(self.rules, commitment, self.ctx[seat], self.boards[seat], shot, verdict)
        except ProtocolError as e:
            self._add_shot(shot, verdict)
            self._false_proof = (shot, verdict)
            return self._end(
                Outcome(shot.seat, EndReason.FALSE_PROOF, f"shot {shot.n}: {e.detail}")
            )
        return self._apply(shot, verdict)

    def _apply(self, shot: Shot, v: Verdict) -> Step:
        r = self.rules
        seat = 1 - shot.seat
        board = self.boards[seat]
        self._shot_count += 1  # _add_shot(), inline: once per shot
        if self._shot_list is not None:
            self._shot_list.append((shot, v))
        self.pending = None
        if shot.radar:
            self.shots_taken[shot.seat] += 1
            self.turn = seat
            return _FIRING, [VerdictGiven(shot, v, seat)]
        any_hit = board.record(shot.cells, v)
        fired = board.fired
        need = self._fleet_cells
        if board.hits >= need:
            self.provisional = Outcome(shot.seat, EndReason.FLEET_SUNK)
            self.turn = None
            return _REVEAL, [VerdictGiven(shot, v, None), RevealDue(self.provisional)]
        open_cells = self._cells - len(fired) - len(board.crossed)
        if open_cells < need - board.hits:
            # Fewer cells left to fire at than ship cells left to hit: the verdicts given so far
            # cannot all be true of a legal fleet. Waiting would only stall the game.
            return self._end(
                Outcome(
                    shot.seat,
                    EndReason.FALSE_PROOF,
                    f"seat {seat}'s verdicts leave {open_cells} open cells for "
                    f"{need - board.hits} unhit ship cells",
                ),
                VerdictGiven(shot, v, None),
            )
        again = r.keeps_turn(any_hit)
        if not again:
            self.shots_taken[shot.seat] += 1
        self.turn = nxt = shot.seat if again else seat
        return _FIRING, [new_verdict_given(shot, v, nxt)]

    # -- time, resignation, absence --------------------------------------------------------------

    def _expire(self, inp: Expire) -> Step:
        # The clock ran out: apply the rules' consequence.
        kind = inp.clock
        now = self.deadline()
        if now is None or now[0] is not kind:
            raise Refused(ErrorCode.WRONG_PHASE, f"no {kind.value} clock is running")
        self._log(inp.entry())
        if kind is Deadline.SETUP:
            missing = [s for s in (0, 1) if self.commitments[s] is None]
            if len(missing) == 2:
                return self._end(Outcome(None, EndReason.NOBODY_PLACED, "neither fleet was placed"))
            if missing:
                return self._end(
                    Outcome(
                        1 - missing[0], EndReason.SETUP_TIMEOUT, f"seat {missing[0]} did not place"
                    )
                )
            # Both committed but no first player yet: the lot was not completed; nobody is at fault
            # that the game can see, so it is a draw rather than a guess.
            return self._end(Outcome(None, EndReason.NOBODY_PLACED, "the lot was not completed"))
        if kind is Deadline.SHOT:
            seat = self.turn
            assert seat is not None
            self.expiries[seat] += 1
            if self.expiries[seat] >= self.rules.clocks.max_expiries:
                return self._end(
                    Outcome(
                        1 - seat,
                        EndReason.SHOT_TIMEOUTS,
                        f"seat {seat} let {self.expiries[seat]} shot clocks run out",
                    )
                )
            return self._lose_shot(seat, "clock")
        if kind is Deadline.ANSWER:
            assert self.pending is not None
            defender = 1 - self.pending.seat
            return self._end(
                Outcome(
                    self.pending.seat,
                    EndReason.NO_ANSWER,
                    f"seat {defender} did not answer shot {self.pending.n}",
                )
            )
        # REVEAL
        for s in (0, 1):
            if self.reveals[s] is None and self.faults[s] is None:
                self.faults[s] = (EndReason.NO_REVEAL, f"seat {s} did not reveal its fleet")
        return self._finish()

    def _resign(self, inp: Resign) -> Step:
        seat = inp.seat  # gives up: the opponent wins
        self._seat(seat)
        self._log(inp.entry())
        return self._end(Outcome(1 - seat, EndReason.RESIGNED, f"seat {seat} resigned"))

    def _abandon(self, inp: Abandon) -> Step:
        seat = inp.seat  # stayed away beyond the disconnect grace period: the opponent wins
        self._seat(seat)
        self._log(inp.entry())
        return self._end(Outcome(1 - seat, EndReason.ABANDONED, f"seat {seat} left the game"))

    # -- the reveal ------------------------------------------------------------------------------

    def _reveal(self, inp: RevealFleet) -> Step:
        # Every verdict the seat gave is checked against its fleet.
        seat, reveal = inp.seat, inp.reveal
        self._seat(seat)
        if self.reveals[seat] is not None or self.faults[seat] is not None:
            raise Refused(ErrorCode.WRONG_PHASE, f"seat {seat} has revealed already")
        self._log(inp.entry(), inp.entry)
        self.reveals[seat] = reveal
        self.faults[seat] = self.check_reveal(seat, reveal)
        fault = self.faults[seat]
        revealed = Revealed(seat, reveal, fault[1] if fault else None)
        if all(self.reveals[s] is not None or self.faults[s] is not None for s in (0, 1)):
            phase, events = self._finish()
            return phase, [revealed, *events]
        return _REVEAL, [revealed]

    def fired_unrevealed(self) -> bool:
        """Whether the game reached ``firing`` (both seats committed, the first player known)
        and never entered ``reveal``: the fleets no reveal of its own shows, which courtesy
        reveals show once it is over (spec 7.3 decision 20)."""
        return self.first is not None and None not in self.commitments and self.provisional is None

    def check_reveal(self, seat: int, reveal: Reveal) -> tuple[EndReason, str] | None:
        """What ``reveal`` shows ``seat`` to have done wrong (``None`` when nothing)."""
        r = self.rules
        com = self.commitments[seat]
        assert com is not None
        try:
            occ = reveal.check(r, self.ctx[seat], com)
        except IllegalFleet as e:
            return EndReason.ILLEGAL_FLEET, f"illegal fleet: {e.detail}"
        except ProtocolError as e:
            return EndReason.BAD_REVEAL, f"bad reveal: {e.detail}"
        shots = self._reveal_shots
        if shots is None:
            shots = self.shots
            if self.phase is _REVEAL:  # both reveals check the same shots: rebuilt once
                self._reveal_shots = shots
        lie = first_lie(r, shots, seat, occ)
        return (EndReason.FALSE_VERDICT, lie) if lie else None

    def _finish(self) -> Step:
        f0, f1 = self.faults
        if f0 and f1:
            return self._end(Outcome(None, EndReason.BOTH_AT_FAULT, f"{f0[1]}; {f1[1]}"))
        for bad, fault in enumerate(self.faults):
            if fault:
                return self._end(Outcome(1 - bad, fault[0], f"seat {bad}: {fault[1]}"))
        assert self.provisional is not None
        return self._end(self.provisional)

    # -- views -----------------------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        """The public view (for spectators and snapshots): never a fleet or a secret."""
        return {
            "game": self.number,
            "phase": self.phase.value,
            "turn": self.turn,
            "first": self.first,
            "committed": [c is not None for c in self.commitments],
            "roots": self.roots,
            "boards": [b.to_dict() for b in self.boards],
            "pending": (
                {
                    "n": self.pending.n,
                    "seat": self.pending.seat,
                    "cells": [c.label() for c in self.pending.cells],
                    "radar": self.pending.radar,
                }
                if self.pending
                else None
            ),
            "shots": self._shot_count,
            "expiries": self.expiries,
            "callers": [self.caller(0), self.caller(1)],
            "outcome": self.outcome.to_dict() if self.outcome else None,
        }
