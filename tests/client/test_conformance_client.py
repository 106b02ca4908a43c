"""The client side of the conformance suite (``seabattle conformance --serve``): our client and
our joining peer pass every case; deliberately broken clients fail the case that names what they
break, so the suite is known not to be a rubber stamp.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.bots.play import play_bot
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import ConnectionClosed, RequestFailed, connect
from seabattle.client.peer import BotPlayer, PeerCheated, join
from seabattle.client.wire import Wire, client_handshake
from seabattle.conformance import conformance
from seabattle.conformance.probe import RULES
from seabattle.conformance.serve import CLIENT_CASES, run_client_suite
from seabattle.protocol import messages as m
from seabattle.protocol.errors import RemoteProtocolError
from seabattle.protocol.seat import Seat
from seabattle.protocol.session import Role

Launcher = Callable[[str, int], Awaitable[None]]
#: How our client and peer end a session the suite failed on purpose: not crashes.
_ENDED = (ConnectionClosed, RequestFailed, RemoteProtocolError, PeerCheated)


async def _our_client(host: str, port: int) -> None:
    try:
        async with connect(host, port) as client:
            await play_bot(client, make_strategy("hunt"), RULES, "blind", 1)
    except* _ENDED:
        pass


async def _our_peer(host: str, port: int) -> None:
    try:
        await join(BotPlayer(make_strategy("hunt")), host, port)
    except* _ENDED:
        pass


def _failed(report: object) -> dict[str, str]:
    return {r.id: r.detail for r in report.failed}  # type: ignore[attr-defined]


async def test_our_client_passes_every_client_case() -> None:
    report = await run_client_suite(_our_client, timeout=5, settle=0.05)
    assert [r.id for r in report.results] == [c.id for c in CLIENT_CASES if not c.peer]
    assert not report.failed, _failed(report)
    data = report.to_dict()
    json.dumps(data)  # the machine-readable report is plain JSON
    for r in data["results"]:
        assert r["outcome"] == "passed" and r["quote"] and r["section"] and r["expected"]


async def test_our_peer_passes_every_peer_case() -> None:
    report = await run_client_suite(_our_peer, peer=True, timeout=5, settle=0.05)
    assert [r.id for r in report.results] == [c.id for c in CLIENT_CASES if c.peer]
    assert not report.failed, _failed(report)


@pytest.mark.skipif(shutil.which("seabattle") is None, reason="the seabattle command is needed")
def test_the_command_tests_our_bot_as_a_subprocess() -> None:
    rules = json.dumps(RULES)
    cmd = ["seabattle", "bot", "--server", "{host}:{port}", "--rules", rules]
    only = ["--only", "c5.6", "--only", "c2.1"]
    res = CliRunner().invoke(conformance, ["--serve", "--json", *only, "--", *cmd])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["counts"]["passed"] == 2, data


# -- broken clients -----------------------------------------------------------------------------


async def test_a_client_that_cosigns_a_lie_fails_the_lie_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Our client with its dispute forgotten: its seat checks, and co-signs whatever it found.
    forgetful = property(lambda h: None, lambda h, v: None)
    monkeypatch.setattr(Seat, "disputed", forgetful, raising=False)
    report = await run_client_suite(
        _our_client, only=["c5.6", "c10.7", "c5.5"], timeout=5, settle=0.05
    )
    failed = _failed(report)
    lies = {"c10.7-forged-opening", "c5.5-firing-root", "c5.5-record-altered"}
    assert set(failed) == lies, failed
    assert all("co-signed" in d for d in failed.values())


async def _raw_client(host: str, port: int, on_message: Callable[[object], None]) -> None:
    """Handshake, then every message handed to ``on_message``, which never answers."""
    wire = Wire(await trio.open_tcp_stream(host, port), role=Role.CLIENT)
    async with wire.stream:
        await client_handshake(wire, Ed25519PrivateKey.generate(), "broken")
        while (msg := await wire.recv()) is not None:
            on_message(msg)


async def test_a_client_that_never_answers_ping_fails_the_heartbeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def deaf(host: str, port: int) -> None:
        await _raw_client(host, port, lambda msg: None)

    report = await run_client_suite(deaf, only=["c4.6"], timeout=3, settle=0)
    assert [(r.id, r.outcome.value) for r in report.results] == [("c4.6-heartbeat", "failed")]
    assert "nothing within" in report.results[0].detail


async def test_a_client_that_crashes_on_an_unknown_tag_fails_that_case(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def brittle(msg: object) -> None:
        if isinstance(msg, RemoteProtocolError):
            raise RuntimeError(f"cannot handle {msg}")

    async def client(host: str, port: int) -> None:
        await _raw_client(host, port, brittle)

    report = await run_client_suite(client, only=["c2.4-unknown"], timeout=3, settle=0)
    failed = _failed(report)
    assert list(failed) == ["c2.4-unknown-tag"], failed
    assert "crashed" in failed["c2.4-unknown-tag"] and "RuntimeError" in failed["c2.4-unknown-tag"]


async def test_our_lean_client_takes_a_copy_of_its_own_verdict_for_what_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A lean client applies its verdict as it sends it (spec 5.7); a copy arriving anyway (a
    # session resumed while the verdict was on its way) must not be applied a second time,
    # which its own copy of the game would refuse, wrongly disputing an honest record.
    from seabattle.conformance import serve_script
    from seabattle.protocol.referee import Send, seat_bit

    real = serve_script.RefereedMatch._deliver

    async def with_verdict_copies(self: serve_script.RefereedMatch, sends: Any) -> None:
        # The referee left the client out of the verdict on its own answer: put it back in.
        bit = seat_bit(self.seat)
        copied = [
            Send(s.to | bit, s.msg, s.member) if isinstance(s.msg, m.VerdictMsg) else s
            for s in sends
        ]
        await real(self, copied)

    monkeypatch.setattr(serve_script.RefereedMatch, "_deliver", with_verdict_copies)
    report = await run_client_suite(_our_client, timeout=5, settle=0.05)
    lean = [r for r in report.results if r.id == "c5.7-lean"]
    assert lean and lean[0].outcome.value == "passed", lean and lean[0].detail
