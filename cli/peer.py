"""``seabattle host`` and ``seabattle join``: peer play, no server; both seats sign the record."""

from __future__ import annotations

import random
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import trio
from seabattle.bots.strategies import STRATEGIES

from .common import (
    HANDSHAKE_TIMEOUT_OPTION,
    PORT,
    _hostport,
    _rules_arg,
    _timed_out,
    _unwrap,
    address_arg,
    console,
    handshake_timeout,
    key_file_arg,
)
from .engine import MOVE_TIME, engine_option_help, started_engine
from .play import LINE_OPTION, save_path

if TYPE_CHECKING:
    from seabattle.engine.base import Engine

    from .tui import GameUI

__all__ = ["host_cmd", "join_cmd"]


def _peer_player(
    bot_name: str | None,
    seed: int | None,
    ui: GameUI | None = None,
    engine: Engine | None = None,
    seat: int = 0,
) -> Any:
    from seabattle.bots.strategies import make_strategy
    from seabattle.client.peer import BotPlayer

    if engine is not None:
        from seabattle.engine.bridge import EnginePlayer

        return EnginePlayer(engine, seat, random.Random(seed) if seed is not None else None)
    if bot_name is None:
        from seabattle.cli.human import ConsolePlayer

        return ConsolePlayer(console, ui=ui)
    rng = random.Random(seed) if seed is not None else None
    return BotPlayer(make_strategy(bot_name), rng)


def _peer_reporter(
    verbose: bool, human: bool, say: Callable[[str], None] = console.print
) -> Callable[[str, Any], None] | None:
    if human and not verbose:
        return None  # the terminal player tells its person everything already

    def report(kind: str, data: Any) -> None:
        if kind == "firing":
            say(f"game {data['game']}: seat {data['first']} fires first")
        elif kind == "game_over":
            o = data["outcome"]
            say(f"game {data['game']} over: winner seat {o['winner']} ({o['reason']})")
        elif verbose and kind == "result":
            cells = ", ".join(c.label() for c in data["cells"])
            v = data["verdict"]
            res = [r.result.value for r in v.results] or [f"total {v.total}"]
            say(f"  {cells}: {', '.join(map(str, res))}")

    return report


def _one_player(bot_name: str | None, engine_spec: str | None, matches: int) -> None:
    if bot_name is not None and engine_spec is not None:
        raise click.UsageError("give --bot or --engine, not both")
    if matches > 1 and bot_name is None and engine_spec is None:
        raise click.UsageError("--matches is for a --bot or an --engine")


async def _told(player: Any) -> None:
    """An engine hears the end of the match's last game before anything else."""
    flush = getattr(player, "flush", None)
    if flush is not None:
        await flush()


def _numbered(save: str | None, i: int, n: int) -> str | None:
    """Where match ``i`` (from 1) of ``n`` is saved: ``--save`` itself for one match, else
    ``NAME-i.EXT``."""
    if save is None or n == 1:
        return save
    path = Path(save)
    return str(path.with_name(f"{path.stem}-{i}{path.suffix}"))


def _finish_all(results: list[Any], save: str | None, players: list[Any]) -> None:
    """Each match's end, in order (the exit status is 1 if a record does not verify)."""
    failed = False
    for i, (result, player) in enumerate(zip(results, players, strict=False), 1):
        if len(results) > 1:
            console.print(f"match {i} of {len(results)}:")
        try:
            _finish_peer(result, _numbered(save, i, len(results)), player)
        except SystemExit:
            failed = True
    if failed:
        sys.exit(1)


def _human(bot_name: str | None, engine_spec: str | None) -> bool:
    """Whether a person plays this side (neither a bot nor an engine)."""
    return bot_name is None and engine_spec is None


def _runner(bot_name: str | None, line: bool) -> Callable[[Callable[..., Any]], Any]:
    """How a peer command runs: a person at a terminal on the game screen, else ``trio.run``."""
    from seabattle.cli.tui import screen_wanted

    if bot_name is not None or not screen_wanted(line):
        return trio.run
    from seabattle.cli.screen import run

    screen: Callable[[Callable[..., Any]], Any] = run
    return screen


