"""An engine that is a web service: ``POST {url}/hello``, ``{url}/placement`` and ``{url}/move``
with the engine protocol's JSON objects as bodies, JSON objects as answers (spec/engine.md 5).

An HTTP/1.1 client over trio's streams (``h11`` does the parsing), one connection a request:
engines are stateless web services, every request carries all the engine needs. ``https://``
URLs are verified against the system's certificate authorities. A refused or broken connection,
or a 5xx status, is ``crashed``; no whole answer within the move time is ``timeout``; any other
status, or a body that is not the expected JSON object, is ``garbage``.
"""

from __future__ import annotations

import ssl
from typing import Any
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

    async def start(self) -> Hello:
        """``POST /hello`` with the greeting; a service without it (404) is an engine named by
        its address that plays any rules."""
        status, body = await self._post("hello", lines.greeting(), max(START_TIME, self.move_time))
        if status == 404:
            hello = Hello(self.name)
        else:
            hello = lines.parse_hello(self._answer("hello", status, body))
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
        return lines.parse_fleet(self._answer("placement", status, body), rules)

    async def move(self, side: Side) -> Move:
        """``POST /move`` with everything ``side`` knows; the answer held to the rules."""
        seconds = answer_time(self.move_time, side.clock)
        msg = side.request(move_time=seconds, clock=side.clock)
        status, body = await self._post("move", msg, seconds)
        return lines.parse_move(self._answer("move", status, body), side)

    # -- HTTP --------------------------------------------------------------------------------------

    def _answer(self, what: str, status: int, body: bytes) -> dict[str, Any]:
        if status >= 500:
            raise EngineFault("crashed", f"/{what} answered HTTP {status}: {body[:200]!r}")
        if status != 200:
            raise EngineFault("garbage", f"/{what} answered HTTP {status}, not 200")
        return lines.decode(body)

    async def _post(self, what: str, msg: dict[str, Any], seconds: float) -> tuple[int, bytes]:
        """One request on a connection of its own, all within ``seconds``."""
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
        stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
        if self.tls:
            stream = trio.SSLStream(
                stream, ssl.create_default_context(), server_hostname=self.host
            )
        async with stream:
            conn = h11.Connection(h11.CLIENT)
            host = self.host if self.port in (80, 443) else f"{self.host}:{self.port}"
            request = h11.Request(
                method="POST",
                target=f"{self.path}/{what}",
                headers=[
                    ("Host", host),
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(body))),
                    ("Connection", "close"),
                ],
            )
            await stream.send_all(conn.send(request) + conn.send(h11.Data(data=body)))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            status = 0
            got = bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    conn.receive_data(bytes(data))
                    continue
                if isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    got += event.data
                    if len(got) > MAX_BODY:
                        raise EngineFault("garbage", f"/{what}: a body over {MAX_BODY} bytes")
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    if not status:
                        raise trio.BrokenResourceError("the connection closed before an answer")
                    return status, bytes(got)
