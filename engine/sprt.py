"""Elo from a score, with error bars, and the sequential probability ratio test, as fastchess
states them (``app/src/matchmaking/elo``, ``app/src/matchmaking/sprt`` in Disservin/fastchess).

Two ways to count results. *Trinomial*: wins, draws and losses, game by game. *Pentanomial*: on
paired boards (the arena's), the two games of a pair are not independent (the same fleets), so
each pair is counted as one outcome by its score, 0 (LL), 0.5 (LD), 1 (WL or DD), 1.5 (WD) or 2
(WW); the variance of the pairs' scores is what the boards left of luck, and the error bars are
narrower for it. Either way:

- the score ``s`` is the mean result per game, the Elo difference ``-400 log10(1/s - 1)``, and
  the error the half-width of the 95 % interval of the score (``s ± 1.96 sqrt(var / n)``, ``n``
  games or pairs) taken through the same function;
- normalized Elo (nElo) divides the score's distance from 0.5 by its standard deviation
  (per game; per pair over ``sqrt 2``), times ``800 / ln 10``; LOS is the chance that the true
  score is above 0.5, ``(1 - erf(-(s - 0.5) / sqrt(2 var / n))) / 2``.

SPRT between H0 (Elo ``elo0``) and H1 (Elo ``elo1``): the log-likelihood ratio of the results
under the two most likely distributions that have those Elo (Van den Bergh, *Comparing the
approximations for the generalized log likelihood ratio of a multinomial distribution*, for the
logistic model; *Comments on normalized Elo* for the normalized one, fastchess's default); a
count of zero counts as 0.001. The test stops for H1 once the LLR reaches
``log((1 - beta) / alpha)``, for H0 once it falls to ``log(beta / (1 - alpha))``. fastchess
solves each distribution's one equation by the ITP method; here it is bisection to the same
equation's machine precision, which gives the same figures to the digits either prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "CI95",
    "Elo",
    "Sprt",
    "elo_from_score",
    "elo_pentanomial",
    "elo_wdl",
    "pentanomial",
]

#: The two-sided 95 % quantile of the normal distribution, as fastchess has it.
CI95 = 1.959963984540054
_NELO = 800.0 / math.log(10.0)


def elo_from_score(score: float) -> float:
    """The Elo difference a mean score per game ``score`` says (infinite at 0 and 1)."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def _score_of_elo(elo: float) -> float:
    return 1.0 / (1.0 + math.pow(10.0, -elo / 400.0))


@dataclass(frozen=True, slots=True)
class Elo:
    """An Elo estimate: ``diff`` ± ``error`` (95 %), normalized ``nelo`` ± ``nelo_error``, the
    likelihood of superiority ``los`` (0..1), the mean ``score`` per game, and ``n``: how many
    games (trinomial) or pairs (pentanomial) it rests on."""

    diff: float
    error: float
    nelo: float
    nelo_error: float
    los: float
    score: float
    n: int

    def __str__(self) -> str:
        return f"{_signed(self.diff)} ± {_plain(self.error)}"


def _signed(x: float) -> str:
    return "+inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:+.1f}"


def _plain(x: float) -> str:
    return "inf" if math.isinf(x) or math.isnan(x) else f"{x:.1f}"


def _elo(scores: Sequence[float], counts: Sequence[int], per_pair: bool) -> Elo:
    n = sum(counts)
    if n == 0:
        return Elo(0.0, math.inf, 0.0, math.inf, 0.5, 0.5, 0)
    probs = [c / n for c in counts]
    score = sum(a * p for a, p in zip(scores, probs, strict=True))
    var = sum(p * (a - score) ** 2 for a, p in zip(scores, probs, strict=True))
    per = var / n
    hi, lo = score + CI95 * math.sqrt(per), score - CI95 * math.sqrt(per)
    diff = elo_from_score(score)
    error = (elo_from_score(hi) - elo_from_score(lo)) / 2.0 if var > 0 else 0.0
    if math.isnan(error):
        error = math.inf
    k = math.sqrt(2.0 * var) if per_pair else math.sqrt(var)
    if k > 0:
        nelo = (score - 0.5) / k * _NELO
        nelo_error = ((hi - 0.5) / k - (lo - 0.5) / k) / 2.0 * _NELO
    else:
        nelo, nelo_error = (0.0 if score == 0.5 else math.copysign(math.inf, score - 0.5)), 0.0
    if per > 0:
        los = (1.0 - math.erf(-(score - 0.5) / math.sqrt(2.0 * per))) / 2.0
    else:
        los = 0.5 if score == 0.5 else float(score > 0.5)
    return Elo(diff, error, nelo, nelo_error, los, score, n)


def elo_wdl(wins: int, draws: int, losses: int) -> Elo:
    """Elo from game results (trinomial)."""
    return _elo((1.0, 0.5, 0.0), (wins, draws, losses), per_pair=False)


def elo_pentanomial(penta: Sequence[int]) -> Elo:
    """Elo from pair results ``[LL, LD, WL+DD, WD, WW]`` (see :func:`pentanomial`)."""
    return _elo(_PENTA_SCORES, penta, per_pair=True)


_PENTA_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)


