"""The server's HTTP port beside ``/metrics``: ``/healthz``, and the live spectator page
``/watch/MATCH`` with its server-sent events, read raw and followed in headless Chromium.

What a spectator relies on: the stream starts with the match as it stands, follows it to its end
and then says so with the record's head, and never shows a fleet before that fleet's reveal; a
private match, an unknown one and a path that is not a match are all 404.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from chromium import Browser
from helpers import SMALL, Bot, connect, pair, play_both, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.rules import rules_from_dict
from seabattle.server.metrics import Metrics, serve_metrics
from seabattle.server.watch import WatchSite


async def _get(addr: tuple[str, int], path: str) -> tuple[int, str, bytes]:
    """``GET path``, read to the end: status, content type, body."""
    stream = await trio.open_tcp_stream(*addr)
    async with stream:
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    kind = next(
        (ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith("content-type")), ""
    )
    return int(lines[0].split(" ")[1]), kind, body


def _events(body: bytes) -> list[tuple[str, Any]]:
    """The events of a finished ``text/event-stream`` body, as (kind, data) pairs."""
    out = []
    for block in body.decode().split("\n\n"):
        fields = dict(ln.split(": ", 1) for ln in block.splitlines() if not ln.startswith(":"))
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


async def _server(nursery: trio.Nursery, tmp_path: Path) -> tuple[tuple[str, int], tuple[str, int]]:
    stats = Metrics()
    addr, _ = await start_server(nursery, tmp_path, metrics=("127.0.0.1", 0), stats=stats)
    assert stats.address is not None
    return addr, stats.address


def _no_fleet_before_its_reveal(views: list[dict[str, Any]]) -> None:
    for d in views:
        text = json.dumps(d["view"])
        assert "fleet" not in d["view"] and "secret" not in text
        phase = d["view"].get("phase")
        if phase not in ("reveal", "over"):
            assert d["revealed"] == [None, None], phase


# -- health ---------------------------------------------------------------------------------------


async def test_healthz_says_live_and_ready(nursery: trio.Nursery, tmp_path: Path) -> None:
    _, http = await _server(nursery, tmp_path)
    assert await _get(http, "/healthz/live") == (200, "text/plain; charset=utf-8", b"live\n")
    assert (await _get(http, "/healthz/ready"))[::2] == (200, b"ready\n")
    status, kind, body = await _get(http, "/healthz")
    assert (status, kind) == (200, "application/json")
    assert json.loads(body) == {"live": True, "ready": True, "reason": ""}


async def test_a_server_not_ready_answers_503_with_why(nursery: trio.Nursery) -> None:
    http = await nursery.start(
        lambda task_status: serve_metrics(
            Metrics(), "127.0.0.1", 0, task_status=task_status, ready=lambda: "shutting down"
        )
    )
    assert (await _get(http, "/healthz/ready"))[::2] == (503, b"shutting down\n")
    assert json.loads((await _get(http, "/healthz"))[2])["ready"] is False
    assert (await _get(http, "/healthz/live"))[0] == 200  # live, all the same


# -- the live page over raw HTTP ------------------------------------------------------------------


async def test_only_running_public_matches_have_a_page(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    addr, http = await _server(nursery, tmp_path)
    _, _, mid = await pair(addr, nursery, SMALL, "blind")
    status, kind, page = await _get(http, f"/watch/{mid.hex()}")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert mid.hex().encode() in page and b"default-src 'none'" in page
    # A private match (an invitation), an unknown id, junk ids and other paths: 404 alike.
    alice = await connect(addr, nursery, name="alice")
    ok = await alice.request(m.Create(1, SMALL, "blind", False))
    carol = await connect(addr, nursery, name="carol")
    assert isinstance(await carol.request(m.Join(1, None, ok.data["invite"])), m.Ok)
    for path in (
        f"/watch/{ok.data['match'].hex()}",
        f"/watch/{ok.data['match'].hex()}/events",
        f"/watch/{bytes(16).hex()}",
        "/watch/zz",
        f"/watch/{mid.hex()}00",
        f"/watch/{mid.hex()}/nothing",
        f"/watch/{mid.hex()}/events/more",
        "/watch/",
        "/watch",
    ):
        assert (await _get(http, path))[0] == 404, path


async def test_the_event_stream_follows_the_match_to_its_end(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    addr, http = await _server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "blind")
    got: list[tuple[int, str, bytes]] = []

    async def watch(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        got.append(await _get(http, f"/watch/{mid.hex()}/events"))

    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            await n.start(watch)
            await trio.testing.wait_all_tasks_blocked()  # the stream is watching
            await play_both(ba, bb)
    assert ba.result is not None
    status, kind, body = got[0]
    assert (status, kind) == (200, "text/event-stream; charset=utf-8")
    events = _events(body)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "end" and set(kinds[:-1]) == {"view"}
    assert events[-1][1] == {"head": ba.result.head.hex()}
    views = [d for k, d in events if k == "view"]
    _no_fleet_before_its_reveal(views)
    last = views[-1]["view"]
    assert last["over"] and last["outcome"] == ba.outcomes[-1]
    # After the reveal the fleets are public, and the page has them.
    assert all(fleet is not None for fleet in views[-1]["revealed"])


# -- the live page in headless Chromium ------------------------------------------------------------


async def test_the_page_follows_a_running_match_in_chromium(
    nursery: trio.Nursery, tmp_path: Path, browser: Browser
) -> None:
    addr, http = await _server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, SMALL, "blind")
    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    url = f"http://{http[0]}:{http[1]}/watch/{mid.hex()}"
    await trio.to_thread.run_sync(browser.open, url)
    # The snapshot: the match as it stands, nobody has fired yet.
    phase = await trio.to_thread.run_sync(browser.wait, "document.body.dataset.phase")
    assert phase in ("setup", "firing")

    def second_verdict(msg: Any) -> bool:
        return isinstance(msg, m.VerdictMsg) and msg.n == 2

    with trio.fail_after(60):
        async with trio.open_nursery() as n:  # play two shots, then hold the game there
            n.start_soon(ba.play, second_verdict)
            n.start_soon(bb.play, second_verdict)
        shots = await trio.to_thread.run_sync(
            browser.wait, "+document.body.dataset.shots >= 2 && document.body.dataset.shots"
        )
        assert shots == "2"
        hits = await trio.to_thread.run_sync(
            browser.eval, "document.querySelectorAll('td.ship').length"
        )
        assert hits == 0  # no fleet on the page before the reveal
        await play_both(ba, bb)
        await trio.to_thread.run_sync(browser.wait, "document.body.dataset.ended")
    assert ba.result is not None
    text = await trio.to_thread.run_sync(browser.eval, "document.body.innerText")
    winner = ba.outcomes[-1]["winner"]
    assert f"seat {winner} wins" in text and "match over" in text
    assert f"record {ba.result.head.hex()[:16]}" in text
    views = await trio.to_thread.run_sync(browser.eval, "window.sbViews")
    _no_fleet_before_its_reveal(views)
    # Once revealed, both fleets are drawn: every ship cell of both seats.
    ships = await trio.to_thread.run_sync(
        browser.eval, "document.querySelectorAll('td.ship').length"
    )
    assert ships == 2 * rules_from_dict(SMALL).fleet_cells


# -- bounds ---------------------------------------------------------------------------------------


class _Ref:
    """A running public match as the watch routes see it: views on demand, spectators."""

    def __init__(self) -> None:
        self.match_id = bytes(range(16))
        self.hex = self.match_id.hex()
        self.public, self.over = True, False
        self.spectators: set[Any] = set()

    def view(self) -> dict[str, Any]:
        return {"over": False, "phase": "firing", "shots": 0}

    def watch(self, peer: Any) -> None:
        self.spectators.add(peer)
        peer.send(m.Snapshot(self.match_id, None, self.view()))

    def unwatch(self, peer: Any) -> bool:
        self.spectators.discard(peer)
        return True


async def test_a_spectator_that_stops_reading_is_dropped(autojump_clock: Any) -> None:
    ref = _Ref()
    lobby: Any = type("L", (), {"running": {ref.match_id: ref}})()
    site = WatchSite(lobby, max_streams=1, write_timeout=10)
    streamer = site.route(b"GET", f"/watch/{ref.hex}/events".encode())
    assert callable(streamer)
    # One stream at a time here: the next is told so at once.
    send, receive = trio.testing.lockstep_stream_pair()  # a write waits for its reader
    with trio.fail_after(60):
        await _one_stalled_reader(site, ref, streamer, send, receive)
    assert 10 <= trio.current_time() < 11
    assert ref.spectators == set() and site.streams == 0


async def _one_stalled_reader(
    site: WatchSite, ref: _Ref, streamer: Any, send: Any, receive: Any
) -> None:
    async with trio.open_nursery() as n:
        n.start_soon(lambda: _expect_too_slow(streamer(send)))
        await trio.testing.wait_all_tasks_blocked()
        busy = site.route(b"GET", f"/watch/{ref.hex}/events".encode())
        assert isinstance(busy, bytes) and busy.startswith(b"HTTP/1.1 503 ")
        # The reader takes the response head, then never reads again: the first view's write
        # waits its 10 s, and the stream is dropped.
        head = b""
        while b"\r\n\r\n" not in head:
            head += await receive.receive_some()
        assert head.startswith(b"HTTP/1.1 200 ")


async def _expect_too_slow(stream: Awaitable[None]) -> None:
    with pytest.raises(trio.TooSlowError):
        await stream
