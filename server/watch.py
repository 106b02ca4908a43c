"""The spectators' web pages on the HTTP port: the running matches (``/watch/``), the live page of
one (``/watch/MATCH``) with its server-sent events, and the signed records (``/records/MATCH``).

Theory of operation. ``/watch/MATCH`` (the match id in hex) answers one self-contained HTML page
(inline CSS and script, a content security policy that loads nothing) for a running public match.
The page carries the match's public view as it stands inside itself, so that its first paint is
the board, not a placeholder; its script then opens ``/watch/MATCH/events``, a
``text/event-stream``. The stream's connection joins the match as a spectator
(:meth:`~.referee.Referee.watch`), exactly as a ``watch`` message would: it gets the spectators'
audience of the referee and nothing else, so what it can show is what a spectator may see
(``spec/protocol.md`` 6.5, 6.6: never a fleet or a secret), and fleets only from the public
``revealed`` messages, after the reveal.

Each event the referee sends the spectator marks the view as changed; the stream then writes the
current public view (:meth:`~.referee.Referee.view`, the snapshot's view) as one ``view`` event,
so a slow reader skips views rather than queueing them. The view has the boards but not the order
of the shots, so each event also carries the moves (shots with their results, lost shots) told
since the last one: the snapshot's event carries the current game's every shot so far, read from
the game (what the ``shot`` and ``verdict`` messages before it told), and says ``reset``. Each
write must finish within ``write_timeout`` or the stream is dropped, and at most ``max_streams``
run at once (503 beyond). When the match ends (``match_over``: its record is stored) the last view
is followed by an ``end`` event naming the record's head, and the stream closes. A public match
that finished lately (the lobby keeps the last ones) still has its page, showing its end; any
other id, or a path that is not a match, is 404 for the page and the stream alike.

``/watch/`` lists this server's running public matches (newest first, at most ``max_rows``,
saying how many more there are), each a link to its page; the page asks
``/watch/matches.json`` again every ``refresh`` seconds and redraws only what changed. A node of
a cluster lists the matches it referees, and says so. ``/`` redirects to ``/watch/``.

``/records/MATCH`` answers the stored record of a finished match (the canonical bytes of the
signed record with every co-signature, what ``get_record`` gives and ``seabattle verify``
reads) as a download; at most ``max_fetches`` run at once, each bounded by ``write_timeout``.
As ``get_record``, it serves any match's record to whoever names its id: a record is signed
evidence meant to be checked by third parties, and a private match's id is known to its players
only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio
from seabattle.common.web import BOARD_CSS, BOARD_JS, CSP, embed_json
from seabattle.protocol import messages as m

from .metrics import http_response

if TYPE_CHECKING:
    from seabattle.protocol.game import Game

    from .lobby import Lobby
    from .referee import Referee

__all__ = ["WatchSite"]

_log = logging.getLogger(__name__)

Streamer = Callable[[trio.abc.SendStream], Awaitable[None]]


def _move(
    game: int, n: int, seat: int, cells: Any, radar: bool, v: dict[str, Any]
) -> dict[str, Any]:
    """One answered shot for the page's log, from its verdict's wire form (openings left out:
    the page shows results, and the openings are most of a verdict's bytes)."""
    results = v.get("results") or []
    sunk = [r["sunk"]["k"] for r in results if r.get("sunk")]
    sunk += [s["k"] for s in v.get("sunk") or []]
    return {
        "game": game,
        "n": n,
        "seat": seat,
        "cells": list(cells),
        "radar": radar,
        "results": [r["r"] for r in results],
        "total": v.get("total"),
        "sunk": sunk,
        "found": v.get("found"),
    }


def _moves_so_far(game: Game | None) -> list[dict[str, Any]]:
    """Every answered shot of ``game`` in order: the log a spectator arriving now has missed.

    Read from the game (rebuilt from its transcript), once a stream or a page load: the same
    shots and verdicts the ``shot`` and ``verdict`` messages told everyone watching.
    """
    if game is None:
        return []
    return [
        _move(game.number, s.n, s.seat, [c.label() for c in s.cells], s.radar, v.to_dict())
        for s, v in game.shots
    ]


def _revealed_so_far(game: Game | None) -> list[Any]:
    """The fleets of ``game`` revealed so far (what ``revealed`` told everyone), by seat."""
    if game is None:
        return [None, None]
    return [r.fleet.to_list() if r is not None else None for r in game.reveals]


def _shown(view: dict[str, Any]) -> dict[str, Any]:
    """The view as the pages get it: JSON-ready, without the commitments (a leaf per cell, for a
    client checking openings: a page has no use for them, and they would be most of its bytes)."""
    out: dict[str, Any] = _plain({k: v for k, v in view.items() if k != "commitments"})
    return out


class _Spectator:
    """The stream's seat among the referee's spectators (a :class:`~.config.Peer`)."""

    player = ""
    name = "http-spectator"
    follows = False
    teams = False
    lean = False
    people = False

    def __init__(self, ref: Referee) -> None:
        self.ref = ref
        self.changed = trio.Event()
        self.view: dict[str, Any] | None = None
        self.revealed: list[Any] = [None, None]  #: the fleets revealed in the current game
        #: moves told since the last event written (bounded: a game has that many shots)
        self.moves: list[dict[str, Any]] = []
        self.reset = False  #: ``moves`` is the current game's whole log (the snapshot)
        self.head: bytes | None = None
        self.closed = False

    def send(self, msg: m.Message) -> None:
        """Take one message for spectators: keep what it tells, read the view, wake the stream."""
        if isinstance(msg, m.Snapshot):
            # Everything so far, as of the snapshot: what came before it is in it.
            game = self.ref.game
            self.moves, self.reset = _moves_so_far(game), True
            self.revealed = _revealed_so_far(game)
        elif isinstance(msg, m.GameStart):
            self.revealed = [None, None]
        elif isinstance(msg, m.VerdictMsg):
            self.moves.append(_move(msg.game, msg.n, msg.seat, msg.cells, msg.radar, msg.verdict))
        elif isinstance(msg, m.ShotLost):
            self.moves.append(
                {"game": msg.game, "seat": msg.seat, "lost": msg.why, "cells": list(msg.cells)}
            )
        elif isinstance(msg, m.Revealed):
            # Public from here on (the reveal is sent to everyone); never the secret.
            self.revealed[msg.seat] = msg.reveal.get("fleet")
        elif isinstance(msg, m.MatchOver):
            self.head = msg.head
        # Read now: the page shows the match as this message left it.
        self.view = self.ref.view()
        self.changed.set()

    def close(self, reason: str) -> None:
        """The referee lets go of its spectators: end the stream."""
        self.closed = True
        self.changed.set()

    @property
    def connected(self) -> bool:
        """Whether the stream is still wanted."""
        return not self.closed

    def take(self) -> dict[str, Any]:
        """The event for the current view, with the moves told since the last one."""
        assert self.view is not None
        data = {
            "view": _shown(self.view),
            "revealed": self.revealed,
            "moves": self.moves,
            "reset": self.reset,
        }
        self.moves, self.reset = [], False
        return data


def _plain(v: Any) -> Any:
    """``v`` as JSON-ready values: byte strings in hex."""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def _match_id(hexid: bytes) -> bytes | None:
    """The match id ``hexid`` names (32 hex digits), or ``None``."""
    if len(hexid) != 32:
        return None
    try:
        return bytes.fromhex(hexid.decode("ascii"))
    except ValueError:
        return None


def _names(ref: Referee) -> list[str]:
    """The seats' display names for the index (the names the players authenticated with, as the
    view's ``names``), or their ids cut short where a seat has none."""
    return [s.name or s.player[:12] for s in ref.seats]


class WatchSite:
    """The spectators' routes of the HTTP endpoint (``/``, ``/watch/``, ``/records/``), over the
    lobby's running matches."""

    def __init__(
        self,
        lobby: Lobby,
        *,
        max_streams: int = 64,
        write_timeout: float = 10.0,
        keepalive: float = 15.0,
        max_rows: int = 100,
        refresh: float = 3.0,
        max_fetches: int = 8,
    ) -> None:
        """``max_streams`` event streams at once; a write that takes ``write_timeout`` drops its
        stream; a comment line every ``keepalive`` seconds keeps quiet streams open. The index
        lists ``max_rows`` matches at most and its page asks again every ``refresh`` seconds;
        ``max_fetches`` record downloads run at once."""
        self.lobby = lobby
        self.max_streams = max_streams
        self.write_timeout = write_timeout
        self.keepalive = keepalive
        self.max_rows = max_rows
        self.refresh = refresh
        self.max_fetches = max_fetches
        self.streams = 0
        self.fetches = 0
        #: the index as last built and when (trio time): every page open asks every ``refresh``
        #: seconds, and each build reads every running match
        self._index: tuple[float, dict[str, Any]] | None = None

    def route(self, method: bytes, path: bytes) -> bytes | Streamer | None:
        """The response to ``method path`` (bytes, or a streamer), or ``None``: not ours."""
        head_only = method == b"HEAD"
        if path in (b"/", b"/watch"):
            return _redirect(b"/watch/", head_only)
        parts = path.split(b"/")
        if len(parts) == 3 and parts[1] == b"records":
            return self._record_route(parts[2], head_only)
        if len(parts) not in (3, 4) or parts[:2] != [b"", b"watch"]:
            return None
        if len(parts) == 3 and parts[2] in (b"", b"matches.json"):
            return self._index_route(parts[2] == b"", head_only)
        mid = _match_id(parts[2])
        ref = self._find(mid) if mid is not None else None
        if len(parts) == 3:
            if ref is None and mid is not None:
                ref = self._finished(mid)
            if ref is None:
                return http_response(404, b"no running public match with that id\n")
            page = _live_page(ref, self._page_data(ref))
            return http_response(200, page, b"text/html; charset=utf-8", head_only=head_only)
        if ref is None:
            return http_response(404, b"no running public match with that id\n")
        if parts[3] != b"events" or head_only:
            return None
        if self.streams >= self.max_streams:
            return http_response(503, b"too many spectators on this endpoint\n")
        return lambda stream: self._stream(ref, stream)

    # -- the running matches --------------------------------------------------------------------

    def index(self) -> dict[str, Any]:
        """The running public matches as the index shows them (built at most once a second)."""
        now = trio.current_time()
        if self._index is not None and now - self._index[0] < 1.0:
            return self._index[1]
        running = [r for r in self.lobby.running.values() if r.public and not r.over]
        rows = []
        # Newest first: the lobby's dict is in the order the matches started.
        for ref in reversed(running[-self.max_rows :] if self.max_rows else []):
            match, game = ref.match, ref.game
            rows.append(
                {
                    "match": ref.hex,
                    "rules": ref.rules.name,
                    "mode": ref.mode,
                    "names": _names(ref),
                    "teams": ref.teams is not None,
                    "game": game.number if game is not None else 0,
                    "games": ref.rules.match.games,
                    "phase": game.phase.value if game is not None else "starting",
                    "scores": list(match.scores),
                    "spectators": len(ref.spectators),
                }
            )
        cluster = getattr(self.lobby, "cluster", None) is not None
        node = getattr(self.lobby, "node", "main")
        data = {"rows": rows, "total": len(running), "cluster": cluster, "node": node}
        data["refresh"] = self.refresh
        self._index = (now, data)
        return data

    def _index_route(self, page: bool, head_only: bool) -> bytes:
        data = self.index()
        if page:
            body = _INDEX.replace("@DATA@", embed_json(data)).encode()
            return http_response(200, body, b"text/html; charset=utf-8", head_only=head_only)
        body = json.dumps(data, separators=(",", ":")).encode()
        return http_response(200, body, b"application/json", head_only=head_only)

    # -- one match ------------------------------------------------------------------------------

    def _find(self, mid: bytes) -> Referee | None:
        ref = self.lobby.running.get(mid)
        # A private match is watched by its players only (lobby ``watch``): not from here.
        return ref if ref is not None and ref.public and not ref.over else None

    def _finished(self, mid: bytes) -> Referee | None:
        """A public match that finished lately, its record stored (the lobby keeps the last)."""
        finished = getattr(self.lobby, "finished", {})
        ref: Referee | None = finished.get(mid)
        return ref if ref is not None and ref.public and ref.recorded else None

    def _page_data(self, ref: Referee) -> dict[str, Any]:
        """What the page carries inside itself: the match as it stands, its log so far, and,
        for a finished match, its end (the page then opens no stream)."""
        game = ref.game
        data: dict[str, Any] = {
            "view": _shown(ref.view()),
            "revealed": _revealed_so_far(game),
            "moves": _moves_so_far(game),
            "reset": True,
        }
        if ref.over:
            data["end"] = {"head": ref.head.hex() if ref.recorded else None}
        return data

    async def _stream(self, ref: Referee, stream: trio.abc.SendStream) -> None:
        self.streams += 1
        spectator = _Spectator(ref)
        try:
            await self._write(stream, _SSE_HEAD)
            ref.watch(spectator)  # its snapshot is the first view
            sent: dict[str, Any] | None = None
            while True:
                with trio.move_on_after(self.keepalive):
                    await spectator.changed.wait()
                spectator.changed = trio.Event()
                view = spectator.view
                if view is not None and view is not sent:
                    sent = view
                    await self._write(stream, _event("view", spectator.take()))
                else:
                    await self._write(stream, b": keepalive\n\n")
                # The end: match_over (its record is stored), or the match left the lobby
                # without one (aborted, or suspended by a shutdown).
                gone = self.lobby.running.get(ref.match_id) is not ref
                if spectator.closed or spectator.head is not None or gone:
                    head = spectator.head.hex() if spectator.head else None
                    await self._write(stream, _event("end", {"head": head}))
                    return
        finally:
            ref.unwatch(spectator)
            self.streams -= 1

    async def _write(self, stream: trio.abc.SendStream, data: bytes) -> None:
        with trio.fail_after(self.write_timeout):
            await stream.send_all(data)

    # -- records --------------------------------------------------------------------------------

    def _record_route(self, hexid: bytes, head_only: bool) -> bytes | Streamer:
        mid = _match_id(hexid)
        if mid is None:
            return http_response(404, b"not a match id\n")
        if self.fetches >= self.max_fetches:
            return http_response(503, b"too many record downloads on this endpoint\n")
        return lambda stream: self._record(mid.hex(), stream, head_only)

    async def _record(self, hexid: str, stream: trio.abc.SendStream, head_only: bool) -> None:
        self.fetches += 1
        try:
            answer = http_response(503, b"the store did not answer in time\n")
            with trio.move_on_after(self.write_timeout):
                try:
                    row = await self.lobby.store.get_record(hexid, 0)
                except Exception:
                    # The store is away (a cluster's database blinks): say so, as for a timeout.
                    _log.warning("record %s: the store failed", hexid, exc_info=True)
                    row = None
                    answer = http_response(503, b"the store is not answering\n")
                else:
                    answer = (
                        _download(row.record, f"{hexid}.sbr", head_only)
                        if row is not None
                        else http_response(404, b"no record for that match (yet)\n")
                    )
            await self._write(stream, answer)
        finally:
            self.fetches -= 1


def _download(body: bytes, filename: str, head_only: bool) -> bytes:
    """A 200 response that a browser saves as ``filename``."""
    head = (
        "HTTP/1.1 200 OK\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "Cache-Control: no-store\r\n"
        "Content-Type: application/octet-stream\r\n"
        f'Content-Disposition: attachment; filename="{filename}"\r\n'
        "X-Content-Type-Options: nosniff\r\n\r\n"
    ).encode()
    return head if head_only else head + body


def _redirect(location: bytes, head_only: bool) -> bytes:
    """A 302 to ``location`` (the endpoint's own responses know no redirect)."""
    body = b"see " + location + b"\n"
    head = (
        b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"Connection: close\r\nCache-Control: no-store\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n\r\n"
    )
    return head if head_only else head + body


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream; charset=utf-8\r\n"
    b"Cache-Control: no-store\r\n"
    b"Connection: close\r\n"
    b"X-Content-Type-Options: nosniff\r\n\r\n"
)


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _live_page(ref: Referee, data: dict[str, Any]) -> bytes:
    """The live page of ``ref``, carrying ``data`` (its first paint)."""
    return _PAGE.replace("@MATCH@", ref.hex).replace("@DATA@", embed_json(data)).encode()


