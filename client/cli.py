"""The ``seabattle`` command line: rules, serve, bot, verify, demo, and peer play (host/join).

Every command is a thin shell over the library: ``api`` for servers, ``peer`` for peer play,
``bots`` for strategies, ``protocol.record`` for verification. Exit codes: 0 success, 1 a verified
failure (a record that does not verify, a lost connection), 2 a usage error (click's own).
"""

from __future__ import annotations

import functools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import trio
from rich.console import Console
from rich.table import Table
from seabattle.protocol.rules import PRESETS, BadRules, RuleSet, preset, rules_from_dict

__all__ = ["main"]

console = Console()


def _rules_arg(value: str) -> RuleSet:
    """``--rules`` takes a preset name or a JSON map (``{"preset": "classic", "radar": true}``)."""
    value = value.strip()
    try:
        if value.startswith("{"):
            return rules_from_dict(json.loads(value))
        return preset(value)
    except (BadRules, json.JSONDecodeError) as e:
        raise click.BadParameter(str(e), param_hint="--rules") from None


def _rules_map(rules: RuleSet) -> dict[str, Any]:
    return {"preset": rules.name} if rules.name in PRESETS else rules.to_dict()


def _hostport(value: str) -> tuple[str, int]:
    h, sep, p = value.rpartition(":")
    if not sep or not p.isdigit():
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    return h or "127.0.0.1", int(p)


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
    from seabattle.client.render import describe_rules

    for k, v in describe_rules(r):
        table.add_row(k, v)
    console.print(table)


