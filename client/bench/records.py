"""Signed records for the verify figure: played in-process when no match finished, and timed
with :func:`~seabattle.protocol.record.verify_record`, in a fresh process as ``seabattle
verify`` runs.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.inputs import ShotCalled
from seabattle.protocol.match import Match
from seabattle.protocol.record import build_record, seal, verify_record
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.verdict import Defender

__all__ = ["local_record", "time_verify", "time_verify_fresh"]

_log = logging.getLogger("seabattle.bench")


def local_record(rules: RuleSet, seed: int) -> dict[str, Any]:
    """A signed record of one honest game played in-process (for when no match finished)."""
    rng = random.Random(seed)
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    match = Match(rules, rng.randbytes(16))
    while not match.over:
        g = match.new_game(rng.randrange(2) if match.needs_lot() else None)
        ds = []
        for seat in (0, 1):
            c = Committed(
                rules, random_fleet(rules, rng), rng.randbytes(32), match.match_id, g.number, seat
            )
            ds.append(Defender(c))
            g.commit(seat, c.commitment)
        while g.phase is Phase.FIRING:
            s = g.turn
            assert s is not None
            b = g.boards[1 - s]
            open_ = [i for i in range(rules.cells) if i not in b.fired and i not in b.crossed]
            cells = [Cell(i // rules.cols, i % rules.cols) for i in rng.sample(open_, 1)]
            called = g.fire(s, cells, g.caller(s))[0]
            assert isinstance(called, ShotCalled)
            g.answer(1 - s, ds[1 - s].answer(called.shot))
        for seat in (0, 1):
            g.reveal(seat, ds[seat].committed.reveal())
        match.game_over()
    record = build_record(match, [k.public_key() for k in keys[:2]], keys[2].public_key())
    return seal(record, [("referee", keys[2])])


def time_verify(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Verify each signed record; the median time per game, and how many failed."""
    per_game: list[float] = []
    failed = 0
    games = 0
    for signed in records:
        t0 = time.perf_counter()
        report = verify_record(signed)
        dt = time.perf_counter() - t0
        n = max(1, len(signed["record"]["games"]))
        games += n
        per_game.append(dt * 1000 / n)
        failed += not report.ok
    return {
        "records": len(records),
        "games": games,
        "failed": failed,
        "ms_per_game": statistics.median(per_game) if per_game else None,
        "ms_per_game_max": max(per_game) if per_game else None,
    }


def time_verify_fresh(records: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`time_verify` in a fresh process, as ``seabattle verify`` runs: not inside the load
    generator, whose heap of thousands of connections slows everything it does afterwards.
    Falls back to this process if the child fails."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.msgpack"
        path.write_bytes(msgpack.packb(records, use_bin_type=True))
        argv = [sys.executable, "-m", "seabattle.client.bench", "verify", str(path)]
        try:
            out = subprocess.run(argv, capture_output=True, check=True, timeout=300).stdout
            result: dict[str, Any] = json.loads(out)
        except (OSError, subprocess.SubprocessError, ValueError):
            _log.warning("verify in a fresh process failed: timing it here")
            return time_verify(records)
    return result
