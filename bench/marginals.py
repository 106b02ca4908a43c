"""How far a cell-probability estimator is from the exact posterior, at fixed positions.

``python -m bench.marginals [--rules russian] [--games 8] [--every 4] [--draws 4000]``

Pure computation but for the cache file and the printout; the positions, the reference and every
estimator draw from their own seeded streams, so a run replays exactly.

Theory of operation. A shooter's estimate of each cell's chance of being a ship cell is judged
against the exact one: under a uniformly drawn fleet, the share of the fleets consistent with
what the shooter was told that have a ship on the cell. Thousands of games can tell two samplers
apart only when their difference is a fifth of a shot; the error of their estimates can be seen
at a few dozen positions in seconds.

* **Positions.** ``--games`` games of the rules, each board from ``random.Random(f"{seed}/{g}")``,
  played by the ``density`` shooter (fixed, so that the positions do not move when a sampler
  changes); every ``--every``-th move is a position, *hunting* when no hit is unresolved and
  *finishing* when one is.
* **The reference** (:func:`reference`) is rejection sampling, written apart from
  :mod:`seabattle.bots.posterior`: the ships shown sunk are fixed; a proposal covers every other
  hit with ships, each hit exactly once (every way of doing so, weighed by the number of
  positions the other ships have beside them), puts the other ships down uniformly, and is kept
  only if the fleet is legal (:meth:`~seabattle.protocol.fleet.Fleet.validate`'s rules) and
  answers every shot of the game exactly as the true fleet did
  (:func:`~seabattle.protocol.verdict.true_answer`). Every consistent fleet is proposed with the
  same probability, so the kept ones are independent uniform draws; a cell's reference is the
  share of them holding it, good to ``sqrt(p (1 - p) / n)``. References are cached in
  ``bench/marginals-cache.json`` (keyed by the position's facts), since early positions accept
  few proposals.
* **Estimators** (:data:`ESTIMATORS`) play along the whole game, as a shooter would (a chain is
  carried from move to move), and their estimate is read at each position. The figure is the
  RMS error over the unknown cells of every position of a phase, less the reference's own noise
  (subtracted in quadrature), and the *regret*: how much less likely, by the reference, the cell
  the estimate would fire at is than the likeliest cell.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seabattle.bots.posterior import Sampler
from seabattle.bots.strategies import DensityStrategy, TargetView, simulate_shots_to_win
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport, preset, rules_from_dict
from seabattle.protocol.targeting import _UNKNOWN, _placements
from seabattle.protocol.verdict import Result, Shot, TrueCell, true_answer

__all__ = [
    "ESTIMATORS",
    "Position",
    "Reference",
    "Score",
    "positions",
    "reference",
    "run",
    "score",
]

CACHE = Path(__file__).with_name("marginals-cache.json")

#: An estimator: made afresh for each game, then called at every move with the game's one view.
Estimator = Callable[[TargetView, random.Random], list[float]]


def _sampler(method: str) -> Callable[[], Estimator]:
    def make() -> Estimator:
        sampler = Sampler(method=method)

        def estimate(view: TargetView, rng: random.Random) -> list[float]:
            est = sampler.estimate(view, rng)
            if est is None:
                raise RuntimeError(f"{method}: no estimate")
            return est.marginals

        return estimate

    return make


#: The estimators of :mod:`seabattle.bots.posterior` by name: ``chain`` (the Gibbs chain carried
#: from move to move, as before issue 37) and ``draws`` (independent draws, weighed; what ``best``
#: uses where they are cheap).
ESTIMATORS: dict[str, Callable[[], Estimator]] = {
    "chain": _sampler("chain"),
    "draws": _sampler("draws"),
    "auto": _sampler("auto"),
}


@dataclass(slots=True)
class Position:
    """A view as a shooter saw it at one move of one game, with what is needed to judge it."""

    game: int
    move: int
    rules: RuleSet
    fleet: Fleet  #: the true fleet
    shots: list[Cell]  #: every cell fired at before this move, in order
    state: list[str]  #: the view's cell states
    estimates: dict[str, list[float]] = field(default_factory=dict)

    @property
    def phase(self) -> str:
        """``finishing`` when a hit is unresolved, else ``hunting``."""
        return "finishing" if "hit" in self.state else "hunting"

    @property
    def key(self) -> str:
        """What the position's reference depends on: the rules, the shots and their answers."""
        answers = _answers(self.rules, self.fleet.occupancy(self.rules), self.shots)
        text = json.dumps(
            [self.rules.name, [c.index(self.rules.cols) for c in self.shots], answers]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:20]