_LIVE_CSS = """
body { margin: 0; padding: 12px 24px; box-sizing: border-box; min-height: 100vh; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .4em 1.2em; }
header h1 { margin: 0; }
header code { font-size: .8em; color: #456; }
header nav { margin-left: auto; }
.pill { display: inline-block; padding: .05em .6em; border-radius: 1em; font-size: .8em;
  vertical-align: middle; font-weight: normal; }
.pill.live { background: #d3f5dc; color: #135f28; }
.pill.over { background: #dde3ea; color: #123; }
.pill.lost { background: #fdf0c4; color: #6b5200; }
#status { width: 100%; margin: .2em 0 .6em; color: #345; }
main { display: grid; grid-template-columns: auto auto minmax(16em, 1fr); gap: 28px;
  align-items: start; }
.seat { padding: 8px 10px 10px; border-radius: 8px; border: 2px solid transparent; }
.seat.turn { border-color: #f39c12; background: #fffaf0; }
.seat .who { display: flex; align-items: baseline; gap: .8em; font-size: 1.15em;
  margin-bottom: .3em; }
.seat .name { font-weight: bold; }
.seat .tag { font-size: .75em; color: #9a6700; }
.seat .score { color: #456; font-size: .85em; }
.seat .clock { margin-left: auto; font-variant-numeric: tabular-nums; color: #456; }
.seat .clock.running { color: #123; font-weight: bold; }
.seat .clock.urgent { color: #c0392b; }
.live .board th, .live .board td { width: var(--cell, 28px); height: var(--cell, 28px);
  padding: 0; font-size: calc(var(--cell, 28px) * .42); }
.live .board caption { display: none; }
.fleet { margin-top: .5em; font-size: .9em; }
.fleet .ship { display: inline-block; margin: .15em .5em .15em 0; padding: 0 .4em;
  border-radius: 4px; background: #e3f0fb; }
.fleet .ship.sunk { background: #f1d6d2; color: #8a1408; text-decoration: line-through; }
#side { display: flex; flex-direction: column; min-width: 0; }
#side h2 { font-size: 1em; margin: 0 0 .3em; }
#log { flex: 1; overflow-y: auto; margin: 0; padding: .3em .6em .3em 2.6em; background: #fff;
  border: 1px solid #c9d6e2; border-radius: 6px; min-height: 6em; }
#log li { padding: .05em 0; }
#log li.game { list-style: none; margin-left: -2em; font-weight: bold; color: #456; }
#log li.hit, #log li.sunk { color: #a00; }
#log li.pending { color: #678; font-style: italic; }
#log li.lost { color: #9a6700; }
#end { margin-top: .8em; }
#end p { margin: .3em 0; }
#end .result { font-size: 1.15em; font-weight: bold; }
#end { overflow-wrap: anywhere; }
#end code { font-size: .85em; }
"""

