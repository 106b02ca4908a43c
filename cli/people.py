"""``seabattle`` commands about people: players' figures, who is online, challenges."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click
import trio
from rich.table import Table

from .common import Conn, connection_options, console, open_client, run_client
from .engine import MOVE_TIME, engine_option_help, started_engine
from .lobby import _JSON, _KEY, _SERVER, _plain, _run

if TYPE_CHECKING:
    from seabattle.client.api import Client
    from seabattle.client.match import MatchHandle
    from seabattle.client.people import ChallengeReceived


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


# ================================================================================================
# online, challenge, accept, decline (spec 6.9.1, 6.9.2)
# ================================================================================================


@click.command("online")
@_SERVER
@connection_options
@_KEY
@_JSON
def online_cmd(
    server: str, tls: bool, ca: str | None, server_key: str | None, key: str | None, as_json: bool
) -> None:
    """Who is online on a server (the players a challenge can reach): id, name, rating, and
    whether each plays a match now."""

    async def body(client: Client) -> None:
        rows = await client.online()
        if as_json:
            click.echo(json.dumps(_plain(rows), indent=2))
            return
        table = Table(title=f"Online on {server}")
        for col in ("player", "name", "rating", "playing"):
            table.add_column(col, no_wrap=True)
        for r in rows:
            rating = r.get("rating")
            table.add_row(
                str(r.get("player", ""))[:16],
                str(r.get("name", "")),
                "-" if rating is None else str(rating),
                "yes" if r.get("playing") else "",
            )
        if not rows:
            table.caption = "nobody (seabattle accept --server waits to be challenged)"
        console.print(table)

    _run(server, tls, ca, server_key, key, body)


def _playing_options(f: Any) -> Any:
    """What plays the match a challenge makes: a bot, or the person (the screen or lines)."""
    from seabattle.bots.strategies import STRATEGIES

    from .play import LINE_OPTION, PLACEMENT

    f = LINE_OPTION(f)
    f = PLACEMENT(f)
    f = click.option(
        "--bot",
        "bot_name",
        default=None,
        type=click.Choice(sorted(STRATEGIES)),
        help="Let this bot play the match instead of playing it by hand.",
    )(f)
    f = click.option(
        "--engine",
        "engine",
        default=None,
        help=engine_option_help + " It plays the match instead of you.",
    )(f)
    f = MOVE_TIME(f)
    f = click.option("--name", default="player", show_default=True, help="Your display name.")(f)
    return f


async def _play_engine(match: MatchHandle, spec: str, move_time: float) -> None:
    """Let the engine ``spec`` names play ``match`` through the bridge; print how it ended
    and any game it lost by a fault."""
    from seabattle.engine.bridge import play_engine_match

    try:
        eng, _ = await started_engine(spec, move_time=move_time)
    except click.ClickException:
        await match.resign()  # the match was accepted: nobody will play it
        raise
    try:
        result = await play_engine_match(match, eng)
    finally:
        await eng.close()
    for f in result.faults:
        click.echo(f"game {f.game}: the engine lost it: {f.reason}: {f.detail}", err=True)
    if not result.ended:
        raise click.ClickException("the match ended without a result (aborted, or lost)")
    won = "won" if result.won else "lost" if result.won is False else "drew"
    click.echo(f"match {match.id.hex()}: you {won} ({result.reason or 'over'})")


async def _play(
    match: MatchHandle,
    bot_name: str | None,
    placement: str,
    ui: Any,
    engine: tuple[str, float] | None = None,
) -> None:
    """Play ``match`` to its end: with bot ``bot_name``, the ``engine`` (its spec and time a
    move), or by hand on ``ui`` (the game screen, or the line mode when ``None``), as
    ``play`` does; print how it ended."""
    if engine is not None:
        await _play_engine(match, *engine)
        return
    if bot_name is not None:
        from seabattle.bots.play import play_match
        from seabattle.bots.strategies import make_strategy

        result = await play_match(match, make_strategy(bot_name), placement=placement)
        if not result.ended:
            raise click.ClickException("the match ended without a result (aborted, or lost)")
        won = "won" if result.won else "lost" if result.won is False else "drew"
        click.echo(f"match {match.id.hex()}: you {won} ({result.reason or 'over'})")
        return
    from .human import _Refereed
    from .tui import Quit, TerminalUI

    if ui is None:
        ui = TerminalUI(console, placement=placement)
    await match.wait_started()
    assert match.rules is not None
    ui.say(f"match {match.id.hex()}: you are seat {match.seat}, {match.mode} mode", "bold")
    ui.match(f"match {match.id.hex()[:12]} · seat {match.seat} · {match.mode}", lambda: match.clock)
    ui.show_rules(match.rules)
    left = False
    try:
        await _Refereed(ui, match).run()
    except* Quit:
        left = True
    if left:
        ui.say("you left the match")
    elif match.result is None:
        ui.say("the connection closed before the match ended", "red")


def _engine(bot_name: str | None, engine: str | None, move_time: float) -> tuple[str, float] | None:
    """The engine that plays (its spec and time a move), or ``None``; not both with a bot."""
    if engine is None:
        return None
    if bot_name is not None:
        raise click.UsageError("give --bot or --engine, not both")
    return engine, move_time


def _run_playing(
    conn: Conn,
    line: bool,
    placement: str,
    bot_name: str | None,
    main: Callable[[Any], Awaitable[None]],
) -> None:
    """``main(ui)`` as ``play`` runs its match: on the game screen for a person at a terminal,
    else in the line mode (``ui`` ``None``); a bot plays without a screen."""
    from .tui import screen_wanted

    if bot_name is None and screen_wanted(line):
        from .screen import run as on_screen

        run_client(conn, main, lambda fn: on_screen(fn, placement=placement))
    else:
        run_client(conn, lambda: main(None))


@click.command("challenge")
@click.argument("player", metavar="PLAYER")
@_SERVER
@connection_options
@_KEY
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--mode", type=click.Choice(["blind", "custody"]), default="blind")
@_playing_options
def challenge_cmd(
    player: str,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    rules_: str,
    mode: str,
    name: str,
    bot_name: str | None,
    engine: str | None,
    move_time: float,
    placement: str,
    line: bool,
) -> None:
    """Challenge PLAYER (a player id, or the name of one player online) to a match, wait for the
    answer (a challenge expires after a minute), then play it as play does (or --bot plays it).
    A declined, expired or cancelled challenge is one line on stderr, exit status 1."""
    from seabattle.client.people import ChallengeFailed
    from seabattle.client.wire import RequestFailed

    from .common import _rules_arg, _rules_map

    conn = Conn(server, tls, ca, server_key)
    conn.hostport  # noqa: B018 - a bad HOST:PORT is a usage error before anything connects
    played = _engine(bot_name, engine, move_time)
    rules = _rules_map(_rules_arg(rules_))

    async def main(ui: Any) -> None:
        def tell(text: str) -> None:
            if ui is None:
                click.echo(text, err=True)
            else:
                ui.say(text)

        async with open_client(conn, key=key, name=name) as client:
            try:
                match = await client.challenge(
                    player,
                    rules,
                    mode,
                    made=lambda cid: tell(f"challenge {cid.hex()} sent to {player}; waiting"),
                )
            except ChallengeFailed as e:
                raise click.ClickException(f"{player}: {e}") from None
            except RequestFailed as e:
                raise click.ClickException(f"{server} refused the challenge: {e}") from None
            tell(f"{player} accepted: match {match.id.hex()}")
            await _play(match, bot_name, placement, ui, played)

    _run_playing(conn, line, placement, bot_name or engine, main)


def _pick(pending: list[ChallengeReceived], which: str | None) -> ChallengeReceived | None:
    """The challenge ``which`` names (its id or the start of it, the challenger's id or the
    start of it, or its name), or the oldest pending when ``None``."""
    if which is None:
        return pending[0] if pending else None
    want = which.strip().casefold()
    for c in pending:
        if c.id.hex().startswith(want) or c.player.startswith(want):
            return c
        if c.name.strip().casefold() == want:
            return c
    return None


def _describe(c: ChallengeReceived) -> str:
    rules = c.rules.get("name", "?")
    return f"challenge {c.id.hex()} from {c.name} ({c.player[:16]}): {rules}, {c.mode}"


async def _incoming(client: Client, which: str | None, wait: float) -> ChallengeReceived:
    """The challenge to answer: listed on stderr with the others pending, waited for up to
    ``wait`` seconds when none is pending yet."""
    from seabattle.client.people import ChallengeReceived

    pending = await client.pending()
    for c in pending:
        click.echo(_describe(c), err=True)
    chosen = _pick(pending, which)
    if chosen is None:
        click.echo(f"waiting up to {wait:g} s for a challenge", err=True)
        with trio.move_on_after(wait):
            async for ev in client.events():
                if isinstance(ev, ChallengeReceived):
                    click.echo(_describe(ev), err=True)
                    chosen = _pick([ev], which)
                    if chosen is not None:
                        break
    if chosen is None:
        said = "no challenge" if which is None else f"no challenge matches {which!r}"
        raise click.ClickException(f"{said} came in {wait:g} s")
    return chosen


_WAIT = click.option(
    "--wait",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds to wait for a challenge when none is pending.",
)


@click.command("accept")
@click.argument("which", metavar="[CHALLENGE]", required=False)
@_SERVER
@connection_options
@_KEY
@_WAIT
@_playing_options
def accept_cmd(
    which: str | None,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    wait: float,
    name: str,
    bot_name: str | None,
    engine: str | None,
    move_time: float,
    placement: str,
    line: bool,
) -> None:
    """List the challenges to you (your --key; --name is what a challenger may call you by) and
    accept one: CHALLENGE (its id, the challenger's id or name), or the oldest; waits for one
    when none is pending. Then play the match as play does (or --bot plays it)."""
    conn = Conn(server, tls, ca, server_key)
    conn.hostport  # noqa: B018 - a bad HOST:PORT is a usage error before anything connects
    played = _engine(bot_name, engine, move_time)

    async def main(ui: Any) -> None:
        from seabattle.client.wire import RequestFailed

        async with open_client(conn, key=key, name=name) as client:
            chosen = await _incoming(client, which, wait)
            try:
                match = await client.accept(chosen)
            except RequestFailed as e:
                raise click.ClickException(f"{server} refused: {e}") from None
            click.echo(f"accepted: match {match.id.hex()}", err=True)
            await _play(match, bot_name, placement, ui, played)

    _run_playing(conn, line, placement, bot_name or engine, main)


@click.command("decline")
@click.argument("which", metavar="[CHALLENGE]", required=False)
@_SERVER
@connection_options
@_KEY
@_WAIT
@click.option("--name", default="player", show_default=True, help="Your display name.")
@click.option("--reason", default=None, help="Say why (at most 200 characters).")
def decline_cmd(
    which: str | None,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    wait: float,
    name: str,
    reason: str | None,
) -> None:
    """Decline a challenge to you (your --key): CHALLENGE (its id, the challenger's id or
    name), or the oldest pending; waits for one when none is pending."""
    conn = Conn(server, tls, ca, server_key)
    conn.hostport  # noqa: B018 - a bad HOST:PORT is a usage error before anything connects

    async def main() -> None:
        from seabattle.client.wire import RequestFailed

        async with open_client(conn, key=key, name=name) as client:
            chosen = await _incoming(client, which, wait)
            try:
                await client.decline(chosen, reason)
            except RequestFailed as e:
                raise click.ClickException(f"{server} refused: {e}") from None
            click.echo(f"declined {_describe(chosen)}")

    run_client(conn, main)
