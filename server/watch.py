"""The live spectator page: ``GET /watch/MATCH`` and its server-sent events, on the HTTP port.

Theory of operation. ``/watch/MATCH`` (the match id in hex) answers one self-contained HTML page
(inline CSS and script, a content security policy that loads nothing) for a running public match;
its script opens ``/watch/MATCH/events``, a ``text/event-stream``. The stream's connection joins
the match as a spectator (:meth:`~.referee.Referee.watch`), exactly as a ``watch`` message would:
it gets the spectators' audience of the referee and nothing else, so what it can show is what a
spectator may see (``spec/protocol.md`` 6.6: never a fleet or a secret), and fleets only from the
public ``revealed`` messages, after the reveal.

Each event the referee sends the spectator only marks the view as changed; the stream then writes
the current public view (:meth:`~.referee.Referee.view`, the snapshot's view) as one ``view``
event, so a slow reader skips views rather than queueing them: a stream holds one pending view,
whatever the match does. Each write must finish within ``write_timeout`` or the stream is dropped,
and at most ``max_streams`` run at once (503 beyond). When the match ends (``match_over``: its
record is stored) the last view is followed by an ``end`` event naming the record's head, and the
stream closes; a match that is not running, not public, or not a match id at all is 404 for the
page and the stream alike.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio
from seabattle.common.web import BOARD_CSS, BOARD_JS, CSP
from seabattle.protocol import messages as m

from .metrics import http_response

if TYPE_CHECKING:
    from .lobby import Lobby
    from .referee import Referee

__all__ = ["WatchSite"]

Streamer = Callable[[trio.abc.SendStream], Awaitable[None]]


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
        self.head: bytes | None = None
        self.closed = False

    def send(self, msg: m.Message) -> None:
        """Take one message for spectators: keep what it tells, read the view, wake the stream."""
        if isinstance(msg, m.GameStart):
            self.revealed = [None, None]
        elif isinstance(msg, m.Revealed):
            # Public from here on (the reveal is sent to everyone); never the secret.
            self.revealed[msg.seat] = msg.reveal.get("fleet")
        elif isinstance(msg, m.MatchOver):
            self.head = msg.head
        # Read now: once the match is over its games are dropped from memory.
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


def _plain(v: Any) -> Any:
    """``v`` as JSON-ready values: byte strings in hex."""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


class WatchSite:
    """The ``/watch/`` routes of the HTTP endpoint, over the lobby's running matches."""

    def __init__(
        self,
        lobby: Lobby,
        *,
        max_streams: int = 64,
        write_timeout: float = 10.0,
        keepalive: float = 15.0,
    ) -> None:
        """``max_streams`` event streams at once; a write that takes ``write_timeout`` drops its
        stream; a comment line every ``keepalive`` seconds keeps quiet streams open."""
        self.lobby = lobby
        self.max_streams = max_streams
        self.write_timeout = write_timeout
        self.keepalive = keepalive
        self.streams = 0

    def route(self, method: bytes, path: bytes) -> bytes | Streamer | None:
        """The response to ``method path`` (bytes, or a streamer), or ``None``: not ours."""
        parts = path.split(b"/")
        if len(parts) not in (3, 4) or parts[:2] != [b"", b"watch"]:
            return None
        ref = self._find(parts[2])
        if ref is None:
            return http_response(404, b"no running public match with that id\n")
        head_only = method == b"HEAD"
        if len(parts) == 3:
            page = _PAGE.replace("@MATCH@", ref.hex).encode()
            return http_response(200, page, b"text/html; charset=utf-8", head_only=head_only)
        if parts[3] != b"events" or head_only:
            return None
        if self.streams >= self.max_streams:
            return http_response(503, b"too many spectators on this endpoint\n")
        return lambda stream: self._stream(ref, stream)

    def _find(self, hexid: bytes) -> Referee | None:
        try:
            mid = bytes.fromhex(hexid.decode("ascii"))
        except ValueError:
            return None
        ref = self.lobby.running.get(mid) if len(mid) == 16 else None
        # A private match is watched by its players only (lobby ``watch``): not from here.
        return ref if ref is not None and ref.public and not ref.over else None

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
                    # The commitments (a leaf per cell) are for a client checking openings: a
                    # page has no use for them, and they would be most of every event's bytes.
                    shown = {k: v for k, v in view.items() if k != "commitments"}
                    data = {"view": _plain(shown), "revealed": spectator.revealed}
                    await self._write(stream, _event("view", data))
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


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream; charset=utf-8\r\n"
    b"Cache-Control: no-store\r\n"
    b"Connection: close\r\n"
    b"X-Content-Type-Options: nosniff\r\n\r\n"
)


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


