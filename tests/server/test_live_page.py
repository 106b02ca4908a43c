"""The server's HTTP port beside ``/metrics``: ``/healthz``, the running matches (``/watch/``),
the live spectator page ``/watch/MATCH`` with its server-sent events, and the records
(``/records/MATCH``), read raw and followed in headless Chromium.

What a spectator relies on: the index lists the running public matches and links each; the page
shows the match as it stands the moment it loads (names, clocks, the move log, the ships afloat,
across the window), follows it to its end and then says who won, why, and where the signed
record is; it never shows a fleet before that fleet's reveal; a private match, an unknown one and
a path that is not a match are all 404.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from chromium import Browser
from helpers import SMALL, Bot, connect, pair, play_both, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.record import load_record, verify_record
from seabattle.protocol.rules import rules_from_dict
from seabattle.server.metrics import Metrics, serve_metrics
from seabattle.server.referee import Seat
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
        f"/records/{mid.hex()}",  # running: no record yet
        "/records/zz",
        "/nothing",
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
    # The moves: from the snapshot on (it says reset: none had been played), every shot once,
    # in order, each with the results its verdict gave, matching the boards.
    assert views[0]["reset"] and not any(d["reset"] for d in views[1:])
    moves = [mv for d in views for mv in d["moves"]]
    assert [mv["n"] for mv in moves] == list(range(1, last["shots"] + 1))
    fired = {
        (1 - mv["seat"], cell): r  # a shot of seat s is on the other seat's board
        for mv in moves
        for cell, r in zip(mv["cells"], mv["results"], strict=True)
    }
    boards = [(s, last["boards"][s]["fired"]) for s in (0, 1)]
    assert fired == {(s, f"{'ABCDE'[i % 5]}{i // 5 + 1}"): r for s, b in boards for i, r in b}
    # After the reveal the fleets are public, and the page has them.
    assert all(fleet is not None for fleet in views[-1]["revealed"])


# -- the live page in headless Chromium ------------------------------------------------------------

#: SMALL with a shot clock, so that the page has a clock to show while the game is played.
CLOCKED = {**SMALL, "clocks": {"shot": 30}}


def _says(browser: Browser, expression: str) -> Any:
    return browser.eval(expression)


def _shown_names(views: list[dict[str, Any]]) -> list[str]:
    """What the page must call the seats: the view's names, or short ids where it has none."""
    view = views[0]["view"]
    return view.get("names") or [p[:12] for p in view["players"]]


def _log_lines(browser: Browser) -> list[str]:
    lines: list[str] = browser.eval(
        "[].map.call(document.querySelectorAll('#log li:not(.game):not(.pending)'),"
        " function (li) { return li.textContent; })"
    )
    return lines


