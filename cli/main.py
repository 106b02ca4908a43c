"""The ``seabattle`` command line: rules, serve, bot, verify, demo, and peer play (host/join).

Every command is a thin shell over the libraries: ``seabattle.client`` (``api`` for servers,
``peer`` for peer play), ``seabattle.bots`` for strategies, ``protocol.record`` for verification.
Exit codes: 0 success, 1 a verified failure (a record that does not verify, a lost connection), 2
a usage error (click's own).

This module holds the group and ``rules``; the other commands live beside it, by what they do:
:mod:`.serve` (``serve``, ``demo``), :mod:`.bot` (``bot``), :mod:`.play` (``play``), :mod:`.peer`
(``host``, ``join``), :mod:`.records` (``verify``), :mod:`.keys` (``keys``), :mod:`.lobby`
(``watch``, ``ladder``, ``matches``, ``record``) and :mod:`.show` (``show``), sharing
:mod:`.common`; the terminal game is :mod:`.human` over :mod:`.tui` (the line mode) or
:mod:`.screen` (the full screen). Their heavier imports (the server above all) stay inside the
commands.
"""

from __future__ import annotations

import json

import click
from rich.table import Table
from seabattle.protocol.rules import PRESETS, BadRules, preset

from .arena import arena
from .bot import _bot_server as _bot_server  # re-exported: tests drive it directly
from .bot import bot
from .checkout import NoCheckout, load_bench
from .common import console
from .keys import keys
from .lobby import ladder, matches, record, watch
from .peer import host_cmd, join_cmd
from .people import accept_cmd, challenge_cmd, decline_cmd, online_cmd, player_cmd
from .play import play
from .records import verify
from .serve import demo, serve
from .show import show

__all__ = ["main"]


@click.group()
@click.version_option("0.1.0", prog_name="seabattle")
def main() -> None:
    """Battleship as a network protocol: play, referee and verify matches nobody can cheat in."""


# ================================================================================================
# rules
# ================================================================================================


@main.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rules(name: str | None, as_json: bool) -> None:
    """List the rule presets, or print preset NAME in full."""
    if name is None:
        if as_json:
            click.echo(json.dumps({k: v.to_dict() for k, v in PRESETS.items()}, indent=2))
            return
        table = Table(title="Rule presets")
        table.caption = "fleet: ships / ship cells"
        for col in ("name", "grid", "fleet", "touch", "shots", "sunk", "again", "match"):
            table.add_column(col, no_wrap=True)
        for k, r in PRESETS.items():
            table.add_row(
                k,
                f"{r.rows}x{r.cols}",
                f"{len(r.fleet)} / {r.fleet_cells}",
                "yes" if r.touching else "no",
                r.shots.value,
                r.sunk.value,
                "yes" if r.hit_again else "no",
                f"{r.match.kind.value}" + (f" {r.match.games}" if r.match.games > 1 else ""),
            )
        console.print(table)
        return
    try:
        r = preset(name)
    except BadRules as e:
        raise click.BadParameter(e.detail, param_hint="NAME") from None
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=2))
        return
    table = Table(title=f"Rules: {r.name}", show_header=False)
    table.add_column("option", style="bold")
    table.add_column("value")
    from seabattle.cli.render import describe_rules

    for k, v in describe_rules(r):
        table.add_row(k, v)
    console.print(table)


for _command in (
    serve,
    verify,
    show,
    bot,
    host_cmd,
    join_cmd,
    play,
    demo,
    keys,
    watch,
    ladder,
    matches,
    record,
    player_cmd,
    online_cmd,
    challenge_cmd,
    accept_cmd,
    decline_cmd,
    arena,
):
    main.add_command(_command)


@click.command(
    "bench",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
def _no_bench() -> None:
    """Load-test a server with bot matches (from a checkout of the source)."""
    raise NoCheckout("bench")


def _add_lazy_commands() -> None:
    # The conformance suite lives in its own package, the load generator in the checkout's
    # bench/ (no part of the installed package: without a checkout `seabattle bench` says so);
    # registering them here keeps `seabattle --help` complete.
    from seabattle.conformance import conformance

    try:
        bench = load_bench("bench").bench
    except NoCheckout:
        bench = _no_bench
    main.add_command(bench)
    main.add_command(conformance)


_add_lazy_commands()
