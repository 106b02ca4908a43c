"""A conformance suite for seabattle servers: any implementation, over TCP, against ``spec/``.

Theory of operation (h2spec and Autobahn style). Each :class:`Case` is named after the section of
``spec/protocol.md`` it checks and quotes the sentence it checks. A case opens its own
connections, sends bytes or messages, and compares what comes back with what the spec requires;
it reports what it sent, what it expected and what it got, and a verdict: ``passed``,
``failed``, or ``not implemented`` (an optional feature the server does not offer).

The suite deliberately does not use :mod:`seabattle.client.api`: it talks to the server through
the codec (:mod:`seabattle.protocol.codec`, :mod:`seabattle.protocol.messages`) over raw trio
streams, so that it tests the server and not our own client. It plays both seats of every match
itself, with the reference commitments (:class:`~seabattle.protocol.commit.Committed`) and honest
answers (:class:`~seabattle.protocol.verdict.Defender`), and checks every opening the server relays
against the commitments itself. Records are checked with
:func:`~seabattle.protocol.record.verify_record`.

Use :func:`run_suite` from code, or the click command :data:`conformance`
(``seabattle conformance HOST:PORT [--json] [--report FILE] [--only SECTION]``).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import click
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.commit import (
    CellOpening,
    Commitment,
    Committed,
    ShipOpening,
    context,
)
from seabattle.protocol.errors import ErrorCode, ProtocolError, RemoteProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import dump_record, load_record, record_head, verify_record
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.session import auth_payload
from seabattle.protocol.verdict import Defender, Shot

__all__ = [
    "CASES",
    "Case",
    "CaseResult",
    "Outcome",
    "Report",
    "conformance",
    "render_table",
    "run_suite",
]

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


class Outcome(StrEnum):
    """A case's verdict."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_IMPLEMENTED = "not implemented"


class CaseFailed(Exception):
    """The server did something the quoted sentence forbids (or did not do what it requires)."""


class NotImplementedCase(Exception):
    """The server does not offer an optional feature the case checks."""


@dataclass(slots=True)
class Trace:
    """What one case sent, expected and got, in order, for the report."""

    sent: list[str] = field(default_factory=list)
    got: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def expect(self, text: str) -> None:
        """Note what the case expects next (shown when it fails)."""
        self.expected.append(text)


@dataclass(slots=True)
class CaseResult:
    """One case's report entry."""

    id: str
    section: str
    title: str
    quote: str
    outcome: Outcome
    sent: list[str]
    expected: list[str]
    got: list[str]
    detail: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "quote": self.quote,
            "outcome": self.outcome.value,
            "sent": self.sent,
            "expected": self.expected,
            "got": self.got,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


@dataclass(slots=True)
class Report:
    """The results of one run against one server."""

    target: str
    results: list[CaseResult]

    @property
    def failed(self) -> list[CaseResult]:
        """The cases that failed."""
        return [r for r in self.results if r.outcome is Outcome.FAILED]

    def counts(self) -> dict[str, int]:
        """How many cases ended with each verdict."""
        return {o.value: sum(r.outcome is o for r in self.results) for o in Outcome}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the ``--json`` output)."""
        return {
            "target": self.target,
            "spec": "spec/protocol.md, protocol version 1",
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }


# ================================================================================================
# Talking to the server
# ================================================================================================


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


class Probe:
    """One connection to the server under test, speaking raw frames; every frame is traced."""

    def __init__(self, stream: trio.abc.Stream, trace: Trace, name: str, timeout: float) -> None:
        self.stream = stream
        self.trace = trace
        self.name = name
        self.timeout = timeout
        self.decoder = FrameDecoder()
        self.eof = False
        self.key = Ed25519PrivateKey.generate()
        self.pub = self.key.public_key().public_bytes_raw()
        self.player = ""
        self.token = b""
        self.welcome: m.Welcome | None = None
        self.keep = False  #: left open after its case (the shared game's connections)
        self._ids = 0

    def next_id(self) -> int:
        """A fresh request id or shot seq, from one counter so that a `ref` names one thing."""
        self._ids += 1
        return self._ids

    async def send(self, msg: m.Message) -> None:
        """Send one message."""
        self.trace.sent.append(f"{self.name}: {describe(msg)}")
        await self._write(encode_frame(m.encode(msg)))

    async def send_raw(self, data: bytes, what: str) -> None:
        """Send bytes as they are (hand-made frames)."""
        shown = data.hex(" ") if len(data) <= 24 else data[:24].hex(" ") + " ..."
        self.trace.sent.append(f"{self.name}: {what} [{shown}]")
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise CaseFailed(f"{self.name}: the server closed the connection ({e})") from None

    async def recv(self, timeout: float | None = None) -> m.Message | None:
        """The next message, or ``None`` at the end of the stream; fails after ``timeout``."""
        limit = self.timeout if timeout is None else timeout
        with trio.move_on_after(limit):
            while True:
                try:
                    body = self.decoder.next_frame()
                except RemoteProtocolError as e:
                    self.trace.got.append(f"{self.name}: undecodable frame: {e}")
                    raise CaseFailed(
                        f"{self.name}: the server sent a frame that breaks section 2: {e}"
                    ) from None
                if body is not None:
                    return self._accept(body)
                if self.eof:
                    return None
                try:
                    data = await self.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    self.eof = True
                    self.trace.got.append(f"{self.name}: <end of stream>")
                    try:
                        self.decoder.eof()
                    except RemoteProtocolError as e:
                        raise CaseFailed(f"{self.name}: stream ended inside a frame: {e}") from None
                else:
                    self.decoder.feed(data)
        self.trace.got.append(f"{self.name}: <nothing within {limit:g} s>")
        raise CaseFailed(f"{self.name}: nothing arrived within {limit:g} s")

    def _accept(self, body: dict[str, Any]) -> m.Message:
        try:
            msg = m.decode(body)
        except RemoteProtocolError as e:
            self.trace.got.append(f"{self.name}: invalid message {_short(body)}")
            raise CaseFailed(f"{self.name}: the server sent an invalid message: {e}") from None
        self.trace.got.append(f"{self.name}: {describe(msg)}")
        if msg.DIR is m.Dir.C2S:
            raise CaseFailed(
                f"{self.name}: the server sent {msg.TAG!r}, a client-to-server message"
            )
        return msg

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

    async def hello(self, versions: Sequence[int] = (1,), caps: Sequence[str] = ()) -> m.Welcome:
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

    async def login(self, resume: bytes | None = None) -> m.Authed:
        """The whole handshake; returns ``authed``."""
        await self.hello()
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

    async def aclose(self) -> None:
        """Close the connection."""
        with trio.move_on_after(1):
            await self.stream.aclose()


@dataclass(slots=True)
class Table:
    """A match with both seats played by the suite: probes and secrets by seat."""

    match: bytes
    rules: RuleSet
    mode: str
    seats: list[Probe]
    starts: list[m.Start]
    first: int = 0
    committed: list[Committed] = field(default_factory=list)
    commitments: list[Commitment] = field(default_factory=list)
    defenders: list[Defender] = field(default_factory=list)

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


# ================================================================================================
# The suite's shared steps
# ================================================================================================


class Suite:
    """A run against one server: connections, shared scenarios and the trace of each case."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.rng = random.Random(secrets.randbits(64))
        #: Results of scenarios several cases look at (one blind game serves five cases).
        self.cache: dict[str, Any] = {}
        #: Connections opened by the running case, closed when it ends (unless kept).
        self.opened: list[Probe] = []

    async def connect(self, trace: Trace, name: str) -> Probe:
        """A fresh connection."""
        try:
            stream = await trio.open_tcp_stream(self.host, self.port)
        except OSError as e:
            raise CaseFailed(f"cannot connect to {self.host}:{self.port}: {e}") from None
        p = Probe(stream, trace, name, self.timeout)
        self.opened.append(p)
        return p

    async def player(self, trace: Trace, name: str) -> Probe:
        """A fresh connection, authenticated with a fresh guest key."""
        p = await self.connect(trace, name)
        await p.login()
        return p

    async def table(self, trace: Trace, mode: str = "blind", public: bool = False) -> Table:
        """Two players in a new match of :data:`RULES`, up to the ``game`` message."""
        a = await self.player(trace, "A")
        b = await self.player(trace, "B")
        created = await a.ok(lambda i: m.Create(i, RULES, mode, public))
        mid = created.get("match")
        if not isinstance(mid, bytes) or len(mid) != 16:
            raise CaseFailed(f"create: ok.data.match is not a 16-byte bin: {_short(mid)}")
        joined = await b.ok(lambda i: m.Join(i, mid, None))
        if joined.get("match") != mid:
            raise CaseFailed("join: ok.data.match is not the match joined")
        starts: dict[str, m.Start] = {}
        for p in (a, b):
            st = await p.expect(m.Start)
            assert isinstance(st, m.Start)
            starts[p.name] = st
        seat_a = starts["A"].seat
        if {seat_a, starts["B"].seat} != {0, 1}:
            raise CaseFailed(f"start seats are {seat_a} and {starts['B'].seat}, not 0 and 1")
        seats = [a, b] if seat_a == 0 else [b, a]
        for s, p in enumerate(seats):
            st = starts[p.name]
            if st.match != mid or st.mode != mode or list(st.players) != [q.player for q in seats]:
                raise CaseFailed(f"start for seat {s} names another match, mode or players")
        rules = rules_from_dict(starts["A"].rules)
        if rules.to_dict() != starts["A"].rules:
            raise CaseFailed("start.rules is not a rule set in full form (section 7.4)")
        t = Table(mid, rules, mode, seats, [starts[p.name] for p in seats])
        firsts = set()
        for p in seats:
            g = await p.expect(m.GameStart)
            assert isinstance(g, m.GameStart)
            if g.match != mid or g.game != 1:
                raise CaseFailed(f"game names match {g.match.hex()} game {g.game}")
            firsts.add(g.first)
        if len(firsts) != 1:
            raise CaseFailed(f"the two seats were told different first players: {firsts}")
        first = firsts.pop()
        t.first = first if first is not None else -1
        return t

    async def commit_both(self, t: Table, trace: Trace) -> None:
        """Both seats commit (blind) or place (custody); wait for ``firing``; check its roots."""
        rules = t.rules
        t.committed = [
            Committed(rules, random_fleet(rules, self.rng), os.urandom(32), t.match, 1, s)
            for s in (0, 1)
        ]
        t.defenders = [Defender(c) for c in t.committed]
        for s, p in enumerate(t.seats):
            c = t.committed[s]
            if t.mode == "blind":
                await p.send(m.Commit(t.match, 1, c.commitment.to_dict()))
            else:
                await p.send(m.Place(t.match, 1, tuple(c.fleet.to_list()), c.secret))
        trace.expect("committed for each seat, then firing{first, commitments} (section 8.3)")
        for s, p in enumerate(t.seats):
            roots: dict[int, bytes] = {}
            while True:
                msg = await p.expect(m.Committed, m.Firing)
                if isinstance(msg, m.Committed):
                    roots[msg.seat] = msg.root
                    continue
                assert isinstance(msg, m.Firing)
                break
            if set(roots) != {0, 1}:
                raise CaseFailed(f"seat {s} got firing before committed of seats {set(roots)}")
            if t.first >= 0 and msg.first != t.first:
                raise CaseFailed(f"firing.first {msg.first}, game.first {t.first}")
            t.first = msg.first
            if len(msg.commitments) != 2:
                raise CaseFailed("firing.commitments does not hold two commitments")
            coms = [Commitment.from_dict(c) for c in msg.commitments]
            for q in (0, 1):
                if coms[q].root(t.ctx(q)) != roots[q]:
                    raise CaseFailed(f"firing.commitments[{q}] does not hash to seat {q}'s root")
                if coms[q] != t.committed[q].commitment:
                    raise CaseFailed(f"firing.commitments[{q}] is not the commitment seat {q} made")
            t.commitments = coms