_PAGE = (
    """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@; connect-src 'self'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seabattle: watching @MATCH@</title>
<style>@CSS@
</style>
</head>
<body>
<header>
<h1>Match <span id="state" class="pill live">live</span></h1>
<code id="match">@MATCH@</code>
<nav><a href="/watch/">all running matches</a></nav>
<div id="status"></div>
</header>
<main class="live" id="main">
<section class="seat" id="seat0"></section>
<section class="seat" id="seat1"></section>
<aside id="side"><h2>Moves</h2><ol id="log"></ol><div id="end"></div></aside>
</main>
<script id="snapshot" type="application/json">@DATA@</script>
<script>@JS@
(function () {
  var DOT = " \\u00b7 ", HEX = "@MATCH@";
  var REASONS = {
    fleet_sunk: "fleet sunk", setup_timeout: "did not place in time",
    nobody_placed: "neither side placed in time", shot_timeouts: "shot clocks ran out",
    no_answer: "a verdict not given in time", resigned: "resignation",
    abandoned: "a player left", false_proof: "a false proof",
    false_verdict: "a false verdict, shown by the reveal", illegal_fleet: "an illegal fleet",
    bad_reveal: "a reveal that is not the committed fleet", no_reveal: "no reveal",
    both_at_fault: "both sides at fault"
  };
  var first = JSON.parse(document.getElementById("snapshot").textContent);
  var v = null, rules = null, revealed = [null, null], log = [], ended = null, lost = false;
  var clock = null;
  window.sbViews = [];
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function name(s) {
    if (v.names && v.names[s]) return v.names[s];
    return v.players ? v.players[s].slice(0, 12) : "seat " + s;
  }
  function shipName(k) { return rules.fleet[k] ? rules.fleet[k][0] : "ship " + k; }
  function outcomeText(o) {
    var why = REASONS[o.reason] || o.reason;
    return (o.winner === null ? "a draw" : name(o.winner) + " wins") + " (" + why + ")";
  }
  function occupancy(fleet) {
    if (!fleet) return null;
    var occ = new Array(rules.rows * rules.cols).fill(0);
    fleet.forEach(function (p, k) {
      for (var j = 0; j < rules.fleet[k][1]; j++) {
        var r = p[0] + (p[2] ? j : 0), c = p[1] + (p[2] ? 0 : j);
        if (r < rules.rows && c < rules.cols) occ[r * rules.cols + c] = k + 1;
      }
    });
    return occ;
  }
  // Whose clock runs: the view says which clock and how long, the phase says for whom.
  function clockSeats() {
    if (!v.clock) return [];
    var k = v.clock.kind, t = v.turn;
    if (k === "shot") return t === null || t === undefined ? [] : [t];
    if (k === "answer") return t === null || t === undefined ? [] : [1 - t];
    if (k === "setup") return [0, 1].filter(function (s) { return !(v.committed || [])[s]; });
    if (k === "reveal") return [0, 1].filter(function (s) { return !revealed[s]; });
    return [0, 1];
  }
  function clockText(seat) {
    var limit = rules.clocks ? rules.clocks.shot : null;
    if (clock && clock.seats.indexOf(seat) >= 0) {
      var left = Math.max(0, Math.ceil(clock.left - (Date.now() - clock.at) / 1000));
      var mm = Math.floor(left / 60), ss = left % 60;
      return [clock.kind + " clock " + mm + ":" + (ss < 10 ? "0" : "") + ss, left];
    }
    if (v.over || !v.game) return ["", null];
    return [limit ? limit + " s a shot" : "no shot clock", null];
  }
  function tick() {
    [0, 1].forEach(function (seat) {
      var c = document.querySelector("#seat" + seat + " .clock");
      if (!c) return;
      var t = clockText(seat);
      c.textContent = t[0];
      c.className = "clock" + (t[1] !== null ? " running" : "") +
        (t[1] !== null && t[1] <= 10 ? " urgent" : "");
    });
  }
  setInterval(tick, 250);
  // The fleet's ships, sunk or afloat, as far as the rules tell sinkings (7.4 sunk).
  function fleetBox(seat) {
    var box = el("div", "fleet"), b = v.boards ? v.boards[seat] : null, sunk = {};
    (b ? b.sunk : []).forEach(function (x) { sunk[x[0]] = true; });
    var occ = occupancy(revealed[seat]), told = rules.sunk !== "silent";
    if (!told && occ && b) {
      // Silent sinkings: nobody is told, but a revealed fleet shows which ships were all hit.
      var hit = {};
      b.fired.forEach(function (f) { if (f[1] === "hit" || f[1] === "sunk") hit[f[0]] = true; });
      rules.fleet.forEach(function (f, k) {
        var all = true;
        occ.forEach(function (o, i) { if (o === k + 1 && !hit[i]) all = false; });
        if (all) sunk[k] = true;
      });
    }
    var n = rules.fleet.length, gone = Object.keys(sunk).length;
    if (!told && !occ) {
      box.appendChild(el("div", "afloat",
        "ships afloat: not told (silent sinkings)" + DOT + (b ? b.hits : 0) + " of " +
        rules.fleet.reduce(function (a, f) { return a + f[1]; }, 0) + " ship cells hit"));
      return box;
    }
    box.appendChild(el("div", "afloat", (n - gone) + " of " + n + " ships afloat"));
    rules.fleet.forEach(function (f, k) {
      var s = el("span", "ship" + (sunk[k] ? " sunk" : ""), f[0] + " " + f[1]);
      s.title = sunk[k] ? "sunk" : "afloat";
      box.appendChild(s);
    });
    return box;
  }
  function seatPanel(seat) {
    var p = $("seat" + seat), who = el("div", "who");
    p.textContent = "";
    who.appendChild(el("span", "name", name(seat)));
    // Marked: the seat that owes the next move (in answer, the defender owes its verdict).
    var firing = v.phase === "firing" && v.turn === seat;
    var answering = v.phase === "answer" && v.turn === 1 - seat, moving = firing || answering;
    if (firing) who.appendChild(el("span", "tag", "to move"));
    if (answering) who.appendChild(el("span", "tag", "answers the shot"));
    if (v.over && v.winner === seat) who.appendChild(el("span", "tag", "winner"));
    if (v.phase === "setup") who.appendChild(el("span", "tag",
      (v.committed || [])[seat] ? "fleet placed" : "placing"));
    var games = rules.match ? rules.match.games : 1;
    if (games > 1) who.appendChild(el("span", "score", "score " + v.scores[seat]));
    who.appendChild(el("span", "clock"));
    p.appendChild(who);
    p.className = "seat" + (moving ? " turn" : "");
    if (v.boards) {
      var t = sbBoard(rules, name(seat), v.boards[seat], occupancy(revealed[seat]), null);
      t.id = "board" + seat;
      t.title = name(seat) + "'s fleet, as the other side's shots found it";
      p.appendChild(t);
      p.appendChild(fleetBox(seat));
    } else p.appendChild(el("p", "muted", v.over
      ? "a finished match keeps its boards in its record: seabattle show FILE --html"
      : "the game has not begun"));
  }
  function moveText(e) {
    var who = name(e.seat);
    if (e.lost) return who + " lost a shot (" + (e.lost === "clock" ? "clock ran out"
        : "repeated a cell") + ")" + (e.cells.length ? ": " + e.cells.join(" ") : "");
    if (e.radar) return who + " radar at " + e.cells[0] + ": " + (e.found ? "found" : "nothing");
    var res = e.total !== null && e.total !== undefined
      ? e.total + (e.total === 1 ? " hit" : " hits") : e.results.join(", ");
    var s = who + " \\u2192 " + e.cells.join(" ") + ": " + res;
    if (e.sunk.length) s += "; sank " + e.sunk.map(shipName).join(", ");
    return s;
  }
  // Redraw with the log kept at its newest line if it was there (the end's lines below it
  // shorten it).
  function atBottom(ol) { return ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 8; }
  function drawLog() {
    var ol = $("log");
    ol.textContent = "";
    var game = null, many = (v.game || 1) > 1;
    log.forEach(function (e) {
      if (e.game !== game && (many || game !== null)) ol.appendChild(el("li", "game",
        "game " + e.game));
      game = e.game;
      var hit = e.total || (e.results || []).some(function (r) { return r !== "miss"; });
      var kind = e.lost ? "lost" : e.sunk && e.sunk.length ? "sunk" : hit ? "hit" : "miss";
      var li = el("li", kind, moveText(e));
      if (e.n) li.value = e.n;
      ol.appendChild(li);
    });
    if (!log.length && !v.pending) ol.appendChild(el("li", "game", "no shot yet"));
    if (v.pending && !v.over) ol.appendChild(el("li", "pending", name(v.pending.seat) +
      " \\u2192 " + v.pending.cells.join(" ") + ": \\u2026"));
  }
  function drawEnd() {
    var box = $("end"), state = $("state");
    box.textContent = "";
    if (v.outcome) box.appendChild(el("p", v.over ? "" : "result",
      "game " + v.game + ": " + outcomeText(v.outcome)));
    var over = v.over || ended;
    if (v.over) {
      var s = v.scores, games = rules.match ? rules.match.games : 1;
      box.appendChild(el("p", "result", "match over: " + (v.winner === null ? "a draw"
        : name(v.winner) + " wins") + (games > 1 ? " " + s[0] + "\\u2013" + s[1] : "")));
    }
    if (ended && ended.head) {
      var p = el("p"), a = el("a", "", "download the signed record");
      a.href = "/records/" + HEX;
      a.id = "record";
      a.setAttribute("download", HEX + ".sbr");
      p.appendChild(a);
      p.appendChild(document.createTextNode(" (check it offline: "));
      p.appendChild(el("code", "", "seabattle verify " + HEX + ".sbr"));
      p.appendChild(document.createTextNode(")"));
      box.appendChild(p);
      var q = el("p", "", "record head "), code = el("code", "", ended.head);
      code.id = "head";
      var copy = el("button", "", "copy");
      copy.onclick = function () {
        var done = function () { copy.textContent = "copied"; };
        if (navigator.clipboard) navigator.clipboard.writeText(ended.head).then(done);
        else {
          var r = document.createRange();
          r.selectNodeContents(code);
          getSelection().removeAllRanges();
          getSelection().addRange(r);
          if (document.execCommand("copy")) done();
        }
      };
      q.appendChild(code);
      q.appendChild(document.createTextNode(" "));
      q.appendChild(copy);
      box.appendChild(q);
    } else if (ended) box.appendChild(el("p", "", "the match ended without a record" +
      " (aborted, or moved to another server)"));
    else if (lost) {
      var gone = el("p", "", "the match no longer runs here; if it finished, ");
      var link = el("a", "", "its signed record");
      link.href = "/records/" + HEX;
      gone.appendChild(link);
      gone.appendChild(document.createTextNode(" is there"));
      box.appendChild(gone);
    }
    state.textContent = v.over ? "match over" : ended ? "ended" : lost ? "gone" : "live";
    state.className = "pill " + (over ? "over" : lost ? "lost" : "live");
  }
  function status() {
    var t = rules.name + DOT + v.mode, games = rules.match ? rules.match.games : 1;
    if (v.game) {
      t += DOT + "game " + v.game + (games > 1 ? " of " + games : "");
      if (v.over) t += DOT + "match over";
      else t += DOT + v.phase;
      t += DOT + v.shots + (v.shots === 1 ? " shot" : " shots");
    } else t += DOT + (v.over ? "match over" : "starting");
    $("status").textContent = t;
    document.title = name(0) + " vs " + name(1) + DOT + "seabattle";
  }
  // The largest cells that fit both boards and the log across, and a board down, the window.
  function fit() {
    if (!rules) return;
    var main = $("main"), side = $("side"), top = main.getBoundingClientRect().top;
    var across = (main.clientWidth - 2 * 28 - Math.max(side.offsetWidth, 256) - 24) / 2;
    var down = window.innerHeight - top - 130;
    var cell = Math.floor(Math.min(across / (rules.cols + 1), down / (rules.rows + 1)));
    main.style.setProperty("--cell", Math.max(14, Math.min(cell, 72)) + "px");
    side.style.maxHeight = Math.max(200, window.innerHeight - top - 16) + "px";
    side.style.height = side.style.maxHeight;
  }
  window.addEventListener("resize", fit);
  function show(d, source) {
    v = d.view;
    rules = v.rules;
    revealed = d.revealed;
    window.sbViews.push(d);
    if (d.reset) log = log.filter(function (e) { return e.game !== v.game; });
    d.moves.forEach(function (e) {
      // A shot told twice (the snapshot and a verdict after it) is logged once.
      if (e.n && log.some(function (x) { return x.game === e.game && x.n === e.n; })) return;
      log.push(e);
    });
    var seats = clockSeats();
    clock = v.clock ? {kind: v.clock.kind, left: v.clock.left, at: Date.now(), seats: seats}
      : null;
    status();
    seatPanel(0);
    seatPanel(1);
    tick();
    var stick = atBottom($("log"));
    drawLog();
    drawEnd();
    fit();
    if (stick) $("log").scrollTop = $("log").scrollHeight;
    var b = document.body.dataset;
    b.phase = v.phase || "";
    b.shots = v.shots || 0;
    b.over = v.over ? "1" : "";
    b.source = source;
  }
  show(first, "page");
  ended = first.end || null;
  if (ended) { drawEnd(); document.body.dataset.ended = "1"; return; }
  var src = new EventSource("/watch/" + HEX + "/events");
  src.addEventListener("view", function (e) {
    lost = false;
    show(JSON.parse(e.data), "stream");
  });
  src.addEventListener("end", function (e) {
    src.close();
    ended = JSON.parse(e.data);
    var stick = atBottom($("log"));
    drawEnd();
    if (stick) $("log").scrollTop = $("log").scrollHeight;
    document.body.dataset.ended = "1";
  });
  src.onerror = function () {
    if (ended) return;
    // Closed for good: the match left this server (404); otherwise the browser retries.
    lost = src.readyState === EventSource.CLOSED;
    if (lost) drawEnd();
    else { $("state").textContent = "reconnecting\\u2026"; $("state").className = "pill lost"; }
  };
})();
</script>
</body>
</html>
""".replace("@CSP@", CSP)
    .replace("@CSS@", BOARD_CSS + _LIVE_CSS)
    .replace("@JS@", BOARD_JS)
)