class _Recorder:
    """The ``density`` shooter, calling every estimator at every move and keeping positions."""

    def __init__(
        self, game: int, fleet: Fleet, every: int, makers: dict[str, Callable[[], Estimator]]
    ) -> None:
        self.game, self.fleet, self.every = game, fleet, every
        self.shooter = DensityStrategy()
        self.estimators = {name: make() for name, make in makers.items()}
        self.rngs = {name: random.Random(f"{game}/{name}") for name in makers}
        self.times: dict[str, list[float]] = {name: [] for name in makers}
        self.shots: list[Cell] = []
        self.out: list[Position] = []

    def choose(self, view: TargetView, count: int, rng: random.Random) -> list[Cell]:
        move = len(self.shots)
        estimates = {}
        for name, est in self.estimators.items():
            t0 = time.perf_counter()
            estimates[name] = est(view, self.rngs[name])
            self.times[name].append(time.perf_counter() - t0)
        if move % self.every == self.every - 1 and view._masks[_UNKNOWN]:
            state = [str(s) for s in view._state]
            self.out.append(
                Position(
                    self.game, move, view.rules, self.fleet, list(self.shots), state, estimates
                )
            )
        picks = self.shooter.choose(view, count, rng)
        self.shots.extend(picks)
        return picks

    def use_radar(self, view: TargetView, rng: random.Random) -> Cell | None:
        return None


def positions(
    rules: RuleSet,
    games: int,
    every: int,
    seed: int = 37,
    makers: dict[str, Callable[[], Estimator]] | None = None,
) -> tuple[list[Position], dict[str, list[float]]]:
    """The positions of ``games`` density games (see the module), with every estimator's
    estimate at each; and each estimator's seconds a move, over every move."""
    out: list[Position] = []
    times: dict[str, list[float]] = {name: [] for name in makers or {}}
    for g in range(games):
        board = random.Random(f"{seed}/{g}")
        fleet = random_fleet(rules, board)
        rec = _Recorder(g, fleet, every, makers or {})
        simulate_shots_to_win(rules, rec, random.Random(f"{seed}/{g}/shots"), fleet)
        out.extend(rec.out)
        for name, ts in rec.times.items():
            times[name].extend(ts)
    return out, times


# -- the reference -------------------------------------------------------------------------------


def _answers(rules: RuleSet, occupancy: Sequence[int], shots: Sequence[Cell]) -> list[object]:
    """What a defender with ``occupancy`` answers to ``shots``, one at a time, as the rules tell
    it (a sinking's ship when named, its cells when shown)."""
    hit: set[int] = set()
    out: list[object] = []
    cols = rules.cols
    for n, c in enumerate(shots):
        truth, _ = true_answer(rules, occupancy, hit, Shot(n + 1, 0, (c,)))
        t: TrueCell = truth[0]
        if t.result is Result.MISS:
            out.append("miss")
            continue
        hit.add(c.index(cols))
        if t.result is Result.HIT:
            out.append("hit")
        elif rules.sunk is SunkReport.SHOWN:
            assert t.ship is not None
            out.append(
                ["sunk", t.ship, sorted(i for i, o in enumerate(occupancy) if o == t.ship + 1)]
            )
        else:
            out.append(["sunk", t.ship])
    return out


@dataclass(frozen=True, slots=True)
class Reference:
    """The exact marginals by rejection: each cell's share of ``accepted`` consistent fleets."""

    marginals: list[float]
    accepted: int
    proposed: int


