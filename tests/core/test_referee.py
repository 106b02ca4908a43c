"""The pure referee (protocol/referee.py) and the game's one transition table, with no sockets.

What a user relies on: that any record's transcript, fed to a fresh referee, gives every seat and
spectator the very bytes they were sent; that a resent shot applies once; that the rules of
refereed play (custody answers, clocks, abandonment, the lot, the series) hold; and that the game
never takes an edge its table (and so the spec's state diagram) does not list.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from helpers import place_msg, player_id, player_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seabattle.protocol import game as game_module
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, ProtocolError, Refused
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell
from seabattle.protocol.inputs import Answer, Expire, Fire, GameInput
from seabattle.protocol.referee import (
    ALL,
    LEAN_SPECTATORS,
    SEAT0,
    SEAT1,
    SPECTATORS,
    Referee,
    Send,
)
from seabattle.protocol.rules import (
    RepeatShot,
    RuleSet,
    SalvoReport,
    ShotMode,
    SunkReport,
    preset,
    rules_from_dict,
)
from seabattle.protocol.session import MAX_S2C_FRAME
from seabattle.protocol.state import TRANSITIONS, Deadline, Phase
from seabattle.protocol.verdict import Defender

MID = bytes(range(16))
PLAYERS = (player_id("a"), player_id("b"))
CLASSIC = preset("classic")
RUSSIAN = preset("russian")

RULES: dict[str, RuleSet] = {
    "classic": CLASSIC,
    "russian": RUSSIAN,
    "six-ship": preset("six-ship"),
    "sea-battle": preset("sea-battle"),
    "classic-8x8": preset("classic-8x8"),
    "salvo-afloat": CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT),
    "salvo-total": CLASSIC.replace(
        shots=ShotMode.SALVO_FIXED, salvo_size=3, salvo_report=SalvoReport.TOTAL
    ),
    "hit-again": CLASSIC.replace(hit_again=True),
    "silent": CLASSIC.replace(sunk=SunkReport.SILENT),
    "radar": CLASSIC.replace(radar=True),
    "teams": CLASSIC.replace(team_size=2),
    "strict-repeat": CLASSIC.replace(repeat=RepeatShot.WASTED),
    "best-of-3": rules_from_dict(
        {"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}}
    ),
}


class Audiences:
    """The frames each audience was sent, in order (and the messages, in ``msgs``)."""

    def __init__(self) -> None:
        self.frames: dict[int, list[bytes]] = {a: [] for a in _AUDIENCES}
        self.msgs: dict[int, list[m.Message]] = {a: [] for a in _AUDIENCES}

    def take(self, sends: list[Send]) -> None:
        for to, msg, member in sends:
            assert member is None  # one player a seat
            frame = m.frame(msg, max_frame=MAX_S2C_FRAME)
            for who, got in self.frames.items():
                if to & who:
                    got.append(frame)
                    self.msgs[who].append(msg)


_AUDIENCES = (SEAT0, SEAT1, SPECTATORS, LEAN_SPECTATORS)


def _move(ref: Referee, rng: random.Random, seq: int) -> m.Message:
    """A legal-looking move for the side to move: mostly a fresh cell, sometimes a repeat."""
    g = ref.game
    assert g is not None and g.turn is not None
    s = g.turn
    r = g.rules
    target = g.boards[1 - s]
    if r.radar and not target.radar_used and rng.random() < 0.05:
        return m.Radar(MID, g.number, "B2", g.caller(s), seq)
    fresh = [i for i in range(r.cells) if i not in target.fired and i not in target.crossed]
    if r.repeat is RepeatShot.WASTED and target.fired and rng.random() < 0.1:
        picked = [next(iter(target.fired))]
    else:
        picked = rng.sample(fresh, g.shot_count(s))
    cells = tuple(Cell(*divmod(i, r.cols)).label() for i in picked)
    return m.Fire(MID, g.number, cells, g.caller(s), seq)


def play(
    rules: RuleSet,
    mode: str,
    rng: random.Random,
    *,
    clocks: bool = False,
    lean: tuple[bool, bool] = (False, False),
) -> tuple[Referee, Audiences]:
    """A whole match through one referee: honest players, random moves, sometimes a clock runs
    out (``clocks``) or a player resigns; ``lean``: which seats' sessions agreed ``lean``."""
    ref = Referee(match_id=MID, rules=rules, mode=mode, players=PLAYERS, lot=rng.randbytes(32))
    for seat in (0, 1):
        ref.set_lean(seat, lean[seat])
    seen = Audiences()
    now = 0.0
    seen.take(ref.start(now))
    seq = 0
    while not ref.over:
        g = ref.game
        assert g is not None
        defenders: list[Defender] = []
        for seat in (0, 1):
            c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, g.number, seat)
            defenders.append(Defender(c))
            sig = c.seat_sig(player_key("ab"[seat]))
            if mode == "custody":
                msg: m.Message = m.Place(MID, g.number, tuple(c.fleet.to_list()), c.secret, sig)
            else:
                msg = m.Commit(MID, g.number, c.commitment.to_dict(), sig)
            seen.take(ref.receive(seat, msg, now))
        while ref.game is g and g.phase is not Phase.OVER:
            if clocks and ref.clock is not None and rng.random() < 0.03:
                now = ref.wake_at
                seen.take(ref.tick(now))
                continue
            if rng.random() < 0.003 and g.phase is not Phase.REVEAL:
                seen.take(ref.receive(rng.randrange(2), m.Resign(MID, g.number), now))
                continue
            if g.phase is Phase.FIRING:
                seq += 1
                seen.take(ref.receive(g.turn or 0, _move(ref, rng, seq), now))
            elif g.phase is Phase.ANSWER:
                assert g.pending is not None
                defender = 1 - g.pending.seat
                verdict = defenders[defender].answer(g.pending).to_dict()
                seen.take(ref.receive(defender, m.Answer(MID, g.number, verdict), now))
            elif g.phase is Phase.REVEAL:
                for seat in (0, 1):
                    if g.phase is Phase.REVEAL and g.reveals[seat] is None:
                        rv = defenders[seat].committed.reveal().to_dict()
                        seen.take(ref.receive(seat, m.RevealMsg(MID, g.number, rv), now))
            else:
                pytest.fail(f"the game waits in phase {g.phase.value}")
    return ref, seen


