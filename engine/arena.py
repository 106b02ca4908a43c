"""The arena: engines against each other, many games, on paired boards, every record kept.

Theory of operation. A *schedule* is a list of games, each between two engines on a *board*: the
two fleets the seats defend and the lot that says which seat fires first. Paired boards: every
pair of engines plays each board twice, with the seats swapped, so that both engines shoot at the
same two fleets and each fires first once; what is left of luck is the engines' own choices. A
board is drawn from the arena's seed and its number alone, so every pair of engines plays the
same boards, and the same seed gives the same games, in whatever order they finish.

Fleets: an engine places its own fleet as it always does (:meth:`Engine.place`); one that asks for
a uniformly random fleet (``place`` returns ``None``: the built-in engines under the ``uniform``
placement, and an external engine that answers ``random``) gets the board's fleet for its seat,
which is such a draw. So two engines that both leave placement to the shell play exactly paired
games; an engine that places its own fleet defends that fleet, and its opponent's side of the
pairing is still the board's.

By default a game is a match on an embedded referee: the pure :class:`~seabattle.protocol.referee.
Referee` and a pure :class:`~seabattle.protocol.seat.Seat` for each engine, wired in memory (no
sockets, no encoding: as ``tests/core/test_seat_pair.py`` does), in blind mode: each seat
commits, answers with proofs, which the referee checks, and co-signs the record. The seats trust
the referee they share a process with (``checking`` off, as the load generator's seats): they
keep no mirror and do not check the record before co-signing it, which would only check the
arena's referee against itself and costs as much again as the rest of the seat's work; the
crossed-out cells a mirror would have told the engine are read off the referee's board instead
(``checking=True`` keeps the mirrors: the engines are told the same). The record is signed by
the arena's referee key and saved with both co-signatures: ``seabattle verify --referee-key``
(the key is in ``referee.pub`` beside the records) checks the whole game, as for a server's.

With a ``server`` (host, port), every game is a real match on that server instead: the seat-0
engine's client creates a private match and the other's joins it by invitation, each engine
behind the bridge (:func:`~.bridge.play_engine_match`: the seats there keep their mirrors and
check everything); the server signs and stores the record, and the arena saves it as the server
gives it, with the co-signatures (``referee.pub`` then holds the server's key). Through a
server the lot is the server's own, so the two games of a pair may have the same engine fire
first.

An engine that fails (:class:`~.base.EngineFault`: it crashed, hung past its move time, wrote
garbage, named an illegal cell or fleet, or does not play the rules) resigns that game through
its seat; the result carries the fault, and the instance is closed and replaced by a fresh one
for its next game. Concurrency: up to ``concurrency`` games run at once, as trio tasks; each task
keeps its own instance of every engine it has met (an engine plays one game at a time). The
built-in engines draw every game's choices from that game's own seed
(:meth:`~.builtin.BuiltinEngine.reseed`).
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet, IllegalFleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import build_record, dump_signed, head_of_bytes, pack_built, sign_as
from seabattle.protocol.referee import SEAT0, SEAT1, Referee, lot
from seabattle.protocol.rules import PRESETS, RuleSet
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import (
    GameEnded,
    GameStarted,
    IncomingShot,
    MatchEvent,
    ShotResult,
    YourTurn,
)
from seabattle.protocol.state import Board as BoardState
from seabattle.protocol.state import Phase

from .base import Engine, EngineFault, Hello, Move
from .side import Side

__all__ = [
    "Arena",
    "Board",
    "Contender",
    "Fault",
    "GameResult",
    "Scheduled",
    "board",
    "illegal_move",
    "paired",
    "unique_names",
]


@dataclass(frozen=True, slots=True)
class Contender:
    """An engine as the arena runs it: the name its table shows, and how to make a fresh
    instance of it (one for each concurrent game, and again after a fault)."""

    name: str
    make: Callable[[], Engine]


@dataclass(frozen=True, slots=True)
class Board:
    """Board ``number``: the fleet each seat defends unless its engine places its own, and the
    lot secret that decides who fires first."""

    number: int
    fleets: tuple[Fleet, Fleet]
    lot: bytes


def _rng(seed: int, *what: object) -> random.Random:
    # A stream of its own for each thing drawn, from the seed and what it is for: the same seed
    # draws the same board whatever else the run does (how many engines, games, which order).
    return random.Random("/".join(map(str, (seed, *what))))


def board(rules: RuleSet, seed: int, number: int) -> Board:
    """Board ``number`` of the arena seeded ``seed``: two uniform fleets, and a lot by which
    seat 0 fires first in board 0, 2, 4... and seat 1 in the others (the pair's swap then has
    each engine fire first once, and either seat lead as often)."""
    rng = _rng(seed, "board", rules.name, number)
    fleets = (random_fleet(rules, rng), random_fleet(rules, rng))
    secret = rng.randbytes(32)
    while lot(secret, 1) != number % 2:
        secret = rng.randbytes(32)
    return Board(number, fleets, secret)


@dataclass(frozen=True, slots=True)
class Scheduled:
    """Game ``index`` of the run: engines ``seats`` (indices into the contenders, by seat) on
    board ``board``."""

    index: int
    board: int
    seats: tuple[int, int]


def paired(engines: int, boards: Iterable[int], *, gauntlet: bool = False) -> Iterator[Scheduled]:
    """The games of a round robin between ``engines`` engines (every pair; ``gauntlet``: the
    first engine against each other one), board by board: on each board every pair plays twice,
    seats swapped."""
    if gauntlet:
        pairs = [(0, j) for j in range(1, engines)]
    else:
        pairs = [(i, j) for i in range(engines) for j in range(i + 1, engines)]
    index = 0
    for b in boards:
        for i, j in pairs:
            for seats in ((i, j), (j, i)):
                yield Scheduled(index, b, seats)
                index += 1


def unique_names(names: Iterable[str]) -> list[str]:
    """``names`` with repeats told apart: ``random``, ``random#2``, ``random#3``..."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