def reference(position: Position, draws: int, rng: random.Random, max_proposals: int) -> Reference:
    """Rejection sampling of the fleets consistent with the position (see the module)."""
    rules = position.rules
    cols, n_ships = rules.cols, len(rules.fleet)
    occ = position.fleet.occupancy(rules)
    truth = _answers(rules, occ, position.shots)
    water = hits = 0
    fixed: dict[int, int] = {}  # ship index -> its cells, for ships shown sunk
    for c, a in zip(position.shots, truth, strict=True):
        bit = 1 << c.index(cols)
        if a == "miss":
            water |= bit
            continue
        hits |= bit
        if isinstance(a, list) and len(a) == 3:
            fixed[a[1]] = sum(1 << i for i in a[2])
    lays_by_length = {
        s.length: [
            (m, m if rules.touching else m | b)
            for m, b, _ in _placements(rules.rows, cols, s.length)
        ]
        for s in rules.fleet
    }
    fence = 0
    for k, m in fixed.items():
        fence |= next(f for x, f in lays_by_length[rules.fleet[k].length] if x == m)
    open_hits = hits & ~sum(fixed.values())
    ships = [k for k in range(n_ships) if k not in fixed]
    cands = {
        k: [(m, f) for m, f in lays_by_length[rules.fleet[k].length] if not m & (water | fence)]
        for k in ships
    }
    # Every way to cover the open hits, each by exactly one ship.
    ways: list[tuple[dict[int, int], int]] = []  # (ship -> cells, forbidden to the others)

    def cover(left: int, used: dict[int, int], forbid: int) -> None:
        if not left:
            ways.append((dict(used), forbid))
            return
        bit = left & -left
        for k in ships:
            if k in used:
                continue
            for m, f in cands[k]:
                if m & bit and not m & forbid:
                    if not rules.touching and (f & ~m) & open_hits:
                        continue  # beside a hit it does not cover: that hit's ship would touch
                    used[k] = m
                    cover(left & ~m, used, forbid | f)
                    del used[k]

    cover(open_hits, {}, fence)
    weights: list[int] = []
    frees: list[list[tuple[int, list[tuple[int, int]]]]] = []
    for used, forbid in ways:
        w = 1
        free: list[tuple[int, list[tuple[int, int]]]] = []
        # Longest first: a proposal is refused at its first clash, and long ships clash most.
        for k in sorted(ships, key=lambda k: -rules.fleet[k].length):
            if k in used:
                continue
            ms = [(m, f) for m, f in cands[k] if not m & (forbid | open_hits)]
            w *= len(ms)
            free.append((k, ms))
        weights.append(w)
        frees.append(free)
    total = sum(weights)
    counts = [0] * rules.cells
    accepted = proposed = 0
    if not total:
        raise RuntimeError("no way to cover the hits")
    cum: list[int] = []
    run_ = 0
    for w in weights:
        run_ += w
        cum.append(run_)
    while accepted < draws and proposed < max_proposals:
        proposed += 1
        a = bisect.bisect_right(cum, rng.randrange(total))
        used, taken = ways[a]
        placed = dict(fixed)
        placed.update(used)
        for k, ms in frees[a]:
            m, f = ms[rng.randrange(len(ms))]
            if m & taken:
                break
            taken |= f
            placed[k] = m
        else:
            # The masks' test above, read again from the rules, cell by cell, for the ones kept.
            if not _legal(rules, placed):
                raise AssertionError("a proposal passed the masks' test but breaks the rules")
        if len(placed) < n_ships:
            continue
        cand_occ = [0] * rules.cells
        for k, m in placed.items():
            while m:
                low = m & -m
                cand_occ[low.bit_length() - 1] = k + 1
                m ^= low
        if _answers(rules, cand_occ, position.shots) != truth:
            continue
        accepted += 1
        for i, o in enumerate(cand_occ):
            if o:
                counts[i] += 1
    unknown = [s == str(_UNKNOWN) for s in position.state]
    marg = [counts[i] / accepted if accepted and unknown[i] else 0.0 for i in range(rules.cells)]
    return Reference(marg, accepted, proposed)


def _legal(rules: RuleSet, placed: dict[int, int]) -> bool:
    """Whether ships of these cell masks overlap nowhere, and touch nowhere where they may not
    (a cell and its eight neighbours, as :meth:`Fleet.validate` reads the rule)."""
    cols, rows = rules.cols, rules.rows
    owner: dict[int, int] = {}
    for k, m in placed.items():
        while m:
            low = m & -m
            i = low.bit_length() - 1
            if i in owner:
                return False
            owner[i] = k
            m ^= low
    if rules.touching:
        return True
    for i, k in owner.items():
        r, c = divmod(i, cols)
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                nr, nc = r + dr, c + dc
                if 0 <= nr < rows and 0 <= nc < cols:
                    j = owner.get(nr * cols + nc)
                    if j is not None and j != k:
                        return False
    return True


# -- the figures ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Score:
    """One estimator's error over the positions of one phase."""

    estimator: str
    phase: str
    positions: int
    rms: float  #: RMS error over the unknown cells, the reference's own noise taken out
    rms_raw: float  #: the same, the reference's noise left in
    regret: float  #: the mean chance of a hit given away by firing where the estimate says
    worst: float  #: the largest cell error at any position (noise included)