# ================================================================================================
# serve
# ================================================================================================


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7010, show_default=True, type=int)
@click.option(
    "--db", default="seabattle.db", show_default=True, help="SQLite database file (WAL mode)."
)
@click.option(
    "--key", default="server.key", show_default=True, help="Identity key file (created if missing)."
)
@click.option("--no-guests", is_flag=True, help="Refuse unregistered keys.")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False))
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False))
@click.option(
    "--json",
    "--json-status",
    "json_status",
    is_flag=True,
    help="Status as JSON lines on stdout: one when listening, one with totals on shutdown.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines on stderr: text, or one JSON object per line.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics at /metrics on this port (0: any free port, printed).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds.",
)
def serve(
    host: str,
    port: int,
    db: str,
    key: str,
    no_guests: bool,
    tls_cert: str | None,
    tls_key: str | None,
    json_status: bool,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run a referee server."""
    try:
        from seabattle.server import app
    except ImportError as e:
        raise click.ClickException(f"the server is not available: {e}") from None
    app.main(
        host=host,
        port=port,
        db=db,
        key=key,
        guests=not no_guests,
        tls_cert=tls_cert,
        tls_key=tls_key,
        json_status=json_status,
        log_format=log_format,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
    )


# ================================================================================================
# verify
# ================================================================================================


def _verify_file(path: str) -> dict[str, Any]:
    from seabattle.protocol.record import RecordError, load_record, verify_record

    try:
        signed = load_record(Path(path).read_bytes())
    except (OSError, RecordError) as e:
        return {"file": path, "ok": False, "reason": f"unreadable: {e}"}
    report = verify_record(signed).to_dict()
    report["file"] = path
    return report


@main.command()
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def verify(records: tuple[str, ...], as_json: bool) -> None:
    """Verify signed match records from themselves alone; exit 0 only if all verify."""
    reports = [_verify_file(p) for p in records]
    if as_json:
        click.echo(json.dumps(reports, indent=2, default=lambda b: b.hex()))
    else:
        for r in reports:
            if r["ok"]:
                games = r.get("games", [])
                shots = sum(g["shots"] for g in games)
                sigs = ", ".join(s["role"] for s in r.get("signatures", []) if s["ok"])
                console.print(
                    f"[green]OK[/green]   {r['file']}: {len(games)} game(s), {shots} shots, "
                    f"signed by {sigs}"
                )
            else:
                console.print(f"[red]FAIL[/red] {r['file']}: {r['reason']}")
    if not all(r["ok"] for r in reports):
        sys.exit(1)


# ================================================================================================
# bot
# ================================================================================================


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


@main.command()
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
    try:
        trio.run(_bot_server, host, port, strategy, rules, mode, games, key, save, name)
    except OSError as e:
        raise click.ClickException(f"cannot reach {server}: {e}") from None


# ================================================================================================
# peer play
# ================================================================================================


def _peer_player(bot_name: str | None, seed: int | None) -> Any:
    from seabattle.client.bots import make_strategy
    from seabattle.client.peer import BotPlayer

    if bot_name is None:
        from seabattle.client.human import ConsolePlayer

        return ConsolePlayer(console)
    rng = random.Random(seed) if seed is not None else None
    return BotPlayer(make_strategy(bot_name), rng)


def _peer_reporter(verbose: bool, human: bool) -> Callable[[str, Any], None] | None:
    if human and not verbose:
        return None  # the terminal player tells its person everything already

    def report(kind: str, data: Any) -> None:
        if kind == "firing":
            console.print(f"game {data['game']}: seat {data['first']} fires first")
        elif kind == "game_over":
            o = data["outcome"]
            console.print(f"game {data['game']} over: winner seat {o['winner']} ({o['reason']})")
        elif verbose and kind == "result":
            cells = ", ".join(c.label() for c in data["cells"])
            v = data["verdict"]
            res = [r.result.value for r in v.results] or [f"total {v.total}"]
            console.print(f"  {cells}: {', '.join(map(str, res))}")

    return report


def _finish_peer(result: Any, save: str | None) -> None:
    from seabattle.protocol.record import dump_record

    outcome = "won" if result.won else "drawn" if result.won is None else "lost"
    summary = result.match.to_dict()
    wins, seat = summary["wins"], result.seat
    console.print(
        f"match {outcome}: {wins[seat]}-{wins[1 - seat]} in games, "
        f"{summary['games']} game(s) played; scores {summary['scores']}"
    )
    status = "[green]verifies[/green]" if result.report.ok else f"[red]{result.report.reason}[/red]"
    console.print(f"record signed by both seats: {status}")
    if save:
        Path(save).write_bytes(dump_record(result.signed))
        console.print(f"record saved to {save}")
    if not result.report.ok:
        sys.exit(1)


def _run_peer(play: Callable[[], Awaitable[Any]], other: str) -> Any:
    """Run a peer match; a person leaving, or the other side going away, ends it with a message."""
    from seabattle.client.peer import PeerCheated
    from seabattle.client.tui import Quit
    from seabattle.client.wire import ConnectionClosed

    try:
        return trio.run(play)
    except BaseException as raised:
        e = _unwrap(raised)
        if isinstance(e, Quit | KeyboardInterrupt):
            console.print("you left the match: it has no record")
            sys.exit(1)
        if isinstance(e, ConnectionClosed):
            raise click.ClickException(f"{other} left before the end of the match ({e})") from None
        if isinstance(e, PeerCheated):
            raise click.ClickException(f"{other} broke the protocol: {e}") from None
        if isinstance(e, OSError):
            raise e from None
        raise


def _unwrap(e: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (trio's nurseries wrap them)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


@main.command("host")
@click.option("--port", default=0, show_default=True, type=int, help="0 picks a free port.")
@click.option("--bind", default="127.0.0.1", show_default=True)
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--bot", "bot_name", default=None, help="Let a bot strategy play this side.")
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--save", default=None, type=click.Path(dir_okay=False), help="Save the record.")
@click.option("--seed", default=None, type=int)
@click.option("-v", "--verbose", is_flag=True)
def host_cmd(
    port: int,
    bind: str,
    rules_: str,
    bot_name: str | None,
    key: str | None,
    save: str | None,
    seed: int | None,
    verbose: bool,
) -> None:
    """Host a peer match (no server): wait for one joiner and play."""
    from seabattle.client.peer import host

    rules = _rules_arg(rules_)
    player = _peer_player(bot_name, seed)

    async def run() -> Any:
        async with trio.open_nursery() as nursery:
            box: list[Any] = []

            async def serve(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                box.append(
                    await host(
                        player,
                        rules=rules,
                        port=port,
                        bind=bind,
                        key=key,
                        on_event=_peer_reporter(verbose, bot_name is None),
                        task_status=task_status,
                    )
                )

            addr = await nursery.start(serve)
            console.print(f"hosting {rules.name} on {addr[0]}:{addr[1]}; waiting for a joiner")
        return box[0]

    _finish_peer(_run_peer(run, "the joiner"), save)


@main.command("join")
@click.argument("address")
@click.option("--bot", "bot_name", default=None, help="Let a bot strategy play this side.")
@click.option("--key", default=None, help="Identity key file (a guest key if omitted).")
@click.option("--name", default="peer", show_default=True)
@click.option("--save", default=None, type=click.Path(dir_okay=False), help="Save the record.")
@click.option("--seed", default=None, type=int)
@click.option("-v", "--verbose", is_flag=True)
def join_cmd(
    address: str,
    bot_name: str | None,
    key: str | None,
    name: str,
    save: str | None,
    seed: int | None,
    verbose: bool,
) -> None:
    """Join a peer match hosted at ADDRESS (HOST:PORT)."""
    from seabattle.client.peer import join

    h, p = _hostport(address)
    player = _peer_player(bot_name, seed)
    reporter = _peer_reporter(verbose, bot_name is None)
    try:
        result = _run_peer(
            lambda: join(player, h, p, key=key, name=name, on_event=reporter), "the host"
        )
    except OSError as e:
        raise click.ClickException(f"cannot reach {address}: {e}") from None
    _finish_peer(result, save)


@main.command()
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


# ================================================================================================
# demo
# ================================================================================================


async def _demo_server(rules: RuleSet, tmp: str) -> dict[str, Any]:
    """Two bots play one match through an in-process server; fetch and verify the record."""
    from seabattle.client.api import connect, play_match
    from seabattle.client.bots import make_strategy
    from seabattle.protocol.record import verify_record
    from seabattle.server import app

    db, key = str(Path(tmp) / "demo.db"), str(Path(tmp) / "server.key")
    async with trio.open_nursery() as nursery:
        addr = await nursery.start(
            functools.partial(app.serve, "127.0.0.1", 0, db_path=db, key_path=key)
        )
        host, port = addr
        async with connect(host, port, name="alice") as a, connect(host, port, name="bob") as b:
            rmap = _rules_map(rules)
            results: list[Any] = [None, None]

            async def play(i: int, c: Any, strategy: str) -> None:
                match = await c.quick(rmap, "blind")
                results[i] = await play_match(match, make_strategy(strategy))

            async with trio.open_nursery() as games:
                games.start_soon(play, 0, a, "density")
                games.start_soon(play, 1, b, "hunt")
            signed = await a.get_record(results[0].match_id)
        nursery.cancel_scope.cancel()
    report = verify_record(signed)
    seats = {results[0].seat: "density", results[1].seat: "hunt"}
    return {
        "via": "server",
        "result": results[0].result,
        "report": report,
        "signed": signed,
        "seats": seats,
    }


async def _demo_peer(rules: RuleSet) -> dict[str, Any]:
    """Two bots play one peer match over loopback TCP; both sign; the record is verified."""
    from seabattle.client.bots import make_strategy
    from seabattle.client.peer import BotPlayer, host, join

    box: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def serve(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            box.append(
                await host(
                    BotPlayer(make_strategy("density")), rules=rules, task_status=task_status
                )
            )

        addr = await nursery.start(serve)
        await join(BotPlayer(make_strategy("hunt")), addr[0], addr[1], name="bob")
    res = box[0]
    return {
        "via": "peer",
        "result": res.match.to_dict(),
        "report": res.report,
        "signed": res.signed,
        "seats": {0: "density", 1: "hunt"},
    }


@main.command()
@click.option("--rules", "rules_", default="classic", show_default=True, help="Preset or JSON.")
@click.option("--peer", is_flag=True, help="Play peer to peer even when the server is available.")
@click.option("--save", default=None, type=click.Path(dir_okay=False), help="Save the record.")
def demo(rules_: str, peer: bool, save: str | None) -> None:
    """Play one bot match end to end, fetch its signed record and verify it."""
    from seabattle.protocol.record import dump_record

    rules = _rules_arg(rules_)
    t0 = time.monotonic()
    use_server = not peer and _server_available()
    with tempfile.TemporaryDirectory() as tmp:
        out = trio.run(_demo_server, rules, tmp) if use_server else trio.run(_demo_peer, rules)
    report = out["report"]
    result = out["result"]
    games = report.games
    shots = sum(g.shots for g in games)
    console.print(
        f"[bold]seabattle demo[/bold] ({out['via']}, rules {rules.name}): "
        f"density bot vs hunt bot, {len(games)} game(s), {shots} shots"
    )
    w = result.get("winner")
    seats = out["seats"]
    console.print(f"winner: {'a draw' if w is None else f'{seats[w]} bot (seat {w})'}")
    for g in games:
        o = g.outcome or {}
        console.print(
            f"  game {g.number}: first seat {g.first}, {g.shots} shots, {o.get('reason')}"
        )
    sigs = ", ".join(s["role"] for s in report.signatures if s["ok"])
    if report.ok:
        console.print(f"record [green]verifies[/green] (signed by {sigs})")
    else:
        console.print(f"record [red]does not verify[/red]: {report.reason}")
    if save:
        Path(save).write_bytes(dump_record(out["signed"]))
        console.print(f"record saved to {save}")
    console.print(f"done in {time.monotonic() - t0:.2f}s")
    if not report.ok:
        sys.exit(1)


def _server_available() -> bool:
    try:
        from seabattle.server import app
    except ImportError:
        return False
    return hasattr(app, "serve")


def _add_lazy_commands() -> None:
    # The load generator and the conformance suite live in their own modules; registering them
    # here keeps `seabattle --help` complete.
    from .bench import bench
    from .conformance import conformance

    main.add_command(bench)
    main.add_command(conformance)


_add_lazy_commands()
