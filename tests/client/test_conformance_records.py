"""Revision 5's record cases of the conformance suite (spec 11): a client that co-signs whatever
it is sent fails the client cases on a record in another encoding and on a version-1 record,
which our client passes (test_conformance_client runs them with every other case); and every
client case quotes the spec as it stands."""

from __future__ import annotations

from pathlib import Path

import pytest
from seabattle.bots.play import play_bot
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import ConnectionClosed, RequestFailed, connect
from seabattle.conformance.probe import RULES
from seabattle.conformance.serve import CLIENT_CASES, run_client_suite
from seabattle.protocol.errors import RemoteProtocolError
from seabattle.protocol.seat import Seat

_CASES = ["c11.2-record-not-canonical", "c11.3-record-version-1"]


async def _our_client(host: str, port: int) -> None:
    try:
        async with connect(host, port) as client:
            await play_bot(client, make_strategy("hunt"), RULES, "blind", 1)
    except* (ConnectionClosed, RequestFailed, RemoteProtocolError):
        pass


async def test_our_client_refuses_to_cosign_both_records() -> None:
    report = await run_client_suite(_our_client, only=_CASES, timeout=5, settle=0.05)
    assert [r.id for r in report.results] == _CASES
    assert not report.failed, {r.id: r.detail for r in report.failed}


async def test_a_client_that_cosigns_whatever_it_is_sent_fails_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Our client with its dispute forgotten: its seat checks, and co-signs whatever it found.
    forgetful = property(lambda h: None, lambda h, v: None)
    monkeypatch.setattr(Seat, "disputed", forgetful, raising=False)
    report = await run_client_suite(_our_client, only=_CASES, timeout=5, settle=0.05)
    failed = {r.id: r.detail for r in report.failed}
    assert set(failed) == set(_CASES), failed
    assert all("co-signed" in d for d in failed.values())


def test_every_client_case_quotes_the_spec_verbatim() -> None:
    # As the server cases (test_conformance): a client case's quote is the sentence it checks,
    # word for word ("[...]" marks an elision), under a section the spec has.
    spec = (Path(__file__).resolve().parents[2] / "spec" / "protocol.md").read_text("utf-8")
    flat = " ".join(spec.split())
    for c in CLIENT_CASES:
        for part in c.quote.split("[...]"):
            part = " ".join(part.split()).strip(" .;,")
            assert part in flat, f"{c.id}: {part!r} is not in spec/protocol.md"
        heading = f"### {c.section}" if "." in c.section.split()[0] else f"## {c.section}"
        assert heading in spec, f"{c.id}: no section {c.section!r}"
