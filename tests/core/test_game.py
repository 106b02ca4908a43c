"""One game, refereed from commitments: honest games end right, and every lie is caught by the end.

The referee (:class:`Game`) never sees a fleet before the reveal; the tests hold each side's secrets
in a :class:`Defender` and drive the referee the way a shell would.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seabattle.protocol.commit import CellOpening, Committed, Reveal
from seabattle.protocol.errors import ErrorCode, Refused, RemoteProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Deadline, EndReason, Game, Outcome, Phase
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.inputs import GameEvent, GameOver, ShotCalled, ShotLost, VerdictGiven
from seabattle.protocol.rules import (
    PRESETS,
    RepeatShot,
    RuleSet,
    SalvoReport,
    ShotMode,
    SunkReport,
    preset,
)
from seabattle.protocol.verdict import CellResult, Defender, Result, Shot, Verdict

MID = bytes(range(16))
Answerer = Callable[[int, Shot], Verdict]


def committed(
    rules: RuleSet, fleet: Fleet, seat: int, *, mid: bytes = MID, game: int = 1, ctx_seat: int = -1
) -> Committed:
    """A player's commitment; ``ctx_seat`` builds it for another seat's context (a replay)."""
    secret = bytes([seat + 1]) * 32
    return Committed(rules, fleet, secret, mid, game, seat if ctx_seat < 0 else ctx_seat)


def start(
    rules: RuleSet, rng: random.Random, first: int = 0, fleets: tuple[Fleet | None, ...] = ()
) -> tuple[Game, list[Defender]]:
    """Both seats commit (random fleets unless given) and ``first`` is set: firing begins."""
    g = Game(rules, MID, 1)
    defenders = []
    for seat in (0, 1):
        fleet = fleets[seat] if fleets and fleets[seat] else random_fleet(rules, rng)
        c = committed(rules, fleet, seat)
        defenders.append(Defender(c))
        g.commit(seat, c.commitment)
    g.set_first(first)
    assert g.phase is Phase.FIRING and g.turn == first
    return g, defenders


def cell(rules: RuleSet, i: int) -> Cell:
    return Cell(i // rules.cols, i % rules.cols)


def open_targets(g: Game, seat: int) -> list[Cell]:
    """The cells ``seat`` may still fire at."""
    b = g.boards[1 - seat]
    cols = g.rules.cols
    return [
        Cell(i // cols, i % cols)
        for i in range(g.rules.cells)
        if i not in b.fired and i not in b.crossed
    ]


def ship_cells(d: Defender) -> list[int]:
    return [i for i, o in enumerate(d.committed.occupancy) if o]


def aimed(g: Game, ds: list[Defender], seat: int, rng: random.Random) -> list[Cell]:
    """A shot that goes for the unhit ship cells first (a test may peek; a player cannot)."""
    open_ = open_targets(g, seat)
    want = g.shot_count(seat)
    opened = {c.index(g.rules.cols) for c in open_}
    ships = [cell(g.rules, i) for i in ship_cells(ds[1 - seat]) if i in opened]
    rest = [c for c in open_ if c not in ships]
    return (ships + rng.sample(rest, len(rest)))[:want]


def turn(
    g: Game,
    ds: list[Defender],
    cells: list[Cell],
    answer: Answerer | None = None,
) -> list[GameEvent]:
    """The side to move fires ``cells``; the defender answers (honestly unless ``answer``)."""
    s = g.turn
    assert s is not None
    events = g.fire(s, cells, g.caller(s))
    if not isinstance(events[0], ShotCalled):
        return events
    shot = events[0].shot
    verdict = answer(1 - s, shot) if answer else ds[1 - s].answer(shot)
    return g.answer(1 - s, verdict)


def play_out(
    g: Game,
    ds: list[Defender],
    rng: random.Random,
    answer: Answerer | None = None,
    aim: tuple[int, ...] = (),
) -> None:
    """Play until the firing ends; seats in ``aim`` go for ship cells, the others fire at random."""
    while g.phase is Phase.FIRING:
        s = g.turn
        assert s is not None
        if s in aim:
            cells = aimed(g, ds, s, rng)
        else:
            cells = rng.sample(open_targets(g, s), g.shot_count(s))
        turn(g, ds, cells, answer)


def reveal_both(g: Game, ds: list[Defender]) -> Outcome:
    for seat in (0, 1):
        g.reveal(seat, ds[seat].committed.reveal())
    assert g.phase is Phase.OVER and g.outcome is not None
    return g.outcome


def refused(code: ErrorCode, g: Game, call: Callable[..., object], *args: Any) -> Refused:
    """``call(*args)`` is refused with ``code`` and leaves the game exactly as it was."""
    before = g.view()
    with pytest.raises(Refused) as info:
        call(*args)
    assert info.value.code is code, info.value
    assert g.view() == before
    return info.value


CLASSIC = preset("classic")
RUSSIAN = preset("russian")
CONFIGS: dict[str, RuleSet] = {
    **PRESETS,
    "salvo-afloat": CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT),
    "salvo-afloat-total": CLASSIC.replace(
        shots=ShotMode.SALVO_AFLOAT, salvo_report=SalvoReport.TOTAL
    ),
    "salvo-fixed": CLASSIC.replace(shots=ShotMode.SALVO_FIXED, salvo_size=5),
    "hit-again": CLASSIC.replace(hit_again=True),
    "silent": CLASSIC.replace(sunk=SunkReport.SILENT),
    "radar": CLASSIC.replace(radar=True),
    "teams": CLASSIC.replace(team_size=2),
    "strict-repeat": CLASSIC.replace(repeat=RepeatShot.WASTED),
    "russian-named": RUSSIAN.replace(sunk=SunkReport.NAMED),
    "russian-salvo": RUSSIAN.replace(hit_again=False, shots=ShotMode.SALVO_FIXED, salvo_size=3),
    "russian-salvo-total": RUSSIAN.replace(
        hit_again=False,
        shots=ShotMode.SALVO_FIXED,
        salvo_size=3,
        salvo_report=SalvoReport.TOTAL,
        sunk=SunkReport.NAMED,
    ),
    "003-house-rule": preset("six-ship").replace(hit_again=True, hit_again_shown=True),
}


# -- honest games ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.integers(0, 2**32 - 1).map(random.Random), first=st.integers(0, 1))
def test_honest_games_end_with_one_winner_and_every_rule_kept(
    name: str, rng: random.Random, first: int
) -> None:
    rules = CONFIGS[name]
    g, ds = start(rules, rng, first)
    last = first
    ships = [set(ship_cells(d)) for d in ds]
    for step in range(10_000):
        if g.phase is not Phase.FIRING:
            break
        s = g.turn
        assert s is not None
        b = g.boards[1 - s]
        # Only the side to move acts: the other seat's shot changes nothing.
        other = open_targets(g, 1 - s)[: g.shot_count(1 - s)]
        refused(ErrorCode.NOT_YOUR_TURN, g, g.fire, 1 - s, other, g.caller(1 - s))
        if step % 4:
            pass  # refusals that keep the turn: checked every few steps, each compares views
        elif b.fired and rules.repeat is RepeatShot.REFUSED:
            again = [cell(rules, next(iter(b.fired))), *open_targets(g, s)[: g.shot_count(s) - 1]]
            refused(ErrorCode.ALREADY_FIRED, g, g.fire, s, again, g.caller(s))
        if step % 4 == 1 and b.crossed and not rules.is_salvo:
            water = [cell(rules, min(b.crossed))]
            refused(ErrorCode.CROSSED_OUT, g, g.fire, s, water, g.caller(s))
        if step % 4 == 2 and rules.team_size > 1:
            # The game holds the caller to the team; whose turn it is, is the referee's rule.
            stranger = rules.team_size
            refused(ErrorCode.NOT_CALLER, g, g.fire, s, open_targets(g, s)[:1], stranger)
        if rules.shots is ShotMode.SALVO_AFLOAT:
            assert g.shot_count(s) == min(g.boards[s].afloat(), len(open_targets(g, s)))
        if rules.radar and not b.radar_used and rng.random() < 0.2:
            top_left = Cell(rng.randrange(rules.rows - 1), rng.randrange(rules.cols - 1))
            g.radar(s, top_left, g.caller(s))
            assert g.pending is not None
            g.answer(1 - s, ds[1 - s].answer(g.pending))
            assert g.turn == 1 - s  # the radar is instead of a shot: the turn passes
            continue
        cells = rng.sample(open_targets(g, s), g.shot_count(s))
        events = turn(g, ds, cells)
        last = s
        hit = any(c.index(rules.cols) in ships[1 - s] for c in cells)
        if g.phase is Phase.FIRING:
            assert g.turn == (s if rules.hit_again and hit else 1 - s)
            last_event = events[-1]
            assert isinstance(last_event, VerdictGiven) and last_event.next == g.turn
        for seat in (0, 1):
            board = g.boards[seat]
            assert board.hits <= rules.fleet_cells
            assert board.hits == len(ds[seat].hit)  # honest defenders: claimed hits are real
            # Crossed-out cells are water: a defender's truthful answers never hide a ship.
            assert not any(ds[seat].committed.occupancy[i] for i in board.crossed)
    assert g.phase is Phase.REVEAL
    assert ds[1 - last].destroyed and not ds[last].destroyed
    outcome = reveal_both(g, ds)
    assert outcome == Outcome(last, EndReason.FLEET_SUNK)


# -- lies are caught -------------------------------------------------------------------------------


def seat1_ship(ds: list[Defender], rng: random.Random) -> int:
    return rng.choice(ship_cells(ds[1]))


@settings(max_examples=15, deadline=None)
@given(
    rng=st.integers(0, 2**32 - 1).map(random.Random), name=st.sampled_from(["classic", "russian"])
)
def test_a_false_miss_with_a_forged_opening_loses_at_once(rng: random.Random, name: str) -> None:
    g, ds = start(PRESETS[name], rng)
    i = seat1_ship(ds, rng)

    def forged(seat: int, shot: Shot) -> Verdict:
        return Verdict(
            shot.n, results=(CellResult(Result.MISS, CellOpening(i, False, rng.randbytes(16))),)
        )

    events = turn(g, ds, [cell(g.rules, i)], forged)
    assert isinstance(events[-1], GameOver)
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (0, EndReason.FALSE_PROOF)
    assert "does not match the commitment" in g.outcome.detail


@settings(max_examples=15, deadline=None)
@given(rng=st.integers(0, 2**32 - 1).map(random.Random), lie_on_ship=st.booleans())
def test_a_true_opening_under_a_false_result_loses_at_once(
    rng: random.Random, lie_on_ship: bool
) -> None:
    g, ds = start(CLASSIC, rng)
    water = [i for i in range(CLASSIC.cells) if i not in ship_cells(ds[1])]
    i = seat1_ship(ds, rng) if lie_on_ship else rng.choice(water)
    said = Result.MISS if lie_on_ship else Result.HIT

    def wrong(seat: int, shot: Shot) -> Verdict:
        return Verdict(shot.n, results=(CellResult(said, ds[1].committed.open_cell(i)),))

    turn(g, ds, [cell(CLASSIC, i)], wrong)
    assert g.outcome == Outcome(
        0,
        EndReason.FALSE_PROOF,
        f"shot 1: {cell(CLASSIC, i).label()} said {said.value}, opening says otherwise",
    )


def liar(ds: list[Defender], seat: int, change: Callable[[Shot, Verdict], Verdict]) -> Answerer:
    """``seat`` answers honestly, then lets ``change`` alter what it says."""

    def answer(defender: int, shot: Shot) -> Verdict:
        v = ds[defender].answer(shot)
        return change(shot, v) if defender == seat else v

    return answer


@settings(max_examples=10, deadline=None)
@given(rng=st.integers(0, 2**32 - 1).map(random.Random))
def test_hit_where_the_ship_sank_is_caught_at_the_reveal(rng: random.Random) -> None:
    g, ds = start(CLASSIC, rng)

    def hide_sinking(shot: Shot, v: Verdict) -> Verdict:
        results = tuple(
            CellResult(Result.HIT, r.opening) if r.result is Result.SUNK else r for r in v.results
        )
        return Verdict(v.n, results=results)

    play_out(g, ds, rng, liar(ds, 1, hide_sinking), aim=(0,))
    assert g.phase is Phase.REVEAL  # no opening can show it: the game goes on to the reveal
    outcome = reveal_both(g, ds)
    assert (outcome.winner, outcome.reason) == (0, EndReason.FALSE_VERDICT)
    assert "answered hit, truth sunk" in outcome.detail


@settings(max_examples=10, deadline=None)
@given(rng=st.integers(0, 2**32 - 1).map(random.Random))
def test_a_wrong_salvo_total_is_caught_at_the_reveal(rng: random.Random) -> None:
    rules = CLASSIC.replace(shots=ShotMode.SALVO_FIXED, salvo_report=SalvoReport.TOTAL)
    g, ds = start(rules, rng)
    lied: list[int] = []

    def inflate(shot: Shot, v: Verdict) -> Verdict:
        assert v.total is not None
        if lied or v.total == len(shot.cells):
            return v
        lied.append(shot.n)
        return Verdict(v.n, total=v.total + 1, sunk=v.sunk)

    # Seat 0 fires at random until the lie is told, then goes for the ships.
    while not lied and g.phase is Phase.FIRING:
        s = g.turn
        assert s is not None
        turn(g, ds, rng.sample(open_targets(g, s), g.shot_count(s)), liar(ds, 1, inflate))
    play_out(g, ds, rng, liar(ds, 1, inflate), aim=(0,))
    outcome = reveal_both(g, ds)
    assert (outcome.winner, outcome.reason) == (0, EndReason.FALSE_VERDICT)
    assert f"shot {lied[0]}: salvo total" in outcome.detail


def test_a_wrong_radar_answer_is_caught_at_the_reveal() -> None:
    rng = random.Random(3)
    rules = CLASSIC.replace(radar=True)
    g, ds = start(rules, rng)
    ship = cell(rules, ship_cells(ds[1])[0])
    top_left = Cell(min(ship.row, rules.rows - 2), min(ship.col, rules.cols - 2))
    g.radar(0, top_left)
    g.answer(1, Verdict(1, found=False))  # there is a ship in the area
    assert g.phase is Phase.FIRING and g.turn == 1
    play_out(g, ds, rng, aim=(0,))
    outcome = reveal_both(g, ds)
    assert (outcome.winner, outcome.reason) == (0, EndReason.FALSE_VERDICT)
    assert f"radar at {top_left.label()} answered False, truth True" in outcome.detail


def touching(rules: RuleSet, seat: int) -> Committed:
    """A commitment to a fleet the rules refuse, built by skipping validation as a cheat would."""
    fleet = Fleet.of(
        ("A1", "across"), ("A2", "across"), ("A3", "across"), ("A4", "across"),
        ("A5", "across"), ("A6", "across"),
    )  # fmt: skip
    with mock.patch.object(Fleet, "validate", lambda self, rules: None):
        return committed(rules, fleet, seat)


def test_an_illegal_fleet_is_caught_at_the_reveal() -> None:
    rng = random.Random(4)
    rules = preset("six-ship")  # no touching, and no crossed-out cells to give it away early
    ds = [Defender(committed(rules, random_fleet(rules, rng), 0)), Defender(touching(rules, 1))]
    g = Game(rules, MID, 1)
    for seat in (0, 1):
        g.commit(seat, ds[seat].committed.commitment)
    g.set_first(0)
    play_out(g, ds, rng, aim=(0,))
    outcome = reveal_both(g, ds)
    assert (outcome.winner, outcome.reason) == (0, EndReason.ILLEGAL_FLEET)
    assert "Carrier touches Battleship" in outcome.detail


def finished(rules: RuleSet, seed: int) -> tuple[Game, list[Defender]]:
    """A game played to the reveal, seat 0 sinking seat 1's fleet."""
    rng = random.Random(seed)
    g, ds = start(rules, rng)
    play_out(g, ds, rng, aim=(0,))
    assert g.phase is Phase.REVEAL
    return g, ds


