"""``seabattle verify``: judge signed match records from themselves alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .common import console

__all__ = ["damaged", "verify"]


def damaged(data: bytes) -> str | None:
    """Why ``data`` is no signed record at all (``"damaged: ..."``, in a reader's words), or
    ``None`` if it decodes to one (which may still fail verification).

    The decoder's own words (``not msgpack: ValueError: Unpack failed: incomplete input``) name
    a library's exception; what the reader needs to know is that the file is broken, and
    whether it was cut short (a copy or a download that stopped) or is something else."""
    from seabattle.protocol.record import RecordError, load_record

    try:
        load_record(data)
    except RecordError as e:
        if not data:
            return "damaged: the file is empty"
        if "incomplete input" in e.detail:
            return "damaged: the file is cut short (it ends inside the record)"
        return "damaged: the file holds no signed match record (its bytes do not decode as one)"
    return None


def _verify_file(path: str, referee_key: bytes | None, accept_v1: bool) -> dict[str, Any]:
    from seabattle.protocol.record import verify_bytes

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return {"file": path, "ok": False, "reason": f"unreadable: {e.strerror or e}"}
    # From the bytes, not a decoded map: a file that is not the record's canonical encoding is
    # malformed (spec 11.3).
    report = verify_bytes(data, referee_key=referee_key, accept_v1=accept_v1).to_dict()
    broken = damaged(data)
    if broken is not None:
        # The report's problems keep the decoder's own words; its reason is for people.
        report["reason"] = broken
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
        raise click.BadParameter("neither 64 hex digits nor a key file", param_hint="--referee-key")
    from seabattle.common.keys import load_or_create_key

    try:
        return load_or_create_key(path).public_key().public_bytes_raw()
    except OSError as e:  # KeyFileError: a file that holds no key
        raise click.BadParameter(str(e), param_hint="--referee-key") from None


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
@click.option(
    "--accept-v1",
    is_flag=True,
    help="Also verify version-1 records (revision 2 and before). Their seats are bound to no key:"
    " the record cannot show who played which seat, and says so.",
)
def verify(
    records: tuple[str, ...], as_json: bool, referee_key: str | None, accept_v1: bool
) -> None:
    """Verify signed match records from themselves alone; exit 0 only if all verify."""
    pinned = None if referee_key is None else _referee_key(referee_key)
    reports = [_verify_file(p, pinned, accept_v1) for p in records]
    if as_json:
        click.echo(json.dumps(reports, indent=2, default=lambda b: b.hex()))
    else:
        for r in reports:
            if r["ok"]:
                games = r.get("games", [])
                shots = sum(g["shots"] for g in games)
                sigs = ", ".join(s["role"] for s in r.get("signatures", []) if s["ok"])
                # A version-1 record accepted on request: what it says of the seats is unproved.
                unbound = (
                    "; [yellow]seats unbound[/yellow]: a version-1 record cannot show who played "
                    "which seat"
                    if not r["seats_bound"]
                    else ""
                )
                console.print(
                    f"[green]OK[/green]   {r['file']}: {len(games)} game(s), {shots} shots, "
                    f"signed by {sigs}{unbound}",
                    soft_wrap=True,
                )
            elif r["reason"].startswith(("damaged", "unreadable")):
                # No record to judge: an error, on stderr, not a verdict on stdout.
                click.echo(f"{r['file']}: {r['reason']}", err=True)
            else:
                hint = " (--accept-v1 reads it)" if r["reason"].startswith("old_version") else ""
                console.print(f"[red]FAIL[/red] {r['file']}: {r['reason']}{hint}", soft_wrap=True)
    if not all(r["ok"] for r in reports):
        sys.exit(1)
