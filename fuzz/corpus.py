"""Seed inputs for each target: the framing vectors of ``spec/vectors`` and honest runs.

libFuzzer starts from these (:mod:`fuzz.run`), and the tests feed them to the targets without
atheris, so each target is run on inputs that reach deep into what it tests.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from .referee import RULES, rule_byte

__all__ = ["framing_streams", "seeds"]

_VECTORS = Path(__file__).resolve().parent.parent / "spec" / "vectors" / "framing.json"


def framing_streams() -> list[bytes]:
    """The byte stream of every framing vector, valid and invalid."""
    doc = json.loads(_VECTORS.read_text())
    return [bytes.fromhex(v["hex"]) for v in doc["valid"] + doc["invalid"]]


def seeds(target: str) -> list[bytes]:
    """The seed inputs of ``target`` (a name of :data:`fuzz.targets.TARGETS`)."""
    rng = random.Random(target)
    noise = [rng.randbytes(rng.randrange(1, 300)) for _ in range(16)]
    if target == "frames":
        # Two head bytes (frame limit and state, then the cuts), then the stream.
        heads = (b"\x00\x00", b"\x04\x00", b"\x04\x07", b"\x05\x2a", b"\x06\x01")
        return [h + s for s in framing_streams() for h in heads] + noise
    if target == "handshake":
        # Steps: 1 a hello, 3 an auth, 7 a cut ping, 5 any message, 0 raw bytes, 6 the end.
        return [
            bytes([1, 1, 3, 0, 5, 3, 1, 3, 2, 2, 0]) * 3,
            bytes([2, 3, 0, 3, 3, 5, 7, 7, 9, 7, 3]) * 4,
            bytes([0, 12]) + framing_streams()[0][:12] + bytes([1, 3, 6]),
            *noise,
        ]
    if target == "referee":
        # Rule set, mode, the lot, then zeros: honest moves all the way (in team play, by the
        # members an honest team's would be).
        return [
            bytes([rule_byte(r), mode, 1]) + bytes(range(32)) + bytes([1]) + bytes(steps)
            for r in range(len(RULES))
            for mode in (0, 1)
            for steps in (30, 200)
        ] + noise
    if target == "mixed":
        # fuzz.targets.mixed: a byte naming the target (frames 0, handshake 1, referee 2), then
        # a few short seeds of each.
        return [
            bytes([i]) + s
            for i, name in enumerate(("frames", "handshake", "referee"))
            for s in sorted(seeds(name), key=len)[:6]
        ]
    raise KeyError(target)