def replay(played: Referee) -> Audiences:
    """Feed every game's transcript, in order, to a fresh referee that draws no lot itself."""
    ref = Referee(match_id=MID, rules=played.rules, mode=played.mode, players=PLAYERS, lot=None)
    seen = Audiences()
    seen.take(ref.start(0.0))
    for g in played.match.games:
        for inp in g.inputs():
            seen.take(ref.feed(inp, 0.0))
    return seen


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("mode", ["blind", "custody"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), clocks=st.booleans())
def test_replaying_the_transcripts_gives_every_audience_the_same_bytes(
    name: str, mode: str, seed: int, clocks: bool
) -> None:
    played, seen = play(RULES[name], mode, random.Random(seed), clocks=clocks)
    again = replay(played)
    for who in (SEAT0, SEAT1, SPECTATORS):
        # Courtesy reveals (spec 7.3 decision 20: a custody referee's, after a game that ended
        # early) are no inputs: a transcript cannot give them again.
        assert again.frames[who] == _no_courtesy(seen, who)
    assert len(seen.frames[SPECTATORS]) > 2  # a whole match, not just its start


def _no_courtesy(seen: Audiences, who: int) -> list[bytes]:
    """The frames ``who`` was sent, less the ``revealed`` sent after a ``game_over``."""
    out, ended = [], False
    for frame, msg in zip(seen.frames[who], seen.msgs[who], strict=True):
        if isinstance(msg, m.GameOver | m.GameStart):
            ended = isinstance(msg, m.GameOver)
        if not (ended and isinstance(msg, m.Revealed)):
            out.append(frame)
    return out


def _custody(rules: RuleSet) -> Referee:
    ref = Referee(match_id=MID, rules=rules, mode="custody", players=PLAYERS, lot=bytes(32))
    ref.start(0.0)
    return ref


def _place_both(ref: Referee, rng: random.Random) -> None:
    g = ref.game
    assert g is not None
    for seat in (0, 1):
        fleet = tuple(random_fleet(ref.rules, rng).to_list())
        msg = place_msg(MID, g.number, fleet, rng.randbytes(32), seat, ref.rules, "ab"[seat])
        ref.receive(seat, msg, 0.0)


