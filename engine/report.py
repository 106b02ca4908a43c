"""What an arena run comes to: each engine's line (games, W/D/L, Elo ± error, shots to win,
faults), the cross-table, and the self-contained HTML report.

Elo is each engine's against the field it met, from its results on paired boards: the two games
of a board against one opponent are one pair (:mod:`.sprt`'s pentanomial count), whose error bars
leave out the luck of the fleets. A pair that is not complete (a run stopped between its games)
counts in W/D/L but not in the Elo. Shots to win are the cells an engine fired in each game it
won by sinking the fleet (a resignation or a fault is no shooting).

The HTML report is one file with nothing to fetch (no script, no font, no image but inline SVG):
the table, the cross-table, the faults, and a histogram of each engine's shots to win, all drawn
on one scale so that the engines' pictures compare at a glance.
"""

from __future__ import annotations

import html
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from .arena import GameResult
from .sprt import Elo, elo_pentanomial, elo_wdl, pentanomial

__all__ = ["Line", "Summary", "render_html", "summarize"]


@dataclass(frozen=True, slots=True)
class Line:
    """One engine's results over the run."""

    name: str
    games: int
    wins: int
    draws: int
    losses: int
    #: Against the field, from complete pairs (see the module docstring).
    elo: Elo
    #: Fault reason to how many games it lost so; and one detail of each reason, as seen first.
    faults: dict[str, int] = field(default_factory=dict)
    fault_details: dict[str, str] = field(default_factory=dict)
    #: Shots it fired in each game it won by sinking the fleet, in schedule order.
    to_win: tuple[int, ...] = ()

    @property
    def points(self) -> float:
        """Wins plus half the draws."""
        return self.wins + self.draws / 2

    @property
    def mean_to_win(self) -> float | None:
        """The mean shots to win (``None``: it won no game by sinking the fleet)."""
        return statistics.fmean(self.to_win) if self.to_win else None

    @property
    def median_to_win(self) -> float | None:
        """The median shots to win."""
        return float(statistics.median(self.to_win)) if self.to_win else None


@dataclass(frozen=True, slots=True)
class Summary:
    """A run: ``lines`` best first, the ``cross``-table (engine and opponent to points, games),
    and what was played."""

    names: list[str]
    lines: list[Line]
    cross: dict[tuple[str, str], tuple[float, int]]
    games: int
    rules: str = ""
    seed: int = 0
    #: The SPRT's line, when one ran (``SPRT [0, 10] ...: H1``).
    sprt: str | None = None


def summarize(
    results: Sequence[GameResult],
    names: Sequence[str],
    *,
    rules: str = "",
    seed: int = 0,
    sprt: str | None = None,
) -> Summary:
    """The lines and cross-table of ``results`` between the engines ``names``."""
    wdl: dict[str, list[int]] = {n: [0, 0, 0] for n in names}
    faults: dict[str, Counter[str]] = {n: Counter() for n in names}
    details: dict[str, dict[str, str]] = {n: {} for n in names}
    to_win: dict[str, list[int]] = {n: [] for n in names}
    cross: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    pairs: dict[tuple[int, frozenset[str]], list[GameResult]] = defaultdict(list)
    for r in results:
        pairs[(r.board, frozenset(r.engines))].append(r)
        for seat, name in enumerate(r.engines):
            score = r.score(seat)
            wdl[name][0 if score == 1 else 1 if score == 0.5 else 2] += 1
            c = cross[(name, r.engines[1 - seat])]
            c[0] += score
            c[1] += 1
        if r.winner is not None and r.to_win:
            to_win[r.engines[r.winner]].extend(r.to_win)
        if r.fault is not None:
            faults[r.fault.engine][r.fault.reason] += 1
            details[r.fault.engine].setdefault(r.fault.reason, r.fault.detail)
    pair_scores: dict[str, list[float]] = {n: [] for n in names}
    for games in pairs.values():
        if len(games) != 2:
            continue
        for name in games[0].engines:
            pair_scores[name].append(sum(g.score(g.engines.index(name)) for g in games))
    lines = []
    for n in names:
        w, d, lost = wdl[n]
        elo = (
            elo_pentanomial(pentanomial(pair_scores[n])) if pair_scores[n] else elo_wdl(w, d, lost)
        )
        lines.append(
            Line(n, w + d + lost, w, d, lost, elo, dict(faults[n]), details[n], tuple(to_win[n]))
        )
    lines.sort(key=lambda ln: (-ln.elo.score, -ln.points, ln.name))
    return Summary(
        list(names),
        lines,
        {k: (v[0], int(v[1])) for k, v in cross.items()},
        len(results),
        rules,
        seed,
        sprt,
    )


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _points(p: float) -> str:
    return f"{p:g}"


