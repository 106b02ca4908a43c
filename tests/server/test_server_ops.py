"""Operations: the Prometheus endpoint over real TCP, the counters a match moves, the
shot-to-verdict timing in virtual time, JSON log lines with match and peer context, and
``main``'s ``--json`` status lines.
"""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import SMALL, Bot, connect, interrupt, pair, play_both, server_process, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.server.app import _redact
from seabattle.server.config import ContextLog
from seabattle.server.logs import JsonFormatter, configure_logging
from seabattle.server.metrics import SHOT_BUCKETS, Histogram, Metrics, serve_metrics

# -- helpers --------------------------------------------------------------------------------------


async def http(addr: tuple[str, int], request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` raw, read to EOF; the status, headers (lowercase names) and body."""
    stream = await trio.open_tcp_stream(*addr)
    async with stream:
        await stream.send_all(request)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, headers, body


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def parse_exposition(text: str) -> dict[str, float]:
    """``{'name{labels}': value}``, checking the text format on the way: every sample belongs to
    a family announced by ``# HELP`` and ``# TYPE`` first, and every value is a number."""
    assert text.endswith("\n")
    typed: set[str] = set()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            typed.add(name)
            continue
        match = _SAMPLE.match(line)
        assert match, line
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, line
        out[name + (labels or "")] = float(value)
    return out


async def scrape(addr: tuple[str, int]) -> dict[str, float]:
    status, headers, body = await http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    assert int(headers["content-length"]) == len(body)
    return parse_exposition(body.decode())


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The server's log records as JSON lines, in a string."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("seabattle.server")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


# -- the metrics endpoint -------------------------------------------------------------------------


async def test_a_match_moves_the_counters(tmp_path: Path, nursery: trio.Nursery) -> None:
    stats = Metrics()
    addr, _ = await start_server(nursery, tmp_path, metrics=("127.0.0.1", 0), stats=stats)
    assert stats.address is not None and stats.address[1] != 0
    before = await scrape(stats.address)
    assert before["seabattle_connections_total"] == 0
    assert before['seabattle_matches_finished_total{mode="blind"}'] == 0

    a, b, mid = await pair(addr, nursery, SMALL, "blind")
    watcher = await connect(addr, nursery, name="carol")
    assert isinstance(await watcher.request(m.Watch(1, mid)), m.Ok)
    err = await watcher.request(m.Watch(2, bytes(16)))
    assert isinstance(err, m.Error) and err.code == ErrorCode.NO_SUCH_MATCH

    during = await scrape(stats.address)
    assert during['seabattle_matches_running{mode="blind"}'] == 1
    assert during['seabattle_matches_started_total{mode="blind"}'] == 1
    assert during["seabattle_spectators"] == 1
    assert during["seabattle_connections_open"] == 3
    assert during['seabattle_refusals_total{code="NO_SUCH_MATCH"}'] == 1

    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.result is not None

    after = await scrape(stats.address)
    assert after["seabattle_connections_total"] == 3
    assert after['seabattle_matches_running{mode="blind"}'] == 0
    assert after['seabattle_matches_finished_total{mode="blind"}'] == 1
    assert after['seabattle_matches_finished_total{mode="custody"}'] == 0
    assert after['seabattle_matches_aborted_total{mode="blind"}'] == 0
    assert after["seabattle_spectators"] == 0
    shots = after["seabattle_shots_total"]
    assert shots >= 3  # at least the 3 ship cells of SMALL were hit
    # Every shot of a finished blind match was answered: one timing per shot.
    assert after["seabattle_shot_verdict_seconds_count"] == shots
    assert after['seabattle_shot_verdict_seconds_bucket{le="+Inf"}'] == shots
    for k in ("messages_in", "messages_out", "bytes_in", "bytes_out"):
        assert after[f"seabattle_{k}_total"] > before[f"seabattle_{k}_total"], k
    assert after["seabattle_bytes_out_total"] > after["seabattle_messages_out_total"]
    # The store was timed per call, by method.
    for op in ("upsert_player", "create_match", "start_match", "put_record", "end_match"):
        assert after[f'seabattle_store_call_seconds_count{{op="{op}"}}'] >= 1, op
    assert stats.totals()["matches_finished"]["blind"] == 1


async def test_shot_to_verdict_is_timed_on_the_trio_clock(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    class SlowToAnswer(Bot):
        """Answers its first shot three (virtual) seconds late."""

        slow = True

        async def send(self, msg: m.Message) -> None:
            if isinstance(msg, m.Answer) and self.slow:
                self.slow = False
                await trio.sleep(3)
            await super().send(msg)

    stats = Metrics()
    addr, _ = await start_server(nursery, tmp_path, stats=stats)
    a, b, _ = await pair(addr, nursery, SMALL, "blind")
    ba, bb = SlowToAnswer(a, "blind", 3), SlowToAnswer(b, "blind", 4)
    await play_both(ba, bb)
    h = stats.shot_latency
    assert h.count == stats.shots > 2
    # Two late answers (one per player), in the (2.5, 5] bucket; the rest took no virtual time.
    assert h.counts[SHOT_BUCKETS.index(5.0)] == 2
    assert h.counts[0] == h.count - 2
    assert 6.0 <= h.sum < 6.5


async def test_custody_shots_are_counted_but_not_timed(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    stats = Metrics()
    addr, _ = await start_server(nursery, tmp_path, stats=stats)
    a, b, _ = await pair(addr, nursery, SMALL, "custody")
    with trio.fail_after(10):
        await play_both(Bot(a, "custody", 5), Bot(b, "custody", 6))
    assert stats.shots > 2 and stats.shot_latency.count == 0
    assert stats.matches_finished == {"blind": 0, "custody": 1}


async def test_the_endpoint_answers_only_get_metrics(nursery: trio.Nursery) -> None:
    metrics = Metrics()
    addr = await nursery.start(serve_metrics, metrics, "127.0.0.1", 0)
    assert metrics.address == addr

    status, _, body = await http(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n")
    assert status == 200 and b"seabattle_shots_total 0\n" in body
    status, headers, body = await http(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    for request in (
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET /metricsx HTTP/1.1\r\n\r\n",
        b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    ):
        status, headers, _ = await http(addr, request)
        assert status == 404, request
        assert headers["connection"] == "close"
    assert (await http(addr, b"hello\r\n\r\n"))[0] == 400
    assert (await http(addr, b"GET /metrics SPDY/3\n\n"))[0] == 400
    # One byte past the bound (8 KiB), no end of head: the server reads it all, so it closes
    # without a reset and the answer arrives.
    head = b"GET /metrics HTTP/1.1\r\nX: "
    assert (await http(addr, head + b"a" * (8193 - len(head))))[0] == 431


async def test_a_silent_scraper_is_cut_off(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr = await nursery.start(serve_metrics, Metrics(), "127.0.0.1", 0)
    stream = await trio.open_tcp_stream(*addr)
    start = trio.current_time()
    await stream.send_all(b"GET /metrics HTTP/1.1\r\n")  # and never the blank line
    assert await stream.receive_some(100) == b""
    assert 5 <= trio.current_time() - start < 6
    await stream.aclose()


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 7.0):
        h.observe(v)
    assert list(h.cumulative()) == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert h.count == 5 and h.sum == pytest.approx(8.65)


def test_exposition_escapes_label_values() -> None:
    metrics = Metrics()
    metrics.refused(int(ErrorCode.BAD_MESSAGE))
    metrics.refused(999)  # a code this server does not know by name
    metrics.store_call('we"ird\\op\n', 0.002)
    text = metrics.render()
    samples = parse_exposition(text)
    assert samples['seabattle_refusals_total{code="BAD_MESSAGE"}'] == 1
    assert samples['seabattle_refusals_total{code="999"}'] == 1
    assert 'op="we\\"ird\\\\op\\n"' in text


# -- structured logs ------------------------------------------------------------------------------


async def test_a_match_logs_json_lines_with_its_context(
    tmp_path: Path, nursery: trio.Nursery, json_log: io.StringIO
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    with trio.fail_after(10):
        await play_both(Bot(a, "custody", 7), Bot(b, "custody", 8))
    await a.close()
    await b.close()

    def logged() -> list[dict[str, Any]]:
        return [json.loads(line) for line in json_log.getvalue().splitlines()]

    with trio.fail_after(5):
        # The server may still be storing the co-signatures the bots sent at match_over.
        while not any(x["msg"] == "closed" for x in logged()):
            await trio.sleep(0.01)
    lines = logged()
    assert lines and all({"ts", "level", "logger", "msg"} <= set(x) for x in lines)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", x["ts"]) for x in lines)
    of_match = [x for x in lines if x.get("match") == mid.hex()]
    msgs = [x["msg"] for x in of_match]
    assert any(s.startswith("created by") for s in msgs), msgs
    assert any(s.startswith("started (custody)") for s in msgs), msgs
    assert any(s.startswith("match over") for s in msgs), msgs
    # The text prefix stays out of the JSON message: the context is in fields.
    assert not any(s.startswith("[") for s in msgs)
    seated = [x for x in of_match if x["msg"].startswith("seat")]
    assert seated and all(x["seat"] in (0, 1) and ":" in x["peer"] for x in seated)
    assert {x["player"] for x in seated} <= {a.player, b.player}
    peers = [x for x in lines if x["msg"] == "authenticated"]
    assert {x["player"] for x in peers} == {a.player, b.player}
    assert all(x["peer"].startswith("127.0.0.1:") for x in peers)
    assert any(x["msg"] == "closed" and "peer" in x for x in lines)


def test_text_logs_keep_a_short_context_prefix(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="seabattle.test")
    log = ContextLog(logging.getLogger("seabattle.test"), {"match": "ab" * 16})
    log.info("seat %d moved", 1, extra={"seat": 1, "player": "cd" * 32})
    (record,) = caplog.records
    assert record.getMessage() == f"[match=abababab seat=1 player={'cd' * 6}] seat 1 moved"
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "seat 1 moved"
    assert (line["match"], line["seat"], line["player"]) == ("ab" * 16, 1, "cd" * 32)


def test_json_lines_carry_exceptions_on_one_line() -> None:
    out = io.StringIO()
    handler = configure_logging("json", stream=out)
    try:
        try:
            raise ValueError("line one\nline two")
        except ValueError:
            logging.getLogger("seabattle.server.x").exception("it failed: %s", "why")
    finally:
        logging.getLogger().removeHandler(handler)
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert record["msg"] == "it failed: why" and record["level"] == "ERROR"
    assert "ValueError: line one\nline two" in record["exc"]
    with pytest.raises(ValueError, match="log format"):
        configure_logging("xml")


# -- main: --json status, --log-format json, --metrics-port ---------------------------------------


def test_main_prints_json_status_and_serves_metrics(tmp_path: Path) -> None:
    code = (
        "from seabattle.server.app import main; "
        f"main('127.0.0.1', 0, {str(tmp_path / 'db')!r}, {str(tmp_path / 'k')!r}, "
        "json_status=True, log_format='json', metrics_port=0)"
    )
    with server_process(code) as proc:
        assert proc.stdout is not None
        up: dict[str, Any] = json.loads(proc.stdout.readline())
        assert up["event"] == "listening" and up["host"] == "127.0.0.1" and up["port"] > 0
        assert up["listening"] == f"127.0.0.1:{up['port']}"
        assert up["metrics_host"] == "127.0.0.1" and up["metrics_port"] > 0
        assert up["db"] == str(tmp_path / "db") and len(up["server_key"]) == 64
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", up["key_fingerprint"])
        url = f"http://127.0.0.1:{up['metrics_port']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert b"seabattle_connections_open 0" in resp.read()
        rc, out, err = interrupt(proc)
    assert rc == 0, err
    (down,) = [json.loads(line) for line in out.splitlines()]
    assert down["event"] == "stopped" and down["connections"] == 0
    assert down["matches_finished"] == {"blind": 0, "custody": 0}
    logged = [json.loads(line) for line in err.splitlines()]
    assert any(x["msg"].startswith("metrics on http://127.0.0.1:") for x in logged)
    assert any("shutting down" in x["msg"] for x in logged)


def test_a_taken_metrics_port_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = (
            "from seabattle.server.app import main; "
            f"main('127.0.0.1', 0, {str(tmp_path / 'db')!r}, {str(tmp_path / 'k')!r}, "
            f"metrics_port={port})"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and r.stdout == ""
    assert f"metrics endpoint 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_a_database_url_is_shown_without_its_password() -> None:
    assert _redact("postgresql://u:s3cret@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert _redact("postgresql://u@db/x") == "postgresql://u@db/x"
    assert _redact("/var/lib/seabattle.db") == "/var/lib/seabattle.db"


# -- hot path: quiet answer clock, one write per batch, one encoding per event --------------------


class _ClockBot(Bot):
    """A bot that notes every ``clock`` it is sent."""

    def __init__(self, c: Any, mode: str, seed: int) -> None:
        super().__init__(c, mode, seed)
        self.clocks: list[m.Clock] = []

    async def on(self, msg: Any) -> None:
        if isinstance(msg, m.Clock):
            self.clocks.append(msg)
        await super().on(msg)


async def test_blind_shots_arm_the_answer_clock_without_announcing_it(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    a, b, _ = await pair(addr, nursery, SMALL, "blind")
    ba, bb = _ClockBot(a, "blind", 41), _ClockBot(b, "blind", 42)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.errors == bb.errors == [] and ba.result is not None
    kinds = {c.kind for c in ba.clocks + bb.clocks}
    assert "answer" not in kinds and "reveal" in kinds


async def test_unanswered_blind_shot_still_shows_its_clock_in_a_snapshot(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    # A long answer clock: virtual time jumps while the store works in its thread during the
    # spectator's handshake, and the snapshot must catch the answer still pending.
    rules = {**SMALL, "clocks": {"reveal": 3600}}
    a, b, mid = await pair(addr, nursery, rules, "blind")
    ba, bb = Bot(a, "blind", 43), Bot(b, "blind", 44)

    def no_answer(msg: m.Message) -> m.Message | None:
        return None if isinstance(msg, m.Answer) else msg

    ba.bend = bb.bend = no_answer
    async with trio.open_nursery() as n:
        n.start_soon(ba.play, lambda msg: isinstance(msg, m.ShotCalled))
        n.start_soon(bb.play, lambda msg: isinstance(msg, m.ShotCalled))
    watcher = await connect(addr, nursery, name="eve")
    await watcher.send(m.Watch(1, mid))
    snap = await watcher.expect(m.Snapshot, skip=(m.Ok,))
    assert snap.view["phase"] == "answer" and snap.view["clock"]["kind"] == "answer"
    assert 0 < snap.view["clock"]["left"] <= 3600