_INDEX_CSS = """
table.matches { border-collapse: collapse; background: #fff; min-width: 60%; }
.matches th, .matches td { text-align: left; padding: .35em .9em;
  border-bottom: 1px solid #dde3ea; }
.matches th { color: #456; font-weight: normal; background: #eef2f5; }
.matches td.id { font-family: ui-monospace, monospace; font-size: .85em; }
.matches td.num { text-align: right; font-variant-numeric: tabular-nums; }
#note, #more { color: #456; }
"""

_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@; connect-src 'self'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seabattle: running matches</title>
<style>@CSS@
</style>
</head>
<body>
<h1>Running matches</h1>
<p id="note"></p>
<table class="matches" id="matches">
<thead><tr><th>match</th><th>players</th><th>rules</th><th>mode</th><th>game</th>
<th>score</th><th>phase</th><th>watching</th></tr></thead>
<tbody></tbody>
</table>
<p id="empty"></p>
<p id="more"></p>
<script id="data" type="application/json">@DATA@</script>
<script>
(function () {
  var DOT = " \\u00b7 ", shown = "";
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function row(r) {
    var tr = el("tr"), a = el("a", "", r.match);
    a.href = "/watch/" + r.match;
    var id = el("td", "id");
    id.appendChild(a);
    tr.appendChild(id);
    tr.appendChild(el("td", "", r.names[0] + " vs " + r.names[1] + (r.teams ? " (teams)" : "")));
    tr.appendChild(el("td", "", r.rules));
    tr.appendChild(el("td", "", r.mode));
    tr.appendChild(el("td", "num", r.game + (r.games > 1 ? " of " + r.games : "")));
    tr.appendChild(el("td", "num", r.scores[0] + "\\u2013" + r.scores[1]));
    tr.appendChild(el("td", "", r.phase));
    tr.appendChild(el("td", "num", String(r.spectators)));
    tr.dataset.match = r.match;
    return tr;
  }
  // Redrawn only when something changed, in one swap of the rows: no flicker.
  function draw(d) {
    var key = JSON.stringify(d);
    if (key === shown) return;
    shown = key;
    var body = el("tbody");
    d.rows.forEach(function (r) { body.appendChild(row(r)); });
    var table = document.getElementById("matches");
    table.replaceChild(body, table.tBodies[0]);
    table.style.display = d.rows.length ? "" : "none";
    document.getElementById("empty").textContent = d.rows.length ? ""
      : "No public match is running on this server right now.";
    document.getElementById("more").textContent = d.total > d.rows.length
      ? "the " + d.rows.length + " newest of " + d.total + " running public matches" : "";
    document.getElementById("note").textContent = (d.cluster
      ? "The public matches node " + d.node + " of a cluster referees; other nodes list theirs."
      : "The public matches this server referees.") + " Private matches are not listed." + DOT +
      "refreshed every " + d.refresh + " s";
    document.body.dataset.rows = d.rows.length;
  }
  var data = JSON.parse(document.getElementById("data").textContent);
  draw(data);
  setInterval(function () {
    fetch("/watch/matches.json", {cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (d) draw(d);
        document.body.dataset.polls = +(document.body.dataset.polls || 0) + 1;
      })
      .catch(function () {});
  }, 1000 * data.refresh);
})();
</script>
</body>
</html>
""".replace("@CSP@", CSP).replace("@CSS@", BOARD_CSS + _INDEX_CSS)