# -- the HTML report -------------------------------------------------------------------------

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em;
       color: #1b2430; background: #fbfcfd; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 2em; }
p.meta { color: #5a6675; margin-top: 0; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { padding: .3em .7em; border-bottom: 1px solid #dde3ea; text-align: right;
         white-space: nowrap; }
th { background: #eef2f6; font-weight: 600; }
td.name, th.name { text-align: left; font-weight: 600; }
td.self { background: #f3f5f7; color: #9aa5b1; text-align: center; }
.faults td { text-align: left; }
.dists { display: flex; flex-wrap: wrap; gap: 1.2em; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .2em; }
svg text { font: 11px system-ui, sans-serif; fill: #5a6675; }
svg .bar { fill: #3f7cc4; } svg .mean { stroke: #c4473f; stroke-width: 1.5; }
svg .median { stroke: #2f8f4e; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg .axis { stroke: #9aa5b1; }
.sprt { font-weight: 600; }
"""


def _histogram(line: Line, lo: int, hi: int, width: int = 420, height: int = 150) -> str:
    """An inline SVG histogram of ``line``'s shots to win on the scale ``lo``..``hi``."""
    pad_l, pad_b, pad_t = 34, 30, 8
    inner_w, inner_h = width - pad_l - 8, height - pad_b - pad_t
    span = max(1, hi - lo + 1)
    # About 30 bins over the common scale, each a whole number of shots.
    step = max(1, -(-span // 30))
    bins = -(-span // step)
    counts = [0] * bins
    for s in line.to_win:
        counts[min(bins - 1, (s - lo) // step)] += 1
    top = max(counts, default=0) or 1
    bw = inner_w / bins
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(line.name)}: shots to win">'
    ]
    base = pad_t + inner_h
    for i, c in enumerate(counts):
        if not c:
            continue
        h = inner_h * c / top
        x = pad_l + i * bw
        first = lo + i * step
        label = f"{first}" if step == 1 else f"{first}–{first + step - 1}"
        parts.append(
            f'<rect class="bar" x="{x + 0.5:.1f}" y="{base - h:.1f}" width="{max(bw - 1, 1):.1f}" '
            f'height="{h:.1f}"><title>{label} shots: {c} games</title></rect>'
        )

    def at(v: float) -> float:
        return pad_l + (v - lo + step / 2) / (bins * step) * inner_w

    for cls, v in (("mean", line.mean_to_win), ("median", line.median_to_win)):
        if v is not None:
            parts.append(
                f'<line class="{cls}" x1="{at(v):.1f}" x2="{at(v):.1f}" y1="{pad_t}" '
                f'y2="{base}"><title>{cls} {v:.1f}</title></line>'
            )
    parts.append(
        f'<line class="axis" x1="{pad_l}" x2="{pad_l + inner_w}" y1="{base}" y2="{base}"/>'
        f'<text x="{pad_l}" y="{base + 14}">{lo}</text>'
        f'<text x="{pad_l + inner_w}" y="{base + 14}" text-anchor="end">{hi}</text>'
        f'<text x="{pad_l + inner_w / 2}" y="{base + 26}" text-anchor="middle">shots to win</text>'
        f'<text x="{pad_l - 4}" y="{pad_t + 9}" text-anchor="end">{top}</text>'
        f'<text x="{pad_l - 4}" y="{base}" text-anchor="end">0</text>'
        "</svg>"
    )
    return "".join(parts)


def render_html(summary: Summary, *, title: str = "seabattle arena") -> str:
    """The report as one self-contained HTML page."""
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">{summary.games} games on paired boards'
        + (f", rules {e(summary.rules)}" if summary.rules else "")
        + f", seed {summary.seed}. Elo against the field, from pairs, ± its 95 % interval.</p>",
    ]
    if summary.sprt:
        out.append(f'<p class="sprt">{e(summary.sprt)}</p>')
    out.append(
        '<h2>Table</h2><table id="table"><thead><tr><th>#</th><th class="name">engine</th>'
        "<th>games</th><th>W</th><th>D</th><th>L</th><th>points</th><th>Elo</th>"
        "<th>nElo</th><th>LOS</th><th>shots to win (mean)</th><th>(median)</th>"
        "<th>faults</th></tr></thead><tbody>"
    )
    for i, ln in enumerate(summary.lines, 1):
        out.append(
            f'<tr><td>{i}</td><td class="name">{e(ln.name)}</td><td>{ln.games}</td>'
            f"<td>{ln.wins}</td><td>{ln.draws}</td><td>{ln.losses}</td>"
            f"<td>{_points(ln.points)}</td><td>{e(str(ln.elo))}</td>"
            f"<td>{e(_elo_text(ln.elo.nelo))}</td><td>{ln.elo.los * 100:.1f} %</td>"
            f"<td>{_num(ln.mean_to_win)}</td><td>{_num(ln.median_to_win)}</td>"
            f"<td>{sum(ln.faults.values())}</td></tr>"
        )
    out.append("</tbody></table>")
    order = [ln.name for ln in summary.lines]
    out.append('<h2>Cross-table</h2><table id="cross"><thead><tr><th class="name"></th>')
    out += [f"<th>{e(n)}</th>" for n in order]
    out.append("</tr></thead><tbody>")
    for a in order:
        out.append(f'<tr><td class="name">{e(a)}</td>')
        for b in order:
            if a == b:
                out.append('<td class="self">·</td>')
                continue
            got = summary.cross.get((a, b))
            out.append("<td>–</td>" if got is None else f"<td>{_points(got[0])} / {got[1]}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    faulty = [ln for ln in summary.lines if ln.faults]
    if faulty:
        out.append(
            '<h2>Faults</h2><table class="faults" id="faults"><thead><tr>'
            '<th class="name">engine</th><th>reason</th><th>games</th><th>for example</th>'
            "</tr></thead><tbody>"
        )
        for ln in faulty:
            for reason, n in sorted(ln.faults.items()):
                detail = ln.fault_details.get(reason, "")
                out.append(
                    f'<tr><td class="name">{e(ln.name)}</td><td>{e(reason)}</td>'
                    f"<td>{n}</td><td>{e(detail)}</td></tr>"
                )
        out.append("</tbody></table>")
    shots = [s for ln in summary.lines for s in ln.to_win]
    out.append(
        '<h2>Shots to win</h2><p class="meta">Each engine\'s games won by sinking the fleet, '
        "on one scale; red: the mean, green dashes: the median.</p>"
        '<div class="dists">'
    )
    lo, hi = (min(shots), max(shots)) if shots else (0, 1)
    for ln in summary.lines:
        caption = (
            f"{e(ln.name)}: {len(ln.to_win)} wins, mean {_num(ln.mean_to_win)}, "
            f"median {_num(ln.median_to_win)}"
        )
        out.append(f"<figure><figcaption>{caption}</figcaption>{_histogram(ln, lo, hi)}</figure>")
    out.append("</div></body></html>")
    return "\n".join(out)


def _elo_text(x: float) -> str:
    return "+inf" if x == float("inf") else "-inf" if x == float("-inf") else f"{x:+.1f}"
