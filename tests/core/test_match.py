"""A match: when it is decided, who fires first in each game, and how it is scored."""

from __future__ import annotations

import random

import pytest
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ErrorCode, Refused
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Deadline, EndReason, Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.match import Match
from seabattle.protocol.rules import Clocks, MatchFormat, MatchKind, RuleSet, preset
from seabattle.protocol.verdict import Defender

MID = bytes(16)


def rules_with(name: str, kind: MatchKind, games: int, sunk_bonus: int = 0) -> RuleSet:
    return preset(name).replace(match=MatchFormat(kind, games, sunk_bonus))


def resign_game(m: Match, loser: int, first: int | None = 0) -> Game:
    """A game the ``loser`` gives up at once."""
    g = m.new_game(first)
    g.resign(loser)
    m.game_over()
    return g


def play_game(m: Match, rng: random.Random, first: int = 0, shots: int | None = None) -> Game:
    """A real game with honest players firing at random; ``shots`` stops early by a resignation."""
    g = m.new_game(first if m.needs_lot() else None)
    rules = m.rules
    ds = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, g.number, seat)
        ds.append(Defender(c))
        g.commit(seat, c.commitment)
    while g.phase is Phase.FIRING and (shots is None or len(g.shots) < shots):
        s = g.turn
        assert s is not None
        b = g.boards[1 - s]
        cols = rules.cols
        open_ = [i for i in range(rules.cells) if i not in b.fired and i not in b.crossed]
        cells = [Cell(i // cols, i % cols) for i in rng.sample(open_, g.shot_count(s))]
        shot = g.fire(s, cells)[0].shot
        assert shot is not None
        g.answer(1 - s, ds[1 - s].answer(shot))
    if g.phase is Phase.FIRING:
        g.resign(0)
    else:
        for seat in (0, 1):
            g.reveal(seat, ds[seat].committed.reveal())
    m.game_over()
    return g


@pytest.mark.parametrize(("games", "wins"), [(3, 2), (5, 3)])
def test_best_of_ends_as_soon_as_a_majority_is_won(games: int, wins: int) -> None:
    m = Match(rules_with("classic", MatchKind.BEST_OF, games), MID)
    for n in range(wins):
        assert not m.over
        resign_game(m, loser=1, first=n % 2 if m.needs_lot() else None)
    assert m.over and m.winner == 0
    assert len(m.games) == wins
    assert m.to_dict() == {
        "games": wins,
        "scores": [wins, 0],
        "wins": [wins, 0],
        "over": True,
        "winner": 0,
    }
    with pytest.raises(Refused) as info:
        m.new_game()
    assert info.value.code is ErrorCode.GAME_OVER


def test_best_of_five_goes_the_distance_when_the_games_split() -> None:
    m = Match(rules_with("classic", MatchKind.BEST_OF, 5), MID)
    for loser in (1, 0, 1, 0):
        resign_game(m, loser, first=0 if m.needs_lot() else None)
        assert not m.over
    resign_game(m, 0, None)
    assert m.over and m.winner == 1 and m.wins == [2, 3]


def test_a_best_of_that_runs_out_of_games_goes_to_whoever_leads() -> None:
    rules = rules_with("classic", MatchKind.BEST_OF, 3).replace(clocks=Clocks(setup=60))
    m = Match(rules, MID)
    m.new_game(0).expire(Deadline.SETUP)  # nobody placed: a draw
    m.game_over()
    resign_game(m, loser=1, first=None)
    m.new_game().expire(Deadline.SETUP)
    m.game_over()
    assert m.over and m.winner == 0 and m.wins == [1, 0]


def test_000_the_first_game_by_lot_then_the_loser_fires_first() -> None:
    m = Match(rules_with("russian", MatchKind.BEST_OF, 5), MID)
    assert m.needs_lot() and m.next_first() is None
    g1 = m.new_game(first=1)
    assert g1.first == 1
    g1.resign(1)
    m.game_over()
    assert not m.needs_lot()
    assert m.new_game().first == 1  # seat 1 lost game 1
    m.games[-1].resign(0)
    m.game_over()
    assert m.new_game().first == 0


def test_002_the_starting_player_alternates_whoever_wins() -> None:
    m = Match(rules_with("classic", MatchKind.BEST_OF, 5), MID)
    firsts = []
    for n in range(4):
        g = resign_game(m, loser=1, first=1 if n == 0 else None)
        firsts.append(g.first)
        if m.over:
            break
    assert firsts == [1, 0, 1]


def test_a_lot_decides_again_after_a_draw() -> None:
    rules = rules_with("russian", MatchKind.BEST_OF, 3).replace(clocks=Clocks(setup=60))
    m = Match(rules, MID)
    g = m.new_game(first=0)
    g.expire(Deadline.SETUP)
    assert g.outcome is not None and g.outcome.reason is EndReason.NOBODY_PLACED
    m.game_over()
    assert m.needs_lot()  # no loser to fire first
    g2 = m.new_game()
    assert g2.first is None and g2.phase is Phase.SETUP
    g2.set_first(1)
    assert g2.first == 1


def test_alternation_after_a_game_that_never_drew_its_lot_draws_a_lot() -> None:
    rules = rules_with("classic", MatchKind.BEST_OF, 3).replace(clocks=Clocks(setup=60))
    m = Match(rules, MID)
    m.new_game().expire(Deadline.SETUP)  # the match's first lot was never drawn
    m.game_over()
    assert m.needs_lot()
    assert m.new_game(first=1).first == 1


def test_victory_points_play_every_game_and_most_points_win() -> None:
    m = Match(rules_with("classic", MatchKind.VICTORY_POINTS, 4), MID)
    for loser in (1, 1, 1):
        resign_game(m, loser, first=0 if m.needs_lot() else None)
    assert not m.over  # three of four won, but the number of games is agreed beforehand
    resign_game(m, 0, None)
    assert m.over and m.winner == 0 and m.scores == [3, 1]


def test_victory_points_level_at_the_end_is_a_drawn_match() -> None:
    m = Match(rules_with("classic", MatchKind.VICTORY_POINTS, 2), MID)
    resign_game(m, 1, first=0)
    resign_game(m, 0, first=None)
    assert m.over and m.winner is None


def test_survival_scores_the_winners_unhit_ship_cells() -> None:
    m = Match(rules_with("classic", MatchKind.SURVIVAL, 1), MID)
    g = play_game(m, random.Random(1))
    assert g.outcome is not None and g.outcome.reason is EndReason.FLEET_SUNK
    w = g.outcome.winner
    assert w is not None
    unhit = m.rules.fleet_cells - g.boards[w].hits
    assert 0 < unhit < m.rules.fleet_cells
    assert m.scores[w] == unhit and m.scores[1 - w] == 0
    assert m.over and m.winner == w


def test_fleet_score_counts_hits_and_a_bonus_per_sunk_ship() -> None:
    m = Match(rules_with("classic", MatchKind.FLEET, 2, sunk_bonus=3), MID)
    g1 = play_game(m, random.Random(2))
    w = g1.outcome.winner if g1.outcome else None
    assert w is not None
    assert m.scores[w] == 17 + 3 * 5  # every ship cell hit, every ship sunk
    winners_grid = g1.boards[w]  # what the loser's shots found
    assert m.scores[1 - w] == winners_grid.hits + 3 * len(winners_grid.sunk)
    before = list(m.scores)
    # "At an agreed stopping time": a game stopped early scores what was hit so far.
    g2 = play_game(m, random.Random(3), shots=40)
    for s in (0, 1):
        opp = g2.boards[1 - s]
        assert m.scores[s] - before[s] == opp.hits + 3 * len(opp.sunk)
    assert m.over


def test_a_game_must_end_before_it_is_scored_or_followed() -> None:
    m = Match(preset("classic"), MID)
    g = m.new_game(0)
    with pytest.raises(Refused) as info:
        m.game_over()
    assert info.value.code is ErrorCode.WRONG_PHASE
    with pytest.raises(Refused) as info:
        m.new_game()
    assert info.value.code is ErrorCode.WRONG_PHASE
    g.resign(0)
    m.game_over()
    assert m.over and m.winner == 1
