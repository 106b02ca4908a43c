"""Glicko-2 rating math against Glickman's worked example and the properties a ladder relies on."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seabattle.server.ladder import DRAW, LOSS, SCALE, WIN, Rating, rate, update


def test_glickman_worked_example() -> None:
    # "Example of the Glicko-2 system", Glickman 2013: the paper rounds its intermediate
    # values (mu' = -0.2069, phi' = 0.8722) and prints r' = 1464.06, RD' = 151.52.
    player = Rating(1500, 200, 0.06)
    results = [(Rating(1400, 30), WIN), (Rating(1550, 100), LOSS), (Rating(1700, 300), LOSS)]
    new = rate(player, results)
    assert (new.rating - 1500) / SCALE == pytest.approx(-0.2069, abs=5e-5)
    assert new.rd / SCALE == pytest.approx(0.8722, abs=5e-5)
    assert new.rating == pytest.approx(1464.06, abs=0.01)
    assert new.rd == pytest.approx(151.52, abs=0.01)
    assert new.vol == pytest.approx(0.05999, abs=1e-5)  # the paper truncates 0.059996


def test_defaults_are_glickmans() -> None:
    assert Rating() == Rating(1500.0, 350.0, 0.06)


def test_update_is_rate_against_the_other_sides_old_rating() -> None:
    a, b = Rating(1600, 80, 0.05), Rating(1450, 200, 0.07)
    new_a, new_b = update(a, b, WIN)
    assert new_a == rate(a, [(b, WIN)])
    assert new_b == rate(b, [(a, LOSS)])


def test_update_does_not_depend_on_which_side_is_a() -> None:
    a, b = Rating(1600, 80, 0.05), Rating(1450, 200, 0.07)
    for score in (WIN, DRAW, LOSS):
        new_a, new_b = update(a, b, score)
        assert update(b, a, 1 - score) == (new_b, new_a)


def test_draw_between_equals_moves_nobody_but_shrinks_rd() -> None:
    new_a, new_b = update(Rating(), Rating(), DRAW)
    assert new_a == new_b
    assert new_a.rating == pytest.approx(1500.0)
    assert new_a.rd < 350.0


def test_no_games_only_grows_rd() -> None:
    old = Rating(1700, 50, 0.06)
    new = rate(old, [])
    assert new.rating == old.rating and new.vol == old.vol
    assert new.rd == pytest.approx(math.hypot(50, 0.06 * SCALE))


@pytest.mark.parametrize("score", [-0.1, 1.1, math.nan])
def test_score_out_of_range_is_refused(score: float) -> None:
    with pytest.raises(ValueError):
        update(Rating(), Rating(), score)


@pytest.mark.parametrize("fields", [(math.inf, 350, 0.06), (1500, 0, 0.06), (1500, 350, -1)])
def test_invalid_rating_cannot_exist(fields: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError):
        Rating(*fields)


ratings = st.builds(
    Rating,
    st.floats(500, 3000),
    st.floats(30, 350),
    st.floats(0.03, 0.1),
)


@given(ratings, ratings)
def test_winner_never_drops_and_loser_never_rises(a: Rating, b: Rating) -> None:
    new_a, new_b = update(a, b, WIN)
    assert new_a.rating > a.rating
    assert new_b.rating < b.rating
    for r in (new_a, new_b):
        assert math.isfinite(r.rating) and 0 < r.rd <= 350.5 and 0 < r.vol < 0.2
