"""An engine that is a web service: ``POST {url}/hello``, ``{url}/placement`` and ``{url}/move``
with the engine protocol's JSON objects as bodies, JSON objects as answers (spec/engine.md 5).

An HTTP/1.1 client over trio's streams (``h11`` does the parsing) that keeps one connection to
the service alive between requests, as every HTTP client does: an arena would otherwise pay a
connect, and with ``https://`` a TLS handshake, for every move. The connection is reused only
when both sides left it clean (the whole answer read, nothing more sent, no ``Connection:
close``); a request that timed out or failed closes it, so that a late answer is never read as
the next request's. A kept connection that the service closes while it is idle may close under
the next request before any byte of the answer: that request is sent once more, on a new
connection, within the same time (engines are stateless web services, every request carries all
the engine needs). ``https://`` URLs are verified against the system's certificate authorities.

A refused or broken connection, or a 5xx status, is ``crashed``; no whole answer within the move
time is ``timeout``; any other status, or a body that is not the expected JSON object, is
``garbage``.
"""

from __future__ import annotations

import select
import ssl
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import h11
import trio
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import RuleSet

from . import lines
from .base import Engine, EngineFault, Hello, Move
from .process import START_TIME, answer_time
from .side import Side

__all__ = ["HttpEngine"]

_T = TypeVar("_T")

#: The largest answer body read, in bytes.
MAX_BODY = lines.MAX_ANSWER


