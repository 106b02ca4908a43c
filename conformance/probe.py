"""Talking to the server: :class:`Probe`, one raw connection whose every frame is traced (a
:class:`Traced`, as the client side's connection is too), and :class:`Table`, a match whose two
seats the suite plays.

A probe that holds a seat plays it with the pure player's machine,
:class:`~seabattle.protocol.seat.Seat`: every message of its match that arrives is fed to the seat
(:meth:`Probe.sit`), and what the seat would send (a commitment or placement, an answer, a
reveal) is held in :attr:`Probe.owed` until the case lets it go (:meth:`Probe.flush`), since a
case decides *when* its players speak. *What* an honest player sends is the seat's alone.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.commit import Commitment, Committed, context
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.session import LEAN, SUPPORTED_VERSIONS, auth_payload

from .results import CaseFailed, Trace

__all__ = ["AGENT", "NOISE", "RULES", "Probe", "Table", "Traced", "describe"]


M = TypeVar("M", bound=m.Message)

#: A small rule set (partial form, section 7.4) so that whole games take a few dozen messages.
RULES: dict[str, Any] = {
    "preset": "classic",
    "rows": 6,
    "cols": 6,
    "fleet": [["Boat", 2], ["Raft", 1]],
}
AGENT = "seabattle-conformance/1"
#: Messages that may arrive between the ones a case waits for without being wrong.
NOISE: tuple[type[m.Message], ...] = (m.Clock, m.Ping, m.Pong, m.OpponentStatus)


def _short(v: Any, depth: int = 0) -> str:
    # Reports must stay readable: byte strings as a hex prefix and their length, long lists cut.
    if isinstance(v, bytes):
        return f"<{len(v)}B {v[:6].hex()}{'..' if len(v) > 6 else ''}>"
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:37] + "...")
    if isinstance(v, dict):
        if depth > 2:
            return "{...}"
        items = list(v.items())
        body = ", ".join(f"{k}: {_short(x, depth + 1)}" for k, x in items[:8])
        return "{" + body + (", ..." if len(items) > 8 else "") + "}"
    if isinstance(v, list | tuple):
        if depth > 2:
            return "[...]"
        body = ", ".join(_short(x, depth + 1) for x in v[:6])
        return "[" + body + (f", ... {len(v)} items" if len(v) > 6 else "") + "]"
    return repr(v)


def describe(msg: m.Message) -> str:
    """A one-line summary of ``msg`` for reports: its tag and fields."""
    d = m.encode(msg)
    d.pop("t")
    return f"{msg.TAG}{_short(d)}"


def _err(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return f"unknown code {code}"


class Traced:
    """A raw connection whose every frame is traced: the suite as a client (:class:`Probe`) or
    as the server (:class:`~.serve_stage.Remote`).

    Messages go out as frames, and what comes in is decoded by the strict rules of section 2: a
    frame or a message that breaks them fails the case. Failures name the other end (``other``)
    after ``prefix``; trace lines start with ``sent_as`` or ``got_as``.
    """

    #: The other end as failures name it, and the section an invalid message of it is cited by.
    other, cite = "the server", ""

    def __init__(
        self,
        stream: trio.abc.Stream,
        trace: Trace,
        timeout: float,
        decoder: FrameDecoder,
        *,
        sent_as: str,
        got_as: str,
        prefix: str = "",
    ) -> None:
        self.stream = stream
        self.trace = trace
        self.timeout = timeout
        self.decoder = decoder
        self.eof = False
        self.sent_as, self.got_as, self.prefix = sent_as, got_as, prefix

    def failed(self, text: str) -> CaseFailed:
        """The failure ``text`` describes, as this end reports it."""
        return CaseFailed(self.prefix + text)

    async def send(self, msg: m.Message) -> None:
        """Send one message."""
        self.trace.sent.append(f"{self.sent_as}: {describe(msg)}")
        await self._write(encode_frame(m.encode(msg)))

    async def send_raw(self, data: bytes, what: str) -> None:
        """Send bytes as they are (hand-made frames)."""
        shown = data.hex(" ") if len(data) <= 24 else data[:24].hex(" ") + " ..."
        self.trace.sent.append(f"{self.sent_as}: {what} [{shown}]")
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise self.failed(f"{self.other} closed the connection ({e})") from None

    async def recv(self, timeout: float | None = None) -> m.Message | None:
        """The next message, or ``None`` at the end of the stream; fails after ``timeout``."""
        limit = self.timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            while True:
                try:
                    body = self.decoder.next_frame()
                except RemoteProtocolError as e:
                    self._undecodable(e)
                    raise self.failed(
                        f"{self.other} sent a frame that breaks section 2: {e}"
                    ) from None
                if body is not None:
                    return self._accept(body)
                if self.eof:
                    return None
                try:
                    data = await self.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if data:
                    self.decoder.feed(data)
                    continue
                self.eof = True
                self.trace.got.append(f"{self.got_as}: <end of stream>")
                self._ended()
        self.trace.got.append(f"{self.got_as}: <nothing within {limit:g} s>")
        raise self.failed(self._silence(limit))

    def _accept(self, body: dict[str, Any]) -> m.Message:
        """The message ``body`` decodes to, traced; fails the case where it may not come."""
        try:
            msg = m.decode(body)
        except RemoteProtocolError as e:
            self.trace.got.append(f"{self.got_as}: invalid message {_short(body)}")
            raise self.failed(f"{self.other} sent an invalid message{self.cite}: {e}") from None
        self.trace.got.append(f"{self.got_as}: {describe(msg)}")
        self._check(msg)
        return msg

    def _check(self, msg: m.Message) -> None:
        """Fail the case if ``msg`` may not come from the other end (a server: 2.4)."""
        if msg.DIR is m.Dir.C2S:
            raise self.failed(f"{self.other} sent {msg.TAG!r}, a client-to-server message")

    def _undecodable(self, e: RemoteProtocolError) -> None:
        """What a frame that could not be decoded leaves in the trace (nothing, by default)."""

    def _ended(self) -> None:
        """What the end of the stream checks beyond itself (nothing, by default)."""

    def _silence(self, limit: float) -> str:
        """The failure when nothing came within ``limit`` seconds."""
        return f"{self.other} sent nothing within {limit:g} s"

    async def aclose(self) -> None:
        """Close the connection."""
        with trio.move_on_after(1):
            await self.stream.aclose()


class Probe(Traced):
    """One connection to the server under test, speaking raw frames; every frame is traced."""

    def __init__(self, stream: trio.abc.Stream, trace: Trace, name: str, timeout: float) -> None:
        super().__init__(
            stream, trace, timeout, FrameDecoder(), sent_as=name, got_as=name, prefix=f"{name}: "
        )
        self.name = name
        self.key = Ed25519PrivateKey.generate()
        self.pub = self.key.public_key().public_bytes_raw()
        self.player = ""
        self.token = b""
        self.welcome: m.Welcome | None = None
        self.keep = False  #: left open after its case (the shared game's connections)
        #: The player's machine of the seat this connection plays (:meth:`sit`), and what it
        #: would send now that the case has not let go yet (:meth:`flush`).
        self.seat: Seat | None = None
        self.owed: list[m.Message] = []
        self._unseated = ""  # why the seat stopped following, if it did
        self._ids = 0

    def next_id(self) -> int:
        """A fresh request id or shot seq, from one counter so that a `ref` names one thing."""
        self._ids += 1
        return self._ids

    def _undecodable(self, e: RemoteProtocolError) -> None:
        self.trace.got.append(f"{self.name}: undecodable frame: {e}")

    # -- the seat ------------------------------------------------------------------------------

    def sit(self, match: bytes) -> Seat:
        """Play a seat of ``match`` (before its ``start`` arrives) with a :class:`Seat`, lean if
        the session agreed ``lean``; from now on every message of that match is fed to it."""
        lean = self.welcome is not None and LEAN in self.welcome.caps
        self.seat = Seat(match, self.key, self.player, lean=lean)
        return self.seat

    def seated(self) -> Seat:
        """The seat this connection plays (fails the case if it has none, or it stopped)."""
        if self.seat is None:
            raise self.failed(self._unseated or "the suite holds no seat on this connection")
        return self.seat

    def _accept(self, body: dict[str, Any]) -> m.Message:
        msg = super()._accept(body)
        seat = self.seat
        if seat is not None and getattr(msg, "match", None) == seat.id:
            try:
                out = seat.receive(msg, trio.current_time())
            except Exception as e:
                # What the server sent is beyond what a seat takes: the case's own checks say
                # what is wrong with it; the seat plays no more.
                self.seat = None
                self._unseated = f"the seat cannot take {describe(msg)}: {e!r}"
            else:
                self.owed += out.sends
        return msg

    async def flush(self) -> list[m.Message]:
        """Send what the seat owes now, in order; returns it."""
        sent, self.owed = self.owed, []
        for msg in sent:
            await self.send(msg)
        return sent

    async def play(self, out: Out) -> list[m.Message]:
        """A choice of the player (the seat's :meth:`~Seat.place`, :meth:`~Seat.fire`): what it
        gives goes now, after whatever else the seat owed; returns what was sent."""
        self.owed += out.sends
        return await self.flush()

    async def place(self, rng: random.Random) -> None:
        """The player places a random fleet with a fresh secret (its captain, in team play)."""
        seat = self.seated()
        assert seat.rules is not None  # the seat is told the rules by start
        await self.play(seat.place(random_fleet(seat.rules, rng), os.urandom(32)))

    async def give(self, kind: type[M]) -> M:
        """Send what the seat owes, which must hold a ``kind`` (its answer to the shot just called
        at it, its reveal on ``reveal_now``); returns that message."""
        self.seated()
        sent = [x for x in await self.flush() if isinstance(x, kind)]
        if not sent:
            raise self.failed(f"the seat gave no {kind.TAG} when one was due")
        return sent[-1]

    async def answer(self) -> dict[str, Any]:
        """:meth:`give` the seat's answer to the shot just called at it; returns its verdict."""
        return dict((await self.give(m.Answer)).verdict)

    def _ended(self) -> None:
        try:
            self.decoder.eof()
        except RemoteProtocolError as e:
            raise self.failed(f"stream ended inside a frame: {e}") from None

    def _silence(self, limit: float) -> str:
        return f"nothing arrived within {limit:g} s"

    async def expect(
        self, *types: type[m.Message], noise: tuple[type[m.Message], ...] = NOISE
    ) -> m.Message:
        """The next message that is not noise; it must be one of ``types``.

        Pings are answered on the way, as the spec requires of every endpoint.
        """
        while True:
            msg = await self.recv()
            if msg is None:
                raise CaseFailed(
                    f"{self.name}: the connection closed while waiting for "
                    + "/".join(t.TAG for t in types)
                )
            if isinstance(msg, m.Ping):
                await self.send(m.Pong(msg.n))
            if isinstance(msg, types):
                return msg
            if isinstance(msg, noise):
                continue
            raise CaseFailed(
                f"{self.name}: expected {'/'.join(t.TAG for t in types)}, got {describe(msg)}"
            )

    async def expect_error(self, code: ErrorCode, ref: int | bool | None = False) -> m.Error:
        """The next non-noise message must be ``error{code}`` (and ``ref``, unless ``False``)."""
        msg = await self.expect(m.Error)
        assert isinstance(msg, m.Error)
        if msg.code != int(code):
            raise CaseFailed(f"{self.name}: expected {_err(code)}, got {_err(msg.code)}")
        if ref is not False and msg.ref != ref:
            raise CaseFailed(f"{self.name}: error ref is {msg.ref!r}, expected {ref!r}")
        return msg

    async def expect_close(self, within: float = 6.0) -> None:
        """Nothing more may arrive, and the stream must end within ``within`` seconds."""
        msg = await self.recv(timeout=within)
        if msg is not None:
            raise CaseFailed(f"{self.name}: expected the session to end, got {describe(msg)}")

    async def alive(self) -> None:
        """The session goes on: a ``ping`` is answered by a ``pong`` with the same ``n``."""
        n = secrets.randbelow(1 << 30)
        await self.send(m.Ping(n))
        msg = await self.expect(m.Pong)
        assert isinstance(msg, m.Pong)
        if msg.n != n:
            raise CaseFailed(f"{self.name}: pong n={msg.n}, ping n={n}")

    async def quiet(self) -> None:
        """Nothing but noise arrives before the answer to a ping (the server handles in order)."""
        await self.alive()

    async def hello(
        self, versions: Sequence[int] = SUPPORTED_VERSIONS, caps: Sequence[str] = ()
    ) -> m.Welcome:
        """Send ``hello`` and return the ``welcome``."""
        await self.send(m.Hello(tuple(versions), AGENT, tuple(caps)))
        w = await self.expect(m.Welcome)
        assert isinstance(w, m.Welcome)
        self.welcome = w
        return w

    def auth_message(self, resume: bytes | None = None, *, good: bool = True) -> m.Auth:
        """An ``auth`` for the last ``welcome`` (a wrong signature unless ``good``)."""
        assert self.welcome is not None
        payload = auth_payload(self.welcome.challenge, self.welcome.server, self.pub)
        sig = self.key.sign(payload if good else payload[::-1])
        return m.Auth(self.pub, sig, self.name, resume)

    async def login(self, resume: bytes | None = None, caps: Sequence[str] = ()) -> m.Authed:
        """The whole handshake, offering ``caps``; returns ``authed``."""
        await self.hello(caps=caps)
        await self.send(self.auth_message(resume))
        a = await self.expect(m.Authed)
        assert isinstance(a, m.Authed)
        self.player, self.token = a.player, a.resume
        return a

    async def request(self, make: Callable[[int], m.Message]) -> m.Ok | m.Error:
        """Send a lobby request; return its ``ok`` or ``error`` (matched by ``ref``)."""
        rid = self.next_id()
        await self.send(make(rid))
        msg = await self.expect(m.Ok, m.Error)
        assert isinstance(msg, m.Ok | m.Error)
        if msg.ref != rid:
            raise CaseFailed(f"{self.name}: answer ref {msg.ref!r}, request id {rid}")
        return msg

    async def ok(self, make: Callable[[int], m.Message]) -> dict[str, Any]:
        """Send a lobby request that must succeed; return ``ok.data``."""
        ans = await self.request(make)
        if isinstance(ans, m.Error):
            raise CaseFailed(f"{self.name}: request refused with {_err(ans.code)}: {ans.msg}")
        return dict(ans.data)


@dataclass(slots=True)
class Table:
    """A match with both seats played by the suite: probes and secrets by seat."""

    match: bytes
    rules: RuleSet
    mode: str
    seats: list[Probe]
    starts: list[m.Start]
    first: int = 0
    #: Each seat's fleet and secret, as its seat placed them (:meth:`.suite.Suite.commit_both`).
    committed: list[Committed] = field(default_factory=list)
    commitments: list[Commitment] = field(default_factory=list)

    def ctx(self, seat: int) -> bytes:
        """The commitment context of ``seat`` in game 1 (section 10.2)."""
        return context(self.match, 1, seat, self.rules)

    def ship_cells(self, seat: int) -> list[Cell]:
        """The cells of ``seat``'s own fleet."""
        return [c for ship in self.committed[seat].fleet.ship_cells(self.rules) for c in ship]

    def water(self, seat: int) -> list[Cell]:
        """Cells of ``seat``'s grid with no ship."""
        occ = self.committed[seat].occupancy
        return [Cell(*divmod(i, self.rules.cols)) for i in range(self.rules.cells) if not occ[i]]
