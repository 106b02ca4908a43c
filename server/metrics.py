"""Operational counters and the optional Prometheus endpoint that exposes them.

Theory of operation. One :class:`Metrics` per server holds plain ints, dicts of ints and
fixed-bucket :class:`Histogram` values; the hot paths (a received frame, a shot) only add to them.
Everything runs on the one trio thread, so no locks are needed, and nothing is formatted until a
scrape asks. Gauges that the server already knows (open connections, running matches, spectators)
are not kept at all: :attr:`Metrics.gauges` reads them from the live state at scrape time, so they
can never drift from it.

:func:`serve_metrics` is a deliberately small HTTP/1.1 responder: one request per connection, a
request head of at most ``head_limit`` bytes, ``timeout`` seconds for the whole exchange and at
most ``max_scrapes`` connections at once. ``GET /metrics`` (or ``HEAD``) answers the text
exposition format, version 0.0.4. ``/healthz/live`` says the event loop answers,
``/healthz/ready`` that the server also takes players (503 with the reason while it does not:
shutting down, the store away, its cluster lease taken), ``/healthz`` both as JSON. ``routes``
adds paths (the live spectator page of :mod:`.watch`, whose event streams outlive ``timeout``
and bound their own writes); any other path is 404. It should listen on loopback (the default in
:func:`seabattle.server.app.main`): the figures are not secret, but nobody outside should be able
to make the server render them in a loop.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from seabattle.protocol.errors import ErrorCode

__all__ = [
    "SHOT_BUCKETS",
    "STORE_BUCKETS",
    "Gauges",
    "Histogram",
    "Metrics",
    "Routes",
    "Streamer",
    "http_response",
    "serve_metrics",
]

SHOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds (seconds) of the shot-to-verdict histogram: bots answer in milliseconds, a
blind-mode client at the answer clock's limit takes up to a minute."""

STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
"""Upper bounds (seconds) of the store-call histogram: an SQLite call is well under a millisecond
when the file is cached, and ``busy_timeout`` (5 s) bounds the worst."""

_log = logging.getLogger("seabattle.server.metrics")

#: Label values the match families always show, so a dashboard sees 0 rather than no series.
_MODES = ("blind", "custody")


class Histogram:
    """Counts of observations at or below each bound (Prometheus' cumulative histogram)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  #: per bucket, not cumulative; the last is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Add one observation."""
        # bisect_left: a value equal to a bound belongs to that bound's bucket (le = "<=").
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> Iterator[tuple[str, int]]:
        """``(le, count)`` pairs as exposed, ending with ``("+Inf", count)``."""
        total = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            total += n
            yield _num(bound), total
        yield "+Inf", self.count


@dataclass(slots=True)
class Gauges:
    """What the server is doing right now, read from its live state at scrape time."""

    connections_open: int = 0
    matches_running: dict[str, int] = field(default_factory=dict)  #: by mode
    spectators: int = 0
    open_matches: int = 0  #: created and waiting for a second player
    quick_waiting: int = 0  #: players waiting in the quick-match queue


