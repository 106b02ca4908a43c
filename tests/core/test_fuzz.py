"""The fuzz targets (fuzz/): frame decoding, the handshake and the referee, on any input.

What a user relies on: that no byte stream a client sends, no handshake it attempts and no game
message it builds makes the core raise anything but the protocol error that becomes an ``error``
reply (a server answers any other exception with ``INTERNAL_ERROR``, or dies), and that the
referee never addresses an audience that does not exist. The targets are fed a fixed corpus (the
framing vectors of spec/vectors among it) without atheris, are shown to catch each kind of bug
they look for, and run briefly under atheris itself, as ``python -m fuzz.run`` runs them for a
million executions (BENCHMARKS.md, "Fuzzing").
"""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path
from typing import Any

import pytest
from seabattle.protocol import messages as m
from seabattle.protocol import session
from seabattle.protocol.referee import ALL, Referee, Send

from fuzz.corpus import framing_streams, seeds
from fuzz.targets import TARGETS, frames, handshake, mixed, referee


@pytest.mark.parametrize("name", [*sorted(TARGETS), "mixed"])
def test_every_target_takes_its_seeds_and_noise_without_a_crash(name: str) -> None:
    target = TARGETS.get(name, mixed)
    rng = random.Random(name)
    noise = [rng.randbytes(n) for n in (0, 1, 2, 3, 7, 64, 300) for _ in range(4)]
    for data in seeds(name) + noise:
        target(data)


def test_the_framing_vectors_whole_and_a_byte_at_a_time() -> None:
    streams = framing_streams()
    assert len(streams) > 20  # every vector, valid and invalid
    for stream in streams:
        for head in (b"\x04\x00", b"\x04\x01", b"\x00\x00", b"\x01\x00"):
            frames(head + stream)


def test_the_frame_target_fails_when_decoding_raises_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(d: dict[str, Any]) -> m.Message:
        raise KeyError("t")

    monkeypatch.setattr(session.m, "decode", broken)
    ping = bytes.fromhex("0000000d82a174a470696e67a373657101")  # the first valid vector
    with pytest.raises(KeyError):
        frames(b"\x04\x00" + ping)


def test_the_handshake_target_fails_when_a_forged_auth_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fuzz.targets

    monkeypatch.setattr(fuzz.targets, "check_auth", lambda msg, challenge, key: None)
    found = False
    for data in seeds("handshake"):
        try:
            handshake(data)
        except AssertionError as e:
            found = "forged" in str(e)
            break
    assert found


def test_the_referee_target_fails_when_the_referee_sends_to_no_seat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = Referee.start

    def start(self: Referee, now: float) -> list[Send]:
        return [*real(self, now), Send(ALL + 1, m.Ping(1))]  # no audience of the referee's

    monkeypatch.setattr(Referee, "start", start)
    with pytest.raises(AssertionError, match=f"audience {ALL + 1}"):
        referee(seeds("referee")[0])


def test_the_referee_target_fails_when_a_message_goes_to_a_member_there_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = Referee.start

    def start(self: Referee, now: float) -> list[Send]:
        return [*real(self, now), Send(1, m.Ping(1), self.rules.team_size)]

    monkeypatch.setattr(Referee, "start", start)
    with pytest.raises(AssertionError, match="to member"):
        referee(seeds("referee")[0])


def test_the_referee_target_fails_when_a_refusal_changes_the_game(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from seabattle.protocol.errors import ErrorCode, Refused

    real = Referee.receive

    def receive(
        self: Referee, seat: int, msg: m.Message, now: float, member: int | None = None
    ) -> list[Send]:
        out = real(self, seat, msg, now, member)
        if isinstance(msg, m.Fire):
            raise Refused(ErrorCode.NOT_YOUR_TURN, "after applying it")
        return out

    monkeypatch.setattr(Referee, "receive", receive)
    with pytest.raises(AssertionError, match="changed the game"):
        for data in seeds("referee"):
            referee(data)


def _atheris() -> None:
    if importlib.util.find_spec("atheris") is not None:
        return
    what = "atheris is not installed: pip install -e '.[dev]'"
    if os.environ.get("CI"):
        pytest.fail(what, pytrace=False)
    pytest.skip(what)


@pytest.mark.slow
def test_a_short_coverage_guided_run_of_every_target_finds_nothing(tmp_path: Path) -> None:
    _atheris()
    from fuzz.run import fuzz

    # All three targets in one process (one start-up: instrumenting the core takes seconds),
    # from an empty corpus: a few seconds on two cores. The seeds are the 1,000,000-run's.
    outcome = fuzz("mixed", 2000, workdir=tmp_path, seeded=False)
    assert outcome.crash is None, outcome.crash
    assert outcome.runs == 2000
    assert not list(tmp_path.glob("mixed-crash-*"))
