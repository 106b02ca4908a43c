"""The ``seabattle conformance`` command: run the suite against HOST:PORT, print the table or
JSON, and exit with status 0 only when no case failed.
"""

from __future__ import annotations

import json
import shlex

import click
import trio

from .results import CaseResult
from .runner import _STYLE, render_table, run_suite
from .suite import CASES

__all__ = ["conformance"]


def _parse_target(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter("expected HOST:PORT", param_hint="TARGET")
    if not 1 <= int(port) <= 65535:
        raise click.BadParameter(f"port {port} is not in 1..65535", param_hint="TARGET")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command("conformance")
@click.argument("target", nargs=-1, required=True)
@click.option(
    "--serve",
    is_flag=True,
    help="Test a client instead: TARGET is its command ({host} and {port} are substituted).",
)
@click.option("--peer", is_flag=True, help="With --serve: the command is a joining peer (6.7).")
@click.option(
    "--settle", default=0.5, show_default=True, help="With --serve: seconds to wait for a cosign."
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of a table.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), help="Write JSON here.")
@click.option(
    "--only", multiple=True, help="Run only cases whose id or section starts with this (repeat)."
)
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait per message.")
@click.option("--list", "list_cases", is_flag=True, help="List the cases and exit.")
def conformance(
    target: tuple[str, ...],
    serve: bool,
    peer: bool,
    settle: float,
    as_json: bool,
    report_file: str | None,
    only: tuple[str, ...],
    timeout: float,
    list_cases: bool,
) -> None:
    """Test the server at TARGET (HOST:PORT) against spec/protocol.md, or with --serve the
    client that the command TARGET... starts (e.g. ``--serve -- seabattle bot --server
    {host}:{port}``): each case listens on a fresh port and starts the client against it.

    Exits with status 0 only when no case failed.
    """
    from .serve import CLIENT_CASES, command_launcher, run_client_suite

    if list_cases:
        for c in CASES if not serve else [c for c in CLIENT_CASES if c.peer == peer]:
            click.echo(f"{c.id:28} {c.section}: {c.title}")
        return
    if not serve and len(target) != 1:
        raise click.BadParameter("expected one HOST:PORT (or --serve CLIENT_CMD...)")
    cases = (
        [(c.id, c.section) for c in CASES]
        if not serve
        else [(c.id, c.section) for c in CLIENT_CASES if c.peer == peer]
    )
    if only and not any(i.startswith(o) or sec.startswith(o) for i, sec in cases for o in only):
        # A report of nothing would pass: a misspelt --only must not look like conformance.
        raise click.BadParameter(f"no case matches {', '.join(only)} (--list shows them)")
    if not serve:
        host, port = _parse_target(target[0])
        try:
            answered = trio.run(_reachable, host, port, timeout)
        except OSError as e:
            # Every case would fail the same way, each with its own trace: say it once.
            raise click.ClickException(f"cannot reach {target[0]}: {e.strerror or e}") from None
        if not answered:
            raise click.ClickException(
                f"{target[0]} accepted the connection but did not answer the handshake within"
                f" {timeout:g} s (--timeout)"
            )
    from rich.console import Console

    console = Console(stderr=as_json)

    def progress(r: CaseResult) -> None:
        if not as_json:
            console.print(f"[{_STYLE[r.outcome]}]{r.outcome.value:>15}[/] {r.id}")

    if serve:
        launcher = command_launcher(target)
        report = trio.run(
            lambda: run_client_suite(
                launcher,
                target=shlex.join(target),
                peer=peer,
                only=only,
                timeout=timeout,
                settle=settle,
                on_result=progress,
            )
        )
    else:
        report = trio.run(
            lambda: run_suite(host, port, only=only, timeout=timeout, on_result=progress)
        )
    data = report.to_dict()
    if report_file:
        with open(report_file, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        console.print(render_table(report))
    raise SystemExit(1 if report.failed else 0)


async def _reachable(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` answers a ``hello`` (with anything: judging it is the suite's) within
    ``timeout`` seconds; raises ``OSError`` if it cannot be reached at all."""
    from seabattle.protocol import messages as m
    from seabattle.protocol.codec import encode_frame
    from seabattle.protocol.session import SUPPORTED_VERSIONS

    from .probe import AGENT

    with trio.move_on_after(timeout):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(encode_frame(m.encode(m.Hello(SUPPORTED_VERSIONS, AGENT, ()))))
            await stream.receive_some(1)  # any answer, the end of the stream included
            return True
    return False