async def test_the_page_follows_a_running_match_in_chromium(
    nursery: trio.Nursery, tmp_path: Path, browser: Browser
) -> None:
    addr, http = await _server(nursery, tmp_path)
    a, b, mid = await pair(addr, nursery, CLOCKED, "blind")
    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    url = f"http://{http[0]}:{http[1]}/watch/{mid.hex()}"
    await trio.to_thread.run_sync(browser.open, url)
    # The snapshot: the match as it stands, nobody has fired yet.
    phase = await trio.to_thread.run_sync(browser.wait, "document.body.dataset.phase")
    assert phase in ("setup", "firing")
    views = await trio.to_thread.run_sync(browser.eval, "window.sbViews")
    names = _shown_names(views)
    if "names" in views[0]["view"]:
        assert names == ["alice", "bob"]  # what they authenticated as
    text = await trio.to_thread.run_sync(browser.eval, "document.body.innerText")
    assert names[0] in text and names[1] in text

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
        # The move log: both shots, in order, each with its result.
        lines = await trio.to_thread.run_sync(_log_lines, browser)
        assert len(lines) == 2
        assert all(re.fullmatch(r".+ → [A-E][1-5]: (miss|hit|sunk)(; sank .+)?", x) for x in lines)
        # The shot clock runs for the seat to move, counting down.
        # The clock runs for the seat that owes the next move (the shooter's shot, or the
        # defender's answer to a shot called), counting down; the other's shows the rule.
        running = await trio.to_thread.run_sync(
            browser.wait, "document.querySelector('.seat.turn .clock.running').textContent"
        )
        assert re.fullmatch(r"(shot|answer) clock [01]:[0-5]\d", running), running
        idle = await trio.to_thread.run_sync(
            browser.eval, "document.querySelector('.seat:not(.turn) .clock').textContent"
        )
        assert idle == "30 s a shot"
        # Ships afloat on each side, as the rules tell sinkings (classic: named).
        fleets = await trio.to_thread.run_sync(
            browser.eval, "[].map.call(document.querySelectorAll('.afloat'), e => e.textContent)"
        )
        assert len(fleets) == 2 and all(re.fullmatch(r"[0-2] of 2 ships afloat", f) for f in fleets)
        await play_both(ba, bb)
        await trio.to_thread.run_sync(browser.wait, "document.body.dataset.ended")
    assert ba.result is not None
    await _shows_the_end(browser, ba, mid, names)
    text = await trio.to_thread.run_sync(browser.eval, "document.body.innerText")
    winner = ba.outcomes[-1]["winner"]
    assert f"game 1: {names[winner]} wins (fleet sunk)" in text
    # The loser's fleet is all sunk: none of its ships afloat.
    afloat = await trio.to_thread.run_sync(
        browser.eval, f"document.querySelector('#seat{1 - winner} .afloat').textContent"
    )
    assert afloat == "0 of 2 ships afloat"
    views = await trio.to_thread.run_sync(browser.eval, "window.sbViews")
    _no_fleet_before_its_reveal(views)
    # Every shot of the game is in the log, once.
    lines = await trio.to_thread.run_sync(_log_lines, browser)
    assert len(lines) == views[-1]["view"]["shots"]
    # Once revealed, both fleets are drawn: every ship cell of both seats.
    ships = await trio.to_thread.run_sync(
        browser.eval, "document.querySelectorAll('td.ship').length"
    )
    assert ships == 2 * rules_from_dict(SMALL).fleet_cells
    # The record link downloads the signed record, which verifies.
    status, kind, body = await _get(http, f"/records/{mid.hex()}")
    assert (status, kind) == (200, "application/octet-stream")
    assert verify_record(load_record(body)).ok
    # Loaded again once the match is over, the page opens on its end.
    await trio.to_thread.run_sync(browser.open, url)
    assert await trio.to_thread.run_sync(browser.wait, "document.body.dataset.ended")
    await _shows_the_end(browser, ba, mid, names)


async def _shows_the_end(browser: Browser, bot: Bot, mid: bytes, names: list[str]) -> None:
    """The page says who won, that the match is over, and links the record."""
    assert bot.result is not None
    text = await trio.to_thread.run_sync(browser.eval, "document.body.innerText")
    winner = names[bot.outcomes[-1]["winner"]]
    assert f"match over: {winner} wins" in text
    state = await trio.to_thread.run_sync(
        browser.eval, "document.getElementById('state').textContent"
    )
    assert state == "match over"
    assert "live" not in text.split() and "to move" not in text
    link = await trio.to_thread.run_sync(browser.eval, "document.getElementById('record').href")
    assert link.endswith(f"/records/{mid.hex()}")
    head = await trio.to_thread.run_sync(
        browser.eval, "document.getElementById('head').textContent"
    )
    assert head == bot.result.head.hex()  # the whole head, not cut


class _Mute(WatchSite):
    """The watch routes with an event stream that never says anything: whatever the page shows
    is what it carried when it loaded."""

    def route(self, method: bytes, path: bytes) -> Any:
        if path.endswith(b"/events"):
            return lambda stream: trio.sleep_forever()
        return super().route(method, path)


