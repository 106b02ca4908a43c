"""``seabattle arena ENGINE...``: engines against each other on paired boards, with a progress
bar, the cross-table at the end, the records and an HTML report (:mod:`seabattle.engine.arena`).
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import trio
from rich.console import Console
from rich.table import Table
from seabattle.protocol.rules import RuleSet

from .common import _hostport, _rules_arg, address_arg, console
from .engine import MOVE_TIME

if TYPE_CHECKING:
    from seabattle.engine.arena import Contender, GameResult
    from seabattle.engine.report import Summary
    from seabattle.engine.sprt import Sprt

__all__ = ["arena"]

#: Games per pair of engines when ``--games`` is not given (``--sprt``: the most it plays).
GAMES = 100
SPRT_GAMES = 20_000


def _contenders(specs: tuple[str, ...], move_time: float) -> list[Contender]:
    """The engines the command line names, each under the name its hello gives (a built-in's
    own), told apart when repeated. An external engine is started once here to learn its name;
    one that does not start keeps its command's name and loses its games with the reason."""
    from seabattle.engine.arena import Contender, unique_names
    from seabattle.engine.base import EngineFault
    from seabattle.engine.builtin import BUILTIN, BuiltinEngine

    from .engine import engine_from_spec

    names: list[str] = []
    makers: list[Any] = []
    for spec in specs:
        if spec.strip() in BUILTIN:
            name = spec.strip()
            makers.append(lambda name=name: BuiltinEngine(name))
            names.append(name)
            continue
        engine_from_spec(spec, move_time=move_time)  # a usage error here, before anything runs

        async def hello(spec: str = spec) -> str:
            engine = engine_from_spec(spec, move_time=move_time)
            try:
                return (await engine.start()).name or spec
            finally:
                await engine.close()

        try:
            name = trio.run(hello)
        except EngineFault:
            name = Path(spec.split()[0]).name if spec.split() else spec
        names.append(name)
        makers.append(lambda spec=spec: engine_from_spec(spec, move_time=move_time))
    return [Contender(n, mk) for n, mk in zip(unique_names(names), makers, strict=True)]


def _sprt_line(sprt: Sprt, penta: list[int], llr: float) -> str:
    verdict = sprt.decide(llr)
    state = {"H1": "H1 accepted", "H0": "H0 accepted", None: "not decided"}[verdict]
    return (
        f"SPRT [{sprt.elo0:g}, {sprt.elo1:g}] alpha {sprt.alpha:g} beta {sprt.beta:g}: "
        f"LLR {llr:.2f} ({sprt.lower:.2f}, {sprt.upper:.2f}), pairs {sum(penta)} "
        f"[{', '.join(map(str, penta))}]: {state}"
    )


def _print(summary: Summary, out: Console) -> None:
    table = Table(title=f"Arena: {summary.games} games on {summary.rules}, seed {summary.seed}")
    for col, just in (
        ("engine", "left"),
        ("W-D-L", "right"),
        ("points", "right"),
        ("Elo", "right"),
        ("LOS", "right"),
        ("to win", "right"),
        ("faults", "right"),
    ):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for ln in summary.lines:
        mean, median = ln.mean_to_win, ln.median_to_win
        table.add_row(
            ln.name,
            f"{ln.wins}-{ln.draws}-{ln.losses}",
            f"{ln.points:g}/{ln.games}",
            str(ln.elo),
            f"{ln.elo.los * 100:.1f} %",
            "–" if mean is None or median is None else f"{mean:.1f} / {median:g}",
            str(sum(ln.faults.values())),
        )
    table.caption = (
        "Elo: against the field, from pairs of games on one board, ± 95 %; "
        "to win: shots to win, mean / median"
    )
    out.print(table)
    order = [ln.name for ln in summary.lines]
    cross = Table(title="Cross-table: points of the row's engine against the column's")
    cross.add_column("", no_wrap=True)
    for n in order:
        cross.add_column(n, justify="right", no_wrap=True)
    for a in order:
        row = [a]
        for b in order:
            got = summary.cross.get((a, b))
            row.append("·" if a == b else "–" if got is None else f"{got[0]:g}/{got[1]}")
        cross.add_row(*row)
    out.print(cross)
    for ln in summary.lines:
        for reason, count in sorted(ln.faults.items()):
            detail = ln.fault_details.get(reason, "")
            out.print(
                f"{ln.name}: lost {count} game(s) by a fault: {reason}"
                + (f" ({detail})" if detail else ""),
                soft_wrap=True,
                markup=False,
            )
    if summary.sprt:
        out.print(summary.sprt, soft_wrap=True, markup=False)


def _summary_json(summary: Summary) -> dict[str, Any]:
    def num(x: float | None) -> float | None:
        return None if x is None or math.isinf(x) or math.isnan(x) else round(x, 2)

    return {
        "games": summary.games,
        "rules": summary.rules,
        "seed": summary.seed,
        "sprt": summary.sprt,
        "engines": [
            {
                "name": ln.name,
                "games": ln.games,
                "wins": ln.wins,
                "draws": ln.draws,
                "losses": ln.losses,
                "elo": num(ln.elo.diff),
                "elo_error": num(ln.elo.error),
                "los": num(ln.elo.los),
                "to_win_mean": num(ln.mean_to_win),
                "to_win_median": num(ln.median_to_win),
                "faults": ln.faults,
            }
            for ln in summary.lines
        ],
        "cross": [
            {"engine": a, "opponent": b, "points": p, "games": g}
            for (a, b), (p, g) in sorted(summary.cross.items())
        ],
    }


