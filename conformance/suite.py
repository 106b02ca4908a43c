"""The suite's shared steps (connections, a match up to firing, an honest shot and its checked
verdict, the end of a game) and the registry of cases.

The suite plays both seats of its matches, each with the pure player's machine (a
:class:`~seabattle.protocol.seat.Seat` on its :class:`~.probe.Probe`): the seat decides what an
honest player sends (its commitment or placement, its answers, its reveal), and a case decides
when it goes. A case that makes a player lie bends the seat (``Seat.tamper``) or alters the
message it gave; it never writes a player's message of its own.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.commit import CellOpening, Commitment, ShipOpening
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import rules_from_dict

from .probe import RULES, Probe, Table, _short
from .results import CaseFailed, Trace

__all__ = [
    "CASES",
    "Case",
    "CaseFn",
    "Suite",
    "case",
    "check_verdict",
    "expect_game_over",
    "expect_shot",
    "expect_verdict",
    "fire_and_answer",
]


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

    async def player(self, trace: Trace, name: str, caps: Sequence[str] = ()) -> Probe:
        """A fresh connection, authenticated with a fresh guest key (offering ``caps``)."""
        p = await self.connect(trace, name)
        await p.login(caps=caps)
        return p

    async def table(
        self, trace: Trace, mode: str = "blind", public: bool = False, caps: Sequence[str] = ()
    ) -> Table:
        """Two players (offering ``caps``) in a new match of :data:`RULES`, up to ``game``; each
        plays its seat with a :class:`~seabattle.protocol.seat.Seat`."""
        a = await self.player(trace, "A", caps)
        b = await self.player(trace, "B", caps)
        created = await a.ok(lambda i: m.Create(i, RULES, mode, public))
        mid = created.get("match")
        if not isinstance(mid, bytes) or len(mid) != 16:
            raise CaseFailed(f"create: ok.data.match is not a 16-byte bin: {_short(mid)}")
        joined = await b.ok(lambda i: m.Join(i, mid, None))
        if joined.get("match") != mid:
            raise CaseFailed("join: ok.data.match is not the match joined")
        for p in (a, b):
            p.sit(mid)
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
        """Both seats commit (blind) or place (custody) a random fleet; wait for ``firing``;
        check its roots."""
        for p in t.seats:
            await p.place(self.rng)
        t.committed = []
        for p in t.seats:
            c = p.seated().committed
            assert c is not None  # it placed just now
            t.committed.append(c)
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


async def expect_shot(q: Probe, n: int, shooter: int, cell: Cell) -> m.ShotCalled:
    """The next message ``q`` gets (noise aside) is ``shot`` number ``n`` by ``shooter`` at
    ``cell``."""
    sh = await q.expect(m.ShotCalled)
    assert isinstance(sh, m.ShotCalled)
    _check_call(q, "shot is", sh, n, shooter, cell)
    return sh


def _check_call(
    q: Probe, what: str, msg: m.ShotCalled | m.VerdictMsg, n: int, shooter: int, cell: Cell
) -> None:
    """``msg`` (a ``shot``, or the ``verdict`` on one) is number ``n``, by ``shooter``, a
    ``fire`` at ``cell``."""
    if (msg.n, msg.seat, list(msg.cells), msg.radar) != (n, shooter, [cell.label()], False):
        raise CaseFailed(
            f"{q.name}: {what} n={msg.n} seat={msg.seat} cells={list(msg.cells)}; expected "
            f"n={n} seat={shooter} cells={[cell.label()]}"
        )


async def fire_and_answer(
    t: Table, shooter: int, cell: Cell, n: int, *, watchers: Sequence[Probe] = ()
) -> m.VerdictMsg:
    """``shooter`` fires at ``cell``; in blind mode the defender's seat answers it.

    Every seat and watcher must see ``shot`` then ``verdict``; the verdict's openings are checked.
    """
    p = t.seats[shooter]
    await p.play(p.seated().fire(cell, p.next_id()))
    everyone = [*t.seats, *watchers]
    for q in everyone:
        await expect_shot(q, n, shooter, cell)
    # Blind mode: the defender's seat answered the shot it was shown (custody: the referee).
    sent = await t.seats[1 - shooter].answer() if t.mode == "blind" else None
    last: m.VerdictMsg | None = None
    for q in everyone:
        last = await expect_verdict(q, t, n, shooter, cell, sent)
    assert last is not None
    return last


async def expect_verdict(
    q: Probe, t: Table, n: int, shooter: int, cell: Cell, sent: dict[str, Any] | None = None
) -> m.VerdictMsg:
    """The next message ``q`` gets (noise aside) is the ``verdict`` on shot ``n`` by ``shooter``
    at ``cell`` (``sent``: the defender's answer, which it must relay as it is), its openings
    checked."""
    v = await q.expect(m.VerdictMsg)
    assert isinstance(v, m.VerdictMsg)
    _check_call(q, "verdict on", v, n, shooter, cell)
    if sent is not None and v.verdict != sent:
        raise CaseFailed(f"{q.name}: the relayed verdict differs from the defender's answer")
    check_verdict(t, v, shooter, [cell])
    return v


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
