"""``seabattle play``: a person on a server (the game screen, or the line mode)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from seabattle.bots.placement import PLACEMENTS

from .common import (
    Conn,
    _rules_arg,
    _rules_map,
    address_arg,
    connection_options,
    console,
    key_file_arg,
    open_client,
    open_stream,
    run_client,
)

if TYPE_CHECKING:
    from seabattle.client.match import MatchHandle

    from .tui import GameUI

__all__ = ["LINE_OPTION", "PLACEMENT", "play", "save_path"]

#: ``--line``: the scrolling line mode even on a terminal (off a terminal it is the only one).
LINE_OPTION = click.option(
    "--line",
    is_flag=True,
    help="Play in the line mode (a transcript of typed lines) instead of the game screen.",
)


#: ``--placement``: how a fleet is placed (``bot``, ``play``).
PLACEMENT = click.option(
    "--placement",
    type=click.Choice(PLACEMENTS),
    default="uniform",
    show_default=True,
    help="How a fleet is placed: uniformly among all legal fleets (uniform), on the cells a "
    "shooter tries last (unlikely), or as the layout a simulated shooter takes longest to sink "
    "(evasive: a second or two of simulated games); for play: what the placing command random "
    "does.",
)


def save_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for a file to save a record to at the end of a match: its folder must
    exist now, not only when the match is over and the record would be lost."""
    if value is not None and not Path(value).resolve().parent.is_dir():
        raise click.BadParameter(f"there is no folder for {value!r}", ctx, param)
    return value


@click.command()
@click.option("--server", required=True, callback=address_arg, help="HOST:PORT of a server.")
@connection_options
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@click.option("--invite", is_flag=True, help="Open a private match and print its invitation code.")
@click.option(
    "--open",
    "open_",
    is_flag=True,
    help="Open a public match, listed by seabattle matches, and wait for someone to take it.",
)
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
    callback=save_path,
    help="Save the signed record of the match to this file when it ends (and verify it).",
)
@click.option(
    "--key",
    default=None,
    callback=key_file_arg,
    help="Identity key file, created if missing (a guest key if omitted).",
)
@click.option("--name", default="player", show_default=True)
@PLACEMENT
@LINE_OPTION
def play(
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    rules_: str,
    mode: str,
    invite: bool,
    open_: bool,
    join_code: str | None,
    save: str | None,
    key: str | None,
    name: str,
    placement: str,
    line: bool,
) -> None:
    """Play one match by hand on a server: the game screen (both boards, both clocks, typed or
    aimed cells), or the line mode off a terminal or with --line. A quick match, a private one
    (--invite prints the code that the opponent's --join takes), or a public one (--open: it
    waits in seabattle matches until someone takes it with --join MATCH)."""
    from seabattle.cli.human import play_server
    from seabattle.cli.tui import screen_wanted

    from .lobby import save_record, summary

    if invite and join_code is not None:
        raise click.UsageError("--invite opens a match and --join takes one: give one of them")
    if open_ and (invite or join_code is not None):
        raise click.UsageError("--open opens a public match: give it without --invite or --join")
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
            create=invite or open_,
            public=open_,
            at_end=None if save is None else keep,
            ui=ui,
        )

    run_client(conn, check)
    if screen_wanted(line):
        from seabattle.cli.screen import run as on_screen

        run_client(conn, run, lambda fn: on_screen(fn, placement=placement))
    else:
        run_client(conn, run)
