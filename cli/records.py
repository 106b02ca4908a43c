"""``seabattle verify``: judge signed match records from themselves alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .common import console

__all__ = ["verify"]


def _verify_file(path: str, referee_key: bytes | None) -> dict[str, Any]:
    from seabattle.protocol.record import RecordError, load_record, verify_record

    try:
        signed = load_record(Path(path).read_bytes())
    except (OSError, RecordError) as e:
        return {"file": path, "ok": False, "reason": f"unreadable: {e}"}
    report = verify_record(signed, referee_key=referee_key).to_dict()
    report["file"] = path
    return report


def _referee_key(given: str) -> bytes:
    """The 32-byte public key ``--referee-key`` names: hex digits, or an existing key file."""
    try:
        raw = bytes.fromhex(given)
    except ValueError:
        raw = b""
    if len(raw) == 32:
        return raw
    path = Path(given)
    if not path.is_file():
        raise click.BadParameter(
            "neither 64 hex digits nor a key file", param_hint="--referee-key"
        )
    from seabattle.common.keys import load_or_create_key

    return load_or_create_key(path).public_key().public_bytes_raw()


@click.command()
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option(
    "--referee-key",
    default=None,
    metavar="HEX|FILE",
    help="Trust only records signed by this referee: its public key in hex (the server's --json"
    " start line prints it as server_key), or its key file.",
)
def verify(records: tuple[str, ...], as_json: bool, referee_key: str | None) -> None:
    """Verify signed match records from themselves alone; exit 0 only if all verify."""
    pinned = None if referee_key is None else _referee_key(referee_key)
    reports = [_verify_file(p, pinned) for p in records]
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