@dataclass(frozen=True, slots=True)
class Fault:
    """Engine ``engine`` failed in game ``game``: ``reason`` from :data:`~.base.FAULTS`."""

    engine: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.engine}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class GameResult:
    """One game of the run (a match, under match rules of several games)."""

    index: int
    board: int
    #: The engines' names, by seat.
    engines: tuple[str, str]
    #: The seat that won the match; ``None``: a draw, or no winner.
    winner: int | None
    #: Why the match's last game ended (``fleet_sunk``, ``resigned``...).
    reason: str
    #: Cells each seat fired, over the match's games.
    shots: tuple[int, int]
    #: Shots the winner took in each game it won by sinking the fleet.
    to_win: tuple[int, ...] = ()
    #: The first engine fault of the game, if any (its engine then resigned).
    fault: Fault | None = None
    #: The record's file name in the records folder (``None``: none saved).
    record: str | None = None

    def score(self, seat: int) -> float:
        """``seat``'s score: 1 a win, 0.5 a draw, 0 a loss."""
        return 0.5 if self.winner is None else float(self.winner == seat)

    def to_dict(self) -> dict[str, Any]:
        """As ``results.json`` holds it."""
        return {
            "index": self.index,
            "board": self.board,
            "engines": list(self.engines),
            "winner": self.winner,
            "reason": self.reason,
            "shots": list(self.shots),
            "to_win": list(self.to_win),
            "fault": None
            if self.fault is None
            else {
                "engine": self.fault.engine,
                "reason": self.fault.reason,
                "detail": self.fault.detail,
            },
            "record": self.record,
        }