def test_a_moved_fleet_is_a_bad_reveal() -> None:
    g, ds = finished(CLASSIC, 5)
    g.reveal(0, ds[0].committed.reveal())
    moved = random_fleet(CLASSIC, random.Random(99))
    g.reveal(1, Reveal(moved, ds[1].committed.secret))
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (0, EndReason.BAD_REVEAL)


def test_the_wrong_secret_is_a_bad_reveal() -> None:
    g, ds = finished(CLASSIC, 6)
    g.reveal(1, Reveal(ds[1].committed.fleet, bytes(32)))
    g.reveal(0, ds[0].committed.reveal())
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (0, EndReason.BAD_REVEAL)


def test_the_winner_who_does_not_reveal_loses() -> None:
    g, ds = finished(CLASSIC, 7)
    g.reveal(1, ds[1].committed.reveal())
    assert g.deadline() == (Deadline.REVEAL, CLASSIC.clocks.reveal)
    g.expire(Deadline.REVEAL)
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (1, EndReason.NO_REVEAL)


def test_both_at_fault_is_a_draw() -> None:
    g, ds = finished(CLASSIC, 8)
    g.reveal(0, Reveal(random_fleet(CLASSIC, random.Random(1)), ds[0].committed.secret))
    g.expire(Deadline.REVEAL)  # seat 1 never reveals
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (None, EndReason.BOTH_AT_FAULT)


