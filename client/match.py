"""One match seen from one seat: place, fire, and a stream of checked events.

A trio shell over the pure :class:`~seabattle.protocol.seat.Seat`, which decides everything an
honest seat does whatever the script does (answer a shot with its openings, reveal, check the
record before co-signing, send again what a resume says is owed) and keeps the *mirror* game
that checks every proof the moment it arrives. The handle feeds it what the client's reader
receives for this match, carries out what it says to send, and queues its events for
:meth:`MatchHandle.events`. A lie is surfaced as
:class:`~seabattle.protocol.seat_events.LieDetected` (naming the seat, or ``None`` when the
server's own relay was inconsistent).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat import Clock, Out, Seat, Tamper
from seabattle.protocol.session import LEAN
from seabattle.protocol.verdict import Defender

from .events import LieDetected, MatchEnded, MatchEvent, Said
from .wire import ConnectionClosed

if TYPE_CHECKING:
    from .api import Client

__all__ = ["MatchHandle", "RunningClock", "Tamper"]


@dataclass(frozen=True, slots=True)
class RunningClock:
    """The clock the server started last (``clock``): ``kind`` runs ``seconds`` for ``seat``.

    ``seat`` is ``None`` for a clock that runs for both (setup). ``started`` is the
    ``trio.current_time()`` at which the message arrived: the server's clock started a little
    earlier, so :meth:`remaining` errs on the side of too little time rather than too much.
    """

    game: int
    kind: str
    seconds: int
    seat: int | None
    started: float

    def remaining(self) -> float:
        """Seconds left (never below zero)."""
        return max(0.0, self.started + self.seconds - trio.current_time())


class MatchHandle:
    """One match we play: place, fire, and iterate its events. Made by :class:`Client`.

    What the seat knows is read from the handle: :attr:`seat` (0 or 1), :attr:`rules`,
    :attr:`mode` (``blind`` or ``custody``), :attr:`players` (both seats' player ids),
    :attr:`names` and :attr:`ratings` (theirs, spec 6.9),
    :attr:`game_no` and :attr:`first`, :attr:`clock` (the clock running now), :attr:`mirror`
    (our checked copy of the current game: both boards as far as shown), :attr:`committed`
    (our fleet and secret), :attr:`lies` and :attr:`disputed`, and at the end :attr:`result`
    and :attr:`head`. :attr:`core` is the pure seat underneath.
    """

    def __init__(self, client: Client, match_id: bytes) -> None:
        self.client = client
        self.id = match_id
        #: The pure machine that decides what this seat sends and what the script is told.
        self.core = Seat(match_id, client.key, client.player)
        #: the invitation to each seat's team, for the host of a team match (``create``)
        self.team_invites: tuple[str, str] | None = None
        self._started = trio.Event()
        self._game_event = trio.Event()
        self._send, self._recv = trio.open_memory_channel[MatchEvent](math.inf)
        self._done = False
        self._clock: tuple[Clock, RunningClock] | None = None
        #: Both seats' display names, seat 0 first (spec 6.9: from ``seated``, which a session
        #: that agreed ``people`` gets right after ``start``, or a snapshot's view); ``()``
        #: until known.
        self.names: tuple[str, ...] = ()
        #: Both seats' ratings when the match began, seat 0 first (``seated``); ``()`` when
        #: not known or the match is not rated.
        self.ratings: tuple[int, ...] = ()

    # -- what the seat knows (the core's, read-only) -----------------------------------------

    @property
    def seat(self) -> int | None:
        """Our seat, 0 or 1 (``None`` before ``start``)."""
        return self.core.seat

    @property
    def rules(self) -> RuleSet | None:
        """The match's rules (``None`` before ``start``)."""
        return self.core.rules

    @property
    def mode(self) -> str:
        """The trust mode: ``blind`` (we answer and reveal) or ``custody`` (the referee does)."""
        return self.core.mode

    @property
    def players(self) -> tuple[str, ...]:
        """Both seats' player ids, seat 0 first."""
        return self.core.players

    @property
    def teams(self) -> dict[int, tuple[str, ...]]:
        """Team play (spec 6.8): each seat's members' ids."""
        return self.core.teams

    @property
    def member(self) -> int:
        """Our member number on our seat's team (0: the captain; always 0 without teams)."""
        return self.core.member

    @property
    def callers(self) -> dict[int, int]:
        """Team play: who calls each seat's next shot (from ``turn``)."""
        return self.core.callers

    @property
    def game_no(self) -> int:
        """The current game's number in the match (0 before the first)."""
        return self.core.game_no

    @property
    def first(self) -> int | None:
        """The seat that shoots first in the current game, once known."""
        return self.core.first

    @property
    def mirror(self) -> Game | None:
        """Our checked copy of the current game (``None`` once it stopped after a lie or gap)."""
        return self.core.mirror

    @property
    def committed(self) -> Committed | None:
        """Our fleet and secret for the current game (``None`` before :meth:`place`)."""
        return self.core.committed

    @property
    def defender(self) -> Defender | None:
        """What answers shots at our fleet with their openings (blind mode)."""
        return self.core.defender

    @property
    def placed_game(self) -> int:
        """The game our fleet was last placed for."""
        return self.core.placed_game

    @property
    def result(self) -> dict[str, Any] | None:
        """The match result from ``match_over`` (``None`` until then)."""
        return self.core.result

    @property
    def head(self) -> bytes | None:
        """The record head we were asked to co-sign (``None`` until ``match_over``)."""
        return self.core.head

    @property
    def lies(self) -> list[LieDetected]:
        """Every lie detected in this match, in order."""
        return self.core.lies

    @property
    def disputed(self) -> str | None:
        """Why the referee's account cannot be co-signed (spec 5.5), or ``None``."""
        return self.core.disputed

    @property
    def awaiting_commit(self) -> bool:
        """Our placement is sent and the server has not said ``committed`` yet."""
        return self.core.awaiting_commit

    @property
    def clock(self) -> RunningClock | None:
        """The last clock the server started in this match (``None`` between games)."""
        c = self.core.clock
        if c is None:
            return None
        if self._clock is None or self._clock[0] is not c:
            # One object per clock started: a screen tells a new clock by identity.
            self._clock = (c, RunningClock(c.game, c.kind, c.seconds, c.seat, c.started))
        return self._clock[1]

    @property
    def tamper(self) -> Tamper | None:
        """Test hook: alter the verdict we give (a scripted liar). Blind mode only."""
        return self.core.tamper

    @tamper.setter
    def tamper(self, fn: Tamper | None) -> None:
        self.core.tamper = fn

    @property
    def team_play(self) -> bool:
        """Whether this is a team match with one session per member (spec 6.8)."""
        return self.core.team_play

    @property
    def lean(self) -> bool:
        """Whether the session agreed ``lean`` (spec 4.2): no copy of our own moves comes back,
        so our shot is known from its verdict and our verdict is applied as we send it."""
        return LEAN in self.client.wire.caps

    @property
    def captain(self) -> bool:
        """Whether we place, answer, reveal and co-sign for our seat (always, without teams)."""
        return self.core.captain

    @property
    def placed(self) -> bool:
        """Whether a fleet is placed for the current game."""
        return self.core.placed

    @property
    def match_id_hex(self) -> str:
        """The match id as hex (what ``get_record`` and the CLI print)."""
        return self.id.hex()

    # -- script side -------------------------------------------------------------------------

    async def wait_started(self) -> None:
        """Wait until the match (``start``) and its first game (``game``) have begun."""
        await self._started.wait()
        while self.game_no == 0:
            await self._game_event.wait()

    async def place(self, fleet: Fleet | None = None, rng: random.Random | None = None) -> Fleet:
        """Place ``fleet`` (``None``: a random legal fleet) for the current game.

        Blind mode sends the commitment only; custody mode hands fleet and secret to the referee.
        The fleet and secret stay here (:attr:`committed`) to answer shots and to reveal. In team
        play a member who is not the captain places nothing (the fleet is the captain's): the
        fleet is returned unsent.
        """
        await self.wait_started()
        assert self.rules is not None
        if fleet is None:
            fleet = random_fleet(self.rules, rng or random.SystemRandom())
        await self._deliver(self.core.place(fleet, os.urandom(32)), wait=True)
        return fleet

    async def fire(self, cells: str | Cell | Sequence[str | Cell]) -> None:
        """Call one cell (``"E5"``) or a salvo (a list); the answer comes as events.

        During a reconnect it waits for the new connection instead of failing, and the shot goes
        out then if the match's snapshot says it is still wanted (our turn, not yet applied);
        otherwise the events say what happened meanwhile. Raises
        :class:`~.wire.ConnectionLost` once the client gave up getting back in. The same holds
        for :meth:`radar`, :meth:`place` and :meth:`resign`.
        """
        await self._deliver(self.core.fire(cells, self.client._move_seq(self)), wait=True)

    async def radar(self, at: str | Cell) -> None:
        """Scan the radar area whose top-left cell is ``at`` instead of firing."""
        await self._deliver(self.core.radar(at, self.client._move_seq(self)), wait=True)

    async def resign(self) -> None:
        """Give up the current game."""
        await self._deliver(self.core.resign(), wait=True)

    async def say(self, line: str) -> None:
        """Say ``line`` to the match's players (spec 6.9.4; at most 200 characters, no control
        characters): it comes back to both of us as a :class:`~.events.Said` event. Raises
        :class:`~.wire.RequestFailed` when refused (``RATE_LIMITED`` past a few lines a second,
        after the client's own retries; ``NOT_ALLOWED`` without the capability ``people``)."""
        await self.client._request(lambda i: m.Say(i, self.id, line))

    async def events(self) -> AsyncIterator[MatchEvent]:
        """The match's events, in order, until :class:`MatchEnded` (or the connection ends)."""
        async for ev in self._recv:
            yield ev
            if isinstance(ev, MatchEnded):
                return

    # -- the shell ---------------------------------------------------------------------------

    async def _deliver(self, out: Out, *, wait: bool) -> None:
        """Send what the seat said to send, then queue its events.

        ``wait``: the script's own (see :meth:`fire`). The reader's sends stop at a dropped
        connection, since the reader is the task that gets back in, and the snapshot then says
        what is still owed."""
        try:
            for msg in out.sends:
                try:
                    epoch = await self.client._deliver(msg, wait=wait)
                except ConnectionClosed:
                    break
                if epoch is not None:
                    self.core.carried(msg, epoch)
        finally:
            for ev in out.events:
                self._emit(ev)

    async def _handle(self, msg: m.Message) -> None:
        """The reader's: one message of this match."""
        core = self.core
        game = core.game_no
        core.lean = self.lean
        core.epoch = self.client.epoch
        if isinstance(msg, m.Said):  # the chat (spec 6.9.4): the seat knows nothing of it
            mine = msg.seat == core.seat and msg.member == core.member
            self._emit(Said(msg.seat, msg.member, msg.line, mine))
            return
        if isinstance(msg, m.Seated):
            self.names, self.ratings = msg.names, msg.ratings
        elif isinstance(msg, m.Snapshot) and not self.names:
            names = msg.view.get("names")
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                self.names = tuple(names)
        out = core.receive(msg, trio.current_time())
        if isinstance(msg, m.Start):
            self._started.set()
        if core.game_no != game:
            ev, self._game_event = self._game_event, trio.Event()
            ev.set()
        await self._deliver(out, wait=False)
        if core.done:
            self._close()
            self.client._forget_moves(self)

    def _rate_limited(self, seq: int | None) -> None:
        """The server dropped a message of ours for rate (spec 2.5): send it again, later."""
        delay = self.core.rate_limited()
        game = self.game_no

        async def again() -> None:
            await trio.sleep(delay)
            if self._done:
                return
            with suppress(ConnectionClosed):
                for msg in self.core.again(seq, game):
                    await self.client.wire.send(msg)

        self.client._spawn(again)

    def _emit(self, ev: MatchEvent) -> None:
        if not self._done:
            self._send.send_nowait(ev)

    def _close(self) -> None:
        self._done = True
        self._send.close()
        self.client._notify()  # a move waiting for this match to be given back goes no further
