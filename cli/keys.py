"""``seabattle keys``: a player's identity, and the keys a closed (``--no-guests``) server admits.

``keys show FILE`` prints the player id of a key file (creating the key if missing): what a
player sends its operator. ``keys add`` registers player ids (or key files) in the server's
database, which the operator runs where ``serve`` runs, with the same ``--db`` (or
``SEABATTLE_DB``): a server started with ``--no-guests`` then admits those keys.
"""

from __future__ import annotations

import os
import re
import time

import click
import trio

__all__ = ["keys"]

_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")


@click.group()
def keys() -> None:
    """Player keys: show your player id, register keys on a closed server."""


@keys.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
def show(file: str) -> None:
    """Print the player id (the public key, hex) of key FILE, creating the key if missing."""
    from seabattle.client.wire import KeyFileError, load_key, public_key

    try:
        key = load_key(file)
    except KeyFileError as e:  # it names the file
        raise click.ClickException(str(e)) from None
    except (OSError, ValueError) as e:
        raise click.ClickException(f"cannot use the key file {file}: {e}") from None
    click.echo(public_key(key).hex())


def _player_id(arg: str) -> str:
    if _HEX_KEY.fullmatch(arg):
        return arg.lower()
    if not os.path.exists(arg):
        raise click.BadParameter(f"{arg!r} is neither a player id (64 hex digits) nor a key file")
    from seabattle.client.wire import load_key, public_key

    try:
        return public_key(load_key(arg, create=False)).hex()
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"cannot use the key file {arg}: {e}") from None


@keys.command("add")
@click.argument("key", nargs=-1, required=True)
@click.option(
    "--db",
    default=None,
    envvar="SEABATTLE_DB",
    help="The server's database (as serve --db; SEABATTLE_DB too) [default: seabattle.db].",
)
@click.option("--name", default="player", show_default=True, help="Name until the player connects.")
def add(key: tuple[str, ...], db: str | None, name: str) -> None:
    """Register each KEY (a player id, or a key file) so that a --no-guests server admits it."""
    ids = [_player_id(k) for k in key]
    try:
        from seabattle.server.store import Store, StoreError
    except ImportError as e:
        raise click.ClickException(f"the server is not available: {e}") from None
    where = db or "seabattle.db"

    async def run() -> list[str]:
        said = []
        async with Store.open(where) as store:
            for pid in ids:
                if await store.get_player(pid) is not None:
                    said.append(f"{pid} was already registered")
                    continue
                await store.upsert_player(pid, name, int(time.time()))
                said.append(f"added {pid}")
        return said

    try:
        said = trio.run(run)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    for line in said:
        click.echo(line)