def _finish_peer(result: Any, save: str | None, player: Any = None) -> None:
    from seabattle.protocol.record import dump_record

    outcome = "won" if result.won else "drawn" if result.won is None else "lost"
    summary = result.match.to_dict()
    wins, seat = summary["wins"], result.seat
    console.print(
        f"match {outcome}: {wins[seat]}-{wins[1 - seat]} in games, "
        f"{summary['games']} game(s) played; scores {summary['scores']}"
    )
    for fault in getattr(player, "faults", ()):
        console.print(f"engine fault, {fault.line()}: the game was resigned")
    status = "[green]verifies[/green]" if result.report.ok else f"[red]{result.report.reason}[/red]"
    console.print(f"record signed by both seats: {status}")
    if save:
        Path(save).write_bytes(dump_record(result.signed))
        console.print(f"record saved to {save}")
    if not result.report.ok:
        sys.exit(1)


def _run_peer(
    play: Callable[..., Awaitable[Any]],
    other: str,
    runner: Callable[[Callable[..., Any]], Any] = trio.run,
    address: str | None = None,
) -> Any:
    """Run a peer match (by ``runner``: ``trio.run`` or the game screen's); a person leaving, or
    the other side going away, ends it with a message. ``address``: the host's, when joining."""
    from seabattle.cli.tui import Quit
    from seabattle.client.peer import NotAHost, PeerCheated
    from seabattle.client.wire import ConnectionClosed, HandshakeTimeout

    try:
        return runner(play)
    except BaseException as raised:
        e = _unwrap(raised)
        if isinstance(e, Quit | KeyboardInterrupt):
            console.print("you left the match: it has no record")
            sys.exit(1)
        if isinstance(e, HandshakeTimeout):
            raise click.ClickException(_timed_out(e)) from None
        if isinstance(e, NotAHost):
            raise click.ClickException(
                f"{address} is a seabattle server, not a hosting peer: play on it with"
                f" seabattle play --server {address}, or seabattle bot --server {address}"
            ) from None
        if isinstance(e, ConnectionClosed):
            raise click.ClickException(f"{other} left before the end of the match ({e})") from None
        if isinstance(e, PeerCheated):
            raise click.ClickException(f"{other} broke the protocol: {e}") from None
        if isinstance(e, OSError):
            raise e from None
        raise


#: ``--bot``: a strategy by name (a mistyped one is a usage error that lists them).
_BOT = click.option(
    "--bot",
    "bot_name",
    type=click.Choice(list(STRATEGIES)),
    default=None,
    help="Let a bot strategy play this side.",
)
_ENGINE = click.option("--engine", "engine_spec", default=None, help=engine_option_help)


async def _started(spec: str, move_time: float, say: Callable[[str], None]) -> Engine:
    """The engine ``spec`` names, started; a failure to start is the command's error."""
    engine, hello = await started_engine(spec, move_time=move_time)
    say(f"engine {hello.name}" + (f" by {hello.author}" if hello.author else ""))
    return engine


_MATCHES = click.option(
    "--matches",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="With --bot or --engine: play this many matches in a row (--save FILE saves FILE-1...).",
)
_KEY = click.option(
    "--key",
    default=None,
    callback=key_file_arg,
    help="Identity key file, created if missing (a guest key if omitted).",
)
_SAVE = click.option(
    "--save",
    default=None,
    type=click.Path(dir_okay=False),
    callback=save_path,
    help="Save the record.",
)


