"""Glicko-2 rating math for the ladder: pure functions, no I/O, no clock.

This follows Mark Glickman, "Example of the Glicko-2 system" (2013 revision), step by step; the
step numbers in the comments refer to that paper. Each finished game is its own rating period, so
a player's RD shrinks with every game and never grows from inactivity here (growth over idle time
would need a clock, which belongs to the shell, not to this module).

A forfeit is scored as a loss for the side that forfeited and a recorded draw as a draw: the
caller turns the outcome into ``score_a`` (``WIN``, ``DRAW`` or ``LOSS``) before calling `update`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_RATING",
    "DEFAULT_RD",
    "DEFAULT_VOL",
    "DRAW",
    "LOSS",
    "SCALE",
    "TAU",
    "WIN",
    "Rating",
    "rate",
    "update",
]

DEFAULT_RATING = 1500.0
"""Rating of a player who has never played."""
DEFAULT_RD = 350.0
"""Rating deviation of a player who has never played."""
DEFAULT_VOL = 0.06
"""Volatility of a player who has never played."""
TAU = 0.5
"""System constant constraining volatility change over time (Glickman suggests 0.3 to 1.2)."""
SCALE = 173.7178
"""Factor between the Glicko scale and the Glicko-2 scale (400 / ln 10)."""

WIN = 1.0
"""Score of the side that won, including by the opponent's forfeit."""
DRAW = 0.5
"""Score of either side in a recorded draw."""
LOSS = 0.0
"""Score of the side that lost, including by forfeit."""

# Convergence tolerance of the volatility iteration (step 5.1 of the paper).
_EPSILON = 1e-6


@dataclass(frozen=True)
class Rating:
    """A player's Glicko-2 state on the public (Glicko) scale.

    ``rating`` is the strength estimate, ``rd`` the rating deviation (uncertainty, one standard
    deviation) and ``vol`` the volatility (how erratic the player's results are).
    """

    rating: float = DEFAULT_RATING
    rd: float = DEFAULT_RD
    vol: float = DEFAULT_VOL

    def __post_init__(self) -> None:
        if not math.isfinite(self.rating):
            raise ValueError(f"rating must be finite, got {self.rating!r}")
        if not (math.isfinite(self.rd) and self.rd > 0):
            raise ValueError(f"rd must be positive and finite, got {self.rd!r}")
        if not (math.isfinite(self.vol) and self.vol > 0):
            raise ValueError(f"vol must be positive and finite, got {self.vol!r}")


def _g(phi: float) -> float:
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


def _expected(mu: float, mu_j: float, phi_j: float) -> float:
    return 1.0 / (1.0 + math.exp(-_g(phi_j) * (mu - mu_j)))


def _new_volatility(sigma: float, phi: float, v: float, delta: float, tau: float) -> float:
    """Step 5: solve for the new volatility with the Illinois variant of regula falsi."""
    a = math.log(sigma * sigma)
    phi2 = phi * phi
    delta2 = delta * delta

    def f(x: float) -> float:
        ex = math.exp(x)
        return ex * (delta2 - phi2 - v - ex) / (2.0 * (phi2 + v + ex) ** 2) - (x - a) / (tau * tau)

    big_a = a
    if delta2 > phi2 + v:
        big_b = math.log(delta2 - phi2 - v)
    else:
        k = 1
        while f(a - k * tau) < 0:
            k += 1
        big_b = a - k * tau
    f_a = f(big_a)
    f_b = f(big_b)
    while abs(big_b - big_a) > _EPSILON:
        big_c = big_a + (big_a - big_b) * f_a / (f_b - f_a)
        f_c = f(big_c)
        # The 2013 revision of the paper tests <= 0 (older ones said < 0); with < 0 an exact
        # root at C would halve f_a forever instead of moving the bracket.
        if f_c * f_b <= 0:
            big_a, f_a = big_b, f_b
        else:
            f_a /= 2.0
        big_b, f_b = big_c, f_c
    return math.exp(big_a / 2.0)


def rate(player: Rating, results: Iterable[tuple[Rating, float]], *, tau: float = TAU) -> Rating:
    """Return ``player``'s rating after one rating period with the given results.

    ``results`` pairs each opponent's rating at the start of the period with ``player``'s score
    in that game (1 win, 0.5 draw, 0 loss). With no results only the RD grows (step 6 alone).
    """
    games = list(results)
    for _, score in games:
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be between 0 and 1, got {score!r}")

    # Step 2: convert to the Glicko-2 scale.
    mu = (player.rating - DEFAULT_RATING) / SCALE
    phi = player.rd / SCALE
    sigma = player.vol

    if not games:
        phi_star = math.sqrt(phi * phi + sigma * sigma)
        return Rating(player.rating, phi_star * SCALE, sigma)

    # Steps 3 and 4: estimated variance v and improvement delta.
    inv_v = 0.0
    improvement = 0.0  # sum of g(phi_j) * (s_j - E_j); delta is v times this
    for opponent, score in games:
        mu_j = (opponent.rating - DEFAULT_RATING) / SCALE
        phi_j = opponent.rd / SCALE
        g = _g(phi_j)
        e = _expected(mu, mu_j, phi_j)
        inv_v += g * g * e * (1.0 - e)
        improvement += g * (score - e)
    v = 1.0 / inv_v
    delta = v * improvement

    sigma_new = _new_volatility(sigma, phi, v, delta, tau)  # step 5

    # Steps 6 and 7: pre-period RD, then the new RD and rating.
    phi_star = math.sqrt(phi * phi + sigma_new * sigma_new)
    phi_new = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + 1.0 / v)
    mu_new = mu + phi_new * phi_new * improvement

    # Step 8: back to the Glicko scale.
    return Rating(SCALE * mu_new + DEFAULT_RATING, SCALE * phi_new, sigma_new)


def update(a: Rating, b: Rating, score_a: float, *, tau: float = TAU) -> tuple[Rating, Rating]:
    """Return the new ratings of ``a`` and ``b`` after one game in which ``a`` scored ``score_a``.

    Both sides are rated against the other's rating from before the game, so the result does
    not depend on which side is called ``a``.
    """
    return rate(a, [(b, score_a)], tau=tau), rate(b, [(a, 1.0 - score_a)], tau=tau)
