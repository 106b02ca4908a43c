"""``seabattle verify``: judge signed match records from themselves alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .cli_common import console

__all__ = ["verify"]


def _verify_file(path: str) -> dict[str, Any]:
    from seabattle.protocol.record import RecordError, load_record, verify_record

    try:
        signed = load_record(Path(path).read_bytes())
    except (OSError, RecordError) as e:
        return {"file": path, "ok": False, "reason": f"unreadable: {e}"}
    report = verify_record(signed).to_dict()
    report["file"] = path
    return report


@click.command()
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