@click.command("host")
@click.option("--port", default=0, show_default=True, type=PORT, help="0 picks a free port.")
@click.option("--bind", default="127.0.0.1", show_default=True)
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@_BOT
@_ENGINE
@MOVE_TIME
@_MATCHES
@_KEY
@_SAVE
@click.option("--seed", default=None, type=int)
@click.option("-v", "--verbose", is_flag=True)
@LINE_OPTION
def host_cmd(
    port: int,
    bind: str,
    rules_: str,
    bot_name: str | None,
    engine_spec: str | None,
    move_time: float,
    matches: int,
    key: str | None,
    save: str | None,
    seed: int | None,
    verbose: bool,
    line: bool,
) -> None:
    """Host a peer match (no server): wait for one joiner and play (--matches: again, on the
    same port)."""
    from seabattle.client.peer import host

    rules = _rules_arg(rules_)
    _one_player(bot_name, engine_spec, matches)
    players: list[Any] = []

    async def run(ui: GameUI | None = None) -> Any:
        say = console.print if ui is None else ui.say
        engine = None if engine_spec is None else await _started(engine_spec, move_time, say)
        results = []
        bound = port
        try:
            for _ in range(matches):
                player = _peer_player(bot_name, seed, ui, engine, seat=0)
                players.append(player)
                result, bound = await hosted(player, say, bound)
                results.append(result)
                await _told(player)
        finally:
            if engine is not None:
                await engine.close()
        return results

    async def hosted(player: Any, say: Callable[[str], None], at: int) -> tuple[Any, int]:
        async with trio.open_nursery() as nursery:
            box: list[Any] = []

            async def serve(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                box.append(
                    await host(
                        player,
                        rules=rules,
                        port=at,
                        bind=bind,
                        key=key,
                        on_event=_peer_reporter(verbose, _human(bot_name, engine_spec), say),
                        task_status=task_status,
                    )
                )

            addr = await nursery.start(serve)
            say(f"hosting {rules.name} on {addr[0]}:{addr[1]}; waiting for a joiner")
        return box[0], addr[1]

    try:
        results = _run_peer(run, "the joiner", _runner(bot_name or engine_spec, line))
    except OSError as e:
        # Before anyone joined: the port is taken, or --bind is no address of this machine.
        raise click.ClickException(f"cannot listen on {bind}:{port}: {e.strerror or e}") from None
    _finish_all(results, save, players)


@click.command("join")
@click.argument("address", callback=address_arg)
@_BOT
@_ENGINE
@MOVE_TIME
@_MATCHES
@_KEY
@click.option("--name", default="peer", show_default=True)
@_SAVE
@click.option("--seed", default=None, type=int)
@click.option("-v", "--verbose", is_flag=True)
@HANDSHAKE_TIMEOUT_OPTION
@LINE_OPTION
def join_cmd(
    address: str,
    bot_name: str | None,
    engine_spec: str | None,
    move_time: float,
    matches: int,
    key: str | None,
    name: str,
    save: str | None,
    seed: int | None,
    verbose: bool,
    line: bool,
) -> None:
    """Join a peer match hosted at ADDRESS (HOST:PORT) (--matches: that many in a row)."""
    from seabattle.client.peer import join

    _one_player(bot_name, engine_spec, matches)
    h, p = _hostport(address)
    timeout = handshake_timeout()
    # Connected before the game screen comes up: an unreachable host is one line, not a screen
    # drawn and taken away again. (A probe connection would not do: the host takes the first
    # connection that reaches it as its joiner.)
    try:
        sock = socket.create_connection((h, p), timeout=timeout)
    except TimeoutError:
        raise click.ClickException(
            f"{address} did not accept the connection within {timeout:g} s"
            " (nothing answers there: check the address and any firewall)"
        ) from None
    except OSError as e:
        raise click.ClickException(f"cannot reach {address}: {e.strerror or e}") from None
    sock.setblocking(False)

    async def connected(host: str, port: int) -> trio.abc.Stream:
        return trio.SocketStream(trio.socket.from_stdlib_socket(sock))

    players: list[Any] = []

    async def again(host: str, port: int) -> trio.abc.Stream:
        # The next match of a series: the host listens again once its last match is over,
        # which may be a moment after ours.
        with trio.move_on_after(timeout):
            while True:
                try:
                    return await trio.open_tcp_stream(host, port)
                except OSError:
                    await trio.sleep(0.05)
        raise click.ClickException(f"{address} did not host match {len(players)} in {timeout:g} s")

    async def run(ui: GameUI | None = None) -> Any:
        say = console.print if ui is None else ui.say
        engine = None if engine_spec is None else await _started(engine_spec, move_time, say)
        results = []
        try:
            for i in range(matches):
                player = _peer_player(bot_name, seed, ui, engine, seat=1)
                players.append(player)
                result = await join(
                    player,
                    h,
                    p,
                    key=key,
                    name=name,
                    on_event=_peer_reporter(verbose, _human(bot_name, engine_spec), say),
                    connect=connected if i == 0 else again,
                    handshake_timeout=timeout,
                )
                results.append(result)
                await _told(player)
        finally:
            if engine is not None:
                await engine.close()
        return results

    try:
        results = _run_peer(run, "the host", _runner(bot_name or engine_spec, line), address)
    except OSError as e:
        failed = e.strerror or e
        raise click.ClickException(f"the connection to {address} failed: {failed}") from None
    finally:
        sock.close()
    _finish_all(results, save, players)