class Metrics:
    """The server's counters; see the module docstring. Attributes are meant to be added to."""

    def __init__(self) -> None:
        self.started = time.time()
        self.connections_total = 0
        self.connections_busy = 0  #: turned away past ``max_clients``
        self.matches_started: dict[str, int] = dict.fromkeys(_MODES, 0)
        self.matches_finished: dict[str, int] = dict.fromkeys(_MODES, 0)
        self.matches_aborted: dict[str, int] = dict.fromkeys(_MODES, 0)
        #: matches this node let go of because another node took them over (fenced)
        self.matches_moved: dict[str, int] = dict.fromkeys(_MODES, 0)
        self.shots = 0
        self.shot_latency = Histogram(SHOT_BUCKETS)
        self.refusals: dict[int, int] = {}  #: ``error`` messages sent, by code
        self.messages_in = 0
        self.messages_out = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.store: dict[str, Histogram] = {}  #: by store method
        #: Set by the server to read its live state; the default reads nothing.
        self.gauges: Callable[[], Gauges] = Gauges
        #: Where the metrics endpoint listens, once it does.
        self.address: tuple[str, int] | None = None

    def refused(self, code: int) -> None:
        """Count one ``error{code}`` sent to a peer."""
        self.refusals[code] = self.refusals.get(code, 0) + 1

    def store_call(self, op: str, seconds: float) -> None:
        """Count one store call ``op`` that took ``seconds``."""
        h = self.store.get(op)
        if h is None:
            h = self.store[op] = Histogram(STORE_BUCKETS)
        h.observe(seconds)

    def totals(self) -> dict[str, Any]:
        """The counters as one JSON-friendly dict (the ``--json`` status on shutdown)."""
        return {
            "connections": self.connections_total,
            "connections_busy": self.connections_busy,
            "matches_started": dict(self.matches_started),
            "matches_finished": dict(self.matches_finished),
            "matches_aborted": dict(self.matches_aborted),
            "matches_moved": dict(self.matches_moved),
            "shots": self.shots,
            "refusals": sum(self.refusals.values()),
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "uptime": round(time.time() - self.started, 3),
        }

    def render(self) -> str:
        """The text exposition format (version 0.0.4) of every metric."""
        g = self.gauges()
        running = dict.fromkeys(_MODES, 0) | g.matches_running
        out: list[str] = []
        fam = _Families(out)
        fam.one(
            "seabattle_start_time_seconds",
            "gauge",
            "When the server started (unix time).",
            self.started,
        )
        fam.one(
            "seabattle_connections_open", "gauge", "Connections being served.", g.connections_open
        )
        fam.one(
            "seabattle_connections_total",
            "counter",
            "Connections accepted.",
            self.connections_total,
        )
        fam.one(
            "seabattle_connections_busy_total",
            "counter",
            "Connections turned away past max_clients.",
            self.connections_busy,
        )
        fam.labelled(
            "seabattle_matches_running", "gauge", "Matches being played, by mode.", "mode", running
        )
        fam.labelled(
            "seabattle_matches_started_total",
            "counter",
            "Matches started, by mode.",
            "mode",
            self.matches_started,
        )
        fam.labelled(
            "seabattle_matches_finished_total",
            "counter",
            "Matches played to the end and recorded, by mode.",
            "mode",
            self.matches_finished,
        )
        fam.labelled(
            "seabattle_matches_aborted_total",
            "counter",
            "Matches that ended without a record (server failure or shutdown), by mode.",
            "mode",
            self.matches_aborted,
        )
        fam.labelled(
            "seabattle_matches_moved_total",
            "counter",
            "Running matches this node let go of because another node took them over, by mode.",
            "mode",
            self.matches_moved,
        )
        fam.one(
            "seabattle_lobby_open_matches",
            "gauge",
            "Matches created and waiting for a second player.",
            g.open_matches,
        )
        fam.one(
            "seabattle_lobby_quick_waiting",
            "gauge",
            "Players waiting in the quick-match queue.",
            g.quick_waiting,
        )
        fam.one(
            "seabattle_spectators", "gauge", "Spectators watching running matches.", g.spectators
        )
        fam.one("seabattle_shots_total", "counter", "Shots and radar scans called.", self.shots)
        fam.histogram(
            "seabattle_shot_verdict_seconds",
            "Time from a shot to its verdict in blind mode (the defender's answer).",
            {(): self.shot_latency},
        )
        codes = {_code_name(c): n for c, n in sorted(self.refusals.items())}
        fam.labelled(
            "seabattle_refusals_total",
            "counter",
            "Error messages sent to peers, by error code.",
            "code",
            codes,
        )
        fam.one(
            "seabattle_messages_in_total",
            "counter",
            "Messages received from peers.",
            self.messages_in,
        )
        fam.one(
            "seabattle_messages_out_total",
            "counter",
            "Messages written to peers.",
            self.messages_out,
        )
        fam.one("seabattle_bytes_in_total", "counter", "Bytes received from peers.", self.bytes_in)
        fam.one("seabattle_bytes_out_total", "counter", "Bytes written to peers.", self.bytes_out)
        fam.histogram(
            "seabattle_store_call_seconds",
            "Wall time of store calls, including the wait for the store's thread.",
            {(("op", op),): h for op, h in sorted(self.store.items())},
        )
        return "\n".join(out) + "\n"


class _Families:
    """Writes metric families (``# HELP``, ``# TYPE``, samples) into a list of lines."""

    def __init__(self, out: list[str]) -> None:
        self.out = out

    def _head(self, name: str, kind: str, help_: str) -> None:
        self.out.append(f"# HELP {name} {_escape_help(help_)}")
        self.out.append(f"# TYPE {name} {kind}")

    def one(self, name: str, kind: str, help_: str, value: float) -> None:
        self._head(name, kind, help_)
        self.out.append(f"{name} {_num(value)}")

    def labelled(
        self, name: str, kind: str, help_: str, label: str, values: dict[str, int]
    ) -> None:
        self._head(name, kind, help_)
        for key, value in values.items():
            self.out.append(f"{name}{_labels(((label, key),))} {_num(value)}")

    def histogram(
        self, name: str, help_: str, series: dict[tuple[tuple[str, str], ...], Histogram]
    ) -> None:
        self._head(name, "histogram", help_)
        for labels, h in series.items():
            for le, n in h.cumulative():
                self.out.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {n}")
            self.out.append(f"{name}_sum{_labels(labels)} {_num(h.sum)}")
            self.out.append(f"{name}_count{_labels(labels)} {h.count}")


