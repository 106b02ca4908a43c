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
from seabattle.common.web import embed_json
from seabattle.protocol import messages as m

from .metrics import http_response
from .watch_page import INDEX, PAGE

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
            body = INDEX.replace("@DATA@", embed_json(data)).encode()
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
    return PAGE.replace("@MATCH@", ref.hex).replace("@DATA@", embed_json(data)).encode()
