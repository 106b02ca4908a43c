"""``seabattle watch``, ``ladder``, ``matches`` and ``record fetch``: what a server shows anyone.

Each is a thin shell over one request of the scripting API (:meth:`Client.watch`,
:meth:`~Client.ladder`, :meth:`~Client.list` or :meth:`~Client.running`,
:meth:`~Client.get_record`) on a connection opened
by :func:`.common.open_client`; a refusal (an unknown match, a private one) is one line on
stderr and exit status 1, as is anything :func:`.common.run_client` catches.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from seabattle.protocol import messages as m

from .common import (
    Conn,
    address_arg,
    connection_options,
    console,
    key_file_arg,
    open_client,
    run_client,
)

if TYPE_CHECKING:
    from seabattle.client.api import Client

__all__ = ["fetch_record", "ladder", "matches", "record", "save_record", "watch"]


def _match_id(value: str) -> bytes:
    """A match id as the commands take it: 32 hex digits."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise click.BadParameter(f"{value!r} is not a match id (32 hex digits)")
    return raw


def _run(
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    body: Callable[[Client], Awaitable[None]],
) -> None:
    """``body(client)`` on a connection to ``server``; a refused request is one line."""
    from seabattle.client.wire import RequestFailed

    conn = Conn(server, tls, ca, server_key)

    async def run() -> None:
        async with open_client(conn, key=key, name="seabattle", reconnect_for=0) as client:
            try:
                await body(client)
            except RequestFailed as e:
                raise click.ClickException(f"{server} refused: {e}") from None

    run_client(conn, run)