_PAGE = (
    """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@; connect-src 'self'">
<title>seabattle: watching @MATCH@</title>
<style>@CSS@
</style>
</head>
<body>
<h1>Match @MATCH@ <span class="muted">live</span></h1>
<p><span id="status">connecting&hellip;</span><span id="clock"></span></p>
<div id="boards" class="boards"></div>
<p id="end"></p>
<script>@JS@
(function () {
  var status = document.getElementById("status"), boards = document.getElementById("boards");
  var src = new EventSource(location.pathname.replace(/\\/$/, "") + "/events");
  window.sbViews = [];
  var clock = null, clockText = document.getElementById("clock");
  function tick() {
    var left = clock ? Math.max(0, Math.ceil(clock.left - (Date.now() - clock.at) / 1000)) : 0;
    clockText.textContent = clock ? " \\u00b7 " + clock.kind + " clock " + left + " s" : "";
  }
  setInterval(tick, 250);
  function occupancy(rules, fleet) {
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
  src.addEventListener("view", function (e) {
    var d = JSON.parse(e.data), v = d.view, rules = v.rules;
    window.sbViews.push(d);
    var text = rules.name + " \\u00b7 " + v.mode;
    if (v.game) {
      text += " \\u00b7 game " + v.game + " \\u00b7 " + v.phase + " \\u00b7 " + v.shots + " shots";
      // In the answer phase the mover is the shooter; the defender owes the verdict.
      if (v.phase === "answer") text += " \\u00b7 seat " + (1 - v.turn) + " answers";
      else if (v.turn !== null && v.turn !== undefined)
        text += " \\u00b7 seat " + v.turn + " to move";
    }
    status.textContent = text;
    // The view's clock is as of when it was sent: count it down here until the next view.
    clock = v.clock ? {kind: v.clock.kind, left: v.clock.left, at: Date.now()} : null;
    tick();
    boards.textContent = "";
    if (v.boards) [0, 1].forEach(function (seat) {
      var t = sbBoard(rules, "seat " + seat + " (" + v.players[seat].slice(0, 12) + ")",
                      v.boards[seat], occupancy(rules, d.revealed[seat]), null);
      t.id = "board" + seat;
      boards.appendChild(t);
    });
    var end = document.getElementById("end");
    if (v.outcome) end.textContent = "game " + v.game + ": " + (v.outcome.winner === null
        ? "a draw" : "seat " + v.outcome.winner + " wins") + " (" + v.outcome.reason + ")";
    if (v.over) end.textContent += " \\u00b7 match over: " + (v.winner === null ? "a draw"
        : "seat " + v.winner + " wins");
    document.body.dataset.phase = v.phase || "";
    document.body.dataset.shots = v.shots || 0;
    document.body.dataset.over = v.over ? "1" : "";
  });
  src.addEventListener("end", function (e) {
    src.close();
    var head = JSON.parse(e.data).head;
    status.textContent += head ? " \\u00b7 record " + head.slice(0, 16) + "\\u2026"
                               : " \\u00b7 ended";
    document.body.dataset.ended = "1";
  });
  src.onerror = function () {
    if (!document.body.dataset.ended) status.textContent = "connection lost; retrying\\u2026";
  };
})();
</script>
</body>
</html>
""".replace("@CSP@", CSP)
    .replace("@CSS@", BOARD_CSS)
    .replace("@JS@", BOARD_JS)
)