@click.command("arena")
@click.argument("engines", nargs=-1, required=True, metavar="ENGINE...")
@click.option(
    "--rules",
    "rules",
    default="russian",
    show_default=True,
    callback=lambda ctx, param, v: _rules_arg(v),
    help="A preset name or a JSON map of rules.",
)
@click.option(
    "--games",
    type=click.IntRange(min=1),
    default=None,
    help=f"Games for each pair of engines, two a board, seats swapped (default {GAMES}; "
    f"with --sprt, the most it plays: default {SPRT_GAMES}).",
)
@click.option("--sprt", is_flag=True, help="Play two engines until the SPRT decides.")
@click.option("--elo0", type=float, default=0.0, show_default=True, help="SPRT: H0's Elo.")
@click.option("--elo1", type=float, default=10.0, show_default=True, help="SPRT: H1's Elo.")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="SPRT: false H1.")
@click.option("--beta", type=float, default=0.05, show_default=True, help="SPRT: false H0.")
@click.option("--gauntlet", is_flag=True, help="The first engine against each other one only.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Games at once (external engines: one instance each).",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="The boards' and engines' seed (default: a fresh one, printed).",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Save every game's signed record in DIR (seabattle verify checks them).",
)
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report, one self-contained HTML file, to FILE.",
)
@click.option(
    "--server",
    default=None,
    metavar="HOST:PORT",
    callback=address_arg,
    help="Play every game as a real match on this server (default: an embedded referee).",
)
@MOVE_TIME
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def arena(
    engines: tuple[str, ...],
    rules: RuleSet,
    games: int | None,
    sprt: bool,
    elo0: float,
    elo1: float,
    alpha: float,
    beta: float,
    gauntlet: bool,
    concurrency: int,
    seed: int | None,
    records: Path | None,
    html_file: Path | None,
    server: str | None,
    move_time: float,
    as_json: bool,
) -> None:
    """Run ENGINEs against each other on paired boards: a round robin (or --gauntlet), a fixed
    number of games or an SPRT between two, with the cross-table at the end.

    Each pair of engines plays every board twice, seats swapped: both shoot at the same two
    fleets (an engine that leaves its fleet to the shell defends the board's), and on the
    embedded referee each fires first once (a --server draws its own lot). The same --seed
    gives the same games. An engine that crashes, hangs past
    --move-time, writes garbage, names an illegal cell or fleet, or does not play the rules
    loses that game, and the table says why.

    ENGINE: a built-in strategy (random, hunt, density, best), an HTTP engine's URL, or a
    command that runs one, quoted ('node examples/engine.js'); see spec/engine.md.
    """
    from seabattle.engine.arena import Arena, paired
    from seabattle.engine.report import render_html, summarize
    from seabattle.engine.sprt import Sprt, pentanomial

    if len(engines) < 2:
        raise click.UsageError("an arena needs two engines at least")
    test = None
    if sprt:
        if len(engines) != 2:
            raise click.UsageError("--sprt plays two engines")
        try:
            test = Sprt(elo0, elo1, alpha, beta)
        except ValueError as e:
            raise click.UsageError(f"--sprt: {e}") from None
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    contenders = _contenders(engines, move_time)
    names = [c.name for c in contenders]
    the_arena = Arena(
        contenders,
        rules,
        seed=seed,
        concurrency=concurrency,
        records=records,
        server=None if server is None else _hostport(server),
    )
    per_pair = games or (SPRT_GAMES if sprt else GAMES)
    boards = (per_pair + 1) // 2
    pairs = 1 if gauntlet or len(names) == 2 else len(names) * (len(names) - 1) // 2
    if gauntlet:
        pairs = len(names) - 1
    total = boards * 2 * pairs
    progress = Console(stderr=True)
    results: list[GameResult] = []
    halves: dict[int, float] = {}  # SPRT: the first engine's score in a board's first game
    pair_scores: list[float] = []
    llr = 0.0

    def done(r: GameResult) -> None:
        nonlocal llr
        results.append(r)
        # Once decided, the test stands as it was then: games still running finish and count
        # in the table, not in the LLR (fastchess stops there too).
        if test is not None and test.decide(llr) is None:
            score = r.score(r.engines.index(names[0]))
            if r.board in halves:
                pair_scores.append(halves.pop(r.board) + score)
                llr = test.llr_pentanomial(pentanomial(pair_scores))
            else:
                halves[r.board] = score

    def stop() -> bool:
        return test is not None and test.decide(llr) is not None

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=progress,
        transient=True,
    ) as bar:
        what = (
            f"{' vs '.join(names) if len(names) == 2 else f'{len(names)} engines'} on {rules.name}"
        )
        task = bar.add_task(what, total=total)

        def tick(r: GameResult) -> None:
            done(r)
            desc = what if test is None else f"{what}: LLR {llr:+.2f}"
            bar.update(task, advance=1, description=desc)

        trio.run(
            lambda: the_arena.play(
                paired(len(names), range(boards), gauntlet=gauntlet), done=tick, stop=stop
            )
        )
    results.sort(key=lambda r: r.index)
    line = None
    if test is not None:
        line = _sprt_line(test, pentanomial(pair_scores), llr)
    summary = summarize(results, names, rules=rules.name, seed=seed, sprt=line)
    if as_json:
        click.echo(json.dumps(_summary_json(summary)))
    else:
        _print(summary, console)
    if html_file is not None:
        html_file.write_text(render_html(summary, title=f"seabattle arena: {', '.join(names)}"))
        if not as_json:
            console.print(f"report: {html_file}", markup=False, soft_wrap=True)
    if records is not None and not as_json:
        pin = ""
        if (records / "referee.pub").exists():
            pin = f" --referee-key {(records / 'referee.pub').read_text().strip()}"
        console.print(
            f"records: {records}/ (seabattle verify{pin} {records}/*.rec)",
            markup=False,
            soft_wrap=True,
        )
    sys.stdout.flush()
