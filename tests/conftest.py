"""Fixtures shared by the tests that need a running referee server."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, int]]:
    """A referee server on 127.0.0.1, port 0, with its store and key in ``tmp_path``."""
    from seabattle.server import app

    async with trio.open_nursery() as nursery:
        addr = await nursery.start(
            functools.partial(
                app.serve,
                "127.0.0.1",
                0,
                db_path=str(tmp_path / "db.sqlite"),
                key_path=str(tmp_path / "server.key"),
            )
        )
        yield addr
        nursery.cancel_scope.cancel()