async def test_the_page_shows_the_match_at_once_and_uses_the_window(
    nursery: trio.Nursery, tmp_path: Path, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("seabattle.server.app.WatchSite", _Mute)
    addr, http = await _server(nursery, tmp_path)
    _, _, mid = await pair(addr, nursery, {"preset": "classic"}, "blind")
    viewport = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    await trio.to_thread.run_sync(browser.call, "Emulation.setDeviceMetricsOverride", viewport)
    try:
        url = f"http://{http[0]}:{http[1]}/watch/{mid.hex()}"
        await trio.to_thread.run_sync(browser.open, url)
        got = await trio.to_thread.run_sync(browser.eval, _LAYOUT)
        shot = await trio.to_thread.run_sync(browser.call, "Page.captureScreenshot", {})
    finally:
        await trio.to_thread.run_sync(browser.call, "Emulation.clearDeviceMetricsOverride")
    (tmp_path / "watch.png").write_bytes(base64.b64decode(shot["data"]))
    # Drawn from the page itself: no event came, and the boards are there, every cell.
    assert got["source"] == "page" and got["views"] == 1
    assert got["cells"] == [100, 100] and "connecting" not in got["text"]
    # Both boards side by side and the log beside them, across most of the window.
    b0, b1, side = got["board0"], got["board1"], got["side"]
    assert b0["right"] < b1["left"] and b1["right"] < side["left"]
    assert b1["right"] - b0["left"] >= 0.6 * 1280
    assert side["right"] >= 0.9 * 1280
    assert b0["height"] >= 0.45 * 900 and b1["bottom"] <= 900


_LAYOUT = """(function () {
  function box(id) {
    var r = document.getElementById(id).getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, height: r.height};
  }
  return {source: document.body.dataset.source, views: window.sbViews.length,
          cells: [0, 1].map(function (s) {
            return document.querySelectorAll('#board' + s + ' td').length; }),
          text: document.body.innerText,
          board0: box('board0'), board1: box('board1'), side: box('side')};
})()"""


# -- the running matches --------------------------------------------------------------------------


async def test_the_index_lists_running_public_matches_and_links_them(
    nursery: trio.Nursery, tmp_path: Path, browser: Browser
) -> None:
    addr, http = await _server(nursery, tmp_path)
    base = f"http://{http[0]}:{http[1]}"
    status, _, _ = await _get(http, "/")
    assert status == 302
    # From the server's root: redirected to the index, which lists nothing yet.
    await trio.to_thread.run_sync(browser.open, base + "/")
    assert await trio.to_thread.run_sync(browser.eval, "location.pathname") == "/watch/"
    assert await trio.to_thread.run_sync(browser.eval, "document.body.dataset.rows") == "0"
    text = await trio.to_thread.run_sync(browser.eval, "document.body.innerText")
    assert "No public match is running" in text
    # A public match starts (and a private one, which is not listed): the page finds it.
    _, _, mid = await pair(addr, nursery, SMALL, "blind")
    alice = await connect(addr, nursery, name="carol")
    ok = await alice.request(m.Create(1, SMALL, "blind", False))
    dave = await connect(addr, nursery, name="dave")
    assert isinstance(await dave.request(m.Join(1, None, ok.data["invite"])), m.Ok)
    with trio.fail_after(30):
        await trio.to_thread.run_sync(browser.wait, "document.body.dataset.rows === '1'")
    row = await trio.to_thread.run_sync(
        browser.eval, "document.querySelector('#matches tbody tr').innerText"
    )
    assert "alice vs bob" in row and "classic" in row and "blind" in row
    assert mid.hex() in row and ok.data["match"].hex() not in row
    # Its link opens the match's page.
    link = await trio.to_thread.run_sync(
        browser.eval, "document.querySelector('#matches tbody a').href"
    )
    assert link == f"{base}/watch/{mid.hex()}"
    await trio.to_thread.run_sync(browser.open, link)
    assert await trio.to_thread.run_sync(browser.wait, "document.body.dataset.phase") == "setup"
    # The same list, for a script.
    status, kind, body = await _get(http, "/watch/matches.json")
    assert (status, kind) == (200, "application/json")
    listed = json.loads(body)
    assert [r["match"] for r in listed["rows"]] == [mid.hex()] and listed["total"] == 1
    assert listed["rows"][0]["names"] == ["alice", "bob"] and not listed["cluster"]


async def test_the_index_is_bounded() -> None:
    refs = [_Ref(bytes([0] * 15 + [i])) for i in range(105)]
    lobby: Any = type("L", (), {"running": {r.match_id: r for r in refs}})()
    site = WatchSite(lobby, max_rows=100)
    index = site.index()
    assert index["total"] == 105 and len(index["rows"]) == 100
    # The newest first: the last to start heads the list.
    assert index["rows"][0]["match"] == refs[-1].hex
    page = site.route(b"GET", b"/watch/")
    assert isinstance(page, bytes) and page.startswith(b"HTTP/1.1 200 ")
    assert page.count(b'"match":') == 100


# -- bounds ---------------------------------------------------------------------------------------


class _Ref:
    """A running public match as the watch routes see it: views on demand, spectators."""

    def __init__(self, match_id: bytes = bytes(range(16))) -> None:
        self.match_id = match_id
        self.hex = self.match_id.hex()
        self.public, self.over = True, False
        self.spectators: set[Any] = set()
        self.rules = rules_from_dict(SMALL)
        self.mode, self.teams, self.game = "blind", None, None
        self.seats = [Seat("a" * 64, "ann"), Seat("b" * 64, "")]
        self.match = type("M", (), {"scores": [0, 0]})()

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