def illegal_move(rules: RuleSet, board: BoardState, turn: YourTurn, move: Move) -> str | None:
    """Why ``move`` is not a legal answer to ``turn`` on the opponent's ``board`` (``None``: it
    is): a cell off the grid, fired at or crossed out already, twice in one salvo, the wrong
    number of cells, a radar scan the turn does not allow or an area off the grid."""
    rows, cols = rules.rows, rules.cols
    if move.radar is not None:
        if move.cells:
            return "a radar scan and cells in one move"
        if not turn.radar:
            return "a radar scan where none is allowed"
        r, c = move.radar
        size = rules.radar_size
        if not (0 <= r <= rows - size and 0 <= c <= cols - size):
            return f"radar area at {_label(move.radar)} is off the grid"
        return None
    free = rules.cells - len(board.fired) - len(board.crossed)
    want = min(turn.count, free)
    if len(move.cells) != want:
        return f"{len(move.cells)} cells where {want} are due"
    seen: set[int] = set()
    for cell in move.cells:
        r, c = cell
        if not (0 <= r < rows and 0 <= c < cols):
            return f"{_label(cell)} is off the grid"
        i = r * cols + c
        if i in seen:
            return f"{cell.label()} twice in one salvo"
        if i in board.fired:
            return f"{cell.label()} was fired at already"
        if i in board.crossed:
            return f"{cell.label()} is crossed out"
        seen.add(i)
    return None


def _label(cell: Cell) -> str:
    try:
        return Cell(*cell).label()
    except (ValueError, IndexError):
        return f"row {cell[0]} column {cell[1]}"