def test_a_reveal_is_accepted_once() -> None:
    g, ds = finished(CLASSIC, 9)
    g.reveal(0, ds[0].committed.reveal())
    refused(ErrorCode.WRONG_PHASE, g, g.reveal, 0, ds[0].committed.reveal())


# -- the seeds' own examples -----------------------------------------------------------------------

# The 000 fleet of test_fleet.py: Battleship A1-D1, Cruiser-1 F1-H1, Cruiser-2 A3-C3,
# Destroyers E3-F3, H3-I3, A5-B5, boats D5, F5, H5, J5.
RUSSIAN_FLEET = Fleet.of(
    ("A1", "across"), ("F1", "across"), ("A3", "across"), ("E3", "across"), ("H3", "across"),
    ("A5", "across"), ("D5", "across"), ("F5", "across"), ("H5", "across"), ("J5", "across"),
)  # fmt: skip


def at(rules: RuleSet, *labels: str) -> list[Cell]:
    return [parse_cell(x, rules.rows, rules.cols) for x in labels]


def indices(rules: RuleSet, *labels: str) -> set[int]:
    return {c.index(rules.cols) for c in at(rules, *labels)}


def test_000_a_hit_crosses_out_its_corners_and_shoots_again() -> None:
    g, ds = start(RUSSIAN, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    turn(g, ds, at(RUSSIAN, "G1"))  # the middle of Cruiser-1
    board = g.boards[1]
    assert board.fired == {6: Result.HIT}
    assert board.crossed == indices(RUSSIAN, "F2", "H2")  # the corners on the board
    assert g.turn == 0  # "A hit or a sinking earns another shot"
    turn(g, ds, at(RUSSIAN, "B3"))
    assert board.crossed == indices(RUSSIAN, "F2", "H2", "A2", "C2", "A4", "C4")
    assert g.turn == 0


def test_000_a_sinking_crosses_out_the_whole_border_and_a_miss_passes() -> None:
    g, ds = start(RUSSIAN, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    for label in ("F1", "G1", "H1"):
        events = turn(g, ds, at(RUSSIAN, label))
    given = events[-1]
    assert isinstance(given, VerdictGiven)
    verdict = given.verdict
    assert verdict.results[0].result is Result.SUNK
    board = g.boards[1]
    # "A ship of three sunk across the top, the whole border round it crossed out"
    assert board.crossed == indices(RUSSIAN, "E1", "I1", "E2", "F2", "G2", "H2", "I2")
    assert board.sunk[1] == tuple(at(RUSSIAN, "F1", "G1", "H1"))  # shown, all of it
    assert g.turn == 0
    turn(g, ds, at(RUSSIAN, "J10"))  # "and a miss that passed the turn"
    assert g.turn == 1


def test_000_a_shot_at_a_crossed_out_or_fired_cell_is_refused_and_kept() -> None:
    g, ds = start(RUSSIAN, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    turn(g, ds, at(RUSSIAN, "G1"))
    error = refused(ErrorCode.CROSSED_OUT, g, g.fire, 0, at(RUSSIAN, "H2"))
    assert "H2 is crossed out" in error.detail
    refused(ErrorCode.ALREADY_FIRED, g, g.fire, 0, at(RUSSIAN, "G1"))
    assert g.turn == 0
    turn(g, ds, at(RUSSIAN, "J10"))
    assert g.turn == 1


def test_a_named_sinking_crosses_out_the_hits_round_the_sinking_cell() -> None:
    rules = RUSSIAN.replace(sunk=SunkReport.NAMED)
    g, ds = start(rules, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    for label in ("E3", "F3"):
        turn(g, ds, at(rules, label))
    assert g.boards[1].sunk == {3: None}  # named, not shown: the referee finds it from the hits
    border = indices(rules, "D2", "E2", "F2", "G2", "D3", "G3", "D4", "E4", "F4", "G4")
    assert g.boards[1].crossed == border


def test_two_sinkings_in_one_salvo_each_cross_out_their_own_border() -> None:
    rules = RUSSIAN.replace(
        hit_again=False, shots=ShotMode.SALVO_FIXED, salvo_size=2, sunk=SunkReport.NAMED
    )
    g, ds = start(rules, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    turn(g, ds, at(rules, "D5", "J5"))  # two boats in one salvo
    assert set(g.boards[1].sunk) == {6, 9}
    assert indices(rules, "C4", "E6", "I4", "I6") <= g.boards[1].crossed


def test_a_total_salvo_sinking_crosses_out_nothing_it_cannot_know() -> None:
    rules = RUSSIAN.replace(
        hit_again=False,
        shots=ShotMode.SALVO_FIXED,
        salvo_size=2,
        salvo_report=SalvoReport.TOTAL,
        sunk=SunkReport.NAMED,
    )
    g, ds = start(rules, random.Random(0), fleets=(RUSSIAN_FLEET, RUSSIAN_FLEET))
    # The boat at D5 sinks; the total does not say which of the two cells it was.
    turn(g, ds, at(rules, "D5", "D9"))
    assert g.boards[1].sunk == {6: None}
    assert not g.boards[1].crossed


def test_004_nobody_placed_is_a_recorded_draw() -> None:
    g = Game(preset("sea-battle"), MID, 1)
    assert g.deadline() == (Deadline.SETUP, 120)
    g.expire(Deadline.SETUP)
    assert g.outcome == Outcome(None, EndReason.NOBODY_PLACED, "neither fleet was placed")


def test_004_only_the_one_who_did_not_place_forfeits() -> None:
    rules = preset("sea-battle")
    g = Game(rules, MID, 1)
    g.commit(1, committed(rules, random_fleet(rules, random.Random(1)), 1).commitment)
    g.expire(Deadline.SETUP)
    assert g.outcome == Outcome(1, EndReason.SETUP_TIMEOUT, "seat 0 did not place")


def test_no_setup_clock_means_no_setup_expiry() -> None:
    g = Game(CLASSIC, MID, 1)
    assert g.deadline() is None
    refused(ErrorCode.WRONG_PHASE, g, g.expire, Deadline.SETUP)


def test_004_shot_clock_loses_the_shot_and_repeated_expiry_forfeits() -> None:
    rules = preset("sea-battle")
    g, ds = start(rules, random.Random(2))
    assert g.deadline() == (Deadline.SHOT, 30)
    events = g.expire(Deadline.SHOT)
    assert events == [ShotLost(0, "clock", 1)]
    assert g.turn == 1 and len(g.shots) == 0
    turn(g, ds, open_targets(g, 1)[:1])
    g.expire(Deadline.SHOT)  # 0's second in a row
    turn(g, ds, open_targets(g, 1)[:1])
    g.expire(Deadline.SHOT)  # third in a row: max_expiries is 3
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (1, EndReason.SHOT_TIMEOUTS)


def test_firing_in_time_resets_the_expiry_count() -> None:
    rules = preset("sea-battle")
    g, ds = start(rules, random.Random(2))
    for _ in range(5):
        g.expire(Deadline.SHOT)
        assert g.turn == 1
        turn(g, ds, open_targets(g, 1)[:1])
        turn(g, ds, open_targets(g, 0)[:1])  # seat 0 fires in time
        turn(g, ds, open_targets(g, 1)[:1])
    assert g.phase is Phase.FIRING and g.expiries == [0, 0]


def test_002_salvo_of_one_shot_per_ship_afloat() -> None:
    rules = CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT)
    fleet = Fleet.of(
        ("A1", "across"), ("A2", "across"), ("A3", "across"), ("A4", "across"), ("A5", "across")
    )
    g, ds = start(rules, random.Random(0), fleets=(fleet, fleet))
    assert g.shot_count(0) == 5  # "A player therefore begins with five shots"
    refused(ErrorCode.WRONG_SALVO_SIZE, g, g.fire, 0, at(rules, "J10"))
    refused(
        ErrorCode.DUPLICATE_IN_SALVO,
        g,
        g.fire,
        0,
        at(rules, "J10", "J10", "J9", "J8", "J7"),
    )
    events = turn(g, ds, at(rules, "A5", "B5", "J8", "J9", "J10"))  # sinks the Destroyer
    given = events[-1]
    assert isinstance(given, VerdictGiven)
    verdict = given.verdict
    assert [r.result for r in verdict.results] == [
        Result.HIT,
        Result.SUNK,
        Result.MISS,
        Result.MISS,
        Result.MISS,
    ]
    # "loses one shot whenever a ship is sunk": seat 1 lost its Destroyer.
    assert g.turn == 1 and g.boards[1].afloat() == 4
    assert g.shot_count(1) == 4
    refused(ErrorCode.WRONG_SALVO_SIZE, g, g.fire, 1, at(rules, "J1", "J2", "J3", "J4", "J5"))
    turn(g, ds, at(rules, "J1", "J2", "J3", "J4"))
    assert g.shot_count(0) == 5


def test_002_radar_once_per_game_instead_of_a_shot() -> None:
    rules = CLASSIC.replace(radar=True)
    fleet = Fleet.of(
        ("A1", "across"), ("A2", "across"), ("A3", "across"), ("A4", "across"), ("A5", "across")
    )
    g, ds = start(rules, random.Random(0), fleets=(fleet, fleet))
    refused(ErrorCode.OFF_BOARD, g, g.radar, 0, Cell(9, 9))  # a 2x2 area at J10 leaves the board
    g.radar(0, Cell(8, 8))  # I9: water only
    assert g.pending is not None
    assert ds[1].answer(g.pending) == Verdict(1, found=False)
    g.answer(1, ds[1].answer(g.pending))
    assert g.turn == 1 and g.boards[1].hits == 0  # "Radar does not count as a hit"
    g.radar(1, Cell(0, 0))
    assert g.pending is not None
    assert ds[0].answer(g.pending).found is True
    g.answer(0, ds[0].answer(g.pending))
    refused(ErrorCode.RADAR_USED, g, g.radar, 0, Cell(0, 0))
    plain, _ = start(CLASSIC, random.Random(0))
    refused(ErrorCode.RADAR_NOT_ALLOWED, plain, plain.radar, 0, Cell(0, 0))


@pytest.mark.parametrize("house_rule", [False, True])
def test_003_shoot_again_only_under_the_house_rule(house_rule: bool) -> None:
    rules = preset("six-ship")
    if house_rule:
        rules = rules.replace(hit_again=True, hit_again_shown=True)
    rng = random.Random(0)
    g, ds = start(rules, rng)
    turn(g, ds, [cell(rules, ship_cells(ds[1])[0])])
    assert g.turn == (0 if house_rule else 1)


def test_002_strict_play_a_repeat_wastes_the_turn() -> None:
    rules = CLASSIC.replace(repeat=RepeatShot.WASTED)
    g, ds = start(rules, random.Random(0))
    turn(g, ds, at(rules, "E5"))
    turn(g, ds, at(rules, "E5"))
    events = g.fire(0, at(rules, "E5"))
    assert events == [ShotLost(0, "repeat", 1)]
    assert g.turn == 1 and len(g.shots) == 2


def test_002_friendly_play_a_repeat_is_chosen_again() -> None:
    g, ds = start(CLASSIC, random.Random(0))
    turn(g, ds, at(CLASSIC, "E5"))
    turn(g, ds, at(CLASSIC, "E5"))
    error = refused(ErrorCode.ALREADY_FIRED, g, g.fire, 0, at(CLASSIC, "E5"))
    assert "E5 was fired at already" in error.detail
    assert g.turn == 0


def test_a_mirrored_commitment_is_refused() -> None:
    g = Game(CLASSIC, MID, 1)
    c = committed(CLASSIC, random_fleet(CLASSIC, random.Random(0)), 0)
    g.commit(0, c.commitment)
    before = g.view()
    with pytest.raises(RemoteProtocolError) as info:
        g.commit(1, c.commitment)
    assert info.value.code is ErrorCode.MIRRORED_COMMITMENT
    assert g.view() == before


@pytest.mark.parametrize(
    "elsewhere",
    [{"ctx_seat": 0}, {"mid": bytes(16)}, {"game": 2}],
    ids=["other seat", "other match", "other game"],
)
def test_a_commitment_made_for_another_context_fails_its_first_opening(
    elsewhere: dict[str, Any],
) -> None:
    # Domain separation: leaves copied from another match, game or seat cannot be opened here.
    rng = random.Random(0)
    g = Game(CLASSIC, MID, 1)
    own = committed(CLASSIC, random_fleet(CLASSIC, rng), 0)
    replayed = committed(CLASSIC, random_fleet(CLASSIC, rng), 1, **elsewhere)
    g.commit(0, own.commitment)
    g.commit(1, replayed.commitment)  # the referee cannot tell yet
    g.set_first(0)
    turn(g, [Defender(own), Defender(replayed)], at(CLASSIC, "A1"))
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (0, EndReason.FALSE_PROOF)


def test_a_malformed_ship_opening_is_a_false_proof_not_a_crash() -> None:
    rules = preset("sea-battle")
    g, ds = start(rules, random.Random(0))
    i = ship_cells(ds[1])[0]
    bad = {
        "n": 1,
        "results": [
            {
                "r": "sunk",
                "open": ds[1].committed.open_cell(i).to_dict(),
                "sunk": {"k": 0, "open": {"k": 0, "at": [-1, 300, False], "salt": bytes(16)}},
            }
        ],
        "total": None,
        "sunk": [],
        "found": None,
    }
    g.fire(0, [cell(rules, i)])
    g.answer(1, Verdict.from_dict(bad))
    assert g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason) == (0, EndReason.FALSE_PROOF)


def test_the_verdict_must_answer_the_pending_shot() -> None:
    g, _ = start(CLASSIC, random.Random(0))
    g.fire(0, at(CLASSIC, "A1"))
    before = g.view()
    with pytest.raises(RemoteProtocolError):
        g.answer(1, Verdict(2, found=True))
    with pytest.raises(Refused):
        g.answer(0, Verdict(1, found=True))
    assert g.view() == before


def test_an_answer_logs_the_map_it_was_parsed_from() -> None:
    g, ds = start(preset("classic"), random.Random(3))
    called = g.fire(0, [cell(g.rules, 0)])[0]
    assert isinstance(called, ShotCalled)
    shot = called.shot
    wire = ds[1].answer(shot).to_dict()
    events = g.answer(1, Verdict.from_dict(wire), wire=wire)
    assert [type(e) for e in events] == [VerdictGiven]
    assert g.transcript[-1]["verdict"] is wire
    assert wire == g.shots[-1][1].to_dict()  # what it would have logged


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(PRESETS)),
    hit_again=st.booleans(),
    radar=st.booleans(),
    salvo=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_defender_knows_whose_turn_its_own_verdict_gives(
    name: str, hit_again: bool, radar: bool, salvo: bool, seed: int
) -> None:
    # A lean client is sent no copy of its own verdict (spec 5.7): what its Defender says about
    # the next mover must be what the game decides, shot after shot, to the end of the firing.
    rules = preset(name)
    if salvo:
        rules = rules.replace(shots=ShotMode.SALVO_FIXED, hit_again=False, hit_again_shown=False)
    else:
        rules = rules.replace(hit_again=hit_again, hit_again_shown=False, radar=radar)
    rng = random.Random(seed)
    g, defenders = start(rules, rng, first=rng.randrange(2))
    while g.phase is Phase.FIRING:
        s = g.turn
        assert s is not None
        b = g.boards[1 - s]
        if rules.radar and not b.radar_used and rng.random() < 0.2:
            shot = g.radar(s, Cell(rng.randrange(rules.rows - 1), 0), g.caller(s))[0].shot
        else:
            cells = rng.sample(open_targets(g, s), g.shot_count(s))
            shot = g.fire(s, cells, g.caller(s))[0].shot
        assert shot is not None
        g.answer(1 - s, defenders[1 - s].answer(shot))
        assert defenders[1 - s].turn_after(shot) == g.turn
    assert g.phase is Phase.REVEAL