def test_a_resent_shot_applies_once_per_game_and_seqs_start_again_each_game() -> None:
    rules = rules_from_dict({"preset": "classic", "match": {"kind": "best-of", "games": 3}})
    rng = random.Random(7)
    ref = _custody(rules)
    for number in (1, 2):
        g = ref.game
        assert g is not None and g.number == number
        _place_both(ref, rng)
        assert g.turn is not None
        shooter = g.turn
        # The same seq in every game: seqs are per game, so game 2's shot 1 is a new shot.
        first = ref.receive(shooter, m.Fire(MID, number, ("A1",), 0, 1), 0.0)
        assert any(isinstance(s.msg, m.ShotCalled) for s in first)
        assert ref.receive(shooter, m.Fire(MID, number, ("A1",), 0, 1), 0.0) == []
        assert len(g.shots) == 1  # answered by the referee, once
        ref.receive(shooter, m.Resign(MID, number), 0.0)
    assert ref.game is not None and ref.game.number == 3


def test_custody_answers_and_reveals_for_the_players() -> None:
    rng = random.Random(3)
    ref = _custody(preset("classic-8x8"))
    _place_both(ref, rng)
    g = ref.game
    assert g is not None
    seq = 0
    while not ref.over:
        seq += 1
        out = ref.receive(g.turn or 0, _move(ref, rng, seq), 0.0)
        assert ref.urgent is not None  # the shooter waits for the verdict
        assert not isinstance(out[-1].msg, m.ShotCalled)  # the verdict came with the shot
    assert g.outcome is not None and g.outcome.reason.value == "fleet_sunk"
    assert all(r is not None for r in g.reveals)


def _revealed_to(seen: Audiences, who: int) -> set[int]:
    return {x.seat for x in seen.msgs[who] if isinstance(x, m.Revealed)}


@pytest.mark.parametrize("mode", ["blind", "custody"])
@pytest.mark.parametrize(
    "rules",
    [
        preset("sea-battle"),
        rules_from_dict({"preset": "sea-battle", "rows": 6, "cols": 6}),  # sea-battle+custom
        RUSSIAN,
        CLASSIC,
    ],
    ids=lambda r: r.name,
)
def test_only_004_in_custody_keeps_each_fleet_from_the_other_player(
    rules: RuleSet, mode: str
) -> None:
    """7.3 decision 19: a custody referee under 004's rule sends each player its own reveal only
    (spectators both); in blind mode, and under every other rule set, both cross."""
    rng = random.Random(8)
    for _ in range(20):  # a match that ends in a resignation has no reveal: play until one does
        ref, seen = play(rules, mode, rng)
        g = ref.game
        assert g is not None and g.outcome is not None
        if g.outcome.reason.value == "fleet_sunk":
            break
    else:
        pytest.fail("no game ended at the reveal")
    private = mode == "custody" and rules.lineage == "sea-battle"
    assert _revealed_to(seen, SEAT0) == ({0} if private else {0, 1})
    assert _revealed_to(seen, SEAT1) == ({1} if private else {0, 1})
    assert _revealed_to(seen, SPECTATORS) == {0, 1}
    assert all(r is not None for r in g.reveals)  # the record keeps both (11.1)


def test_a_wrong_trust_mode_message_is_refused_and_changes_nothing() -> None:
    rng = random.Random(4)
    ref = _custody(CLASSIC)
    g = ref.game
    assert g is not None
    c = Committed(CLASSIC, random_fleet(CLASSIC, rng), bytes(32), MID, 1, 0)
    with pytest.raises(Refused) as e:
        ref.receive(0, m.Commit(MID, 1, c.commitment.to_dict(), bytes(64)), 0.0)
    assert e.value.code is ErrorCode.UNEXPECTED_MESSAGE
    assert g.commitments == [None, None] and len(g.transcript) == 1  # the lot only


def test_clocks_restart_as_the_rules_say_and_expire_only_when_due() -> None:
    rules = preset("sea-battle")  # 120 s setup, 30 s shot clock
    rng = random.Random(5)
    ref = Referee(match_id=MID, rules=rules, mode="custody", players=PLAYERS, lot=bytes(32))
    out = ref.start(0.0)
    clocks = [s.msg for s in out if isinstance(s.msg, m.Clock)]
    assert [(c.kind, c.seconds) for c in clocks] == [("setup", 120)]
    assert ref.wake_at == 120
    assert ref.tick(119.0) == []  # not due yet
    _place_both(ref, rng)
    assert ref.clock is not None and ref.clock[0] is Deadline.SHOT and ref.wake_at == 30
    g = ref.game
    assert g is not None and g.turn is not None
    mover = g.turn
    out = ref.tick(30.0)
    lost = [s.msg for s in out if isinstance(s.msg, m.ShotLost)]
    assert lost == [m.ShotLost(MID, 1, mover, "clock", (), 1 - mover)]
    assert ref.wake_at == 60  # the next mover's clock


