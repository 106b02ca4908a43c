"""``seabattle bot`` and ``seabattle play``: bots or a person on a server; bot statistics."""

from __future__ import annotations

import json
import math
import random
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import trio
from rich.console import Console
from seabattle.protocol.rules import RuleSet

from .cli_common import (
    Conn,
    _rules_arg,
    _rules_map,
    connection_options,
    console,
    open_client,
    open_stream,
    run_client,
)
from .placement import PLACEMENTS

if TYPE_CHECKING:
    from .botplay import BotResult
    from .match import MatchHandle
    from .tui import GameUI

__all__ = ["LINE_OPTION", "bot", "play"]

#: ``--line``: the scrolling line mode even on a terminal (off a terminal it is the only one).
LINE_OPTION = click.option(
    "--line",
    is_flag=True,
    help="Play in the line mode (a transcript of typed lines) instead of the game screen.",
)


def _stats(rules: RuleSet, strategy: str, games: int, seed: int | None, placement: str) -> None:
    from rich.progress import Progress
    from seabattle.client.bots import make_strategy
    from seabattle.client.botsim import measure

    seed = random.SystemRandom().getrandbits(32) if seed is None else seed
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"{strategy} on {rules.name}", total=games)
        st = measure(
            rules,
            partial(make_strategy, strategy),
            games,
            seed,
            placement,
            partial(progress.advance, task),
        )
    console.print(
        f"{strategy} on {rules.name} against {placement} fleets, {games} game(s), seed {seed}: "
        f"shots to win {st.line()}"
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
) -> int:
    """Play ``games`` quick matches; one line per match (``as_json``: one JSON object on stdout,
    the rest on stderr). ``wait`` bounds each wait for an opponent, in seconds."""
    from seabattle.client.botplay import play_match
    from seabattle.client.bots import make_strategy

    conn = conn or Conn(f"{host}:{port}")
    say = Console(stderr=True).print if as_json else console.print
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
            res = await play_match(match, make_strategy(strategy), placement=placement)
            wins += bool(res.won)
            if as_json:
                click.echo(json.dumps(_bot_json(res, client.player)))
            else:
                say(f"match {res.match_id.hex()}: {_bot_line(res, client.player)}")
            if save and res.ended:
                from .cli_lobby import fetch_record

                out = Path(save) / f"{res.match_id.hex()}.sbr"
                await fetch_record(client, res.match_id, out)
                say(f"  record saved to {out}")
        say(f"{wins}/{games} won")
    return 0


def _bot_json(res: BotResult, player: str) -> dict[str, Any]:
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


_PLACEMENT = click.option(
    "--placement",
    type=click.Choice(PLACEMENTS),
    default="uniform",
    show_default=True,
    help="How a fleet is placed: uniformly among all legal fleets, or to cost a density "
    "shooter shots (for play: what the placing command random does).",
)


@click.command()
@click.option("--server", default=None, help="HOST:PORT of a server (omit with --stats).")
@connection_options
@click.option("--strategy", default="density", show_default=True)
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--games", default=1, show_default=True, type=click.IntRange(1))
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--name", default="bot", show_default=True)
@click.option("--save", default=None, type=click.Path(file_okay=False), help="Save records here.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per match on stdout.")
@click.option(
    "--wait",
    default=None,
    type=click.FloatRange(0, min_open=True),
    help="Give up after this many seconds without an opponent.",
)
@click.option("--stats", is_flag=True, help="Simulate locally and print shots-to-win statistics.")
@click.option("--seed", default=None, type=int, help="Seed for --stats.")
@_PLACEMENT
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
    seed: int | None,
    placement: str,
) -> None:
    """Play GAMES matches with a bot on a server, or measure a strategy with --stats (against
    fleets placed by --placement)."""
    from seabattle.client.bots import STRATEGIES

    if strategy not in STRATEGIES:
        raise click.BadParameter(f"one of {', '.join(STRATEGIES)}", param_hint="--strategy")
    rules = _rules_arg(rules_)
    if stats:
        _stats(rules, strategy, games, seed, placement)
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
        ),
    )


@click.command()
@click.option("--server", required=True, help="HOST:PORT of a server.")
@connection_options
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--invite", is_flag=True, help="Open a private match and print its invitation code.")
@click.option(
    "--join",
    "join_code",
    default=None,
    metavar="CODE",
    help="Join this invitation code (or match id) instead of a quick match.",
)
@click.option(
    "--save",
    default=None,
    type=click.Path(dir_okay=False),
    help="Save the signed record of the match to this file when it ends (and verify it).",
)
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--name", default="player", show_default=True)
@_PLACEMENT
@LINE_OPTION
def play(
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    rules_: str,
    mode: str,
    invite: bool,
    join_code: str | None,
    save: str | None,
    key: str | None,
    name: str,
    placement: str,
    line: bool,
) -> None:
    """Play one match by hand on a server: the game screen (both boards, both clocks, typed or
    aimed cells), or the line mode off a terminal or with --line. A quick match, or a private
    one: --invite prints the code that the opponent's --join takes."""
    from seabattle.client.human import play_server
    from seabattle.client.tui import screen_wanted

    from .cli_lobby import save_record, summary

    if invite and join_code is not None:
        raise click.UsageError("--invite opens a match and --join takes one: give one of them")
    if save is not None and not Path(save).resolve().parent.is_dir():
        raise click.BadParameter(f"no directory for {save!r}", param_hint="--save")
    conn = Conn(server, tls, ca, server_key)
    h, p = conn.hostport
    rules = _rules_map(_rules_arg(rules_))

    async def check() -> None:
        # A first handshake on its own: what refuses it (TLS, a pinned key, a closed server) is
        # told as open_client tells it, before the screen starts.
        async with open_client(conn, key=key, name=name):
            pass

    async def run(ui: GameUI | None = None) -> None:
        async def keep(match: MatchHandle) -> None:
            assert save is not None
            said = summary(await save_record(match.client, match.id, Path(save)))
            if ui is None:
                click.echo(said)
            else:  # the screen is up: what is printed now would be drawn over
                ui.say(said)

        stream = await open_stream(conn)
        await play_server(
            h,
            p,
            rules=rules,
            mode=mode,
            key=key,
            name=name,
            console=console,
            invite=join_code,
            stream=stream,
            placement=placement,
            create=invite,
            at_end=None if save is None else keep,
            ui=ui,
        )

    run_client(conn, check)
    if screen_wanted(line):
        from seabattle.client.screen import run as on_screen

        run_client(conn, run, lambda fn: on_screen(fn, placement=placement))
    else:
        run_client(conn, run)
