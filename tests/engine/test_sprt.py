"""Elo and SPRT against figures checked by hand, and against fastchess's own test vectors
(``app/tests/elo_test.cpp``, ``app/tests/sprt_test.cpp`` in Disservin/fastchess: its ``Stats``
takes wins, losses, draws; or LL, LD, WL, DD, WD, WW)."""

from __future__ import annotations

import math

import pytest
from seabattle.engine.sprt import Sprt, elo_from_score, elo_pentanomial, elo_wdl, pentanomial


def test_elo_of_a_score_by_hand() -> None:
    assert elo_from_score(0.5) == 0.0
    assert elo_from_score(0.75) == pytest.approx(400 * math.log10(3))  # 190.85
    assert elo_from_score(0.25) == pytest.approx(-400 * math.log10(3))
    assert elo_from_score(1.0) == math.inf and elo_from_score(0.0) == -math.inf


def test_elo_error_by_hand() -> None:
    # 100 games, 75 won, 25 lost: variance 0.75 * 0.25 = 0.1875 a game, so the score's 95 %
    # interval is 0.75 ± 1.96 * sqrt(0.1875 / 100) = 0.75 ± 0.08487.
    e = elo_wdl(75, 0, 25)
    half = 1.959963984540054 * math.sqrt(0.1875 / 100)
    assert e.score == 0.75 and e.n == 100
    assert e.diff == pytest.approx(190.85, abs=0.01)
    assert e.error == pytest.approx((elo_from_score(0.75 + half) - elo_from_score(0.75 - half)) / 2)
    # By hand: Elo(0.8349) = 281.5, Elo(0.6651) = 119.2, half their distance 81.15.
    assert e.error == pytest.approx(81.15, abs=0.01)
    assert str(e) == f"+190.8 ± {e.error:.1f}"


@pytest.mark.parametrize(
    ("w", "lost", "d", "nelo", "nerr", "los", "score"),
    [(76, 89, 123, -20.76, 40.13, 0.1553, 0.477), (136, 96, 111, 49.77, 36.77, 0.9960, 0.558)],
)
def test_elo_wdl_as_fastchess(
    w: int, lost: int, d: int, nelo: float, nerr: float, los: float, score: float
) -> None:
    e = elo_wdl(w, d, lost)
    assert e.nelo == pytest.approx(nelo, rel=0.01)
    assert e.nelo_error == pytest.approx(nerr, rel=0.01)
    assert e.los == pytest.approx(los, abs=0.00005)
    assert e.score == pytest.approx(score, rel=0.01)


def test_elo_wdl_diff_as_fastchess() -> None:
    e = elo_wdl(136, 111, 96)
    assert e.diff == pytest.approx(40.70, rel=0.01) and e.error == pytest.approx(30.43, rel=0.01)


@pytest.mark.parametrize(
    ("stats", "diff", "err", "nelo", "nerr", "los"),
    [
        ((34, 54, 31, 32, 64, 75), 55.58, 27.65, 57.94, 28.28, 1.0),
        ((332, 433, 457, 41, 333, 334), -8.64, 10.33, -9.17, 10.96, 0.0505),
        ((7895, 8757, 5485, 200, 568, 9999), -21.04, 2.95, -19.01, 2.65, 0.0),
    ],
)
def test_elo_pentanomial_as_fastchess(
    stats: tuple[int, ...], diff: float, err: float, nelo: float, nerr: float, los: float
) -> None:
    ll, ld, wl, dd, wd, ww = stats
    e = elo_pentanomial([ll, ld, wl + dd, wd, ww])
    assert e.diff == pytest.approx(diff, rel=0.01) and e.error == pytest.approx(err, rel=0.01)
    assert e.nelo == pytest.approx(nelo, rel=0.01)
    assert e.nelo_error == pytest.approx(nerr, rel=0.01)
    assert e.los == pytest.approx(los, abs=0.00005)


def test_pentanomial_counts_pairs_by_score() -> None:
    assert pentanomial([0, 0.5, 1, 1, 1.5, 2, 2, 2]) == [1, 1, 2, 1, 3]


def test_sprt_bounds_by_hand() -> None:
    s = Sprt(0, 10, 0.05, 0.05)
    assert s.lower == pytest.approx(math.log(0.05 / 0.95)) == pytest.approx(-2.944, abs=0.001)
    assert s.upper == pytest.approx(2.944, abs=0.001)
    assert s.decide(3.0) == "H1" and s.decide(-3.0) == "H0" and s.decide(0.0) is None
    with pytest.raises(ValueError, match="elo0"):
        Sprt(5, 5)
    with pytest.raises(ValueError, match="alpha"):
        Sprt(0, 5, 0.6, 0.5)


def test_sprt_llr_by_hand_without_draws() -> None:
    """With wins and losses only, the most likely distribution with a given score is the score
    itself, so the logistic LLR is the plain binomial one: W ln(s1/s0) + L ln((1-s1)/(1-s0))."""
    s = Sprt(0, 100, model="logistic")
    s0, s1 = 0.5, 1 / (1 + 10 ** (-100 / 400))
    w, lost = 30, 10
    expect = w * math.log(s1 / s0) + lost * math.log((1 - s1) / (1 - s0))
    # The draw count of zero counts as 0.001 (as fastchess does): a hair off the plain figure.
    assert s.llr_wdl(w, 0, lost) == pytest.approx(expect, abs=0.01)


@pytest.mark.parametrize(
    ("wins", "losses", "draws", "elo0", "elo1", "model", "llr"),
    [
        (36433, 36027, 68692, 0, 2, "normalized", 0.92),
        (10871, 10650, 20431, -1.75, 0.25, "normalized", 2.30),
        (4250, 0, 0, 0, 10, "normalized", 120.56),
        (21404, 21184, 40708, 0.5, 2.5, "logistic", -1.57),
        (57433, 57030, 106593, 0, 2, "logistic", -2.59),
    ],
)
def test_sprt_trinomial_as_fastchess(
    wins: int, losses: int, draws: int, elo0: float, elo1: float, model: str, llr: float
) -> None:
    s = Sprt(elo0, elo1, 0.05, 0.05, model)
    assert s.llr_wdl(wins, draws, losses) == pytest.approx(llr, rel=0.01)


@pytest.mark.parametrize(
    ("stats", "elo0", "elo1", "model", "llr"),
    [
        ((365, 16618, 36029, 200, 16974, 390), 0, 2, "normalized", 2.25),
        ((127, 4883, 10311, 401, 5150, 104), -1.75, 0.25, "normalized", 3.01),
        ((0, 0, 0, 0, 0, 5550), 0, 5, "normalized", 111.82),
        ((223, 9863, 20279, 1000, 10037, 246), 0.5, 2.5, "logistic", -3.07),
        ((871, 26175, 55003, 980, 26678, 821), 0, 2, "logistic", -4.98),
    ],
)
def test_sprt_pentanomial_as_fastchess(
    stats: tuple[int, ...], elo0: float, elo1: float, model: str, llr: float
) -> None:
    ll, ld, wl, dd, wd, ww = stats
    s = Sprt(elo0, elo1, 0.05, 0.05, model)
    assert s.llr_pentanomial([ll, ld, wl + dd, wd, ww]) == pytest.approx(llr, rel=0.01)