def test_both_gone_the_one_who_left_first_forfeits() -> None:
    rng = random.Random(6)
    ref = _custody(CLASSIC)
    _place_both(ref, rng)
    grace = CLASSIC.clocks.grace
    told = ref.seat_gone(1, 10.0)
    assert told == [Send(SEAT0, m.OpponentStatus(MID, 1, False, grace))]
    ref.seat_gone(0, 20.0)
    assert ref.wake_at == 10.0 + grace
    out = ref.tick(10.0 + grace)
    over = [s.msg for s in out if isinstance(s.msg, m.GameOver)]
    assert over and over[0].outcome["winner"] == 0 and over[0].outcome["reason"] == "abandoned"


def test_a_seat_back_in_time_keeps_its_game() -> None:
    rng = random.Random(8)
    ref = _custody(CLASSIC)
    _place_both(ref, rng)
    ref.seat_gone(1, 0.0)
    back = ref.seat_back(1, 5.0)
    assert [type(s.msg) for s in back] == [m.Start, m.Snapshot, m.OpponentStatus]
    assert [s.to for s in back] == [SEAT1, SEAT1, SEAT0]
    # Classic runs no shot clock: long after the grace period, nothing happens to the game.
    assert ref.tick(1000.0) == []
    assert ref.game is not None and ref.game.outcome is None


def test_a_player_who_leaves_forfeits_every_game_still_to_come() -> None:
    rules = rules_from_dict({"preset": "classic", "match": {"kind": "best-of", "games": 3}})
    rng = random.Random(9)
    ref = _custody(rules)
    _place_both(ref, rng)
    ref.leave(1, 0.0)
    while not ref.over:
        assert ref.wake_at == -float("inf")
        ref.tick(0.0)
    assert ref.match.winner == 0
    reasons = [g.outcome.reason.value for g in ref.match.games if g.outcome]
    assert reasons == ["resigned", "abandoned"]


# -- team play (spec 6.8) --------------------------------------------------------------------------

TEAM_IDS = ((PLAYERS[0], player_id("a2")), (PLAYERS[1], player_id("b2")))


def _team_match() -> tuple[Referee, list[Send]]:
    rules = CLASSIC.replace(team_size=2)
    ref = Referee(
        match_id=MID, rules=rules, mode="custody", players=PLAYERS, lot=bytes(32), teams=TEAM_IDS
    )
    out = ref.start(0.0)
    g = ref.game
    assert g is not None
    rng = random.Random(3)
    for seat in (0, 1):
        fleet = tuple(random_fleet(rules, rng).to_list())
        out += ref.receive(
            seat, place_msg(MID, 1, fleet, bytes(32), seat, rules, "ab"[seat]), 0.0, member=0
        )
    return ref, out


@contextmanager
def refusal(code: ErrorCode, ref: Referee) -> Iterator[None]:
    """The block is refused with ``code`` and changes nothing the match shows."""
    before = ref.view(0.0)
    with pytest.raises(Refused) as info:
        yield
    assert info.value.code == code
    assert ref.view(0.0) == before


def _turns(sends: list[Send]) -> list[tuple[int, int]]:
    return [(s.msg.seat, s.msg.member) for s in sends if isinstance(s.msg, m.Turn)]


def test_the_referee_names_each_caller_and_refuses_the_others() -> None:
    ref, out = _team_match()
    teams = [s.msg for s in out if isinstance(s.msg, m.Team)]
    assert [(t.seat, t.members) for t in teams] == [(0, TEAM_IDS[0]), (1, TEAM_IDS[1])]
    g = ref.game
    assert g is not None and g.turn is not None
    first = g.turn
    assert _turns(out) == [(first, 0)]
    # Member 1 may not call member 0's turn, nor call as member 0.
    with refusal(ErrorCode.NOT_CALLER, ref):
        ref.receive(first, m.Fire(MID, 1, ("A1",), 1, 1), 0.0, member=1)
    with refusal(ErrorCode.NOT_CALLER, ref):
        ref.receive(first, m.Fire(MID, 1, ("A1",), 0, 1), 0.0, member=1)
    # Only the captain resigns (or places, answers, reveals).
    with refusal(ErrorCode.NOT_CAPTAIN, ref):
        ref.receive(first, m.Resign(MID, 1), 0.0, member=1)
    called = []
    for seq in range(1, 9):
        s = g.turn
        k = ref.caller(s)
        called.append((s, k))
        sends = ref.receive(s, m.Fire(MID, 1, (f"{'ABCDEFGH'[seq - 1]}10",), k, seq), 0.0, k)
        if g.turn is not None:
            assert _turns(sends)[-1] == (g.turn, ref.caller(g.turn))
    # The caller rotates within each team, a turn each (classic: no hit again).
    assert [k for s, k in called if s == first] == [0, 1, 0, 1]
    assert [k for s, k in called if s != first] == [0, 1, 0, 1]


