"""The conformance suite (conformance/) against our server, and against a broken one.

Our server must pass every case. A deliberately broken fake server must fail the cases that
concern what it breaks, so that the suite is known not to be a rubber stamp.
"""

from __future__ import annotations

import json
import queue
import threading
from functools import partial
from pathlib import Path
from typing import Any

import trio
from click.testing import CliRunner
from seabattle.conformance import CASES, Outcome, Report, conformance, run_suite
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.server.app import serve


async def _serve(nursery: trio.Nursery, tmp_path: Path) -> tuple[str, int]:
    addr: tuple[str, int] = await nursery.start(
        partial(serve, "127.0.0.1", 0, db_path=tmp_path / "db", key_path=tmp_path / "key")
    )
    return addr


def _explain(report: Report) -> str:
    return "\n".join(
        f"{r.id}: {r.detail}\n  expected {r.expected}\n  sent {r.sent[-4:]}\n  got {r.got[-4:]}"
        for r in report.failed
    )


async def test_our_server_passes_every_case(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        host, port = await _serve(nursery, tmp_path)
        with trio.fail_after(30):
            report = await run_suite(host, port)
        nursery.cancel_scope.cancel()
    assert [r.id for r in report.results] == [c.id for c in CASES]
    assert not report.failed, _explain(report)
    assert all(r.outcome is Outcome.PASSED for r in report.results), report.counts()
    data = report.to_dict()
    json.dumps(data)  # the machine-readable report is plain JSON
    assert data["counts"]["passed"] == len(CASES)
    for r in data["results"]:
        assert r["quote"] and r["section"] and r["expected"]


async def test_only_selects_by_section_and_id(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        host, port = await _serve(nursery, tmp_path)
        report = await run_suite(host, port, only=["2.3", "4.3-auth"])
        nursery.cancel_scope.cancel()
    ids = [r.id for r in report.results]
    assert ids and all(i.startswith("2.3-") for i in ids[:-1]) and ids[-1] == "4.3-auth"


# -- a broken server ------------------------------------------------------------------------------


async def _broken_handler(stream: trio.SocketStream) -> None:
    """Answers hello with a version nobody offered and a short challenge; pong with n + 1;
    refuses every bad body with BAD_MESSAGE; never closes on a framing error; no lobby."""
    dec = FrameDecoder(1 << 20)  # accepts oversized frames instead of refusing them
    try:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            dec.feed(data)
            while True:
                try:
                    body = dec.next_frame()
                except RemoteProtocolError:
                    err = m.Error(int(ErrorCode.BAD_MESSAGE), "bad", None)
                    await stream.send_all(encode_frame(m.encode(err)))
                    continue
                if body is None:
                    break
                try:
                    msg = m.decode(body)
                except RemoteProtocolError:
                    err = m.Error(int(ErrorCode.BAD_MESSAGE), "bad", None)
                    await stream.send_all(encode_frame(m.encode(err)))
                    continue
                out: m.Message | None = None
                if isinstance(msg, m.Hello):
                    out = m.Welcome(7, ("x-bogus",), bytes(32), bytes(16), True)
                elif isinstance(msg, m.Ping):
                    out = m.Pong(msg.n + 1)
                if out is not None:
                    await stream.send_all(encode_frame(m.encode(out)))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def test_a_broken_server_fails_the_relevant_cases() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, _broken_handler, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        sections = ["2.1", "2.3-D6", "2.4-unknown", "4.2", "4.3", "4.6", "6.2-create"]
        with trio.fail_after(25):
            report = await run_suite("127.0.0.1", port, only=sections, timeout=0.3)
        nursery.cancel_scope.cancel()
    outcome = {r.id: r for r in report.results}
    for cid in (
        "2.1-frame-too-large",  # no FRAME_TOO_LARGE, no close
        "2.3-D6-duplicate",  # BAD_MESSAGE instead of DUPLICATE_KEY
        "2.4-unknown-tag",  # no handshake possible
        "4.2-version",  # welcome.version 7 was never offered
        "4.3-auth",  # never answers auth
        "4.6-heartbeat",  # pong carries another n
        "6.2-create-list",  # no lobby
    ):
        r = outcome[cid]
        assert r.outcome is Outcome.FAILED, (cid, r.detail)
        assert r.detail and r.sent, cid
    assert "welcome.version is 7" in outcome["4.2-version"].detail
    assert "DUPLICATE_KEY" in outcome["2.3-D6-duplicate"].detail


async def test_nothing_listening_fails_every_case() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()
    report = await run_suite("127.0.0.1", port, only=["2.1", "8-"], timeout=0.3)
    assert report.results and all(r.outcome is Outcome.FAILED for r in report.results)
    assert "cannot connect" in report.results[0].detail


# -- the click command ----------------------------------------------------------------------------


def _server_in_thread(tmp_path: Path) -> tuple[int, Any, threading.Thread]:
    """Our server on its own trio loop in a thread (the command runs ``trio.run`` itself)."""
    ready: queue.Queue[tuple[int, trio.lowlevel.TrioToken, trio.Event]] = queue.Queue()

    async def main() -> None:
        shutdown = trio.Event()
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(
                partial(
                    serve,
                    "127.0.0.1",
                    0,
                    db_path=tmp_path / "db",
                    key_path=tmp_path / "key",
                    shutdown=shutdown,
                )
            )
            ready.put((addr[1], trio.lowlevel.current_trio_token(), shutdown))

    th = threading.Thread(target=trio.run, args=(main,), daemon=True)
    th.start()
    port, token, shutdown = ready.get(timeout=10)

    def stop() -> None:
        trio.from_thread.run_sync(shutdown.set, trio_token=token)
        th.join(timeout=15)

    return port, stop, th


def test_command_reports_json_and_exit_status(tmp_path: Path) -> None:
    port, stop, _ = _server_in_thread(tmp_path)
    try:
        runner = CliRunner()
        out = tmp_path / "report.json"
        res = runner.invoke(
            conformance,
            [f"127.0.0.1:{port}", "--json", "--report", str(out), "--only", "2.3", "--only", "4.7"],
        )
        assert res.exit_code == 0, res.output
        data = json.loads(out.read_text())
        assert data["counts"]["failed"] == 0
        assert {r["id"] for r in data["results"]} >= {"2.3-D6-duplicate", "4.7-resume"}
        res = runner.invoke(conformance, [f"127.0.0.1:{port}", "--only", "2.1"])
        assert res.exit_code == 0, res.output
        assert "2.1-frame-too-large" in res.output
    finally:
        stop()
    res = CliRunner().invoke(
        conformance, [f"127.0.0.1:{port}", "--only", "2.1", "--timeout", "0.3"]
    )
    assert res.exit_code == 1  # nothing listens any more: every case fails
    assert CliRunner().invoke(conformance, ["no-port"]).exit_code == 2
    listed = CliRunner().invoke(conformance, ["x:1", "--list"])
    assert listed.exit_code == 0 and "8-blind-game" in listed.output


def test_every_case_quotes_the_spec_verbatim() -> None:
    # A case's quote is the sentence it checks: it must still be in the spec, word for word
    # ("[...]" marks an elision), so that a spec edit cannot leave a case checking old text.
    spec = (Path(__file__).resolve().parents[2] / "spec" / "protocol.md").read_text("utf-8")
    flat = " ".join(spec.split())
    for c in CASES:
        for part in c.quote.split("[...]"):
            part = " ".join(part.split()).strip(" .;,")
            assert part in flat, f"{c.id}: {part!r} is not in spec/protocol.md"
        assert c.section.split()[0] + " " in spec, c.id
        heading = f"### {c.section}" if "." in c.section.split()[0] else f"## {c.section}"
        assert heading in spec, f"{c.id}: no section {c.section!r}"
