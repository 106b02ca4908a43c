"""``seabattle bot``: a bot on a server, or a strategy measured locally (``--stats``).

This module holds the command, the matches a bot plays on a server (:func:`_bot_server`),
and the local measurement (:func:`seabattle.bots.simulate.measure`: uniform boards from a seeded
stream, the same for every strategy).
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import trio
from rich.console import Console
from seabattle.bots.strategies import DEFAULT_STRATEGY, STRATEGIES
from seabattle.protocol.rules import RuleSet

from .common import (
    Conn,
    _rules_arg,
    _rules_map,
    address_arg,
    connection_options,
    console,
    key_file_arg,
    open_client,
    run_client,
)
from .engine import MOVE_TIME, engine_option_help, started_engine
from .play import PLACEMENT

if TYPE_CHECKING:
    from seabattle.bots.play import BotResult
    from seabattle.engine.base import Engine

__all__ = ["bot", "exact_report", "stats_report"]


def stats_report(
    rules: RuleSet, strategy: str, games: int, seed: int, placement: str, *, progress: Console
) -> dict[str, Any]:
    """Measure ``strategy`` over ``games`` games (a progress bar on ``progress``); the figures
    with what they were measured on: rules, placement, seed, machine and load average."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
    from seabattle.bots.simulate import measure
    from seabattle.bots.strategies import make_strategy

    load_before = os.getloadavg()
    with Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=progress,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{strategy} on {rules.name}", total=games)
        st = measure(
            rules,
            partial(make_strategy, strategy),
            games,
            seed,
            placement,
            partial(bar.advance, task),
        )
    return {
        "rules": rules.name,
        "strategy": strategy,
        "placement": placement,
        "seed": seed,
        "games": st.games,
        "mean": round(st.mean, 4),
        "sem": round(st.sem, 4),
        "median": st.median,
        "p90": st.p90,
        "max": st.max,
        "move_ms_median": round(st.move_ms_median, 3),
        "move_ms_p99": round(st.move_ms_p99, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
        "_line": st.line(),
    }


def exact_report(
    rules: RuleSet, strategy: str, seed: int, budget: int, *, progress: Console
) -> dict[str, Any]:
    """Exact expected turns to win on a small board (the checkout's ``bench/exact.py``:
    ``strategy`` against every legal fleet once, and the optimum, greedy on the exact posterior,
    and one-step rollout over it; a figure whose computation passes ``budget`` states is
    ``None``. Raises :class:`~.checkout.NoCheckout` outside a checkout of the source."""
    from seabattle.bots.strategies import make_strategy

    from .checkout import load_bench

    exact = load_bench("bot --exact", "bench.exact")
    TooLarge = exact.TooLarge
    try:
        board = exact.Board(rules, budget=budget)
    except TooLarge as e:
        raise click.UsageError(f"--exact is for small boards: {e}") from None
    except ValueError as e:
        raise click.UsageError(f"--exact: {e}") from None
    out: dict[str, Any] = {
        "rules": rules.name,
        "fleets": len(board.fleets),
        "strategy": strategy,
        "seed": seed,
    }
    figures: list[tuple[str, Any]] = [
        (strategy, partial(exact.strategy_turns, rules, partial(make_strategy, strategy), seed)),
        ("greedy", board.greedy),
        ("rollout", board.rollout),
        ("optimal", board.optimal),
    ]
    with progress.status("") as status:
        for name, compute in figures:
            status.update(f"{name} on {rules.name} ({len(board.fleets)} fleets)")
            try:
                out[name] = round(compute(), 6)
            except TooLarge:
                out[name] = None
    return out


@click.command()
@click.option(
    "--server",
    default=None,
    callback=address_arg,
    help="HOST:PORT of a server (omit with --stats).",
)
@connection_options
@click.option(
    "--strategy",
    type=click.Choice(list(STRATEGIES)),
    default=DEFAULT_STRATEGY,
    show_default=True,
    help="best: posterior sampling of whole fleets; density, hunt, random: the simpler bots.",
)
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--games", default=1, show_default=True, type=click.IntRange(1))
@click.option(
    "--key",
    default=None,
    callback=key_file_arg,
    help="Identity key file, created if missing (a guest key if omitted).",
)
@click.option("--name", default="bot", show_default=True)
@click.option("--save", default=None, type=click.Path(file_okay=False), help="Save records here.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per match (or for --stats) on stdout."
)
@click.option(
    "--wait",
    default=None,
    type=click.FloatRange(0, min_open=True),
    help="Give up after this many seconds without an opponent.",
)
@click.option(
    "--stats",
    is_flag=True,
    help="Simulate GAMES games locally on uniform boards (or --placement's) and print turns to "
    "win (mean ± standard error, median, p90, max) and the time a move takes.",
)
@click.option(
    "--exact",
    is_flag=True,
    help="On a small board (--rules JSON): the exact expected turns of --strategy against every "
    "legal fleet, of greedy on the exact posterior, of one-step rollout, and the optimum "
    "(from a checkout of the source: the solver is in its bench/).",
)
@click.option(
    "--budget",
    default=2_000_000,
    show_default=True,
    type=click.IntRange(1),
    help="With --exact: the most game states one figure may visit.",
)
@click.option(
    "--seed",
    default=None,
    type=int,
    help="Seed for --stats (the boards' stream), or for --exact (the strategy's stream, restarted "
    "every game; 0 if omitted).",
)
@click.option("--engine", "engine", default=None, help=engine_option_help)
@click.option(
    "--engine-url",
    default=None,
    help="An HTTP engine: POST URL/placement and URL/move (spec/engine.md).",
)
@MOVE_TIME
@PLACEMENT
def bot(
    server: str | None,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    strategy: str,
    rules_: str,
    mode: str,
    games: int,
    key: str | None,
    name: str,
    save: str | None,
    as_json: bool,
    wait: float | None,
    stats: bool,
    exact: bool,
    budget: int,
    seed: int | None,
    engine: str | None,
    engine_url: str | None,
    move_time: float,
    placement: str,
) -> None:
    """Play GAMES matches with a bot on a server, or measure a strategy with --stats (against
    fleets placed by --placement). With --engine or --engine-url an engine plays instead of
    --strategy: a program in any language that speaks spec/engine.md."""
    rules = _rules_arg(rules_)
    if engine is not None and engine_url is not None:
        raise click.UsageError("give --engine or --engine-url, not both")
    if engine_url is not None:
        if not engine_url.startswith(("http://", "https://")):
            raise click.BadParameter("an http:// or https:// URL", param_hint="--engine-url")
        engine = engine_url
    if engine is not None and (stats or exact):
        raise click.UsageError("--stats and --exact measure a built-in --strategy, not an engine")
    if exact:
        report = exact_report(rules, strategy, seed or 0, budget, progress=Console(stderr=True))
        if as_json:
            click.echo(json.dumps(report))
        else:
            figures = ", ".join(
                f"{k} {'-' if report[k] is None else f'{report[k]:.4f}'}"
                for k in (strategy, "greedy", "rollout", "optimal")
            )
            console.print(
                f"{rules.name}, {report['fleets']} legal fleets, expected turns to win: {figures}"
            )
        return
    if stats:
        seed = random.SystemRandom().getrandbits(32) if seed is None else seed
        report = stats_report(
            rules, strategy, games, seed, placement, progress=Console(stderr=True)
        )
        line = report.pop("_line")
        if as_json:
            click.echo(json.dumps(report))
        else:
            console.print(
                f"{strategy} on {rules.name} against {placement} fleets, {games} game(s), "
                f"seed {seed}: turns to win {line}"
            )
        return
    if server is None:
        raise click.UsageError("give --server HOST:PORT, or --stats for a local simulation")
    conn = Conn(server, tls, ca, server_key)
    host, port = conn.hostport
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
    run_client(
        conn,
        partial(
            _bot_server,
            host,
            port,
            strategy,
            rules,
            mode,
            games,
            key,
            save,
            name,
            conn=conn,
            as_json=as_json,
            wait=wait,
            placement=placement,
            engine=engine,
            move_time=move_time,
        ),
    )


async def _bot_server(
    host: str,
    port: int,
    strategy: str,
    rules: RuleSet,
    mode: str,
    games: int,
    key: str | None,
    save: str | None,
    name: str,
    *,
    conn: Conn | None = None,
    as_json: bool = False,
    wait: float | None = None,
    placement: str = "uniform",
    engine: str | None = None,
    move_time: float = 5.0,
) -> int:
    """Play ``games`` quick matches; one line per match (``as_json``: one JSON object on stdout,
    the rest on stderr). ``wait`` bounds each wait for an opponent, in seconds. ``engine``: an
    engine (:func:`~.engine.engine_from_spec`) plays instead of ``strategy``, ``move_time``
    seconds for each answer."""
    say = Console(stderr=True).print if as_json else console.print
    kw: dict[str, Any] = {
        "conn": conn,
        "as_json": as_json,
        "wait": wait,
        "placement": placement,
        "say": say,
    }
    if engine is None:
        return await _bot_matches(host, port, strategy, rules, mode, games, key, save, name, **kw)
    eng, hello = await started_engine(engine, move_time=move_time)
    try:
        plays = ", ".join(hello.rules) if hello.rules else "any rules"
        author = f" by {hello.author}" if hello.author else ""
        say(f"engine {hello.name}{author} ({plays})")
        return await _bot_matches(
            host, port, strategy, rules, mode, games, key, save, name, **kw, engine=eng
        )
    finally:
        await eng.close()


async def _bot_matches(
    host: str,
    port: int,
    strategy: str,
    rules: RuleSet,
    mode: str,
    games: int,
    key: str | None,
    save: str | None,
    name: str,
    *,
    conn: Conn | None,
    as_json: bool,
    wait: float | None,
    placement: str,
    say: Any,
    engine: Engine | None = None,
) -> int:
    from seabattle.bots.play import play_match
    from seabattle.bots.strategies import make_strategy

    conn = conn or Conn(f"{host}:{port}")
    async with open_client(conn, key=key, name=name) as client:
        say(f"connected as {client.player[:16]}...")
        wins = 0
        for _ in range(games):
            say(f"waiting for an opponent ({rules.name}, {mode})...")
            match = None
            with trio.move_on_after(math.inf if wait is None else wait):
                match = await client.quick(_rules_map(rules), mode)
                await match.wait_started()
            if match is None or match.rules is None:  # `start` sets the rules
                raise click.ClickException(f"no opponent in {wait:g} s (--wait)")
            res: BotResult
            if engine is not None:
                from seabattle.engine.bridge import play_engine_match

                res = await play_engine_match(match, engine)
            else:
                res = await play_match(match, make_strategy(strategy), placement=placement)
            wins += bool(res.won)
            if as_json:
                click.echo(json.dumps(_bot_json(res, client.player)))
            else:
                say(f"match {res.match_id.hex()}: {_bot_line(res, client.player)}")
                for fault in getattr(res, "faults", ()):
                    say(f"  engine fault, {fault.line()}")
            if save and res.ended:
                from .lobby import fetch_record

                out = Path(save) / f"{res.match_id.hex()}.sbr"
                await fetch_record(client, res.match_id, out)
                say(f"  record saved to {out}")
        say(f"{wins}/{games} won")
    return 0


def _bot_json(res: BotResult, player: str) -> dict[str, Any]:
    from seabattle.engine.bridge import EngineResult

    rating = (res.ratings or {}).get(player)
    return {
        "match": res.match_id.hex(),
        "seat": res.seat,
        "outcome": _outcome(res),
        "winner": res.result.get("winner"),
        "reason": res.reason,
        "scores": res.result.get("scores"),
        "games": res.result.get("games"),
        "rating": rating,  # {old, new}, or null for an unrated match
        "lies": [lie.detail for lie in res.lies],
        **(
            {
                "engine": res.engine,
                "faults": [
                    {"game": f.game, "reason": f.reason, "detail": f.detail} for f in res.faults
                ],
            }
            if isinstance(res, EngineResult)
            else {}
        ),
    }


def _outcome(res: BotResult) -> str:
    if not res.ended:
        return "aborted"
    return "won" if res.won else "draw" if res.won is None else "lost"


def _bot_line(res: BotResult, player: str) -> str:
    if not res.ended:
        return "aborted: it ended without a result (no record to save)"
    parts = [_outcome(res)]
    scores = res.result.get("scores")
    if isinstance(scores, list) and len(scores) == 2 and res.seat is not None:
        parts.append(f"{scores[res.seat]}-{scores[1 - res.seat]}")
    if res.reason:
        parts.append(f"({res.reason.replace('_', ' ')})")
    rating = (res.ratings or {}).get(player)
    if isinstance(rating, dict):
        parts.append(f"rating {rating.get('old')} -> {rating.get('new')}")
    if res.lies:
        parts.append(f"{len(res.lies)} lie(s) detected")
    return ", ".join([" ".join(parts[:3]), *parts[3:]])
