"""``seabattle bot`` and ``seabattle play``: bots or a person on a server; bot statistics."""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

import click
import trio
from seabattle.protocol.rules import RuleSet

from .cli_common import _hostport, _rules_arg, _rules_map, _unwrap, console

__all__ = ["bot", "play"]


def _stats(rules: RuleSet, strategy: str, games: int, seed: int | None) -> None:
    from rich.progress import Progress
    from seabattle.client.bots import make_strategy, simulate_shots_to_win

    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    results = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"{strategy} on {rules.name}", total=games)
        for _ in range(games):
            results.append(simulate_shots_to_win(rules, make_strategy(strategy), rng))
            progress.advance(task)
    console.print(
        f"{strategy} on {rules.name}, {games} game(s): shots to win "
        f"mean {statistics.fmean(results):.2f}, median {statistics.median(results):g}, "
        f"min {min(results)}, max {max(results)}"
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
) -> int:
    from seabattle.client.api import connect, play_bot
    from seabattle.client.bots import make_strategy

    async with connect(host, port, key=key, name=name) as client:
        console.print(f"connected as {client.player[:16]}...")
        results = await play_bot(client, make_strategy(strategy), _rules_map(rules), mode, games)
        wins = 0
        for res in results:
            wins += bool(res.won)
            lies = f", {len(res.lies)} lie(s) detected" if res.lies else ""
            outcome = "won" if res.won else "draw" if res.won is None else "lost"
            console.print(f"match {res.match_id.hex()}: {outcome} {res.result}{lies}")
            if save:
                from seabattle.protocol.record import dump_record

                signed = await client.get_record(res.match_id)
                out = Path(save) / f"{res.match_id.hex()}.sbr"
                out.write_bytes(dump_record(signed))
                console.print(f"  record saved to {out}")
        console.print(f"{wins}/{len(results)} won")
    return 0


@click.command()
@click.option("--server", default=None, help="HOST:PORT of a server (omit with --stats).")
@click.option("--strategy", default="density", show_default=True)
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--games", default=1, show_default=True, type=int)
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--name", default="bot", show_default=True)
@click.option("--save", default=None, type=click.Path(file_okay=False), help="Save records here.")
@click.option("--stats", is_flag=True, help="Simulate locally and print shots-to-win statistics.")
@click.option("--seed", default=None, type=int, help="Seed for --stats.")
def bot(
    server: str | None,
    strategy: str,
    rules_: str,
    mode: str,
    games: int,
    key: str | None,
    name: str,
    save: str | None,
    stats: bool,
    seed: int | None,
) -> None:
    """Play GAMES matches with a bot on a server, or measure a strategy with --stats."""
    from seabattle.client.bots import STRATEGIES

    if strategy not in STRATEGIES:
        raise click.BadParameter(f"one of {', '.join(STRATEGIES)}", param_hint="--strategy")
    rules = _rules_arg(rules_)
    if stats:
        _stats(rules, strategy, games, seed)
        return
    if server is None:
        raise click.UsageError("give --server HOST:PORT, or --stats for a local simulation")
    host, port = _hostport(server)
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
    from seabattle.client.wire import ConnectionClosed, RequestFailed
    from seabattle.protocol.errors import ProtocolError

    try:
        trio.run(_bot_server, host, port, strategy, rules, mode, games, key, save, name)
    except BaseException as raised:
        e = _unwrap(raised)
        if isinstance(e, OSError):
            raise click.ClickException(f"cannot reach {server}: {e}") from None
        if isinstance(e, ConnectionClosed | RequestFailed | ProtocolError):
            # The session failed (spec 4.5): say why, without a traceback.
            raise click.ClickException(f"the session with {server} failed: {e}") from None
        raise


@click.command()
@click.option("--server", required=True, help="HOST:PORT of a server.")
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--invite", default=None, help="Join this invitation (or match id) instead.")
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--name", default="player", show_default=True)
def play(
    server: str, rules_: str, mode: str, invite: str | None, key: str | None, name: str
) -> None:
    """Play one match by hand on a server: rich grids, typed coordinates."""
    from seabattle.client.human import play_server

    h, p = _hostport(server)
    rules = _rules_map(_rules_arg(rules_))
    from seabattle.client.wire import ConnectionClosed, RequestFailed

    try:
        trio.run(
            lambda: play_server(
                h, p, rules=rules, mode=mode, key=key, name=name, console=console, invite=invite
            )
        )
    except BaseException as raised:
        e = _unwrap(raised)
        if isinstance(e, OSError):
            raise click.ClickException(f"cannot reach {server}: {e}") from None
        if isinstance(e, ConnectionClosed | RequestFailed):
            raise click.ClickException(f"the server ended the session: {e}") from None
        if isinstance(e, KeyboardInterrupt):
            console.print("interrupted")
            sys.exit(130)
        raise
