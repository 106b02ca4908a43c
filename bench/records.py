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
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import build_record, seal, verify_record
from seabattle.protocol.referee import Referee
from seabattle.protocol.rules import RuleSet

from .checkout import child_env

__all__ = ["local_record", "time_verify", "time_verify_fresh"]

_log = logging.getLogger("seabattle.bench")


def local_record(rules: RuleSet, seed: int) -> dict[str, Any]:
    """A signed record of one honest match played in-process (for when no match finished): the
    pure referee in custody mode, fed random fleets and random shots, answers and reveals."""
    rng = random.Random(seed)
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    mid = rng.randbytes(16)
    players = (_hex(keys[0]), _hex(keys[1]))
    ref = Referee(match_id=mid, rules=rules, mode="custody", players=players, lot=rng.randbytes(32))
    ref.start(0.0)
    seq = 0
    while not ref.over:
        g = ref.game
        assert g is not None
        for seat in (0, 1):
            fleet, secret = random_fleet(rules, rng), rng.randbytes(32)
            sig = Committed(rules, fleet, secret, mid, g.number, seat).seat_sig(keys[seat])
            ref.receive(seat, m.Place(mid, g.number, tuple(fleet.to_list()), secret, sig), 0.0)
        while g.turn is not None:
            s = g.turn
            b = g.boards[1 - s]
            free = [x for x in range(rules.cells) if x not in b.fired and x not in b.crossed]
            i = rng.choice(free)
            seq += 1
            label = Cell(i // rules.cols, i % rules.cols).label()
            ref.receive(s, m.Fire(mid, g.number, (label,), g.caller(s), seq), 0.0)
    record = build_record(ref.match, [k.public_key() for k in keys[:2]], keys[2].public_key())
    return seal(record, [("referee", keys[2])])


def _hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes_raw().hex()


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
        argv = [sys.executable, "-m", "bench", "verify", str(path)]
        try:
            out = subprocess.run(
                argv, capture_output=True, check=True, timeout=300, env=child_env()
            ).stdout
            result: dict[str, Any] = json.loads(out)
        except (OSError, subprocess.SubprocessError, ValueError):
            _log.warning("verify in a fresh process failed: timing it here")
            return time_verify(records)
    return result