def _pub(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes_raw()


class _Player:
    """One engine at one seat of an in-memory match."""

    __slots__ = ("crossed", "dead", "engine", "listens", "seat", "side")

    def __init__(self, engine: Engine, seat: Seat) -> None:
        self.engine = engine
        self.seat = seat
        # Whether it is told each shot's result: a built-in engine reads its side instead, and
        # a no-op awaited twice a shot is not free.
        self.listens = type(engine).told is not Engine.told
        self.side: Side | None = None
        self.dead = False  # faulted: its seat resigns every game left
        self.crossed: set[int] = set()  # cells of the opponent's grid known crossed out


class _Table:
    """One match in memory: a pure referee, a pure seat for each engine (see the module)."""

    def __init__(
        self,
        arena: Arena,
        job: Scheduled,
        engines: tuple[Engine, Engine],
    ) -> None:
        self.arena = arena
        self.job = job
        self.board = arena.board(job.board)
        rules = arena.rules
        self.rules = rules
        rng = _rng(arena.seed, "game", job.index)
        self.rng = rng
        self.mid = rng.randbytes(16)
        self.keys = tuple(arena.keys[s] for s in job.seats)
        ids = tuple(_pub(k).hex() for k in self.keys)
        self.ref = Referee(
            match_id=self.mid,
            rules=rules,
            mode=arena.mode,
            players=(ids[0], ids[1]),
            lot=self.board.lot,
        )
        # Lean seats (spec 5.7): nobody is sent a copy of its own moves; the verdict says it.
        self.players = []
        for s in (0, 1):
            self.ref.set_lean(s, True)
            seat = Seat(
                self.mid, self.keys[s], ids[s], lean=True, courtesy=False, checking=arena.checking
            )
            self.players.append(_Player(engines[s], seat))
        self.inbox: deque[tuple[int, m.Message]] = deque()
        self.cosigns: dict[int, m.CoSign] = {}
        self.fault: Fault | None = None
        self.seq = 0

    # -- wiring ------------------------------------------------------------------------------

    async def to_seats(self, sends: list[Any]) -> None:
        p0, p1 = self.players
        for to, msg, _member in sends:
            if to & SEAT0:
                await self.take(0, p0.seat.receive(msg, 0.0))
            if to & SEAT1:
                await self.take(1, p1.seat.receive(msg, 0.0))

    async def take(self, s: int, out: Out) -> None:
        """Queue what seat ``s`` sends, and let its engine react to its events."""
        seat = self.players[s].seat
        for msg in out.sends:
            self.inbox.append((s, msg))
            seat.carried(msg, seat.epoch)
        for ev in out.events:
            await self.react(s, ev)

    async def react(self, s: int, ev: MatchEvent) -> None:
        p = self.players[s]
        if isinstance(ev, GameStarted):
            p.side = Side(self.rules, s, ev.game)
            p.crossed = set()
            if p.dead:
                await self.take(s, p.seat.resign())
                return
            try:
                await p.engine.new_game(self.rules, s, ev.game)
                fleet = await p.engine.place(self.rules)
                if fleet is None:
                    fleet = self.board.fleets[s]
                else:
                    try:
                        fleet.validate(self.rules)
                    except IllegalFleet as e:
                        raise EngineFault("illegal_fleet", str(e)) from None
            except EngineFault as f:
                await self.faulted(s, f)
                return
            p.side.fleet = fleet
            await self.take(s, p.seat.place(fleet, self.rng.randbytes(32)))
        elif isinstance(ev, YourTurn):
            if p.side is None or p.dead:
                return
            p.side.feed(ev)
            await self.move(s, ev)
        elif isinstance(ev, ShotResult | IncomingShot):
            if p.side is None:
                return
            if isinstance(ev, ShotResult) and not self.arena.checking:
                # A trusting seat keeps no mirror, so it cannot tell which cells the rules
                # crossed out: the referee's own board says, as the mirror would have.
                board = self.ref.match.games[ev.game - 1].boards[1 - s]
                if len(board.crossed) > len(p.crossed):
                    cols = self.rules.cols
                    new = board.crossed - p.crossed
                    p.crossed |= new
                    ev = replace(ev, crossed=tuple(Cell(*divmod(i, cols)) for i in sorted(new)))
            p.side.feed(ev)
            if p.listens and not p.dead:
                try:
                    await p.engine.told(ev)
                except EngineFault as f:
                    await self.faulted(s, f)
        elif isinstance(ev, GameEnded) and not p.dead:
            try:
                await p.engine.game_over(ev.won, str(ev.outcome.get("reason", "")))
            except EngineFault as f:
                await self.faulted(s, f)

    async def move(self, s: int, turn: YourTurn) -> None:
        p = self.players[s]
        assert p.side is not None
        g = self.ref.game
        assert g is not None
        try:
            move = await p.engine.move(p.side)
            why = illegal_move(self.rules, g.boards[1 - s], turn, move)
            if why is not None:
                raise EngineFault("illegal_move", why)
        except EngineFault as f:
            await self.faulted(s, f)
            return
        self.seq += 1
        if move.radar is not None:
            await self.take(s, p.seat.radar(move.radar, self.seq))
        else:
            await self.take(s, p.seat.fire(move.cells, self.seq))

    async def faulted(self, s: int, f: EngineFault) -> None:
        """Seat ``s``'s engine failed: it resigns the game (and every later one of the match)."""
        p = self.players[s]
        if self.fault is None:
            self.fault = Fault(self.arena.names[self.job.seats[s]], f.reason, f.detail)
        p.dead = True
        g = self.ref.game
        if g is not None and g.phase is not Phase.OVER:
            await self.take(s, p.seat.resign())

    # -- the match ---------------------------------------------------------------------------

    async def run(self) -> GameResult:
        ref = self.ref
        await self.to_seats(ref.start(0.0))
        while not ref.over:
            if not self.inbox:
                # Nothing owed by anyone and no clock to wait for: the wiring is wrong.
                raise AssertionError(f"game {self.job.index} stalled")
            s, msg = self.inbox.popleft()
            try:
                sends = ref.receive(s, msg, 0.0)
            except ProtocolError as e:
                # The checks above keep an engine's moves legal; this is a seat's own mistake,
                # which a shell cannot mend: the seat's engine loses the game for it.
                await self.faulted(s, EngineFault("illegal_move", f"refused: {e}"))
                continue
            await self.to_seats(sends)
        return await self.conclude()

    async def conclude(self) -> GameResult:
        """Sign the record as a server does, send ``match_over``, gather the co-signatures."""
        ref, arena = self.ref, self.arena
        record = build_record(ref.match, [_pub(k) for k in self.keys], _pub(arena.key))
        packed = pack_built(record)
        head = head_of_bytes(packed)
        sigs = [sign_as(record, arena.key, "referee", head=head)]
        over = m.MatchOver(self.mid, ref.match.to_dict(), None, head, packed)
        await self.to_seats([(SEAT0 | SEAT1, over, None)])
        while self.inbox:
            s, msg = self.inbox.popleft()
            if isinstance(msg, m.CoSign) and msg.head == head:
                self.cosigns[s] = msg
        for s, c in sorted(self.cosigns.items()):
            sigs.append({"key": _pub(self.keys[s]), "role": f"seat{s}", "sig": c.sig})
        name = None
        if arena.records is not None:
            name = arena.record_name(self.job)
            (arena.records / name).write_bytes(dump_signed(packed, sigs))
        shots = [0, 0]
        to_win: list[int] = []
        for g in ref.match.games:
            for s in (0, 1):
                shots[s] += len(g.boards[1 - s].fired)
            out = g.outcome
            if out is not None and out.winner is not None and out.reason.value == "fleet_sunk":
                to_win.append(len(g.boards[1 - out.winner].fired))
        last = ref.match.games[-1].outcome if ref.match.games else None
        return GameResult(
            index=self.job.index,
            board=self.job.board,
            engines=(arena.names[self.job.seats[0]], arena.names[self.job.seats[1]]),
            winner=ref.match.winner,
            reason=last.reason.value if last is not None else "",
            shots=(shots[0], shots[1]),
            to_win=tuple(to_win),
            fault=self.fault,
            record=name,
        )


@dataclass
class Arena:
    """Runs games between ``contenders`` under ``rules`` (see the module docstring).

    ``records``: the folder every record is saved in (made if missing; ``None``: none saved).
    ``key``: the referee key that signs the in-process records (``None``: a fresh one).
    ``server``: ``(host, port)`` to play every game on a real server instead.
    """

    contenders: list[Contender]
    rules: RuleSet
    seed: int = 0
    mode: str = "blind"
    concurrency: int = 1
    records: Path | None = None
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    server: tuple[str, int] | None = None
    #: Whether each in-process seat keeps a mirror, checks every proof and checks the record
    #: before co-signing (see the module docstring); off, the seats trust the referee.
    checking: bool = False
    #: The engines' player keys, in contender order (drawn from the seed: an arena's players
    #: are its own, and the same seed then makes the same records).
    keys: list[Ed25519PrivateKey] = field(init=False)
    names: list[str] = field(init=False)
    _boards: dict[int, Board] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.names = [c.name for c in self.contenders]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"engine names repeat: {self.names} (see unique_names)")
        self.keys = [
            Ed25519PrivateKey.from_private_bytes(_rng(self.seed, "key", n).randbytes(32))
            for n in self.names
        ]
        if self.records is not None:
            self.records.mkdir(parents=True, exist_ok=True)
            if self.server is None:  # a server signs with its own key, written as it is met
                (self.records / "referee.pub").write_text(_pub(self.key).hex() + "\n")

    def board(self, number: int) -> Board:
        """Board ``number`` (drawn once, then kept)."""
        b = self._boards.get(number)
        if b is None:
            b = self._boards[number] = board(self.rules, self.seed, number)
        return b

    def record_name(self, job: Scheduled) -> str:
        """The file name of game ``job``'s record."""
        a, b = (self.names[i] for i in job.seats)
        safe = "".join(ch if ch.isalnum() or ch in "-_.#" else "_" for ch in f"{a}-vs-{b}")
        return f"{job.index:05d}-{safe}.rec"

    def game_seed(self, job: Scheduled, seat: int) -> int:
        """The seed a built-in engine draws its choices from in game ``job`` at ``seat``."""
        text = f"{self.seed}/engine/{job.index}/{seat}".encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")

    async def play(
        self,
        games: Iterable[Scheduled],
        *,
        done: Callable[[GameResult], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[GameResult]:
        """Play ``games`` (up to :attr:`concurrency` at once) and return their results in
        schedule order. ``done`` is called with each result as it comes; once ``stop()`` says
        so, no further game starts (those running finish)."""
        todo = iter(games)
        results: list[GameResult] = []

        async def worker() -> None:
            pool: dict[int, Engine] = {}
            try:
                while not (stop is not None and stop()):
                    job = next(todo, None)
                    if job is None:
                        return
                    result = await self.play_one(job, pool)
                    results.append(result)
                    if done is not None:
                        done(result)
            finally:
                for engine in pool.values():
                    with trio.CancelScope(shield=True):
                        await _close(engine)

        async with trio.open_nursery() as nursery:
            for _ in range(max(1, self.concurrency)):
                nursery.start_soon(worker)
        return sorted(results, key=lambda r: r.index)

    async def play_one(self, job: Scheduled, pool: dict[int, Engine]) -> GameResult:
        """Play game ``job`` with engines from ``pool`` (made and started as needed; closed
        and dropped after a fault)."""
        engines: list[Engine] = []
        for seat, i in enumerate(job.seats):
            engine = pool.get(i)
            if engine is None:
                engine = self.contenders[i].make()
                try:
                    hello = await engine.start()
                    if not hello.plays(self.rules):
                        plays = ", ".join(hello.rules)
                        raise EngineFault("wrong_rules", f"it plays {plays}, not {self.rules.name}")
                except EngineFault as f:
                    await _close(engine)
                    # One that cannot start would not start next time either: it loses its
                    # games at once, the same way, rather than each after a start's timeout.
                    engine = _Failed(f)
                pool[i] = engine
            reseed = getattr(engine, "reseed", None)
            if reseed is not None:
                reseed(self.game_seed(job, seat))
            engines.append(engine)
        if self.server is not None:
            result = await _on_server(self, job, (engines[0], engines[1]))
        else:
            result = await _Table(self, job, (engines[0], engines[1])).run()
        if result.fault is not None:
            # The instance that failed may be dead or confused: the next game gets a fresh one.
            i = job.seats[result.engines.index(result.fault.engine)]
            failed = pool.get(i)
            if failed is not None and not isinstance(failed, _Failed):
                del pool[i]
                await _close(failed)
        return result


class _Failed(Engine):
    """An engine that could not start: every game it is in, it fails at once, the same way."""

    def __init__(self, fault: EngineFault) -> None:
        self.fault = fault

    async def start(self) -> Any:
        raise self.fault

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        raise self.fault

    async def place(self, rules: RuleSet) -> Fleet | None:
        raise self.fault

    async def move(self, side: Side) -> Move:
        raise self.fault


async def _close(engine: Engine) -> None:
    with contextlib.suppress(EngineFault):
        await engine.close()


class _Counted(Engine):
    """An engine on a server match, as the arena watches it: the board's fleet for its seat when
    it asks for a random one, and what each game came to (its shots, whether it won, why)."""

    def __init__(self, inner: Engine, board: Board) -> None:
        self.inner, self.board = inner, board
        self.name = inner.name
        self.seat = 0
        self.shots: dict[int, int] = {}
        self.ended: dict[int, tuple[bool | None, str]] = {}
        self.game = 0

    async def start(self) -> Hello:
        return await self.inner.start()

    async def new_game(self, rules: RuleSet, seat: int, game: int) -> None:
        self.seat, self.game = seat, game
        self.shots[game] = 0
        await self.inner.new_game(rules, seat, game)

    async def place(self, rules: RuleSet) -> Fleet | None:
        fleet = await self.inner.place(rules)
        return self.board.fleets[self.seat] if fleet is None else fleet

    async def move(self, side: Side) -> Move:
        return await self.inner.move(side)

    async def told(self, event: ShotResult | IncomingShot) -> None:
        if isinstance(event, ShotResult) and not event.radar:
            self.shots[event.game] = self.shots.get(event.game, 0) + len(event.cells)
        await self.inner.told(event)

    async def game_over(self, won: bool | None, reason: str) -> None:
        self.ended[self.game] = (won, reason)
        await self.inner.game_over(won, reason)


def _rules_map(rules: RuleSet) -> dict[str, Any]:
    return {"preset": rules.name} if PRESETS.get(rules.name) == rules else rules.to_dict()


def _display(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)[:32] or "engine"


async def _on_server(arena: Arena, job: Scheduled, engines: tuple[Engine, Engine]) -> GameResult:
    """Game ``job`` as a real match on the arena's server (see the module docstring)."""
    from seabattle.client.api import connect
    from seabattle.protocol.record import dump_record

    from .bridge import play_engine_match

    assert arena.server is not None
    host, port = arena.server
    b = arena.board(job.board)
    watched = [_Counted(e, b) for e in engines]
    names = [arena.names[i] for i in job.seats]
    rng = _rng(arena.seed, "game", job.index)
    results: list[Any] = [None, None]
    async with (
        connect(host, port, key=arena.keys[job.seats[0]], name=_display(names[0])) as c0,
        connect(host, port, key=arena.keys[job.seats[1]], name=_display(names[1])) as c1,
    ):
        if arena.records is not None:
            # The key that signs these records is the server's: pinned, as for the embedded one.
            (arena.records / "referee.pub").write_text(c0.server_key.hex() + "\n")
        h0, invite = await c0.create(_rules_map(arena.rules), arena.mode, public=False)
        assert invite is not None
        h1 = await c1.join(invite)

        async def play(k: int, handle: Any) -> None:
            results[k] = await play_engine_match(handle, watched[k], rng=rng)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(play, 0, h0)
            nursery.start_soon(play, 1, h1)
        signed = await c0.get_record(h0.id)
        # The players' co-signatures go beside the record as each arrives: a moment after.
        for _ in range(40):
            if len(signed.get("sigs", [])) >= 3:
                break
            await trio.sleep(0.05)
            signed = await c0.get_record(h0.id)
    # Who sat where is the server's to say: the creator is not always seat 0.
    by_seat = sorted(range(2), key=lambda k: results[k].seat)
    w = [watched[k] for k in by_seat]
    seat_names = (names[by_seat[0]], names[by_seat[1]])
    fault = None
    for k in by_seat:
        if results[k].faults:
            f = results[k].faults[0]
            fault = Fault(names[k], f.reason, f.detail)
            break
    won0 = results[by_seat[0]].won
    winner = None if won0 is None else (0 if won0 else 1)
    to_win: list[int] = []
    for s in (0, 1):
        for game, (won, reason) in sorted(w[s].ended.items()):
            if won and reason == "fleet_sunk":
                to_win.append(w[s].shots.get(game, 0))
    name = None
    if arena.records is not None:
        seats = (job.seats[by_seat[0]], job.seats[by_seat[1]])
        name = arena.record_name(Scheduled(job.index, job.board, seats))
        (arena.records / name).write_bytes(dump_record(signed))
    return GameResult(
        index=job.index,
        board=job.board,
        engines=seat_names,
        winner=winner,
        reason=str(results[by_seat[0]].reason or ""),
        shots=(sum(w[0].shots.values()), sum(w[1].shots.values())),
        to_win=tuple(to_win),
        fault=fault,
        record=name,
    )
