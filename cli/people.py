"""``seabattle`` commands about people: players' figures, who is online, challenges."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from .common import connection_options, console
from .lobby import _JSON, _KEY, _SERVER, _plain, _run

if TYPE_CHECKING:
    from seabattle.client.api import Client


# ================================================================================================
# player: a player's figures (spec 6.9)
# ================================================================================================


def accuracy(shots: int, hits: int) -> str:
    """Hits over shots fired, as a percentage with one decimal (``-`` before any shot)."""
    return "-" if shots <= 0 else f"{100 * hits / shots:.1f}%"


@click.command("player")
@click.argument("who", metavar="ID|NAME")
@_SERVER
@connection_options
@_KEY
@_JSON
@click.option(
    "--history",
    default=10,
    show_default=True,
    type=click.IntRange(0),
    help="How many rated matches to list, newest first.",
)
def player_cmd(
    who: str,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    as_json: bool,
    history: int,
) -> None:
    """A player's figures on a server, by player id or display name: games, wins, losses and
    draws, accuracy (hits over shots fired), rating and its history."""

    async def body(client: Client) -> None:
        f = await client.figures(who)
        if as_json:
            out = _plain(f)
            out["accuracy"] = None if not f.get("shots") else f["hits"] / f["shots"]
            click.echo(json.dumps(out, indent=2))
            return
        _print_figures(server, f, history)

    _run(server, tls, ca, server_key, key, body)


def _print_figures(server: str, f: dict[str, Any], history: int) -> None:
    shots, hits = int(f.get("shots", 0)), int(f.get("hits", 0))
    table = Table(title=f"{f.get('name', '?')} on {server}", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value")
    table.add_row("player", str(f.get("player", "")))
    table.add_row("rating", f"{f.get('rating', '?')} (rd {f.get('rd', '?')})")
    table.add_row("games", str(f.get("games", 0)))
    table.add_row(
        "won / lost / drawn", f"{f.get('wins', 0)} / {f.get('losses', 0)} / {f.get('draws', 0)}"
    )
    table.add_row("accuracy", f"{accuracy(shots, hits)} ({hits} hits of {shots} shots)")
    console.print(table)
    rows = list(f.get("history", []))[:history]
    if not rows:
        return
    past = Table(title="Rating history, newest first")
    for col in ("when", "match", "opponent", "result", "rating"):
        past.add_column(col, no_wrap=True)
    for h in rows:
        mid = h.get("match")
        at = h.get("at")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if isinstance(at, int) else "?"
        past.add_row(
            when,
            mid.hex() if isinstance(mid, bytes) else str(mid),
            str(h.get("opponent", ""))[:16],
            str(h.get("result", "")),
            f"{h.get('old', '?')} -> {h.get('new', '?')}",
        )
    console.print(past)