def test_every_shot_to_call_has_its_turn_even_the_same_callers_next() -> None:
    """6.8: a member calls when a ``turn`` names it; a hit under ``hit_again`` keeps the caller,
    and the next shot still has its ``turn``. A refused call sends none."""
    rules = CLASSIC.replace(team_size=2, hit_again=True)
    ref = Referee(
        match_id=MID, rules=rules, mode="custody", players=PLAYERS, lot=bytes(32), teams=TEAM_IDS
    )
    ref.start(0.0)
    rng = random.Random(5)
    fleets = [random_fleet(rules, rng) for _ in (0, 1)]
    for seat in (0, 1):
        fleet = tuple(fleets[seat].to_list())
        msg = place_msg(MID, 1, fleet, bytes(32), seat, rules, "ab"[seat])
        ref.receive(seat, msg, 0.0, member=0)
    g = ref.game
    assert g is not None and g.turn is not None
    s = g.turn
    ship = next(iter(fleets[1 - s].ship_cells(rules)))[0].label()
    hit = ref.receive(s, m.Fire(MID, 1, (ship,), 0, 1), 0.0, member=0)
    assert g.turn == s  # a hit shoots again
    assert _turns(hit) == [(s, 0)]  # the same caller, told again
    with pytest.raises(Refused):
        ref.receive(s, m.Fire(MID, 1, (ship,), 0, 2), 0.0, member=0)  # fired at already
    water = next(
        Cell(*divmod(i, rules.cols)).label()
        for i in range(rules.cells)
        if not fleets[1 - s].occupancy(rules)[i]
    )
    miss = ref.receive(s, m.Fire(MID, 1, (water,), 0, 3), 0.0, member=0)
    assert _turns(miss) == [(1 - s, 0)]


def test_a_member_away_is_skipped_and_a_team_is_away_only_when_all_are() -> None:
    ref, _ = _team_match()
    g = ref.game
    assert g is not None and g.turn is not None
    s = g.turn
    # The due caller (member 0) goes: the turn passes at once to member 1, and nobody is told
    # the seat is away.
    gone = ref.seat_gone(s, 1.0, member=0)
    assert _turns(gone) == [(s, 1)]
    assert not any(isinstance(x.msg, m.OpponentStatus) for x in gone)
    assert ref.wake_at == float("inf")  # no grace period runs
    ref.receive(s, m.Fire(MID, 1, ("J1",), 1, 1), 1.0, member=1)
    # The whole team away: the other seat is told, and the grace period runs.
    gone = ref.seat_gone(s, 2.0, member=1)
    assert [x.msg for x in gone if isinstance(x.msg, m.OpponentStatus)] == [
        m.OpponentStatus(MID, s, False, ref.rules.clocks.grace)
    ]
    assert ref.wake_at == 2.0 + ref.rules.clocks.grace
    # One comes back: it alone gets start, the teams and its snapshot; the other seat is told.
    back = ref.seat_back(s, 3.0, member=1)
    mine = [x for x in back if x.member == 1]
    assert [type(x.msg) for x in mine] == [m.Start, m.Team, m.Team, m.Snapshot]
    assert all(x.to == (SEAT0 if s == 0 else SEAT1) for x in mine)
    assert [x.msg.present for x in back if isinstance(x.msg, m.OpponentStatus)] == [True]
    snapshot = next(x.msg for x in mine if isinstance(x.msg, m.Snapshot))
    assert snapshot.view["away"][s] == [0] and snapshot.view["teams"] == [list(t) for t in TEAM_IDS]


# -- the transition table ------------------------------------------------------------------------