def check_verdict(t: Table, v: m.VerdictMsg, shooter: int, cells: Sequence[Cell]) -> int:
    """Check a ``verdict``'s openings against the defender's commitment; return how many."""
    defender = 1 - shooter
    com, ctx = t.commitments[defender], t.ctx(defender)
    d = v.verdict
    results = d.get("results")
    if not isinstance(results, list) or len(results) != len(cells):
        raise CaseFailed(f"verdict.results does not hold one result per called cell: {_short(d)}")
    checked = 0
    for cell, r in zip(cells, results, strict=True):
        try:
            o = CellOpening.from_dict(r.get("open"))
            com.check_cell(ctx, o)
        except ProtocolError as e:
            raise CaseFailed(f"the opening of {cell.label()} does not verify: {e}") from None
        if o.index != cell.index(t.rules.cols):
            raise CaseFailed(f"the opening is of cell {o.index}, not {cell.label()}")
        if o.occupied != (r.get("r") in ("hit", "sunk")):
            raise CaseFailed(f"result {r.get('r')!r} contradicts the opening's occ={o.occupied}")
        sunk = r.get("sunk")
        if isinstance(sunk, dict) and sunk.get("open") is not None:
            try:
                com.check_ship(ctx, ShipOpening.from_dict(sunk["open"]))
            except ProtocolError as e:
                raise CaseFailed(f"the ship opening does not verify: {e}") from None
            checked += 1
        checked += 1
    return checked


async def fire_and_answer(
    t: Table, shooter: int, cell: Cell, n: int, *, watchers: Sequence[Probe] = ()
) -> m.VerdictMsg:
    """``shooter`` fires at ``cell``; in blind mode the defender answers honestly.

    Every seat and watcher must see ``shot`` then ``verdict``; the verdict's openings are checked.
    """
    p = t.seats[shooter]
    await p.send(m.Fire(t.match, 1, (cell.label(),), 0, p.next_id()))
    everyone = [*t.seats, *watchers]
    for q in everyone:
        sh = await q.expect(m.ShotCalled)
        assert isinstance(sh, m.ShotCalled)
        if (sh.n, sh.seat, list(sh.cells), sh.radar) != (n, shooter, [cell.label()], False):
            raise CaseFailed(
                f"{q.name}: shot is n={sh.n} seat={sh.seat} cells={list(sh.cells)}; expected "
                f"n={n} seat={shooter} cells={[cell.label()]}"
            )
    sent: dict[str, Any] | None = None
    if t.mode == "blind":
        verdict = t.defenders[1 - shooter].answer(Shot(n, shooter, (cell,)))
        sent = verdict.to_dict()
        await t.seats[1 - shooter].send(m.Answer(t.match, 1, sent))
    else:
        t.defenders[1 - shooter].answer(Shot(n, shooter, (cell,)))  # keep the mirror's hits
    last: m.VerdictMsg | None = None
    for q in everyone:
        v = await q.expect(m.VerdictMsg)
        assert isinstance(v, m.VerdictMsg)
        if (v.n, v.seat, list(v.cells)) != (n, shooter, [cell.label()]):
            raise CaseFailed(f"{q.name}: verdict on n={v.n} seat={v.seat}, expected n={n}")
        if sent is not None and v.verdict != sent:
            raise CaseFailed(f"{q.name}: the relayed verdict differs from the defender's answer")
        check_verdict(t, v, shooter, [cell])
        last = v
    assert last is not None
    return last