def _num(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _escape_help(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in pairs)
    return f"{{{body}}}" if body else ""


def _escape_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# -- the HTTP endpoint -----------------------------------------------------------------------------

_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


#: A response that goes on after its head: it writes to the stream itself, and is not bound by
#: the endpoint's ``timeout`` (a server-sent event stream bounds its own writes).
Streamer = Callable[[trio.abc.SendStream], Awaitable[None]]


class Routes(Protocol):
    """More paths for the endpoint (the live spectator page, :mod:`.watch`)."""

    def route(self, method: bytes, path: bytes) -> bytes | Streamer | None:
        """The whole response to ``method path``, a :data:`Streamer`, or ``None``: not ours."""


def _always_ready() -> str | None:
    return None


async def serve_metrics(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    head_limit: int = 8192,
    timeout: float = 5.0,
    max_scrapes: int = 16,
    ready: Callable[[], str | None] = _always_ready,
    routes: Routes | None = None,
) -> None:
    """Answer ``GET /metrics`` on ``host:port`` until cancelled; reports the bound address.

    Also sets ``metrics.address``. See the module docstring for the bounds, ``/healthz`` and
    ``routes``. ``ready`` says why the server is not ready (``None``: it is).
    """
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as e:
        # Say which listener: the game port is bound first and would otherwise be suspected.
        raise OSError(e.errno, f"metrics endpoint {host}:{port}: {e.strerror}") from e
    active = 0

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal active
        follow: Streamer | None = None
        try:
            if active >= max_scrapes:
                return  # closing at once is the cheapest way to say no
            active += 1
            try:
                with trio.move_on_after(timeout):
                    answer = await _respond(stream, metrics, head_limit, ready, routes)
                    if isinstance(answer, bytes):
                        await stream.send_all(answer)
                    else:
                        follow = answer
            finally:
                active -= 1
            if follow is not None:
                await follow(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass
        except Exception:
            # One request's failure must never take the endpoint (and the server) down.
            _log.exception("the HTTP endpoint failed a request")
        finally:
            await trio.aclose_forcefully(stream)

    addr = listeners[0].socket.getsockname()
    metrics.address = (addr[0], addr[1])
    task_status.started(metrics.address)
    await trio.serve_listeners(handle, listeners)


_HEALTH = (b"/healthz", b"/healthz/live", b"/healthz/ready")


async def _respond(
    stream: trio.abc.ReceiveStream,
    metrics: Metrics,
    limit: int,
    ready: Callable[[], str | None],
    routes: Routes | None,
) -> bytes | Streamer:
    """Read one request head and return the whole response for it (or its streamer)."""
    buf = bytearray()
    while b"\r\n\r\n" not in buf and b"\n\n" not in buf:
        if len(buf) > limit:
            return http_response(431, b"request head too large\n")
        data = await stream.receive_some(limit + 1 - len(buf))
        if not data:
            return http_response(400, b"incomplete request\n")
        buf += data
    line = bytes(buf).split(b"\n", 1)[0].rstrip(b"\r")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return http_response(400, b"bad request line\n")
    method, target = parts[0], parts[1]
    path = target.split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD"):
        return http_response(404, b"not found; try GET /metrics\n")
    head_only = method == b"HEAD"
    if path == b"/metrics":
        body = metrics.render().encode()
        return http_response(200, body, _CONTENT_TYPE, head_only=head_only)
    if path in _HEALTH:
        return _health(path, ready(), head_only)
    answer = routes.route(method, path) if routes is not None else None
    if answer is None:
        return http_response(404, b"not found; try GET /metrics\n")
    return answer


def _health(path: bytes, not_ready: str | None, head_only: bool) -> bytes:
    """``/healthz/live``: the server's event loop answers; ``/healthz/ready``: it also takes
    players; ``/healthz``: both, as JSON. 503 when the question asked is answered no."""
    if path == b"/healthz/live":
        return http_response(200, b"live\n", head_only=head_only)
    status = 200 if not_ready is None else 503
    if path == b"/healthz/ready":
        return http_response(status, f"{not_ready or 'ready'}\n".encode(), head_only=head_only)
    body = {"live": True, "ready": not_ready is None, "reason": not_ready or ""}
    return http_response(
        status, json.dumps(body).encode() + b"\n", b"application/json", head_only=head_only
    )


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def http_response(
    status: int,
    body: bytes,
    content_type: bytes = b"text/plain; charset=utf-8",
    *,
    head_only: bool = False,
) -> bytes:
    """A whole HTTP/1.1 response (one per connection: ``Connection: close``)."""
    head = (
        (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n"
            "Cache-Control: no-store\r\n"
        ).encode()
        + b"Content-Type: "
        + content_type
        + b"\r\n\r\n"
    )
    return head if head_only else head + body