_SERVER = click.option(
    "--server", required=True, callback=address_arg, help="HOST:PORT of a server."
)
_KEY = click.option(
    "--key",
    default=None,
    callback=key_file_arg,
    help="Identity key file, created if missing (a guest key if omitted).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _plain(v: Any) -> Any:
    """``v`` as JSON-ready values: byte strings in hex, tuples as lists."""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


# ================================================================================================
# watch
# ================================================================================================


def _event_json(msg: m.Message) -> dict[str, Any]:
    out = _plain(m.encode(msg))
    # The commitments (a leaf per cell) let a player check openings; to a reader of the stream
    # they are thousands of digests that say nothing.
    out.pop("commitments", None)
    if isinstance(out.get("view"), dict):
        out["view"].pop("commitments", None)
    return dict(out)


@click.command()
@click.argument("match_id", metavar="MATCH")
@_SERVER
@connection_options
@_KEY
@_JSON
@click.option("--plain", is_flag=True, help="One line of text per event, even on a terminal.")
def watch(
    match_id: str,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    as_json: bool,
    plain: bool,
) -> None:
    """Watch the running public match MATCH (its id in hex), from its snapshot until it ends:
    both boards with the names, the clock and whose turn it is, drawn again at every event (on
    a terminal), or one line per public event (--plain, or off a terminal; --json: one JSON
    object)."""
    from .tui import watch_match

    mid = _match_id(match_id)

    async def body(client: Client) -> None:
        async with client.watch(mid) as events:
            if not as_json:
                ended = await watch_match(events, board=not plain, console=console, echo=click.echo)
                if ended:
                    return
            async for msg in events:
                click.echo(json.dumps(_event_json(msg)))
                if isinstance(msg, m.MatchOver) or (
                    isinstance(msg, m.Snapshot) and msg.view.get("over") is True
                ):
                    return
        raise click.ClickException(f"{server} closed the connection before the match ended")

    _run(server, tls, ca, server_key, key, body)


# ================================================================================================
# ladder, matches
# ================================================================================================


@click.command()
@_SERVER
@connection_options
@_KEY
@_JSON
@click.option("--top", default=None, type=click.IntRange(1), help="Show only the first N rows.")
def ladder(
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    as_json: bool,
    top: int | None,
) -> None:
    """The server's rating ladder, best first."""

    async def body(client: Client) -> None:
        rows = (await client.ladder())[:top]
        if as_json:
            click.echo(json.dumps(_plain(rows), indent=2))
            return
        table = Table(title=f"Ladder of {server}")
        for col in ("#", "player", "name", "rating", "rd", "games", "won", "lost", "drawn"):
            table.add_column(col, no_wrap=True, justify="right" if col != "name" else "left")
        for i, r in enumerate(rows, 1):
            table.add_row(
                str(i),
                str(r.get("player", ""))[:16],
                str(r.get("name", "")),
                *(str(r.get(k, "")) for k in ("rating", "rd", "games", "wins", "losses", "draws")),
            )
        if not rows:
            table.caption = "no rated matches yet"
        console.print(table)

    _run(server, tls, ca, server_key, key, body)


@click.command()
@_SERVER
@connection_options
@_KEY
@_JSON
@click.option(
    "--running",
    is_flag=True,
    help="The running public matches instead, with who plays (watch one with seabattle watch).",
)
def matches(
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    as_json: bool,
    running: bool,
) -> None:
    """The open public matches, waiting for a second player (join one with play --join ID), or
    with --running the matches being played that anyone may watch."""

    async def body(client: Client) -> None:
        rows = await (client.running() if running else client.list())
        if as_json:
            click.echo(json.dumps(_plain(rows), indent=2))
        elif running:
            _running_table(server, rows)
        else:
            _open_table(server, rows)

    _run(server, tls, ca, server_key, key, body)


def _open_table(server: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"Open matches on {server}")
    for col in ("match", "rules", "mode", "host"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        rules = r.get("rules")
        name = rules.get("name", "?") if isinstance(rules, dict) else "?"
        mid = r.get("match")
        host = str(r.get("host", ""))[:16]
        # The host's display name where the server gives it (spec 6.9), its id beside it.
        if isinstance(r.get("name"), str):
            host = f"{r['name']} ({host[:8]})"
        table.add_row(
            mid.hex() if isinstance(mid, bytes) else str(mid),
            str(name),
            str(r.get("mode", "")),
            host,
        )
    if not rows:
        table.caption = "none open: seabattle play --open opens a public one"
    else:
        table.caption = "take one: seabattle play --join MATCH"
    console.print(table)


def _running_table(server: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"Running matches on {server}")
    # The match id whole (watch takes it), the rest wrapped to fit: the mode is in --json.
    table.add_column("match", no_wrap=True)
    table.add_column("players")
    table.add_column("rules")
    table.add_column("game", justify="right")
    table.add_column("watching", justify="right")
    for r in rows:
        mid = r.get("match")
        names = r.get("names")
        ids = r.get("players")
        if isinstance(names, list) and len(names) == 2:
            players = f"{names[0]} vs {names[1]}"
        elif isinstance(ids, list) and len(ids) == 2:
            players = f"{str(ids[0])[:8]} vs {str(ids[1])[:8]}"
        else:
            players = "?"
        table.add_row(
            mid.hex() if isinstance(mid, bytes) else str(mid),
            players,
            str(r.get("rules", "?")),
            str(r.get("game", "")),
            str(r.get("spectators", "")),
        )
    if not rows:
        table.caption = "no public match is being played"
    else:
        table.caption = f"watch one: seabattle watch MATCH --server {server}"
    console.print(table)


# ================================================================================================
# record fetch
# ================================================================================================


async def fetch_record(client: Client, match_id: bytes, out: Path | None) -> dict[str, Any]:
    """Fetch the signed record of ``match_id`` and write its canonical bytes to ``out`` (if
    given); the record. A file that cannot be written is a one-line error."""
    from seabattle.protocol.record import dump_record

    signed = await client.get_record(match_id)
    if out is not None:
        try:
            out.write_bytes(dump_record(signed))
        except OSError as e:
            raise click.ClickException(f"cannot write {out}: {e.strerror or e}") from None
    return signed


async def save_record(client: Client, match_id: bytes, out: Path | None) -> dict[str, Any]:
    """Fetch the signed record of ``match_id``, write its canonical bytes to ``out`` (if given)
    and verify it, pinned to the server's key; the verification report (``VerifyReport.to_dict``,
    with ``match`` and ``file``)."""
    from seabattle.protocol.record import verify_record

    signed = await fetch_record(client, match_id, out)
    report = verify_record(signed, referee_key=client.server_key).to_dict()
    report["match"] = match_id.hex()
    report["file"] = None if out is None else str(out)
    return report


def summary(report: dict[str, Any]) -> str:
    """One line on a fetched record: its games, shots and signatures, or why it fails."""
    where = f" -> {report['file']}" if report.get("file") else ""
    if not report["ok"]:
        return f"FAIL record {report['match']}{where}: {report['reason']}"
    games = report.get("games", [])
    shots = sum(g["shots"] for g in games)
    sigs = ", ".join(s["role"] for s in report.get("signatures", []) if s["ok"])
    head = f"OK   record {report['match']}{where}"
    return f"{head}: {len(games)} game(s), {shots} shots, signed by {sigs}"


@click.group()
def record() -> None:
    """Signed match records on a server."""


@record.command("fetch")
@click.argument("match_id", metavar="ID")
@_SERVER
@connection_options
@_KEY
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write the record here.")
@_JSON
def fetch(
    match_id: str,
    server: str,
    tls: bool,
    ca: str | None,
    server_key: str | None,
    key: str | None,
    out: str | None,
    as_json: bool,
) -> None:
    """Fetch the signed record of finished match ID, verify it (signed by this server), and write
    its canonical bytes to --out or print a summary; exit 1 if it does not verify."""
    mid = _match_id(match_id)
    box: list[dict[str, Any]] = []

    async def body(client: Client) -> None:
        box.append(await save_record(client, mid, None if out is None else Path(out)))

    if out is not None and not Path(out).parent.is_dir():
        raise click.BadParameter(f"no directory {str(Path(out).parent)!r}", param_hint="--out")
    _run(server, tls, ca, server_key, key, body)
    report = box[0]
    if as_json:
        click.echo(json.dumps(report, indent=2, default=lambda b: b.hex()))
    else:
        click.echo(summary(report))
    if not report["ok"]:
        raise SystemExit(1)