@contextmanager
def edges_taken() -> Iterator[set[tuple[Phase, str, Phase]]]:
    """Every (phase, input, next phase) the games fed in this block went through."""
    taken: set[tuple[Phase, str, Phase]] = set()
    original = Game.feed

    def feed(self: Game, inp: GameInput) -> Any:
        before = self.phase
        events = original(self, inp)
        taken.add((before, inp.NAME.value, self.phase))
        return events

    Game.feed = feed  # type: ignore[method-assign]
    try:
        yield taken
    finally:
        Game.feed = original  # type: ignore[method-assign]


def _honest(rules: RuleSet, seed: int) -> tuple[Game, list[Defender]]:
    rng = random.Random(seed)
    g = Game(rules, MID)
    ds = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, seat)
        ds.append(Defender(c))
        g.commit(seat, c.commitment)
    return g, ds


def _every_edge() -> None:
    timed = preset("sea-battle")
    # Setup: the lot before the commits, after them, clocks, resignation, absence.
    g, _ = _honest(CLASSIC, 1)  # commit -> setup (no first yet), twice
    g.set_first(0)  # set_first -> firing
    g2 = Game(CLASSIC, MID)
    g2.set_first(1)  # set_first -> setup
    c = Committed(CLASSIC, random_fleet(CLASSIC, random.Random(2)), bytes(32), MID, 1, 0)
    g2.commit(0, c.commitment)
    g2.resign(0)
    g2b = Game(CLASSIC, MID)
    g2b.set_first(0)
    _, dsb = _honest(CLASSIC, 12)
    for seat in (0, 1):
        g2b.commit(seat, dsb[seat].committed.commitment)  # the last one -> firing
    Game(timed, MID).expire(Deadline.SETUP)
    Game(CLASSIC, MID).abandon(1)
    g3, _ = _honest(CLASSIC, 3)
    g3.set_first(0)
    g3.fire(0, [Cell(0, 0)])  # fire -> answer
    g3.abandon(0)  # answer -> over
    # Firing: a wasted repeat, radar, clocks, resignation, absence.
    strict = CLASSIC.replace(repeat=RepeatShot.WASTED, radar=True, clocks=timed.clocks)
    g4, ds4 = _honest(strict, 4)
    g4.set_first(0)
    g4.fire(0, [Cell(0, 0)])
    g4.answer(1, ds4[1].answer(g4.pending))  # type: ignore[arg-type]
    if g4.turn == 1:
        g4.fire(1, [Cell(0, 0)])
        g4.answer(0, ds4[0].answer(g4.pending))  # type: ignore[arg-type]
    g4.fire(0, [Cell(0, 0)])  # a repeat: fire -> firing
    g4.radar(1, Cell(0, 0))  # radar -> answer
    g4.answer(0, ds4[0].answer(g4.pending))  # type: ignore[arg-type]
    g4.expire(Deadline.SHOT)  # expire -> firing
    for _ in range(2 * strict.clocks.max_expiries):
        if g4.phase is Phase.FIRING:
            g4.expire(Deadline.SHOT)  # ... and at last -> over
    assert g4.phase is Phase.OVER
    g5, _ = _honest(CLASSIC, 5)
    g5.set_first(0)
    g5.resign(1)
    g6, _ = _honest(CLASSIC, 6)
    g6.set_first(0)
    g6.abandon(1)
    # Answer: a false proof, the answer clock, resignation.
    g7, ds7 = _honest(CLASSIC, 7)
    g7.set_first(0)
    g7.fire(0, [Cell(0, 0)])
    v = ds7[1].answer(g7.pending)  # type: ignore[arg-type]
    forged = ds7[0].answer(g7.pending)  # type: ignore[arg-type]  # seat 0's opening: false
    g7.answer(1, forged if forged != v else v)
    g8, _ = _honest(timed, 8)
    g8.set_first(0)
    g8.fire(0, [Cell(0, 0)])
    g8.expire(Deadline.ANSWER)
    g9, _ = _honest(CLASSIC, 9)
    g9.set_first(0)
    g9.fire(0, [Cell(0, 0)])
    g9.resign(0)
    # The reveal: one, then the other; and a reveal clock.
    for seed, clock in ((10, False), (11, True)):
        g10, ds10 = _honest(timed if clock else CLASSIC, seed)
        g10.set_first(0)
        rng = random.Random(seed)
        while g10.phase is Phase.FIRING:
            s = g10.turn
            assert s is not None
            b = g10.boards[1 - s]
            i = rng.choice([i for i in range(100) if i not in b.fired])
            g10.fire(s, [Cell(*divmod(i, 10))])
            g10.answer(1 - s, ds10[1 - s].answer(g10.pending))  # type: ignore[arg-type]
        g10.reveal(0, ds10[0].committed.reveal())
        if clock:
            g10.expire(Deadline.REVEAL)
        else:
            g10.reveal(1, ds10[1].committed.reveal())