def pentanomial(pair_scores: Sequence[float]) -> list[int]:
    """``[LL, LD, WL+DD, WD, WW]``: how many pairs scored 0, 0.5, 1, 1.5 and 2."""
    out = [0] * 5
    for s in pair_scores:
        out[round(s * 2)] += 1
    return out


def _bisect(f: Callable[[float], float], a: float, b: float) -> float:
    """The root of ``f``, decreasing on ``(a, b)``, found by halving to the last bit."""
    for _ in range(200):
        mid = (a + b) / 2.0
        if mid in (a, b):
            break
        if f(mid) > 0:
            a = mid
        else:
            b = mid
    return (a + b) / 2.0


def _mle_logistic(scores: Sequence[float], probs: Sequence[float], s: float) -> list[float]:
    # Van den Bergh, proposition 1.1: p_i = phat_i / (1 + theta (a_i - s)), theta the root of
    # sum phat_i (a_i - s) / (1 + theta (a_i - s)) = 0 between -1/(a_max - s) and -1/(a_min - s).
    lo, hi = -1.0 / (scores[-1] - s), -1.0 / (scores[0] - s)
    theta = _bisect(
        lambda x: sum(
            p * (a - s) / (1.0 + x * (a - s)) for a, p in zip(scores, probs, strict=True)
        ),
        lo,
        hi,
    )
    return [p / (1.0 + theta * (a - s)) for a, p in zip(scores, probs, strict=True)]


def _mle_normalized(
    scores: Sequence[float], probs: Sequence[float], mu_ref: float, t: float
) -> list[float]:
    # Van den Bergh, Comments on normalized Elo, section 4.1: fixed-point iterations from the
    # uniform distribution, each solving (4.9) for theta.
    n = len(scores)
    p = [1.0 / n] * n
    for _ in range(10):
        mu = sum(a * q for a, q in zip(scores, p, strict=True))
        sigma = math.sqrt(sum(q * (a - mu) ** 2 for a, q in zip(scores, p, strict=True)))
        phi = [a - mu_ref - 0.5 * t * sigma * (1.0 + ((a - mu) / sigma) ** 2) for a in scores]
        lo, hi = -1.0 / max(phi), -1.0 / min(phi)

        def f(x: float, phi: list[float] = phi) -> float:
            return sum(q * g / (1.0 + x * g) for q, g in zip(probs, phi, strict=True))

        theta = _bisect(f, lo, hi)
        new = [q / (1.0 + theta * g) for q, g in zip(probs, phi, strict=True)]
        done = max(abs(a - b) for a, b in zip(new, p, strict=True)) < 1e-4
        p = new
        if done:
            break
    return p


@dataclass(frozen=True, slots=True)
class Sprt:
    """The test of H0 (Elo ``elo0``) against H1 (Elo ``elo1``), with error rates ``alpha`` (to
    accept H1 when H0 holds) and ``beta``; ``model``: ``normalized`` (fastchess's default) or
    ``logistic``."""

    elo0: float = 0.0
    elo1: float = 10.0
    alpha: float = 0.05
    beta: float = 0.05
    model: str = "normalized"

    def __post_init__(self) -> None:
        if self.elo0 >= self.elo1:
            raise ValueError("elo0 must be less than elo1")
        if not (0 < self.alpha < 1 and 0 < self.beta < 1) or self.alpha + self.beta >= 1:
            raise ValueError("alpha and beta must be between 0 and 1, their sum below 1")
        if self.model not in ("normalized", "logistic"):
            raise ValueError(f"no SPRT model {self.model!r}: normalized or logistic")

    @property
    def lower(self) -> float:
        """The LLR at or below which the test accepts H0."""
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def upper(self) -> float:
        """The LLR at or above which the test accepts H1."""
        return math.log((1.0 - self.beta) / self.alpha)

    def llr_wdl(self, wins: int, draws: int, losses: int) -> float:
        """The log-likelihood ratio of game results (trinomial)."""
        return self._llr((0.0, 0.5, 1.0), (losses, draws, wins), math.sqrt(1.0))

    def llr_pentanomial(self, penta: Sequence[int]) -> float:
        """The log-likelihood ratio of pair results ``[LL, LD, WL+DD, WD, WW]``."""
        return self._llr(_PENTA_SCORES, penta, math.sqrt(2.0))

    def _llr(self, scores: Sequence[float], counts: Sequence[int], k: float) -> float:
        reg = [float(c) if c else 1e-3 for c in counts]
        total = sum(reg)
        probs = [c / total for c in reg]
        if self.model == "normalized":
            t0, t1 = k * self.elo0 / _NELO, k * self.elo1 / _NELO
            p0 = _mle_normalized(scores, probs, 0.5, t0)
            p1 = _mle_normalized(scores, probs, 0.5, t1)
        else:
            p0 = _mle_logistic(scores, probs, _score_of_elo(self.elo0))
            p1 = _mle_logistic(scores, probs, _score_of_elo(self.elo1))
        return total * sum(
            q * (math.log(b) - math.log(a)) for q, a, b in zip(probs, p0, p1, strict=True)
        )

    def decide(self, llr: float) -> str | None:
        """``"H1"``, ``"H0"``, or ``None`` while the test goes on."""
        if llr >= self.upper:
            return "H1"
        if llr <= self.lower:
            return "H0"
        return None
