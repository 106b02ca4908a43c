"""The full-screen game for people: both boards, both clocks, the fleets, the rules, one screen.

Theory of operation. :func:`run` is ``trio.run`` with the screen up: it starts the Textual app
(:mod:`seabattle.cli.screen_app`) on asyncio's loop and runs the trio program as a *guest* on
that loop (``trio.lowlevel.start_guest_run``), so both live on one thread. The game side,
:class:`ScreenUI`, has the same methods as the line mode's
:class:`~seabattle.cli.tui.TerminalUI` (``say``, ``place``, ``move``, ...), so that the shells of
:mod:`seabattle.cli.human` drive either; it keeps the state of the screen, draws it whole into
renderables (:class:`~seabattle.cli.screen_app.View`) and hands them to the app with
``App.call_later``, and it takes what the player does from the app through
``TrioToken.run_sync_soon``: the only two crossings between the loops.

Why Textual, and why guest mode (measured on this project's 2-core machine, load 1.2-1.4):

* Textual against prompt_toolkit, a minimal full-screen app on a 100 x 40 pty redrawing 4 times a
  second: first frame 0.42 s against 0.28 s (import 0.55 s against 0.23 s), 0.61 s against 0.38 s
  of CPU over its first 10 s, 3.6 kB/s against 0.65 kB/s to the terminal. prompt_toolkit is
  lighter, but Textual draws the :mod:`rich` renderables of :mod:`seabattle.cli.render` as they
  are (one wording for the line mode and the screen), brings focus, an input line with editing
  and a layout, and costs nothing that a person at a terminal, or ssh, would notice.
* Guest mode against the UI's loop in a thread of its own: trio's socket round trip is 230 us in
  guest mode against 70-95 us under ``trio.run`` (a match sends a few hundred messages: a tenth of
  a second over a whole match), and a key reaches the trio side in 119 us median (p99 2.7 ms)
  against 143 us (p99 4.0 ms) through ``trio.from_thread``. Neither is felt; what decides is that
  on one thread the two sides never race over a widget, and nothing blocks on the other loop
  (Textual's ``call_from_thread`` waits for the UI thread, which can deadlock at exit).

What goes down the line (ssh): the screen is drawn from one task, once per batch of changes and
every quarter second for the clocks; a widget is drawn again only when its text changed, laid out
again only when its size did; a grid sends one style per run of like cells; the cursor does not
blink. An idle screen sends nothing, a line in the log about 2.4 kB, and the pty test's match on
8 x 8 went from 1.6 MB to 0.59 MB with these.

The screen is only for a terminal: the commands use it when standard input and output are both
terminals (and not ``--line``), and the line mode otherwise.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, TypeVar

import outcome  # trio's own: what a guest run ends with
import trio
from rich.console import RenderableType
from rich.text import Text
from seabattle.bots.placement import PlacementRefused, Placer, off_loop
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet

from .render import (
    GAME_LEGEND,
    explain_end,
    explain_refusal,
    rules_panel,
)
from .screen_app import InputEvent, ScreenApp
from .screen_view import draw, legal_starts
from .tui import AGAIN, Chat, ClockSource, Move, Quit, shot_hint, typed_move

__all__ = ["ScreenUI", "run"]

T = TypeVar("T")

#: How often the clocks on the screen are redrawn (seconds).
_TICK = 0.25

_CELL = re.compile(r"[A-Za-z]+[0-9]+")


class ScreenUI:
    """The game side of the screen (see the module docstring); made by :func:`run`."""

    def __init__(
        self, app: ScreenApp, *, placement: str = "uniform", rng: random.Random | None = None
    ) -> None:
        self.app = app
        self.placement = placement
        self.rng = rng or random.SystemRandom()
        self.chat: Chat | None = None
        self.title = "seabattle"
        #: The clock that runs now, for either seat (the refereed shell sets it; peers have none).
        self.clocks: ClockSource | None = None
        #: Both seats as people know them (:func:`~seabattle.cli.render.seat_names`), if known.
        self.names: list[str] | None = None
        self.rules: RuleSet | None = None
        self.seat = 0
        self.game: Game | None = None
        self.fleet: Fleet | None = None
        self.their_fleet: Fleet | None = None
        self.over: str | None = None  #: how the last game ended, while no new one began
        self.used = [0.0, 0.0]  #: each seat's time to call its shots this game
        self.transcript: list[RenderableType] = []  #: everything said, for the terminal after
        self.message = Text("")  #: the message line
        self.placer: Placer | None = None  #: the fleet being placed, while it is
        self.vertical = False  #: the way the ship being placed lies
        self.starts: set[int] = set()  #: where it could start (004's marks)
        self.cursor = Cell(0, 0)  #: the board's cursor
        self.chosen: list[Cell] = []  #: a salvo's cells marked so far
        self.prompt = ""  #: what is asked now ("": nothing)
        self._count = 1
        self._on_key: Callable[[str], str | None] | None = None
        self._send: trio.MemorySendChannel[InputEvent] | None = None
        self._recv: trio.MemoryReceiveChannel[InputEvent] | None = None
        self._scope: trio.CancelScope | None = None
        self._dirty: trio.Event | None = None  #: set: draw again (``None``: trio has ended)
        #: The player left (quit, Ctrl-C): the screen closes without waiting for a key.
        self.left = False

    # -- the run ---------------------------------------------------------------------------------

    async def _main(
        self, main: Callable[[ScreenUI], Awaitable[T]], started: list[trio.lowlevel.TrioToken]
    ) -> T:
        self._send, self._recv = trio.open_memory_channel[InputEvent](math.inf)
        token = trio.lowlevel.current_trio_token()
        started.append(token)

        def sink(ev: InputEvent) -> None:
            with suppress(trio.RunFinishedError):
                token.run_sync_soon(self._feed, ev)

        self.app.sink = sink
        self._dirty = trio.Event()
        box: list[T] = []
        try:
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._tick)
                    box.append(await main(self))
                    nursery.cancel_scope.cancel()
        finally:
            # From here on the screen is drawn from asyncio's side, where trio's clock is not.
            self.clocks = None
            self.app.sink = None
            self._dirty = None
        if not box:
            raise KeyboardInterrupt
        return box[0]

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _tick(self) -> None:
        # The one task that draws while the game runs: at each change (many changes in one go
        # make one drawing), and every _TICK seconds for the clocks.
        last = trio.current_time()
        while True:
            with trio.move_on_after(_TICK):
                assert self._dirty is not None
                await self._dirty.wait()
            self._dirty = trio.Event()
            now = trio.current_time()
            g = self.game
            if g is not None and g.phase is Phase.FIRING and g.turn is not None:
                self.used[g.turn] += now - last
            last = now
            self.app.call_later(self.app.show, draw(self))

    def _feed(self, ev: InputEvent) -> None:
        """What the player did (on trio's side of the loop, via ``run_sync_soon``)."""
        kind, value = ev
        if self._on_key is not None and self._send is not None:
            self._send.send_nowait(ev)
        elif kind == "quit":
            if self._scope is not None:
                self._scope.cancel()
        elif kind == "key":
            self._move_cursor(value)
            self._push()
        elif kind == "line" and value.strip():
            self._idle_line(value.strip())

    def _idle_line(self, line: str) -> None:
        low = line.lower()
        if low in ("quit", "exit") and self._scope is not None:
            self._scope.cancel()
        elif low == "rules" and self.rules is not None:
            self.show_rules(self.rules)
        elif low in ("help", "?"):
            self.say(GAME_LEGEND, "dim")
        else:
            self.say("not now: wait for your turn (the line at the top says whose it is)", "yellow")

    # -- TerminalUI's methods --------------------------------------------------------------------

    def say(self, text: str | RenderableType, style: str | None = None) -> None:
        """A line on the log and the message line (a renderable goes to the log only)."""
        r: RenderableType = Text(text, style=style or "") if isinstance(text, str) else text
        self.transcript.append(r)
        if isinstance(r, Text):
            self.message = Text("> ") + r
        self.app.call_later(self.app.log_line, r)
        self._push()

    def refused(self, code: int, detail: str) -> None:
        """Explain a refused move or placement."""
        self.say(explain_refusal(code, detail), "red")

    def show_rules(self, rules: RuleSet, *, peer: bool = False) -> None:
        """The rule set in the log; its name and house rules stay in the header."""
        self.rules = rules
        self.say(rules_panel(rules, peer=peer))

    def match(
        self, title: str, clocks: ClockSource | None, names: Sequence[str] | None = None
    ) -> None:
        """What the header names (the match, the players), where the running clock is read, and
        both seats' names (shown over their boards' clocks)."""
        self.title, self.clocks = title, clocks
        self.names = None if names is None or len(names) < 2 else [str(n) for n in names[:2]]
        self._push()

    def show(self, game: Game | None, seat: int, fleet: Fleet | None) -> None:
        """The state changed: ``game`` (our copy) seen from ``seat``, with our ``fleet``."""
        if game is not None and (self.game is None or game.number != self.game.number):
            # A new game (the peer shell hands a game of its own each time: compare numbers).
            self.used = [0.0, 0.0]
            self.their_fleet = None
            self.over = None
            self.chosen = []
        self.game, self.seat, self.fleet = game, seat, fleet
        if game is not None:
            self.rules = game.rules
            theirs = game.reveals[1 - seat]
            if theirs is not None:
                self.their_fleet = theirs.fleet
        self._push()

    def game_over(
        self,
        number: int,
        game: Game | None,
        seat: int,
        outcome: Mapping[str, Any],
        fleet: Fleet | None,
        their_fleet: Fleet | None,
    ) -> None:
        """The end of a game: the reason on the message line, both fleets on the boards."""
        if game is not None:
            self.show(game, seat, fleet)
        self.their_fleet = their_fleet or self.their_fleet
        self.over = f"game {number} over: " + explain_end(outcome, seat)
        self.say(self.over, "bold")
        self.say(f"  reason: {outcome.get('reason')}", "dim")
        if self.their_fleet is None:
            self.say("their fleet was not revealed in this game", "dim")

    def revealed(self, number: int, seat: int, fleet: Fleet) -> None:
        """The opponent's fleet of game ``number``, revealed (at its end, or after it): drawn
        under our shots on their board, the game-over screen's included."""
        g = self.game
        if g is not None and g.number != number:
            return
        late = self.over is not None and self.their_fleet is None
        self.their_fleet = fleet
        if late:
            self.say("their fleet is revealed: it is drawn on their board", "dim")
        self._push()

    async def ask(self, prompt: str, on_key: Callable[[str], str | None] | None = None) -> str:
        """Show ``prompt``, read one line (or a key that ``on_key`` turns into one); raises
        :class:`~seabattle.cli.tui.Quit` on ``quit`` or Ctrl-C."""
        assert self._recv is not None, "ScreenUI runs under screen.run"
        self.prompt = prompt
        self._on_key = on_key or (lambda key: self._move_cursor(key))
        self._push()
        try:
            while True:
                kind, value = await self._recv.receive()
                if kind == "quit":
                    self.left = True
                    raise Quit("quit")
                if kind == "line":
                    line = value
                    break
                said = self._on_key(value)
                if said is not None:
                    line = said
                    break
                self._push()
        finally:
            self.prompt = ""
            self._on_key = None
            self._push()
        line = line.strip()
        if line.lower() in ("quit", "exit"):
            self.left = True
            raise Quit("quit")
        return line

    # -- placing ---------------------------------------------------------------------------------

    async def place(self, rules: RuleSet, game: int, clock: ClockSource | None = None) -> Fleet:
        """Place a fleet: typed commands as in the line mode, or the cursor; fixed when done."""
        self.rules = rules
        if self.clocks is None:
            self.clocks = clock
        # A new game: the last one's boards give way (its end stays in the log).
        self.game, self.their_fleet, self.over, self.used = None, None, None, [0.0, 0.0]
        placer = self.placer = Placer(rules, self.placement)
        self.cursor = Cell(0, 0)
        order = " (in fleet order)" if rules.ordered_placement else ""
        self.say(f"game {game}: place your fleet{order}: A1 across, C3 down, turn, random", "bold")
        try:
            while not placer.done:
                k = placer.next_ship
                assert k is not None
                self.starts = legal_starts(placer, k, self.vertical)
                line = await self.ask(self._place_prompt(), self._placing)
                if line.lower() in ("turn", "rotate", "t"):
                    self.vertical = not self.vertical
                    continue
                try:
                    said = await off_loop(
                        placer.placement, placer.command, self._directed(line), self.rng
                    )
                except PlacementRefused as e:
                    self.say(f"refused: {e}", "red")
                    continue
                self.say(said, "green")
        finally:
            self.placer = None
        self.fleet = placer.fleet()
        self.say("your fleet is placed and fixed for this game", "bold green")
        self.cursor = Cell(rules.rows // 2, rules.cols // 2)
        return self.fleet

    def _place_prompt(self) -> str:
        """What the line asks while placing: the ship, and the way it lies now."""
        placer = self.placer
        if placer is None or placer.next_ship is None:
            return self.prompt
        spec = placer.rules.fleet[placer.next_ship]
        way = "" if spec.length == 1 else " down" if self.vertical else " across"
        return f"place {spec.name} ({spec.length}){way}: "

    def _directed(self, line: str) -> str:
        """``A1`` (or ``Cruiser A1``) lies the way the ship is turned on the screen."""
        words = line.split()
        if words and _CELL.fullmatch(words[-1]) and words[0].lower() not in ("move", "help"):
            return f"{line} {'down' if self.vertical else 'across'}"
        return line

    def _placing(self, key: str) -> str | None:
        if key == "space":
            self.vertical = not self.vertical
            placer = self.placer
            if placer is not None and placer.next_ship is not None:
                self.starts = legal_starts(placer, placer.next_ship, self.vertical)
                # The line says the way it lies too, and a cell typed there is placed that way.
                self.prompt = self._place_prompt()
            return None
        if key == "enter":
            return f"{self.cursor.label()} {'down' if self.vertical else 'across'}"
        return self._move_cursor(key)

    # -- firing ----------------------------------------------------------------------------------

    async def move(
        self,
        game: Game,
        seat: int,
        fleet: Fleet | None,
        clock: ClockSource | None = None,
        *,
        can_resign: bool = False,
        count: int | None = None,
        radar: bool | None = None,
    ) -> Move | None:
        """Read a move, typed or aimed with the cursor; ``None``: the player resigns."""
        self.show(game, seat, fleet)
        if self.clocks is None:
            self.clocks = clock
        rules = game.rules
        self._count = game.shot_count(seat) if count is None else count
        if radar is None:
            radar = rules.radar and not game.boards[1 - seat].radar_used
        hint = shot_hint(self._count, radar, can_resign)
        self.chosen = []
        try:
            while True:
                text = await self.ask(f"your shot ({hint}): ", self._firing)
                move = typed_move(self, text, rules, self._count, can_resign)
                if move != AGAIN:
                    return move
                self.chosen = []
        finally:
            self.chosen = []

    def _firing(self, key: str) -> str | None:
        at = self.cursor
        if key == "space" and self._count > 1:
            if at in self.chosen:
                self.chosen.remove(at)
            elif len(self.chosen) < self._count:
                self.chosen.append(at)
            return None
        if key == "enter":
            if self._count == 1:
                return at.label()
            if at not in self.chosen and len(self.chosen) < self._count:
                self.chosen.append(at)
            if len(self.chosen) == self._count:
                return " ".join(c.label() for c in self.chosen)
            self.message = Text(f"{self._count - len(self.chosen)} more cell(s) to mark")
            return None
        return self._move_cursor(key)

    def _move_cursor(self, key: str) -> str | None:
        # A key handler's answer: no line to submit, only the cursor moved.
        rules = self.rules
        if rules is None:
            return None
        dr, dc = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}.get(key, (0, 0))
        r = min(rules.rows - 1, max(0, self.cursor.row + dr))
        c = min(rules.cols - 1, max(0, self.cursor.col + dc))
        self.cursor = Cell(r, c)
        return None

    # -- drawing ---------------------------------------------------------------------------------

    def _push(self) -> None:
        if self._dirty is not None:
            self._dirty.set()
        else:  # the game is over: nothing runs on trio's side to draw
            self.app.call_later(self.app.show, draw(self))


# ================================================================================================
# The runner
# ================================================================================================


def run(
    main: Callable[[ScreenUI], Awaitable[T]],
    *,
    placement: str = "uniform",
    rng: random.Random | None = None,
    app: ScreenApp | None = None,
) -> T:
    """``trio.run(main, ui)`` with the game screen up; what ``main`` returns or raises.

    The screen closes on a key once ``main`` has returned (so the player sees how it ended),
    at once if it raised; then the log from the last game's end on is printed on the terminal.
    Ctrl-C while nothing is asked raises :class:`KeyboardInterrupt`, as in the line mode.
    """
    return asyncio.run(_host(main, app or ScreenApp(), placement, rng))


async def _host(
    main: Callable[[ScreenUI], Awaitable[T]],
    app: ScreenApp,
    placement: str,
    rng: random.Random | None,
) -> T:
    loop = asyncio.get_running_loop()
    ui = ScreenUI(app, placement=placement, rng=rng)
    done: asyncio.Future[outcome.Outcome[T]] = loop.create_future()
    started: list[trio.lowlevel.TrioToken] = []

    def start() -> None:
        trio.lowlevel.start_guest_run(
            ui._main,
            main,
            started,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done.set_result,
        )

    app.on_ready = start
    shown = asyncio.ensure_future(app.run_async())
    both: list[asyncio.Future[Any]] = [shown, done]
    await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
    if not done.done() and started:
        # The screen went away by itself (it failed): stop the game, then report both.
        started[0].run_sync_soon(ui._cancel)
        await done
    if not shown.done():
        if isinstance(done.result(), outcome.Value) and not ui.left:
            ui.say("press any key to close the screen", "bold")
            app.call_later(app.leave_on_key)
        else:
            app.exit()
    await shown
    _print_tail(ui.transcript)
    if not done.done():
        raise RuntimeError("the game screen closed before the game started")
    return done.result().unwrap()


def _print_tail(transcript: list[RenderableType]) -> None:
    """What the terminal keeps once the screen is gone: from the last game's end on (or the
    last few lines, when no game ended)."""
    from rich.console import Console

    start = max(0, len(transcript) - 4)
    for i, r in enumerate(transcript):
        if isinstance(r, Text) and re.match(r"game \d+ over: ", r.plain):
            start = i
    tail = [
        r
        for r in transcript[start:]
        if not (isinstance(r, Text) and r.plain.startswith("press any key"))
    ]
    console = Console()
    for r in tail:
        console.print(r)
