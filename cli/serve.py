"""``seabattle serve`` and ``seabattle demo``: run a referee server, or show one match end to end.

The only commands that import ``seabattle.server``, and only inside the command, when it runs.
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import trio
from seabattle.protocol.rules import RuleSet

from .common import _rules_arg, _rules_map, console

__all__ = ["demo", "serve"]


def _settings() -> Any:
    try:
        from seabattle.server import settings
    except ImportError as e:
        raise click.ClickException(f"the server is not available: {e}") from None
    return settings


@click.command()
@click.option(
    "--config",
    "config",
    default=None,
    envvar="SEABATTLE_CONFIG",
    type=click.Path(dir_okay=False),
    help="A TOML file of settings (the keys --print-config shows); SEABATTLE_CONFIG too.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Print the effective settings (file, SEABATTLE_* variables, options) and exit.",
)
@click.option("--host", default=None, help="Address to listen on.")
@click.option("--port", default=None, type=int, help="Port (0: any free port).")
@click.option(
    "--db",
    default=None,
    help="SQLite database file (WAL mode, created owner-only), or a postgresql://user@host/db URL.",
)
@click.option(
    "--key",
    default=None,
    help="Identity key file (created if missing).",
)
@click.option(
    "--guests/--no-guests",
    default=None,
    help="Admit any key, or only keys registered with `seabattle keys add`.",
)
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False))
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False))
@click.option(
    "--json",
    "--json-status",
    "json_status",
    is_flag=True,
    default=None,
    help="Status as JSON lines on stdout: one when listening, one with totals on shutdown.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="Log lines on stderr: text, or one JSON object per line.",
)
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    help="Serve Prometheus metrics at /metrics on this port (0: any free port, printed).",
)
@click.option(
    "--metrics-host",
    default=None,
    help="Address the metrics endpoint binds.",
)
@click.option(
    "--node",
    default=None,
    help="This server's name among nodes sharing one database (each takes up its own matches).",
)
@click.option(
    "--cluster/--no-cluster",
    default=None,
    help="Join the other nodes on the database: pairing across nodes, redirects, failover"
    " (default: on PostgreSQL).",
)
@click.option(
    "--advertise",
    default=None,
    metavar="HOST:PORT",
    help="Where other nodes send players to reach this one (default: the address bound).",
)
@click.option(
    "--lease",
    type=float,
    default=None,
    help="Seconds after which another node takes over the matches of a node that went silent.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Server processes on this port (SO_REUSEPORT), one per core: each a node of one"
    " cluster on the database (default 1).",
)
@click.option(
    "--cpu-latency-us",
    type=int,
    default=None,
    metavar="US",
    help="Hold idle CPUs to this wake-up latency while serving (Linux PM QoS, needs root; 0:"
    " idle CPUs poll): faster round trips at human pace, for CPU spent idling.",
)
def serve(config: str | None, print_config: bool, **given: Any) -> None:
    """Run a referee server (one node of several, on PostgreSQL).

    Every option, and the server's limits (rate, max_clients, the timeouts, the journal...), may
    also come from the --config file (`port = 7010`) or the environment (SEABATTLE_PORT=7010);
    an option given here wins over both, a variable over the file. --print-config shows every
    setting with its default, or where its value came from.
    """
    settings = _settings()
    try:
        effective = settings.load(given, config=config)
    except settings.SettingsError as e:
        raise click.ClickException(str(e)) from None
    from seabattle.server import app

    if print_config:
        # app._redact: the one place that knows how a database URL hides its password.
        click.echo(settings.render(effective, redact=app._redact), nl=False)
        return
    app.main(**effective.main_kwargs())


#: The demo's two bots: the default (strongest) strategy against the density one.
_DEMO = ("best", "density")


async def _demo_server(rules: RuleSet, tmp: str) -> dict[str, Any]:
    """Two bots play one match through an in-process server; fetch and verify the record."""
    from seabattle.bots.play import play_match
    from seabattle.bots.strategies import make_strategy
    from seabattle.client.api import connect
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
                games.start_soon(play, 0, a, _DEMO[0])
                games.start_soon(play, 1, b, _DEMO[1])
            signed = await a.get_record(results[0].match_id)
        nursery.cancel_scope.cancel()
    report = verify_record(signed)
    seats = {results[0].seat: _DEMO[0], results[1].seat: _DEMO[1]}
    return {
        "via": "server",
        "result": results[0].result,
        "report": report,
        "signed": signed,
        "seats": seats,
    }


async def _demo_peer(rules: RuleSet) -> dict[str, Any]:
    """Two bots play one peer match over loopback TCP; both sign; the record is verified."""
    from seabattle.bots.strategies import make_strategy
    from seabattle.client.peer import BotPlayer, host, join

    box: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def serve(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            box.append(
                await host(BotPlayer(make_strategy(_DEMO[0])), rules=rules, task_status=task_status)
            )

        addr = await nursery.start(serve)
        await join(BotPlayer(make_strategy(_DEMO[1])), addr[0], addr[1], name="bob")
    res = box[0]
    return {
        "via": "peer",
        "result": res.match.to_dict(),
        "report": res.report,
        "signed": res.signed,
        "seats": {0: _DEMO[0], 1: _DEMO[1]},
    }


@click.command()
# russian: where best is more than density (on classic it plays density's own moves, STRENGTH.md).
@click.option("--rules", "rules_", default="russian", show_default=True, help="Preset or JSON.")
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
    for line in _demo_lines(rules, out):
        # One line each, never wrapped by the console: each is written to fit 80 columns.
        console.print(line, soft_wrap=True)
    if save:
        Path(save).write_bytes(dump_record(out["signed"]))
        console.print(f"record saved to {save}", soft_wrap=True, markup=False)
    console.print(f"done in {time.monotonic() - t0:.2f} s")
    if not report.ok:
        sys.exit(1)


def _demo_lines(rules: RuleSet, out: dict[str, Any]) -> list[str]:
    """What ``demo`` says of its match, in sentences, each line within 80 columns: who played
    whom, and how, who won and in how many of their own shots, and whether the record verifies.
    """
    from rich.markup import escape

    report, seats = out["report"], out["seats"]
    via = "through a server" if out["via"] == "server" else "peer to peer"
    lines = [
        f"[bold]seabattle demo[/bold]: the {_DEMO[0]} bot plays the {_DEMO[1]} bot, {via}",
        f"rules: {escape(rules.name[:48])} ({rules.rows} x {rules.cols}, {len(rules.fleet)} ships)",
    ]
    fired = _shots_by_seat(out["signed"])
    many = len(report.games) > 1
    for g in report.games:
        o = g.outcome or {}
        w: Any = o.get("winner")
        shots = fired.get(g.number, [0, 0])
        # Each bot named once a sentence: who fired first is said of the winner.
        first = ""
        if w in seats:
            said = f"{seats[w]} won in {shots[w]} shots against {seats[1 - w]}"
            if g.first in seats:
                first = "firing first" if g.first == w else "firing second"
        else:
            said = f"{_DEMO[0]} and {_DEMO[1]} drew, after {sum(shots)} shots"
        reason = str(o.get("reason", "")).replace("_", " ")
        why = ", ".join(x for x in (reason, first) if x)
        lines.append(f"{f'  game {g.number}: ' if many else ''}{said} ({why})")
    if many:
        w = out["result"].get("winner")
        wins = out["result"].get("wins") or [0, 0]
        if w in seats:
            lines.append(f"{seats[w]} won the match {wins[w]}-{wins[1 - w]} against {seats[1 - w]}")
        else:
            lines.append(f"the match between {_DEMO[0]} and {_DEMO[1]} is drawn")
    sigs = [s["role"] for s in report.signatures if s["ok"]]
    signed = (
        "the referee and both players"
        if sorted(sigs) == ["referee", "seat0", "seat1"]
        else "both players"
        if sorted(sigs) == ["seat0", "seat1"]
        else ", ".join(sigs) or "nobody"
    )
    if report.ok:
        lines.append(f"the signed record [green]verifies[/green]: signed by {signed}")
    else:
        lines.append(f"the record [red]does not verify[/red]: {report.reason[:50]}")
    return lines


def _shots_by_seat(signed: dict[str, Any]) -> dict[int, list[int]]:
    """Each game's shots fired by each seat, counted in the signed record."""
    out: dict[int, list[int]] = {}
    record = signed.get("record", {}) if isinstance(signed, dict) else {}
    for g in record.get("games", ()):
        n = [0, 0]
        for e in g.get("transcript", ()):
            if isinstance(e, dict) and e.get("in") == "fire" and e.get("seat") in (0, 1):
                n[e["seat"]] += 1
        out[g.get("number", 0)] = n
    return out


def _server_available() -> bool:
    try:
        from seabattle.server import app
    except ImportError:
        return False
    return hasattr(app, "serve")