def test_games_go_through_every_edge_of_the_table_and_no_other() -> None:
    with edges_taken() as taken:
        _every_edge()
    listed = {(p, i, dst) for (p, i), leads in TRANSITIONS.items() for dst, _ in leads}
    assert taken == listed


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(RULES)), seed=st.integers(0, 2**32 - 1))
def test_random_matches_take_only_edges_the_table_lists(name: str, seed: int) -> None:
    listed = {(p, i, dst) for (p, i), leads in TRANSITIONS.items() for dst, _ in leads}
    with edges_taken() as taken:
        play(RULES[name], "custody", random.Random(seed), clocks=True)
    assert taken <= listed


def test_an_edge_the_table_lacks_is_a_local_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leads = dict(game_module._LEADS)
    leads[(Phase.SETUP, "resign")] = frozenset({Phase.SETUP})  # the code goes to `over`
    monkeypatch.setattr(game_module, "_LEADS", leads)
    g = Game(CLASSIC, MID)
    with pytest.raises(LocalProtocolError, match="'resign' in phase 'setup' led to 'over'"):
        g.resign(0)
    assert g.phase is Phase.SETUP  # the table sets the phase: an edge it lacks is not taken


def test_the_replay_fast_paths_take_their_edges_through_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Game.replay applies a single shot and its proved verdict without feed(); the phase still
    # moves only along an edge of the table.
    g, ds = _honest(CLASSIC, 5)
    g.set_first(0)
    shot = Fire(0, 0, (Cell(0, 0),)).entry()
    monkeypatch.setattr(game_module, "_FIRE_LEADS", frozenset({Phase.FIRING}))
    with pytest.raises(LocalProtocolError, match="'fire' in phase 'firing' led to 'answer'"):
        g.replay(shot)
    assert g.phase is Phase.FIRING
    monkeypatch.undo()
    g = Game(CLASSIC, MID, compact=False)
    for seat in (0, 1):
        g.commit(seat, ds[seat].committed.commitment)
    g.set_first(0)
    g.replay(shot)
    assert g.phase is Phase.ANSWER and g.pending is not None
    answer = Answer(1, ds[1].answer(g.pending)).entry()
    monkeypatch.setattr(game_module, "_ANSWER_LEADS", frozenset({Phase.OVER}))
    with pytest.raises(LocalProtocolError, match="'answer' in phase 'answer' led to 'firing'"):
        g.replay(answer)
    assert g.phase is Phase.ANSWER


def test_an_input_the_phase_does_not_take_is_refused_naming_both() -> None:
    g = Game(CLASSIC, MID)
    with pytest.raises(Refused, match="'fire' is not allowed in phase 'setup'") as e:
        g.fire(0, [Cell(0, 0)])
    assert e.value.code is ErrorCode.WRONG_PHASE
    g.resign(0)
    with pytest.raises(ProtocolError) as over:
        g.feed(Expire(Deadline.SETUP))
    assert over.value.code is ErrorCode.GAME_OVER


# -- lean sessions (spec 5.7) ----------------------------------------------------------------------


def _copy(mode: str, seat: int | None, msg: m.Message) -> bool:
    """Whether 5.7 says a lean session is not sent ``msg``: in ``seat``, one player a seat (so
    every shot of the seat is its own move, every verdict on the other's shot its answer), or a
    spectator (``None``)."""
    if isinstance(msg, m.ShotCalled):
        return mode == "custody" or msg.seat == seat
    return isinstance(msg, m.VerdictMsg) and mode == "blind" and seat not in (None, msg.seat)


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("mode", ["blind", "custody"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), lean=st.sampled_from([(True, True), (True, False)]))
def test_a_lean_session_is_sent_everything_but_the_copies_of_its_own_moves(
    name: str, mode: str, seed: int, lean: tuple[bool, bool]
) -> None:
    # The same match (lean changes nothing the game does) with and without lean sessions: each
    # audience is sent the same frames, less exactly what 5.7 says a lean one is not sent.
    _, plain = play(RULES[name], mode, random.Random(seed), clocks=True)
    _, leaned = play(RULES[name], mode, random.Random(seed), clocks=True, lean=lean)
    # Without lean sessions the seats, and the spectators who did not agree lean, are sent it all.
    for who, source, seat, agreed in (
        (SEAT0, SEAT0, 0, lean[0]),
        (SEAT1, SEAT1, 1, lean[1]),
        (LEAN_SPECTATORS, SPECTATORS, None, True),
    ):
        want = [
            f
            for f, msg in zip(plain.frames[source], plain.msgs[source], strict=True)
            if not (agreed and _copy(mode, seat, msg))
        ]
        assert leaned.frames[who] == want
    assert plain.frames[LEAN_SPECTATORS] == want  # whatever the seats agreed
    assert leaned.frames[SPECTATORS] == plain.frames[SPECTATORS]
    if lean[0] and mode == "custody":
        assert not any(isinstance(x, m.ShotCalled) for x in leaned.msgs[SEAT0])