async def expect_game_over(
    probes: Sequence[Probe], winner: int | None, reason: str
) -> list[m.GameOver]:
    """Every probe gets ``game_over`` with this winner and reason."""
    out = []
    for q in probes:
        go = await q.expect(m.GameOver)
        assert isinstance(go, m.GameOver)
        o = go.outcome
        if set(o) != {"winner", "reason", "detail"}:
            raise CaseFailed(f"{q.name}: outcome keys {sorted(o)}, not winner, reason, detail")
        if (o["winner"], o["reason"]) != (winner, reason):
            raise CaseFailed(
                f"{q.name}: game_over winner={o['winner']} reason={o['reason']!r}; "
                f"expected winner={winner} reason={reason!r}"
            )
        out.append(go)
    return out


# ================================================================================================
# The cases
# ================================================================================================

CaseFn = Callable[[Suite, Trace], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Case:
    """One check: its id, the spec section it checks, the sentence quoted, and the check."""

    id: str
    section: str
    title: str
    quote: str
    expected: str
    run: CaseFn


CASES: list[Case] = []


def case(
    id: str, section: str, title: str, quote: str, expected: str
) -> Callable[[CaseFn], CaseFn]:
    """Register a case (in the order the spec's sections come)."""

    def deco(fn: CaseFn) -> CaseFn:
        CASES.append(Case(id, section, title, quote, expected, fn))
        return fn

    return deco


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


async def _refused_body(
    s: Suite, t: Trace, body: bytes, what: str, code: ErrorCode, *, authed: bool = False
) -> None:
    p = await (s.player(t, "C") if authed else s.connect(t, "C"))
    await p.send_raw(_frame(body), what)
    await p.expect_error(code, None)
    t.expect("the session goes on: ping answered by pong")
    await p.alive()
    await p.aclose()


@case(
    "2.1-frame-too-large",
    "2.1 Frames",
    "Oversized frame header",
    "`N` over the limit of its direction with `FRAME_TOO_LARGE`, and in both cases the receiver "
    "MUST fail the session",
    "error{FRAME_TOO_LARGE}, then the end of the stream",
)
async def _frame_too_large(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    # Only the header: a conforming server refuses it before waiting for any body.
    await p.send_raw((65537).to_bytes(4, "big"), "header announcing 65537 bytes, no body")
    await p.expect_error(ErrorCode.FRAME_TOO_LARGE, None)
    await p.expect_close()


@case(
    "2.1-zero-length",
    "2.1 Frames",
    "Zero-length frame",
    "`N = 0` is refused with `BAD_MESSAGE` [...] the receiver MUST fail the session",
    "error{BAD_MESSAGE}, then the end of the stream",
)
async def _zero_length(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send_raw(b"\x00\x00\x00\x00", "header announcing 0 bytes")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.expect_close()


@case(
    "2.3-D1-malformed",
    "2.3 Strict decoding",
    "Malformed msgpack; the session continues",
    "The body is well-formed msgpack: no reserved byte (`0xc1`) [...] `MALFORMED_MSGPACK` (1003)",
    "error{MALFORMED_MSGPACK, ref: nil}; then ping -> pong",
)
async def _malformed(s: Suite, t: Trace) -> None:
    await _refused_body(s, t, b"\xc1", "body c1", ErrorCode.MALFORMED_MSGPACK)


@case(
    "2.3-D3-ext",
    "2.3 Strict decoding",
    "Extension type",
    "No extension type anywhere (`fixext`, `ext8/16/32`) [...] `FORBIDDEN_TYPE` (1004)",
    "error{FORBIDDEN_TYPE}; then ping -> pong",
)
async def _ext(s: Suite, t: Trace) -> None:
    body = b"\x82\xa1t\xa4ping\xa1n\xd4\x05\x01"  # {"t": "ping", "n": fixext1(type 5)}
    await _refused_body(s, t, body, "ping with n = fixext1", ErrorCode.FORBIDDEN_TYPE)


@case(
    "2.3-D4-float",
    "2.3 Strict decoding",
    "Float",
    "No float anywhere (`float32`, `float64`). Integers are the only numbers. | `FORBIDDEN_TYPE`",
    "error{FORBIDDEN_TYPE}; then ping -> pong",
)
async def _float(s: Suite, t: Trace) -> None:
    body = b"\x82\xa1t\xa4ping\xa1n\xcb" + struct.pack(">d", 1.5)  # n: float64 1.5
    await _refused_body(s, t, body, "ping with n = 1.5", ErrorCode.FORBIDDEN_TYPE)


@case(
    "2.3-D5-key-type",
    "2.3 Strict decoding",
    "Non-string map key",
    "Every map key, at every level, is a `str`. [...] | `BAD_MESSAGE` (1007)",
    "error{BAD_MESSAGE}; then ping -> pong",
)
async def _int_key(s: Suite, t: Trace) -> None:
    body = b"\x83\xa1t\xa4ping\xa1n\x01\x07\x01"  # {"t": "ping", "n": 1, 7: 1}
    await _refused_body(s, t, body, "ping with an integer key", ErrorCode.BAD_MESSAGE)


@case(
    "2.3-D6-duplicate",
    "2.3 Strict decoding",
    "Duplicate key",
    "No map repeats a key (compared as decoded strings). | `DUPLICATE_KEY` (1005)",
    "error{DUPLICATE_KEY}; then ping -> pong",
)
async def _duplicate(s: Suite, t: Trace) -> None:
    body = b"\x83\xa1t\xa4ping\xa1n\x01\xa1n\x02"  # {"t": "ping", "n": 1, "n": 2}
    await _refused_body(s, t, body, "ping with n twice", ErrorCode.DUPLICATE_KEY)


@case(
    "2.3-D7-too-deep",
    "2.3 Strict decoding",
    "Nesting deeper than 8",
    "Maps and arrays nest at most **8** deep [...] `TOO_DEEP` (1006)",
    "error{TOO_DEEP}; then ping -> pong",
)
async def _too_deep(s: Suite, t: Trace) -> None:
    deep: Any = 1
    for _ in range(8):
        deep = [deep]
    body = canonical_pack({"t": "ping", "n": deep})
    await _refused_body(s, t, body, "ping nesting 9 deep", ErrorCode.TOO_DEEP)


@case(
    "2.3-D8-not-a-map",
    "2.3 Strict decoding",
    "Top level not a map",
    "The top-level value is a map. | `BAD_MESSAGE` (1007)",
    "error{BAD_MESSAGE}; then ping -> pong",
)
async def _not_map(s: Suite, t: Trace) -> None:
    await _refused_body(s, t, b"\x92\x01\x02", "array [1, 2]", ErrorCode.BAD_MESSAGE)


@case(
    "2.4-unknown-tag",
    "2.4 From map to message",
    "Unknown tag",
    "a tag that names no message of the agreed version: `UNKNOWN_TAG`",
    "error{UNKNOWN_TAG}; then ping -> pong",
)
async def _unknown_tag(s: Suite, t: Trace) -> None:
    body = canonical_pack({"t": "frobnicate", "n": 1})
    await _refused_body(s, t, body, "{t: frobnicate}", ErrorCode.UNKNOWN_TAG, authed=True)


@case(
    "2.4-extra-key",
    "2.4 From map to message",
    "Extra key",
    "a missing key, an extra key, a value of the wrong type [...]: `BAD_MESSAGE`",
    "error{BAD_MESSAGE} for an extra key and for true where an int is due",
)
async def _extra_key(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send_raw(_frame(canonical_pack({"t": "ping", "n": 1, "x": 0})), "ping with key x")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.send_raw(_frame(canonical_pack({"t": "ping", "n": True})), "ping with n = true")
    await p.expect_error(ErrorCode.BAD_MESSAGE, None)
    await p.alive()
    await p.aclose()


@case(
    "2.4-wrong-direction",
    "2.4 From map to message",
    "Message in the wrong direction",
    "a message whose direction (section 5) does not allow this receiver: `UNEXPECTED_MESSAGE`",
    "error{UNEXPECTED_MESSAGE} for a `shot` sent to the server; the session goes on",
)
async def _wrong_direction(s: Suite, t: Trace) -> None:
    p = await s.player(t, "C")
    await p.send(m.ShotCalled(bytes(16), 1, 1, 0, ("A1",), False))
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p.alive()
    await p.aclose()


@case(
    "4.1-handshake-required",
    "4.1 Handshake",
    "Message before the handshake",
    "Before `ready`, a message that the table does not allow [...] MUST be refused with "
    "`HANDSHAKE_REQUIRED`; it is dropped and the session goes on.",
    "error{HANDSHAKE_REQUIRED}; then hello -> welcome",
)
async def _handshake_required(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send(m.ListMatches(1))
    await p.expect_error(ErrorCode.HANDSHAKE_REQUIRED)
    w = await p.hello()
    await p.send(m.Ladder(2))  # welcome sent, auth owed: still before ready
    await p.expect_error(ErrorCode.HANDSHAKE_REQUIRED)
    await p.send(p.auth_message())
    await p.expect(m.Authed)
    t.notes.append(f"welcome.version={w.version}")


@case(
    "4.1-handshake-twice",
    "4.1 Handshake",
    "Handshake message after ready",
    "After `ready`, a handshake message (`hello`, `welcome`, `auth`, `authed`) MUST be refused "
    "with `UNEXPECTED_MESSAGE`.",
    "error{UNEXPECTED_MESSAGE} for a second hello",
)
async def _handshake_twice(s: Suite, t: Trace) -> None:
    p = await s.player(t, "C")
    await p.send(m.Hello((1,), AGENT, ()))
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE)
    await p.alive()


@case(
    "4.2-version",
    "4.2 Version and capabilities",
    "Version choice and capabilities",
    "The server MUST choose the highest version that both speak [...] `welcome.caps` [...] MUST be "
    "a subset of `hello.caps`.",
    "welcome{version: 1, caps within hello.caps, server: 32 bytes, challenge: 32 bytes}",
)
async def _version(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    w = await p.hello(versions=(1, 1000), caps=("x-conformance",))
    if w.version != 1:
        raise CaseFailed(f"welcome.version is {w.version}; 1 is the highest both speak")
    if not set(w.caps) <= {"x-conformance"}:
        raise CaseFailed(f"welcome.caps {list(w.caps)} is not a subset of hello.caps")
    if len(w.server) != 32 or len(w.challenge) != 32:
        raise CaseFailed("welcome.server and welcome.challenge are 32 bytes each")
    q = await s.connect(t, "D")
    w2 = await q.hello()
    if w2.challenge == w.challenge:
        raise CaseFailed("two sessions got the same challenge")


@case(
    "4.2-unsupported-version",
    "4.2 Version and capabilities",
    "No common version",
    "If there is none, the server MUST refuse `hello` with `UNSUPPORTED_VERSION`",
    "error{UNSUPPORTED_VERSION}; then the session fails, or hello may be sent again",
)
async def _unsupported(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send(m.Hello((1000,), AGENT, ()))
    await p.expect_error(ErrorCode.UNSUPPORTED_VERSION)
    # The server MAY fail the session; if it does not, it is still in state hello.
    msg: m.Message | None = None
    try:
        await p.send(m.Hello((1,), AGENT, ()))
        msg = await p.recv(timeout=3)
    except CaseFailed:
        msg = None
    if msg is None:
        t.notes.append("the server failed the session")
    elif not isinstance(msg, m.Welcome):
        raise CaseFailed(f"after UNSUPPORTED_VERSION, hello got {describe(msg)}")
    else:
        t.notes.append("the server kept the session in state hello")


@case(
    "4.3-auth",
    "4.3 Identity",
    "Bad signature, then a good one",
    "The server MUST refuse `auth` with `AUTH_FAILED` when [...] the signature does not verify "
    "[...] After a refused `auth` the handshake returns to state `auth` and the client MAY try "
    "again",
    "error{AUTH_FAILED}; then authed{player: hex of the key, resume: bin}",
)
async def _auth(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.hello()
    await p.send(p.auth_message(good=False))
    await p.expect_error(ErrorCode.AUTH_FAILED, None)
    await p.send(m.Auth(p.pub[:31], bytes(64), "short", None))
    await p.expect_error(ErrorCode.AUTH_FAILED, None)
    await p.send(p.auth_message())
    a = await p.expect(m.Authed)
    assert isinstance(a, m.Authed)
    if a.player != p.pub.hex():
        raise CaseFailed(f"authed.player {a.player!r} is not the lower-case hex of the key")
    if not a.resume:
        raise CaseFailed("authed.resume is empty: a server issues a resume token (4.7)")
    await p.alive()


@case(
    "4.6-heartbeat",
    "4.6 Heartbeat",
    "Ping in every state",
    "Either endpoint MAY send `ping{n}` in any state; the receiver MUST answer `pong{n}` with the "
    "same `n` promptly.",
    "pong{n} before hello, and after authed",
)
async def _heartbeat(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.alive()
    await p.login()
    await p.alive()


@case(
    "6.2-create-list",
    "6.2 Answers to lobby requests",
    "create and list",
    "`create` | `{match: bin16, invite: str}` [...] `list` | `{matches: [{match: bin16, rules: "
    "map, mode: str, host: str}]}`",
    "ok{match, invite}; list shows the public match with full rules and the host's id",
)
async def _create_list(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    data = await p.ok(lambda i: m.Create(i, RULES, "blind", True))
    mid, invite = data.get("match"), data.get("invite")
    if not isinstance(mid, bytes) or len(mid) != 16 or not isinstance(invite, str):
        raise CaseFailed(f"create answered {_short(data)}")
    listed = await p.ok(lambda i: m.ListMatches(i))
    rows = [r for r in listed.get("matches", []) if isinstance(r, dict) and r.get("match") == mid]
    if len(rows) != 1:
        raise CaseFailed("list does not show the public match just created")
    row = rows[0]
    if set(row) != {"match", "rules", "mode", "host"}:
        raise CaseFailed(f"list row keys are {sorted(row)}")
    if row["mode"] != "blind" or row["host"] != p.player:
        raise CaseFailed(f"list row mode={row['mode']!r} host={row['host']!r}")
    if rules_from_dict(row["rules"]).to_dict() != row["rules"]:
        raise CaseFailed("list row rules are not in full form")
    left = await p.ok(lambda i: m.Leave(i, mid))
    t.notes.append(f"leave answered {_short(left)}")
    listed = await p.ok(lambda i: m.ListMatches(i))
    if any(isinstance(r, dict) and r.get("match") == mid for r in listed.get("matches", [])):
        raise CaseFailed("a cancelled match is still listed")


@case(
    "6.1-private",
    "6.1 Matches",
    "Private matches are not listed",
    "A match is **public** (`create.public: true`: listed by `list`, open to `watch` by anyone) or "
    "private (not listed; watched only by its players).",
    "a private match is absent from list",
)
async def _private(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    data = await p.ok(lambda i: m.Create(i, RULES, "blind", False))
    listed = await p.ok(lambda i: m.ListMatches(i))
    if any(
        isinstance(r, dict) and r.get("match") == data.get("match")
        for r in listed.get("matches", [])
    ):
        raise CaseFailed("list shows a private match")


@case(
    "5.3-join",
    "5.3 Receiver rules: lobby requests",
    "join by invitation, and join's refusals",
    "Unknown match: `NO_SUCH_MATCH`; unknown, used or expired invitation: `BAD_INVITE`; a match "
    "that has started (both seats taken) or is over: `MATCH_FULL`; the sender is the match's host "
    "(a player cannot play itself): `NOT_ALLOWED`. [...] On success answer `ok`, then send `start` "
    "to both players (the `ok` comes first).",
    "NO_SUCH_MATCH, BAD_INVITE, NOT_ALLOWED; then ok{match} and start{seat} for both",
)
async def _join(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A")
    b = await s.player(t, "B")
    data = await a.ok(lambda i: m.Create(i, RULES, "blind", False))
    mid, invite = data["match"], data["invite"]
    for who, make, code in (
        (b, lambda i: m.Join(i, os.urandom(16), None), ErrorCode.NO_SUCH_MATCH),
        (b, lambda i: m.Join(i, None, "NO-SUCH-CODE"), ErrorCode.BAD_INVITE),
        (a, lambda i: m.Join(i, mid, None), ErrorCode.NOT_ALLOWED),
        (b, lambda i: m.Join(i, None, None), ErrorCode.BAD_MESSAGE),
    ):
        ans = await who.request(make)
        if not isinstance(ans, m.Error) or ans.code != int(code):
            raise CaseFailed(f"expected {_err(code)}, got {describe(ans)}")
    joined = await b.ok(lambda i: m.Join(i, None, invite))
    if joined.get("match") != mid:
        raise CaseFailed(f"join by invitation answered {_short(joined)}")
    seats = set()
    for p in (a, b):
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        seats.add(st.seat)
        if st.match != mid or st.mode != "blind" or len(st.players) != 2:
            raise CaseFailed(f"{p.name}: start {describe(st)}")
    if seats != {0, 1}:
        raise CaseFailed(f"seats {seats}")
    c = await s.player(t, "C")
    ans = await c.request(lambda i: m.Join(i, mid, None))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.MATCH_FULL):
        raise CaseFailed(f"joining a full match: expected MATCH_FULL, got {describe(ans)}")
    await a.send(m.Resign(mid, 1))


@case(
    "5.3-quick",
    "5.3 Receiver rules: lobby requests",
    "Quick match",
    "Pair the sender with the longest-waiting player of another key whose rule set has the same "
    "digest (section 7.4) and the same `mode`; if there is none, the sender waits and the `ok` "
    "comes only once paired (then `ok` to both, then `start` to both).",
    "both quick requests answered ok{match} with the same id; start for both",
)
async def _quick(s: Suite, t: Trace) -> None:
    # A rule set nobody else asks for, so that the two probes pair with each other.
    rules = dict(RULES, clocks={"grace": 1 + secrets.randbelow(1000)})
    a = await s.player(t, "A")
    b = await s.player(t, "B")
    ida = a.next_id()
    await a.send(m.Quick(ida, rules, "blind"))
    idb = b.next_id()
    await b.send(m.Quick(idb, rules, "blind"))
    mids = []
    for p, rid in ((a, ida), (b, idb)):
        ok = await p.expect(m.Ok)
        assert isinstance(ok, m.Ok)
        if ok.ref != rid:
            raise CaseFailed(f"{p.name}: ok.ref {ok.ref}, request id {rid}")
        mids.append(ok.data.get("match"))
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.match != ok.data.get("match"):
            raise CaseFailed(f"{p.name}: start names another match")
    if mids[0] != mids[1] or not isinstance(mids[0], bytes):
        raise CaseFailed(f"the two quick requests got matches {mids}")
    await a.send(m.Resign(mids[0], 1))


@case(
    "5.3-rematch",
    "5.3 Receiver rules: lobby requests",
    "Rematch",
    "the match MUST be over and known to the server (`NO_SUCH_MATCH` otherwise, including while it "
    "runs; [...] The request waits until the other player asks too [...] then the server creates a "
    "new match with the same rules, mode and visibility, answers both requests with its id, and "
    "sends `start` to both.",
    "NO_SUCH_MATCH while the match runs; after match_over both rematch requests get ok{match: the "
    "same new id}, then start with the same rules",
)
async def _rematch(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    a, b = tb.seats
    ans = await a.request(lambda i: m.Rematch(i, tb.match))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.NO_SUCH_MATCH):
        raise CaseFailed(f"rematch of a running match: expected NO_SUCH_MATCH, got {describe(ans)}")
    await a.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")
    for p in tb.seats:
        await p.expect(m.MatchOver)
    ids = {}
    for p in (a, b):
        rid = p.next_id()
        ids[p.name] = rid
        await p.send(m.Rematch(rid, tb.match))
    new = set()
    for p in (a, b):
        ok = await p.expect(m.Ok)
        assert isinstance(ok, m.Ok)
        if ok.ref != ids[p.name]:
            raise CaseFailed(f"{p.name}: ok.ref {ok.ref}, request id {ids[p.name]}")
        new.add(ok.data.get("match"))
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.match != ok.data.get("match") or st.rules != tb.starts[0].rules:
            raise CaseFailed(f"{p.name}: start is not the rematch under the same rules")
    rematch = new.pop() if len(new) == 1 else None
    if not isinstance(rematch, bytes) or rematch == tb.match:
        raise CaseFailed(f"the rematch requests got matches {new | {rematch}}")
    await a.send(m.Resign(rematch, 1))


@case(
    "7.4-bad-rules",
    "7.4 The wire form",
    "Rule sets that cannot be built",
    "A referee MUST refuse with `BAD_RULES`: an unknown preset; an unknown key at any level [...]; "
    "a value of the wrong type (a `bool` is not an `int`)",
    "error{BAD_RULES} for each",
)
async def _bad_rules(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    for rules in (
        {"preset": "no-such-preset"},
        {"preset": "classic", "colour": "blue"},
        {"preset": "classic", "rows": True},
        {"preset": "classic", "clocks": {"shot": -1}},
        {"preset": "classic", "crossed_out": True, "touching": True},
    ):
        ans = await p.request(lambda i, r=rules: m.Create(i, r, "blind", True))  # type: ignore[misc]
        if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.BAD_RULES):
            raise CaseFailed(f"rules {rules}: expected BAD_RULES, got {describe(ans)}")


@case(
    "5.3-get-record-unknown",
    "5.3 Receiver rules: lobby requests",
    "No record",
    "**`get_record`**: no signed record for that match (unknown, or not finished): "
    "`NO_SUCH_RECORD`.",
    "error{NO_SUCH_RECORD}",
)
async def _no_record(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    ans = await p.request(lambda i: m.GetRecord(i, os.urandom(16)))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.NO_SUCH_RECORD):
        raise CaseFailed(f"expected NO_SUCH_RECORD, got {describe(ans)}")


# -- the honest blind game, shared by several cases ---------------------------------------------


async def _blind_game(s: Suite, t: Trace) -> dict[str, Any]:
    """Play one honest blind game to its end, with a spectator; return what was observed."""
    obs: dict[str, Any] = {"trace": t}
    tb = await s.table(t, public=True)  # public, so that a spectator may watch
    obs["table"] = tb
    if tb.first not in (0, 1):
        raise CaseFailed("in refereed play game.first is the seat the referee's lot chose")
    await s.commit_both(tb, t)
    watcher = await s.player(t, "W")
    await watcher.ok(lambda i: m.Watch(i, tb.match))
    snap = await watcher.expect(m.Snapshot)
    assert isinstance(snap, m.Snapshot)
    obs["watch_snapshot"] = snap
    # Each shooter opens with a miss, then sinks the other fleet, cell by cell.
    targets = [
        [*tb.water(1)[:1], *tb.ship_cells(1)],
        [*tb.water(0)[:1], *tb.ship_cells(0)],
    ]
    mover, n, openings, verdicts = tb.first, 0, 0, 0
    while True:
        n += 1
        cell = targets[mover].pop(0)
        v = await fire_and_answer(tb, mover, cell, n, watchers=[watcher])
        verdicts += 1
        openings += check_verdict(tb, v, mover, [cell])
        if v.next is None:
            break
        if v.next != 1 - mover:
            raise CaseFailed(f"verdict.next is {v.next}; without hit_again the turn passes")
        mover = v.next
    winner = mover
    obs.update(openings=openings, verdicts=verdicts, winner=winner)
    for q in (*tb.seats, watcher):
        rn = await q.expect(m.RevealNow)
        assert isinstance(rn, m.RevealNow)
        if rn.winner != winner:
            raise CaseFailed(f"{q.name}: reveal_now.winner {rn.winner}, the shooter was {winner}")
    for seat, p in enumerate(tb.seats):
        await p.send(m.RevealMsg(tb.match, 1, tb.committed[seat].reveal().to_dict()))
    for q in (*tb.seats, watcher):
        seen = set()
        for _ in range(2):
            rv = await q.expect(m.Revealed)
            assert isinstance(rv, m.Revealed)
            if rv.fault is not None:
                raise CaseFailed(f"{q.name}: seat {rv.seat}'s honest reveal has fault {rv.fault}")
            if rv.reveal != tb.committed[rv.seat].reveal().to_dict():
                raise CaseFailed(f"{q.name}: revealed carries another reveal than seat sent")
            seen.add(rv.seat)
        if seen != {0, 1}:
            raise CaseFailed(f"{q.name}: revealed for seats {seen}")
    await expect_game_over([*tb.seats, watcher], winner, "fleet_sunk")
    heads = set()
    for q in (*tb.seats, watcher):
        mo = await q.expect(m.MatchOver)
        assert isinstance(mo, m.MatchOver)
        res = mo.result
        if res.get("over") is not True or res.get("winner") != winner:
            raise CaseFailed(f"{q.name}: match_over.result {_short(res)}")
        if len(mo.head) != 32:
            raise CaseFailed(f"{q.name}: match_over.head is not 32 bytes")
        heads.add(mo.head)
    if len(heads) != 1:
        raise CaseFailed("players and spectators were sent different record heads")
    obs["head"] = heads.pop()
    obs["watcher"] = watcher
    for q in (*tb.seats, watcher):
        q.keep = True
    return obs


async def _shared_game(s: Suite, t: Trace) -> dict[str, Any]:
    # The first case that needs the game plays it (its trace shows the messages); later cases
    # reuse what it saw, or fail with the same reason.
    cached = s.cache.get("blind")
    if cached is None:
        try:
            s.cache["blind"] = await _blind_game(s, t)
        except CaseFailed as e:
            s.cache["blind"] = e
            raise
        return dict(s.cache["blind"])
    if isinstance(cached, CaseFailed):
        raise CaseFailed(f"the shared blind game failed: {cached}")
    t.notes.append("uses the blind game played by case 8-blind-game")
    return dict(cached)


@case(
    "8-blind-game",
    "8 The game",
    "A whole honest blind game",
    "When a verdict brings the hits on a grid to the number of ship cells of the fleet [...] the "
    "referee sends `verdict` with `next: nil` and `reveal_now{winner}`. [...] The referee sends "
    "`game_over{outcome}` to all.",
    "start, game, committed x2, firing, (shot, verdict)*, reveal_now, revealed x2, game_over "
    "fleet_sunk, match_over",
)
async def _game(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    t.notes.append(f"{obs['verdicts']} verdicts; seat {obs['winner']} won")


@case(
    "10.7-openings",
    "10.7 What is proved when",
    "Every relayed opening verifies",
    "At once, when a verdict arrives, the referee (and every blind-mode client, on `verdict`) "
    "MUST check [...] the opening is valid for the defender's commitment, and `occ` is `true` "
    "exactly when `r` is `hit` or `sunk`",
    "every opening in every verdict (to both seats and the spectator) verifies against firing's "
    "commitments",
)
async def _openings(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    if obs["openings"] < obs["verdicts"]:
        raise CaseFailed("a verdict carried no opening")
    t.notes.append(f"{obs['openings']} openings checked by the suite")


@case(
    "6.5-watch",
    "6.5 Spectators",
    "A spectator's snapshot and events",
    "**`watch`**: [...] Answer `ok`, then `snapshot{seat: nil, view}`, then every public event of "
    "the match.",
    "ok, snapshot{seat: nil} with no fleet or secret, then shot, verdict, reveal_now, revealed, "
    "game_over, match_over",
)
async def _watch(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    snap: m.Snapshot = obs["watch_snapshot"]
    t.got.append(f"W: {describe(snap)}")
    if snap.seat is not None:
        raise CaseFailed(f"a spectator's snapshot has seat {snap.seat}")
    _check_view(snap.view, t, spectator=True)
    if snap.view.get("phase") != "firing":
        raise CaseFailed(f"view.phase is {snap.view.get('phase')!r} during firing")


def _check_view(view: dict[str, Any], t: Trace, *, spectator: bool) -> None:
    required = {
        "mode", "games", "scores", "wins", "over", "winner", "game", "phase", "turn", "first",
        "committed", "roots", "boards", "pending", "shots", "expiries", "callers", "outcome",
    }  # fmt: skip
    missing = required - set(view)
    if missing:
        raise CaseFailed(f"snapshot view lacks {sorted(missing)} (section 6.6)")
    for secret_key in ("fleet", "secret", "secrets", "fleets"):
        if spectator and secret_key in view:
            raise CaseFailed(f"a spectator's view holds {secret_key!r}")
    for key in ("rules", "players"):
        if key not in view:
            t.notes.append(f"view has no {key!r} (SHOULD, section 6.6)")


@case(
    "11-record",
    "11.2 The head and the signed record",
    "The signed record verifies, and co-signatures are added",
    "The head of a finished match's record is sent in `match_over.head`; `get_record` returns the "
    "signed record.",
    "ok{record: bin}, canonical bytes that verify (section 11.3) with the referee's signature over "
    "match_over.head; a bad cosign BAD_SIGNATURE; a good one added as seat<N>",
)
async def _record(s: Suite, t: Trace) -> None:
    obs = await _shared_game(s, t)
    tb: Table = obs["table"]
    p = tb.seats[0]
    p.trace = t  # report this case's own messages
    data = await p.ok(lambda i: m.GetRecord(i, tb.match))
    raw = data.get("record")
    if not isinstance(raw, bytes):
        raise CaseFailed(f"ok.data.record is not bin (canonical record bytes): {_short(raw)}")
    try:
        signed = load_record(raw)
    except Exception as e:
        raise CaseFailed(f"the record bytes are not a canonical signed record: {e}") from None
    if dump_record(signed) != raw:
        raise CaseFailed("the record bytes are not canonical (re-encoding them differs)")
    report = verify_record(signed)
    if not report.ok:
        raise CaseFailed(f"verify_record: {report.reason}")
    if record_head(signed["record"]) != obs["head"]:
        raise CaseFailed("the record's head differs from match_over.head")
    server_key = p.welcome.server if p.welcome is not None else b""
    if signed["record"].get("referee") != server_key:
        raise CaseFailed("record.referee is not welcome.server")
    t.notes.append(f"record verified: {len(raw)} bytes, {len(signed['sigs'])} signature(s)")
    # A co-signature over another head is refused; the right one is stored with the record.
    await p.send(m.CoSign(tb.match, obs["head"], p.key.sign(b"not the head")))
    await p.expect_error(ErrorCode.BAD_SIGNATURE)
    await p.send(m.CoSign(tb.match, obs["head"], p.key.sign(obs["head"])))
    await p.quiet()
    data = await p.ok(lambda i: m.GetRecord(i, tb.match))
    signed = load_record(data["record"])
    roles = sorted(sg["role"] for sg in signed["sigs"])
    if "seat0" not in roles:
        raise NotImplementedCase(f"co-signature not stored (roles {roles})")
    if not verify_record(signed).ok:
        raise CaseFailed("the co-signed record does not verify")


# -- refusals, lies, custody, resume ---------------------------------------------------------------


@case(
    "5.4-refusals",
    "5.4 Receiver rules: game inputs",
    "Refused shots change nothing",
    "the referee MUST refuse: a label that is not a cell of the grid `OFF_BOARD`; not the "
    "sender's turn `NOT_YOUR_TURN`; [...] a cell fired at already `ALREADY_FIRED` [...] An input "
    "that is refused changes nothing.",
    "error{NOT_YOUR_TURN|OFF_BOARD|ALREADY_FIRED, ref: seq}; no shot in between; the next shot "
    "gets the next n",
)
async def _refusals(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    other = 1 - mover
    pm, po = tb.seats[mover], tb.seats[other]
    seq = po.next_id()
    await po.send(m.Fire(tb.match, 1, ("A1",), 0, seq))
    await po.expect_error(ErrorCode.NOT_YOUR_TURN, seq)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, ("Z99",), 0, seq))
    await pm.expect_error(ErrorCode.OFF_BOARD, seq)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, ("G1",), 0, seq))  # column G on a 6-column grid
    await pm.expect_error(ErrorCode.OFF_BOARD, seq)
    t.expect("the opponent saw no shot: the refused inputs changed nothing")
    await po.quiet()
    a = tb.water(other)[0]
    await fire_and_answer(tb, mover, a, 1)
    b = tb.water(mover)[0]
    await fire_and_answer(tb, other, b, 2)
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, (a.label().lower(),), 0, seq))
    await pm.expect_error(ErrorCode.ALREADY_FIRED, seq)
    await po.quiet()
    c = tb.water(other)[1]
    await fire_and_answer(tb, mover, c, 3)
    await po.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, mover, "resigned")


@case(
    "5.4-seq-idempotent",
    "5.4 Receiver rules: game inputs",
    "A resent shot applies once",
    "A `fire` or `radar` whose `seq` equals the `seq` of an input from the same seat already "
    "applied in this game MUST be ignored: no error, no state change.",
    "no error and no second shot for the resent fire",
)
async def _seq(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    pm = tb.seats[mover]
    cell = tb.water(1 - mover)[0]
    seq = pm.next_id()
    await pm.send(m.Fire(tb.match, 1, (cell.label(),), 0, seq))
    await pm.send(m.Fire(tb.match, 1, (cell.label(),), 0, seq))
    for q in tb.seats:
        await q.expect(m.ShotCalled)
    t.expect("nothing but the one shot before the pong")
    await pm.quiet()
    await tb.seats[1 - mover].quiet()
    await pm.send(m.Resign(tb.match, 1))


@case(
    "5.4-routing",
    "5.4 Receiver rules: game inputs",
    "Inputs to the wrong match, game or trust mode",
    "The referee MUST refuse, in this order: an unknown match with `NO_SUCH_MATCH`; a sender whose "
    "session holds no seat in it with `NOT_ALLOWED`; [...] a `game` that is not the current game's "
    "number (an earlier, finished game included) with `WRONG_PHASE`; an input that the match's "
    "trust mode does not use [...] with `UNEXPECTED_MESSAGE`",
    "NO_SUCH_MATCH, NOT_ALLOWED, WRONG_PHASE, UNEXPECTED_MESSAGE (commit and coin in custody), "
    "BAD_MESSAGE (a 31-byte secret)",
)
async def _routing(s: Suite, t: Trace) -> None:
    tb = await s.table(t, "custody")
    p0 = tb.seats[0]
    stranger = await s.player(t, "X")
    seq = stranger.next_id()
    await stranger.send(m.Fire(os.urandom(16), 1, ("A1",), 0, seq))
    await stranger.expect_error(ErrorCode.NO_SUCH_MATCH, seq)
    seq = stranger.next_id()
    await stranger.send(m.Fire(tb.match, 1, ("A1",), 0, seq))
    await stranger.expect_error(ErrorCode.NOT_ALLOWED, seq)
    rules = tb.rules
    c = Committed(rules, random_fleet(rules, s.rng), os.urandom(32), tb.match, 1, 0)
    await p0.send(m.Place(tb.match, 2, tuple(c.fleet.to_list()), c.secret))
    await p0.expect_error(ErrorCode.WRONG_PHASE, None)
    await p0.send(m.Commit(tb.match, 1, c.commitment.to_dict()))
    await p0.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p0.send(m.Coin(tb.match, 1, os.urandom(32), None))
    await p0.expect_error(ErrorCode.UNEXPECTED_MESSAGE, None)
    await p0.send(m.Place(tb.match, 1, tuple(c.fleet.to_list()), c.secret[:31]))
    await p0.expect_error(ErrorCode.BAD_MESSAGE, None)
    t.expect("nothing changed: the other seat saw no committed")
    await tb.seats[1].quiet()
    await p0.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")


@case(
    "10.7-false-proof",
    "10.7 What is proved when",
    "A forged opening loses the game",
    "if any check fails, the game ends at once, `false_proof`, the shooter wins (no `error` is "
    "sent: the outcome is in `game_over`)",
    "game_over{winner: shooter, reason: false_proof} to both, then match_over",
)
async def _false_proof(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    mover = tb.first
    liar = 1 - mover
    boat = tb.committed[liar].fleet.ship_cells(tb.rules)[0][0]  # a cell of the 2-cell boat
    await tb.seats[mover].send(m.Fire(tb.match, 1, (boat.label(),), 0, tb.seats[mover].next_id()))
    for q in tb.seats:
        await q.expect(m.ShotCalled)
    honest = tb.defenders[liar].answer(Shot(1, mover, (boat,))).to_dict()
    forged = dict(honest)
    # "miss", with an opening that claims the cell is empty: the leaf cannot match.
    forged["results"] = [
        dict(honest["results"][0], r="miss", sunk=None, open=dict(honest["results"][0]["open"]))
    ]
    forged["results"][0]["open"]["occ"] = False
    await tb.seats[liar].send(m.Answer(tb.match, 1, forged))
    await expect_game_over(tb.seats, mover, "false_proof")
    for q in tb.seats:
        await q.expect(m.MatchOver)


@case(
    "6.1-custody",
    "6.1 Matches",
    "A custody game",
    "`custody`: players hand fleet and secret to the referee (`place`), which answers and reveals "
    "for them with the same commitments, openings and reveal as in blind mode.",
    "ILLEGAL_FLEET (ref nil) for an overlapping fleet; then verdicts with valid openings, revealed "
    "x2, game_over fleet_sunk",
)
async def _custody(s: Suite, t: Trace) -> None:
    tb = await s.table(t, "custody")
    if tb.mode != "custody":
        raise NotImplementedCase("custody mode")
    p0 = tb.seats[0]
    await p0.send(m.Place(tb.match, 1, ([0, 0, False], [0, 0, False]), os.urandom(32)))
    await p0.expect_error(ErrorCode.ILLEGAL_FLEET, None)
    await s.commit_both(tb, t)
    targets = [tb.ship_cells(1), tb.ship_cells(0)]
    mover, n = tb.first, 0
    while True:
        n += 1
        v = await fire_and_answer(tb, mover, targets[mover].pop(0), n)
        if v.next is None:
            break
        mover = v.next
    for q in tb.seats:
        await q.expect(m.RevealNow)
        for _ in range(2):
            rv = await q.expect(m.Revealed)
            assert isinstance(rv, m.Revealed)
            if rv.reveal != tb.committed[rv.seat].reveal().to_dict() or rv.fault is not None:
                raise CaseFailed(f"{q.name}: the referee's reveal of seat {rv.seat} is not ours")
    await expect_game_over(tb.seats, mover, "fleet_sunk")


@case(
    "4.7-bad-resume-token",
    "4.7 Resume",
    "An unknown resume token",
    "The server MUST refuse a token that is unknown, expired or issued to another key with "
    "`BAD_RESUME_TOKEN` (the handshake returns to state `auth`",
    "error{BAD_RESUME_TOKEN}; then auth with resume nil -> authed",
)
async def _bad_token(s: Suite, t: Trace) -> None:
    other = await s.player(t, "B")
    p = await s.connect(t, "A")
    await p.hello()
    await p.send(p.auth_message(os.urandom(32)))
    await p.expect_error(ErrorCode.BAD_RESUME_TOKEN, None)
    await p.send(p.auth_message(other.token))  # a real token, but another key's
    await p.expect_error(ErrorCode.BAD_RESUME_TOKEN, None)
    await p.send(p.auth_message(None))
    await p.expect(m.Authed)


@case(
    "4.7-resume",
    "4.7 Resume",
    "Resume with a token gets a snapshot",
    "for every running match in which the player holds a seat, the server sends `start` followed "
    "by `snapshot{match, seat, view}`, then the live events from that point. [...] The opponent "
    "is sent `opponent{present: true, grace: 0}`.",
    "opponent{present: false} on the drop; after auth{resume}: authed, start, snapshot{seat}; "
    "opponent{present: true}; the resumed session plays the seat",
)
async def _resume(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    await s.commit_both(tb, t)
    old = tb.seats[0]
    other = tb.seats[1]
    await old.aclose()
    st = await other.expect(m.OpponentStatus, noise=(m.Clock, m.Ping, m.Pong))
    assert isinstance(st, m.OpponentStatus)
    if (st.match, st.seat, st.present) != (tb.match, 0, False):
        raise CaseFailed(f"expected opponent{{seat 0, present false}}, got {describe(st)}")
    p = await s.connect(t, "A'")
    p.key, p.pub = old.key, old.pub
    a = await p.login(resume=old.token)
    if a.player != old.player:
        raise CaseFailed("the resumed session is another player")
    start = await p.expect(m.Start)
    assert isinstance(start, m.Start)
    if start.match != tb.match or start.seat != 0:
        raise CaseFailed(f"start after resume: {describe(start)}")
    snap = await p.expect(m.Snapshot)
    assert isinstance(snap, m.Snapshot)
    if snap.match != tb.match or snap.seat != 0:
        raise CaseFailed(f"snapshot names match {snap.match.hex()} seat {snap.seat}")
    v = snap.view
    _check_view(v, t, spectator=False)
    if v.get("phase") != "firing" or v.get("committed") != [True, True]:
        raise CaseFailed(f"snapshot phase {v.get('phase')!r}, committed {v.get('committed')}")
    if v.get("turn") != tb.first:
        raise CaseFailed(f"snapshot turn {v.get('turn')}, firing.first {tb.first}")
    if v.get("roots") != [tb.committed[0].root, tb.committed[1].root]:
        raise CaseFailed("snapshot roots are not the committed roots")
    st = await other.expect(m.OpponentStatus, noise=(m.Clock, m.Ping, m.Pong))
    assert isinstance(st, m.OpponentStatus)
    if not st.present:
        raise CaseFailed("the opponent was not told the seat came back")
    tb.seats[0] = p
    await p.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")


# ================================================================================================
# Running and reporting
# ================================================================================================


def _selected(c: Case, only: Sequence[str]) -> bool:
    if not only:
        return True
    return any(c.id.startswith(o) or c.section.startswith(o) for o in only)


async def run_case(s: Suite, c: Case, case_timeout: float) -> CaseResult:
    """Run one case and judge it."""
    t = Trace(expected=[c.expected])
    start = time.monotonic()
    outcome, detail = Outcome.PASSED, ""
    try:
        with trio.fail_after(case_timeout):
            await c.run(s, t)
    except CaseFailed as e:
        outcome, detail = Outcome.FAILED, str(e)
    except NotImplementedCase as e:
        outcome, detail = Outcome.NOT_IMPLEMENTED, str(e)
    except trio.TooSlowError:
        outcome, detail = Outcome.FAILED, f"the case did not finish within {case_timeout:g} s"
    except (ProtocolError, OSError, trio.BrokenResourceError) as e:
        outcome, detail = Outcome.FAILED, f"{type(e).__name__}: {e}"
    finally:
        opened, s.opened = s.opened, []
        for p in opened:
            if not p.keep:
                await p.aclose()
    if t.notes and outcome is Outcome.PASSED:
        detail = "; ".join(t.notes)
    elif t.notes:
        detail += " (" + "; ".join(t.notes) + ")"
    return CaseResult(
        c.id,
        c.section,
        c.title,
        c.quote,
        outcome,
        t.sent,
        t.expected,
        t.got,
        detail,
        time.monotonic() - start,
    )


async def run_suite(
    host: str,
    port: int,
    *,
    only: Sequence[str] = (),
    timeout: float = 5.0,
    case_timeout: float = 30.0,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run the cases selected by ``only`` (ids, id prefixes or section prefixes; all if empty).

    ``timeout`` bounds every wait for one message; ``case_timeout`` a whole case.
    """
    s = Suite(host, port, timeout)
    results = []
    for c in CASES:
        if not _selected(c, only):
            continue
        r = await run_case(s, c, case_timeout)
        results.append(r)
        if on_result is not None:
            on_result(r)
    for obs in s.cache.values():
        # Close the shared game's spectator and seats now that every case has looked.
        if isinstance(obs, dict):
            for p in [*obs["table"].seats, obs["watcher"]]:
                await p.aclose()
    return Report(f"{host}:{port}", results)


_STYLE = {Outcome.PASSED: "green", Outcome.FAILED: "bold red", Outcome.NOT_IMPLEMENTED: "yellow"}


def render_table(report: Report, *, verbose: bool = False) -> Any:
    """A rich table of the report (failed cases show what was sent, expected and got)."""
    from rich.table import Table as RichTable

    tbl = RichTable(title=f"seabattle conformance: {report.target}", show_lines=verbose)
    tbl.add_column("Case")
    tbl.add_column("Section")
    tbl.add_column("Result")
    tbl.add_column("Detail", overflow="fold")
    for r in report.results:
        detail = r.detail
        if r.outcome is Outcome.FAILED:
            detail = (
                f"{r.detail}\nquote: {r.quote}\nexpected: {'; '.join(r.expected)}\n"
                f"sent (last 3): {' | '.join(r.sent[-3:])}\ngot (last 3): {' | '.join(r.got[-3:])}"
            )
        tbl.add_row(
            r.id, r.section, f"[{_STYLE[r.outcome]}]{r.outcome.value}[/]", detail or r.title
        )
    c = report.counts()
    tbl.caption = ", ".join(f"{v} {k}" for k, v in c.items())
    return tbl


def _parse_target(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter("expected HOST:PORT", param_hint="TARGET")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command("conformance")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of a table.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), help="Write JSON here.")
@click.option(
    "--only", multiple=True, help="Run only cases whose id or section starts with this (repeat)."
)
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait per message.")
@click.option("--list", "list_cases", is_flag=True, help="List the cases and exit.")
def conformance(
    target: str,
    as_json: bool,
    report_file: str | None,
    only: tuple[str, ...],
    timeout: float,
    list_cases: bool,
) -> None:
    """Test the server at TARGET (HOST:PORT) against spec/protocol.md.

    Exits with status 0 only when no case failed.
    """
    if list_cases:
        for c in CASES:
            click.echo(f"{c.id:28} {c.section}: {c.title}")
        return
    host, port = _parse_target(target)
    from rich.console import Console

    console = Console(stderr=as_json)

    def progress(r: CaseResult) -> None:
        if not as_json:
            console.print(f"[{_STYLE[r.outcome]}]{r.outcome.value:>15}[/] {r.id}")

    report = trio.run(lambda: run_suite(host, port, only=only, timeout=timeout, on_result=progress))
    data = report.to_dict()
    if report_file:
        with open(report_file, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        console.print(render_table(report))
    raise SystemExit(1 if report.failed else 0)