def score(found: list[Position], refs: dict[str, Reference], name: str, phase: str) -> Score | None:
    """``name``'s figures over the positions of ``phase`` (``None`` where there are none)."""
    sq = noise = regret = worst = 0.0
    cells = npos = 0
    for p in found:
        if p.phase != phase:
            continue
        ref = refs[p.key]
        est = p.estimates[name]
        unknown = [i for i, s in enumerate(p.state) if s == str(_UNKNOWN)]
        npos += 1
        for i in unknown:
            e = est[i] - ref.marginals[i]
            sq += e * e
            r = ref.marginals[i]
            noise += r * (1 - r) / max(ref.accepted - 1, 1)
            worst = max(worst, abs(e))
        cells += len(unknown)
        pick = max(unknown, key=lambda i: est[i])
        regret += max(ref.marginals[i] for i in unknown) - ref.marginals[pick]
    if not npos:
        return None
    return Score(
        name,
        phase,
        npos,
        math.sqrt(max(sq - noise, 0.0) / cells),
        math.sqrt(sq / cells),
        regret / npos,
        worst,
    )


def references(
    found: list[Position],
    draws: int,
    max_proposals: int,
    cache: Path | None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Reference]:
    """Each position's reference, from ``cache`` where it holds one with at least ``draws``
    fleets (or as many as ``max_proposals`` gave), else computed and added to it."""
    stored: dict[str, dict[str, Any]] = {}
    if cache is not None and cache.exists():
        stored = json.loads(cache.read_text())
    out: dict[str, Reference] = {}
    for p in found:
        key = p.key
        hit = stored.get(key)
        if hit is not None and (hit["accepted"] >= draws or hit["proposed"] >= max_proposals):
            out[key] = Reference(list(hit["marginals"]), hit["accepted"], hit["proposed"])
            continue
        t0 = time.perf_counter()
        ref = reference(p, draws, random.Random(key), max_proposals)
        if log is not None:
            log(
                f"reference game {p.game} move {p.move} ({p.phase}): {ref.accepted} of "
                f"{ref.proposed} proposals kept, {time.perf_counter() - t0:.1f} s"
            )
        out[key] = ref
        stored[key] = {
            "accepted": ref.accepted,
            "proposed": ref.proposed,
            "marginals": [round(m, 6) for m in ref.marginals],
        }
        if cache is not None:  # at once: the early positions take a minute or more each
            lines = (f"{json.dumps(k)}: {json.dumps(stored[k])}" for k in sorted(stored))
            cache.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return out


def run(
    rules: RuleSet,
    names: Sequence[str],
    games: int,
    every: int,
    draws: int,
    seed: int = 37,
    max_proposals: int = 20_000_000,
    cache: Path | None = CACHE,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Score], dict[str, float]]:
    """The figures of each estimator in ``names`` (:data:`ESTIMATORS`) by phase, and each one's
    median milliseconds a move."""
    makers = {name: ESTIMATORS[name] for name in names}
    found, times = positions(rules, games, every, seed, makers)
    refs = references(found, draws, max_proposals, cache, log)
    scores = [
        s
        for name in names
        for phase in ("hunting", "finishing")
        if (s := score(found, refs, name, phase)) is not None
    ]
    medians = {name: 1000 * sorted(ts)[len(ts) // 2] for name, ts in times.items() if ts}
    return scores, medians


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m bench.marginals", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--rules", default="russian", help="a preset, or a rule set as JSON")
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--every", type=int, default=5, help="every Nth move of a game is a position")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--draws", type=int, default=10_000, help="consistent fleets a reference keeps")
    ap.add_argument("--max-proposals", type=int, default=20_000_000)
    ap.add_argument(
        "--estimators", default="chain,draws", help="comma-separated: " + ", ".join(ESTIMATORS)
    )
    ap.add_argument("--cache", default=str(CACHE), help="the references' cache ('' for none)")
    ap.add_argument("--json", action="store_true", help="one JSON object per figure")
    args = ap.parse_args(argv)
    text = args.rules.strip()
    rules = rules_from_dict(json.loads(text)) if text.startswith("{") else preset(text)
    names = [n for n in args.estimators.split(",") if n]
    for n in names:
        if n not in ESTIMATORS:
            ap.error(f"no estimator {n!r}: {', '.join(ESTIMATORS)}")
    scores, medians = run(
        rules,
        names,
        args.games,
        args.every,
        args.draws,
        args.seed,
        args.max_proposals,
        Path(args.cache) if args.cache else None,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    for s in scores:
        if args.json:
            print(
                json.dumps(
                    {
                        **{k: getattr(s, k) for k in s.__slots__},
                        "move_ms_median": medians[s.estimator],
                    }
                )
            )
        else:
            print(
                f"{s.estimator:6} {s.phase:9} {s.positions:3} positions: RMS {s.rms:.4f} "
                f"(raw {s.rms_raw:.4f}), regret {s.regret:.4f}, worst {s.worst:.3f}; "
                f"{medians[s.estimator]:.2f} ms a move"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