def test_a_lean_team_member_is_left_out_of_its_own_shot_alone() -> None:
    # Team play (6.8): the caller's session is left out, its team mates are sent the shot by name;
    # in custody mode every lean session is left out of every shot.
    ref, _ = _team_match()
    g = ref.game
    assert g is not None and g.turn is not None
    s = g.turn
    k = ref.caller(s)
    ref.set_lean(s, True, k)
    assert ref.is_lean(s, k) and not ref.is_lean(s, 1 - k) and not ref.is_lean(1 - s)
    out = ref.receive(s, m.Fire(MID, 1, ("A1",), k, 1), 0.0, k)
    shots = [(x.to, x.member) for x in out if isinstance(x.msg, m.ShotCalled)]
    bit = SEAT0 if s == 0 else SEAT1
    assert shots == [(ALL & ~bit & ~LEAN_SPECTATORS, None), (bit, 1 - k)]
    verdicts = [(x.to, x.member) for x in out if isinstance(x.msg, m.VerdictMsg)]
    assert verdicts == [(ALL, None)]
    ref.set_lean(s, False, k)
    out = ref.receive(
        g.turn, m.Fire(MID, 1, ("B1",), ref.caller(g.turn), 2), 0.0, ref.caller(g.turn)
    )
    shots = [(x.to, x.member) for x in out if isinstance(x.msg, m.ShotCalled)]
    assert shots == [(ALL & ~LEAN_SPECTATORS, None)]


def test_a_lean_team_member_in_blind_mode_is_not_sent_its_own_shot_nor_its_captains_answer() -> (
    None
):
    rules = CLASSIC.replace(team_size=2)
    ref = Referee(
        match_id=MID, rules=rules, mode="blind", players=PLAYERS, lot=bytes(32), teams=TEAM_IDS
    )
    ref.start(0.0)
    rng = random.Random(8)
    defenders = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, seat)
        defenders.append(Defender(c))
        sig = c.seat_sig(player_key("ab"[seat]))
        ref.receive(seat, m.Commit(MID, 1, c.commitment.to_dict(), sig), 0.0)
    g = ref.game
    assert g is not None and g.turn is not None
    s = g.turn
    k = ref.caller(s)
    for seat, member in ((s, 0), (s, 1), (1 - s, 0)):  # every session lean but one
        ref.set_lean(seat, True, member)
    out = ref.receive(s, m.Fire(MID, 1, ("A1",), k, 1), 0.0, k)
    bit, other = (SEAT0, SEAT1) if s == 0 else (SEAT1, SEAT0)
    assert [(x.to, x.member) for x in out if isinstance(x.msg, m.ShotCalled)] == [
        (ALL & ~bit, None),
        (bit, 1 - k),
    ]
    assert g.pending is not None
    verdict = defenders[1 - s].answer(g.pending).to_dict()
    out = ref.receive(1 - s, m.Answer(MID, 1, verdict), 0.0)  # the captain answers
    assert [(x.to, x.member) for x in out if isinstance(x.msg, m.VerdictMsg)] == [
        (ALL & ~other, None),
        (other, 1),
    ]


def test_lean_is_said_of_a_seat_or_member_there_is() -> None:
    ref = _custody(CLASSIC)
    with pytest.raises(ValueError, match="seat 2"):
        ref.set_lean(2, True)
    with pytest.raises(ValueError, match="member 1"):
        ref.set_lean(0, True, 1)
    ref.set_lean(1, True)
    assert ref.is_lean(1) and not ref.is_lean(0)