class HttpEngine(Engine):
    """The engine served at ``url`` (``http://HOST:PORT/PATH``); ``move_time``: seconds for
    each answer, connecting included."""

    def __init__(self, url: str, *, move_time: float = 5.0, name: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an HTTP engine's URL is http(s)://HOST[:PORT][/PATH], got {url!r}")
        self.url = url
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.path = parts.path.rstrip("/")
        self.move_time = move_time
        self._given_name = name
        self.name = name or parts.netloc
        self.hello: Hello | None = None
        self._game = (0, 1)
        self._kept: _Connection | None = None  # the idle connection the next request reuses

    async def start(self) -> Hello:
        """``POST /hello`` with the greeting; a service without it (404) is an engine named by
        its address that plays any rules."""
        status, body = await self._post("hello", lines.greeting(), max(START_TIME, self.move_time))
        if status == 404:
            hello = Hello(self.name)
        else:
            hello = await self._answer("hello", status, body, lines.parse_hello)
        self.hello = hello
        self.name = self._given_name or hello.name
        return hello

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        """Nothing is sent (every request carries the game); ``wrong_rules`` as the hello says."""
        if self.hello is None:
            await self.start()
        assert self.hello is not None
        lines.check_rules(self.hello, rules)
        self._game = (seat, game)

    async def place(self, rules: RuleSet) -> Fleet | None:
        """``POST /placement``: the fleet, or ``None`` for a uniformly random one."""
        seat, game = self._game
        msg = lines.place(rules, seat, game, self.move_time)
        status, body = await self._post("placement", msg, self.move_time)
        return await self._answer("placement", status, body, lambda d: lines.parse_fleet(d, rules))

    async def move(self, side: Side) -> Move:
        """``POST /move`` with everything ``side`` knows; the answer held to the rules."""
        seconds = answer_time(self.move_time, side.clock)
        msg = side.request(move_time=seconds, clock=side.clock)
        status, body = await self._post("move", msg, seconds)
        return await self._answer("move", status, body, lambda d: lines.parse_move(d, side))

    async def close(self) -> None:
        """Close the kept connection, if any (a later request opens a new one)."""
        await self._drop()

    # -- HTTP --------------------------------------------------------------------------------------

    async def _answer(
        self, what: str, status: int, body: bytes, parse: Callable[[dict[str, Any]], _T]
    ) -> _T:
        """The answer ``parse`` reads from the JSON object of a 200."""
        try:
            if status >= 500:
                raise EngineFault("crashed", f"/{what} answered HTTP {status}: {body[:200]!r}")
            if status != 200:
                raise EngineFault("garbage", f"/{what} answered HTTP {status}, not 200")
            return parse(lines.decode(body))
        except EngineFault:
            # A service that failed starts afresh, as a failed process engine is started again.
            await self._drop()
            raise

    async def _drop(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            await trio.aclose_forcefully(kept.stream)

    async def _post(self, what: str, msg: dict[str, Any], seconds: float) -> tuple[int, bytes]:
        """One request and its whole answer, all within ``seconds`` (connecting included)."""
        out: tuple[int, bytes] | None = None
        with trio.move_on_after(seconds):
            try:
                out = await self._request(what, lines.encode(msg))
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as e:
                why = getattr(e, "strerror", None) or str(e) or type(e).__name__
                raise EngineFault("crashed", f"{self.url}/{what}: {why}") from None
            except h11.ProtocolError as e:
                raise EngineFault("garbage", f"{self.url}/{what}: not HTTP: {e}") from None
        if out is None:
            raise EngineFault("timeout", f"no answer from /{what} in {seconds:g} s")
        return out

    async def _request(self, what: str, body: bytes) -> tuple[int, bytes]:
        """The request on the kept connection, else (or if that one closed before any byte of
        the answer) on a new one."""
        kept, self._kept = self._kept, None
        if kept is not None and _readable(kept.stream):
            # Closed by the service while idle, or bytes nobody asked for: either way not ours.
            await trio.aclose_forcefully(kept.stream)
            kept = None
        if kept is not None:
            try:
                return await self._exchange(kept, what, body)
            except _Unanswered:
                pass  # the service closed it as we sent: a stateless request goes again
        try:
            return await self._exchange(await self._connect(), what, body)
        except _Unanswered as e:
            raise trio.BrokenResourceError(str(e)) from None

    async def _connect(self) -> _Connection:
        stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
        if self.tls:
            stream = trio.SSLStream(stream, ssl.create_default_context(), server_hostname=self.host)
        return _Connection(stream)

    async def _exchange(self, conn: _Connection, what: str, body: bytes) -> tuple[int, bytes]:
        """One request and its answer on ``conn``, which is then kept for the next request if
        both sides left it reusable, and closed otherwise (always, when anything went wrong)."""
        try:
            out = await self._round_trip(conn, what, body)
        except BaseException:
            await trio.aclose_forcefully(conn.stream)
            raise
        http = conn.http
        if (
            http.our_state is h11.DONE
            and http.their_state is h11.DONE
            and not http.trailing_data[0]
            and self._kept is None
        ):
            http.start_next_cycle()
            self._kept = conn
        else:
            await trio.aclose_forcefully(conn.stream)
        return out

    async def _round_trip(self, conn: _Connection, what: str, body: bytes) -> tuple[int, bytes]:
        host = self.host if self.port in (80, 443) else f"{self.host}:{self.port}"
        request = h11.Request(
            method="POST",
            target=f"{self.path}/{what}",
            headers=[
                ("Host", host),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
            ],
        )
        http, stream = conn.http, conn.stream
        data = http.send(request) + http.send(h11.Data(data=body)) + http.send(h11.EndOfMessage())
        try:
            await stream.send_all(data)
        except trio.BrokenResourceError as e:
            raise _Unanswered(_why(e)) from None
        answered = False  # a byte of the answer came: the request is not sent again
        status = 0
        got = bytearray()
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = bytes(await stream.receive_some(65536))
                except trio.BrokenResourceError as e:
                    if answered:
                        raise
                    raise _Unanswered(_why(e)) from None
                if not data and not answered:
                    raise _Unanswered("the connection closed before an answer")
                answered = True
                http.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                got += event.data
                if len(got) > MAX_BODY:
                    raise EngineFault("garbage", f"/{what}: a body over {MAX_BODY} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return status, bytes(got)
            elif isinstance(event, h11.ConnectionClosed):
                raise trio.BrokenResourceError("the connection closed before a whole answer")


class _Connection:
    """A connection to the service and its HTTP state (one request at a time)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.http = h11.Connection(h11.CLIENT)


class _Unanswered(Exception):
    """The connection closed, or was reset, before any byte of the answer."""


def _why(e: BaseException) -> str:
    cause = e.__cause__ or e.__context__
    return getattr(cause, "strerror", None) or str(e) or str(cause) or type(e).__name__


def _readable(stream: trio.abc.Stream) -> bool:
    """Whether an idle connection has anything to read (the service's close, or bytes nobody
    asked for) right now; ``True`` when that cannot be told, so the connection is not reused."""
    sock = getattr(getattr(stream, "transport_stream", stream), "socket", None)
    try:
        fd = sock.fileno() if sock is not None else -1
        if fd < 0:
            return True
        if hasattr(select, "poll"):
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            return bool(poll.poll(0))
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True
