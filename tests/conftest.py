"""Fixtures shared by the tests that need a running referee server (built on ``helpers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from helpers import start_server


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> tuple[str, int]:
    """A referee server on 127.0.0.1, port 0, with its store and key in ``tmp_path``."""
    addr, _ = await start_server(nursery, tmp_path)
    return addr
