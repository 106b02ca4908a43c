"""The line mode: typed lines in, rich text out, for a person playing off the game screen.

The game screen (:mod:`seabattle.cli.screen`) is what a terminal gets; this is what a pipe, a
dumb terminal or ``--line`` gets, and what the tests drive. :class:`GameUI` is what both offer
the shells.

Theory of operation. :class:`TerminalUI` asks for one line at a time (``ask``) and prints through a
:class:`rich.console.Console`; nothing takes over the screen, so it works over ssh, in a pipe and
in a pseudo-terminal alike. Lines come from a *line reader*: by default :class:`StdinLines`, one
daemon thread that reads standard input for the whole run and hands each line to the trio loop, so
that the loop keeps answering the opponent while the person thinks, and a prompt that the clock
cancels leaves no reader behind to swallow the next line. Tests pass their own reader (an async
function of the prompt) and a ``Console(file=StringIO())``, and drive whole games in-process.

The two shells that use it, peer play and refereed play, are in :mod:`seabattle.cli.human`.
"""

from __future__ import annotations

import math
import random
import re
import sys
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, Protocol, TextIO

import trio
from rich.console import Console, RenderableType
from rich.text import Text
from seabattle.bots.placement import HELP as PLACEMENT_HELP
from seabattle.bots.placement import PlacementRefused, Placer, off_loop
from seabattle.client.match import RunningClock
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell, parse_cell
from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.verdict import Verdict

from .render import (
    GAME_LEGEND,
    Spectator,
    explain_refusal,
    house_badge,
    render_end,
    render_grids,
    render_placement,
    rules_panel,
)

__all__ = [
    "AGAIN",
    "Chat",
    "ClockSource",
    "GameUI",
    "LineReader",
    "Move",
    "Quit",
    "StdinLines",
    "TerminalUI",
    "describe_verdict",
    "parse_move",
    "render_grids",
    "screen_wanted",
    "shot_hint",
    "typed_move",
    "watch_match",
]

#: Reads the line typed at ``prompt``; ``None`` at the end of input.
LineReader = Callable[[str], Awaitable[str | None]]

#: The clock that runs for us now, if any (the shells know which clock concerns which prompt).
ClockSource = Callable[[], RunningClock | None]

Move = tuple[str, list[Cell]]
"""``("fire", cells)`` or ``("radar", [top_left])``."""

#: The time left as a prompt shows it.
_LEFT = re.compile(r"\[\d+ s left\]")

#: Seconds left at which a running clock is announced (those below the clock's length).
_THRESHOLDS = (60, 30, 20, 10, 5)

MOVE_HELP = (
    "call a cell such as E5 (a salvo: several cells, A1 B2 C3); 'radar C3' scans once where the "
    "rules allow; 'rules' shows the rules again; 'quit' leaves"
)


def screen_wanted(line: bool = False) -> bool:
    """Whether the full-screen game (:mod:`seabattle.cli.screen`) is for this terminal:
    standard input and output are both terminals, the terminal can address its cells (not
    ``TERM=dumb``), and the player did not ask for the line mode (``line``)."""
    import os

    term = os.environ.get("TERM", "")
    return not line and sys.stdin.isatty() and sys.stdout.isatty() and term not in ("", "dumb")


class Quit(Exception):
    """The player left: the input ended, or they typed ``quit``."""


#: Sends a line of the match's chat (spec 6.9.4); set on a UI by a shell that can.
Chat = Callable[[str], None]


class GameUI(Protocol):
    """What the shells of :mod:`seabattle.cli.human` talk to: :class:`TerminalUI` (the line
    mode) or :class:`~seabattle.cli.screen.ScreenUI` (the game screen)."""

    #: Where ``say TEXT`` typed at the shot prompt goes: ``None`` where there is no chat (peer
    #: play, a server without the capability people).
    chat: Chat | None

    def say(self, text: str | RenderableType, style: str | None = None) -> None:
        """Tell the player something."""

    def refused(self, code: int, detail: str) -> None:
        """Explain a refused move or placement."""

    def show_rules(self, rules: RuleSet, *, peer: bool = False) -> None:
        """The rule set and its house rules."""

    def match(
        self, title: str, clocks: ClockSource | None, names: Sequence[str] | None = None
    ) -> None:
        """The match's name, where the clock running now (for either seat) is read, and both
        seats' names (:func:`~seabattle.cli.render.seat_names`)."""

    def revealed(self, number: int, seat: int, fleet: Fleet) -> None:
        """The opponent's fleet of game ``number``, revealed (at its end, or after it)."""

    def show(self, game: Game | None, seat: int, fleet: Fleet | None) -> None:
        """The state of the game changed."""

    def game_over(
        self,
        number: int,
        game: Game | None,
        seat: int,
        outcome: Mapping[str, Any],
        fleet: Fleet | None,
        their_fleet: Fleet | None,
    ) -> None:
        """A game ended: how, and both fleets."""

    async def place(self, rules: RuleSet, game: int, clock: ClockSource | None = None) -> Fleet:
        """The fleet the player places."""
        ...

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
        """The player's move; ``None``: they resign."""
        ...


def parse_move(text: str, rules: RuleSet, count: int) -> Move:
    """``"E5"``, ``"A1 B2 C3"`` for a salvo, or ``"radar C3"``.

    Raises ``ProtocolError`` (``OFF_BOARD``) for a cell not on the board, ``ValueError`` for the
    wrong number of cells.
    """
    words = text.replace(",", " ").split()
    if words and words[0].lower() == "radar":
        if len(words) != 2:
            raise ValueError("radar takes one cell: radar C3")
        return "radar", [parse_cell(words[1], rules.rows, rules.cols)]
    if len(words) != count:
        raise ValueError(f"this turn calls {count} cell(s), e.g. " + " ".join(["E5"] * count))
    return "fire", [parse_cell(w, rules.rows, rules.cols) for w in words]


#: What :func:`typed_move` answers for a line that was no move: ask again.
AGAIN: Final = "again"


def shot_hint(count: int, radar: bool, can_resign: bool) -> str:
    """What the shot prompt says can be typed."""
    hint = f"{count} cells" if count > 1 else "a cell, e.g. E5"
    hint += ", or radar C3" if radar else ""
    return hint + (", or resign" if can_resign else "")


def typed_move(
    ui: GameUI, text: str, rules: RuleSet, count: int, can_resign: bool
) -> Move | Literal["again"] | None:
    """What a line typed at the shot prompt asks: a move, ``None`` (resign), or :data:`AGAIN`
    once ``ui`` has answered it (help, the rules, why the move was refused)."""
    low = text.lower()
    chat = getattr(ui, "chat", None)
    if low in ("help", "?"):
        ui.say(
            MOVE_HELP
            + ("; 'resign' gives up this game" if can_resign else "")
            + ("; 'say TEXT' talks to your opponent" if chat is not None else "")
        )
        ui.say(GAME_LEGEND, "dim")
    elif chat is not None and (low == "say" or low.startswith("say ")):
        line = text[3:].strip()
        if line:
            chat(line)
        else:
            ui.say("say what? e.g. say good luck", "yellow")
    elif low == "rules":
        ui.show_rules(rules)
    elif low == "resign" and can_resign:
        return None
    else:
        try:
            return parse_move(text, rules, count)
        except ProtocolError as e:
            ui.refused(e.code, e.detail)
        except ValueError as e:
            ui.say(f"refused: {e}", "red")
    return AGAIN


def describe_verdict(rules: RuleSet, cells: Sequence[Cell], radar: bool, v: Verdict) -> str:
    """``"E5 hit, E6 sunk Destroyer"``, ``"3 hits"`` or ``"radar at C3: ships found"``."""
    if radar:
        found = "ships found" if v.found else "nothing found"
        return f"radar at {cells[0].label()}: {found}"
    if v.total is not None:
        sunk = [rules.fleet[s.ship].name for s in v.sunk if 0 <= s.ship < len(rules.fleet)]
        out = f"{' '.join(c.label() for c in cells)}: {v.total} hit(s)"
        return out + (f", sunk {', '.join(sunk)}" if sunk else "")
    parts = []
    for c, res in zip(cells, v.results, strict=True):
        word = res.result.value
        claim = res.sunk
        named = rules.sunk is not SunkReport.SILENT
        if claim is not None and named and 0 <= claim.ship < len(rules.fleet):
            word += f" {rules.fleet[claim.ship].name}"
        parts.append(f"{c.label()} {word}")
    return ", ".join(parts)


class StdinLines:
    """Lines of a text stream (standard input), read by one daemon thread for the whole run."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdin
        self._recv: trio.MemoryReceiveChannel[str | None] | None = None
        self._eof = False

    def _start(self) -> trio.MemoryReceiveChannel[str | None]:
        send, recv = trio.open_memory_channel[str | None](math.inf)
        token = trio.lowlevel.current_trio_token()
        stream = self._stream

        def pump() -> None:
            try:
                while True:
                    line = stream.readline()
                    text = line.rstrip("\r\n") if line else None
                    trio.from_thread.run_sync(send.send_nowait, text, trio_token=token)
                    if text is None:
                        return
            except (trio.RunFinishedError, trio.BrokenResourceError, OSError, ValueError):
                return  # the game is over (or stdin closed): nobody is left to read for

        threading.Thread(target=pump, name="seabattle-stdin", daemon=True).start()
        return recv

    async def __call__(self, prompt: str) -> str | None:
        """The next line (``prompt`` is printed by the caller); ``None`` once the input ended."""
        if self._eof:
            return None
        if self._recv is None:
            self._recv = self._start()
        line = await self._recv.receive()
        self._eof = line is None
        return line


class TerminalUI:
    """What one person at a terminal sees and types (see the module docstring)."""

    def __init__(
        self,
        console: Console | None = None,
        read: LineReader | None = None,
        rng: random.Random | None = None,
        *,
        placement: str = "uniform",
    ) -> None:
        self.console = console or Console()
        #: How the placing command ``random`` places the rest (``placement.PLACEMENTS``).
        self.placement = placement
        self.read: LineReader = read or StdinLines()
        #: A scripted reader types nothing that a terminal would echo, so the transcript echoes it.
        self.echo = read is not None
        self.rng = rng or random.SystemRandom()
        self.chat: Chat | None = None
        self._prompt: str | None = None
        #: The last game_over: number, game, seat, our fleet, theirs (for a reveal after it).
        self._end: tuple[int, Game | None, int, Fleet | None, Fleet | None] | None = None

    # -- output ----------------------------------------------------------------------------------

    def say(self, text: str | RenderableType, style: str | None = None) -> None:
        """Print a line (plain text is never read as markup) or a renderable."""
        self._interrupt()
        if isinstance(text, str):
            self.console.print(Text(text, style=style or ""))
        else:
            self.console.print(text)
        self._resume()

    def _interrupt(self) -> None:
        # Something arrives while a prompt waits (a clock notice): finish the prompt's line first.
        if self._prompt is not None:
            self.console.print()

    def _resume(self) -> None:
        if self._prompt is not None:
            self.console.print(Text(self._prompt), end="")

    def refused(self, code: int, detail: str) -> None:
        """Explain a refused move or placement."""
        self.say(explain_refusal(code, detail), "red")

    def show_rules(self, rules: RuleSet, *, peer: bool = False) -> None:
        """The rule set, its house rules and 003's badge, before the first game."""
        self.say(rules_panel(rules, peer=peer))

    def match(
        self, title: str, clocks: ClockSource | None, names: Sequence[str] | None = None
    ) -> None:
        """What the game screen heads its page with; the line mode has said it already."""

    def revealed(self, number: int, seat: int, fleet: Fleet) -> None:
        """A reveal after the game's end was printed: both grids again, their fleet on its own."""
        end = self._end
        if end is None or end[0] != number or end[4] is not None:
            return  # before the end: game_over is handed it with the rest
        self._end = (*end[:4], fleet)
        _, game, mine, ours, _ = end
        self.say(Text("their fleet, revealed:", style="bold"))
        if game is not None:
            self.say(render_grids(game, mine, ours, fleet, self.console.width))

    def show(self, game: Game | None, seat: int, fleet: Fleet | None) -> None:
        """The state changed; the line mode draws the grids only when it asks for a shot."""

    def game_over(
        self,
        number: int,
        game: Game | None,
        seat: int,
        outcome: Mapping[str, Any],
        fleet: Fleet | None,
        their_fleet: Fleet | None,
    ) -> None:
        """The reason, then both fleets with every shot on them."""
        self._end = (number, game, seat, fleet, their_fleet)
        self.say(render_end(number, game, seat, outcome, fleet, their_fleet, self.console.width))

    # -- input -----------------------------------------------------------------------------------

    async def ask(self, prompt: str) -> str:
        """Print ``prompt``, read one line; raises :class:`Quit` at the end of input or on quit."""
        self.console.print(Text(prompt), end="")
        self._prompt = prompt
        line: str | None = None
        answered = False
        try:
            line = await self.read(prompt)
            answered = True
        finally:
            self._prompt = None
            if not answered or line is None or self.echo:
                # Cancelled (the clock ran out) or scripted: end the prompt's line ourselves.
                self.console.print(Text(line or ""))
        if line is None:
            raise Quit("end of input")
        line = line.strip()
        if line.lower() in ("quit", "exit"):
            raise Quit("quit")
        return line

    @asynccontextmanager
    async def countdown(self, clock: ClockSource | None, what: str) -> AsyncIterator[None]:
        """While the body runs, announce the time left on ``clock`` (``what``: for what)."""
        if clock is None:
            yield
            return
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._tick, clock, what)
                yield
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The ticker only ever stops by cancellation, so a group holds the body's exception
            # (Quit, say): hand it on as itself, as if there were no ticker.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def _tick(self, clock: ClockSource, what: str) -> None:
        shown = clock()  # the prompt itself shows the clock that runs as it opens
        current: RunningClock | None = None
        said: set[int] = set()
        while True:
            c = clock()
            if c is not None:
                if c is not current:
                    current = c
                    said = {t for t in _THRESHOLDS if t >= c.seconds}
                    if c is not shown:
                        self.say(f"[clock] {c.seconds} s {what}", "yellow")
                left = c.remaining()
                due = [t for t in _THRESHOLDS if t not in said and left <= t]
                if due:
                    said.update(due)
                    if left > 0:
                        if self._prompt is not None:
                            # The prompt printed again under the notice tells the time left now.
                            now = f"[{math.ceil(left)} s left]"
                            self._prompt = _LEFT.sub(now, self._prompt)
                        self.say(f"[clock] {math.ceil(left)} s left {what}", "yellow")
            # A coarse poll: the clock that concerns us may be replaced at any moment (a new turn).
            await trio.sleep(0.25)

    @staticmethod
    def _left(clock: ClockSource | None) -> str:
        c = clock() if clock is not None else None
        return f" [{math.ceil(c.remaining())} s left]" if c is not None else ""

    # -- placing ---------------------------------------------------------------------------------

    async def place(self, rules: RuleSet, game: int, clock: ClockSource | None = None) -> Fleet:
        """Place a fleet by hand, ship by ship (:class:`~seabattle.bots.placement.Placer`); fixed
        when done."""
        placer = Placer(rules, self.placement)
        order = " (in fleet order)" if rules.ordered_placement else ""
        self.say(f"game {game}: place your fleet{order}. {PLACEMENT_HELP}", "bold")
        self.say(render_placement(rules, placer.placed, placer.next_ship))
        async with self.countdown(clock, "to place your fleet"):
            while not placer.done:
                k = placer.next_ship
                assert k is not None
                spec = rules.fleet[k]
                line = await self.ask(f"place {spec.name} ({spec.length}){self._left(clock)}: ")
                try:
                    # ``random`` under ``evasive`` plays simulated games for a second or two.
                    said = await off_loop(placer.placement, placer.command, line, self.rng)
                except PlacementRefused as e:
                    self.say(f"refused: {e}", "red")
                    continue
                self.say(said, "green")
                if not placer.done and line.lower() not in ("help", "?"):
                    self.say(render_placement(rules, placer.placed, placer.next_ship))
        fleet = placer.fleet()
        self.say(render_placement(rules, placer.placed, None))
        self.say("your fleet is placed and fixed for this game", "bold green")
        return fleet

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
        """Draw both grids and read a move until it parses; ``None``: the player resigns.

        ``count`` and ``radar`` (cells to call, radar still available) default to what ``game``
        says; a shell whose game mirror has stopped passes what the server said instead.
        """
        rules = game.rules
        badge = house_badge(rules)
        if badge is not None:
            self.say(badge)
        self.say(render_grids(game, seat, fleet, width=self.console.width))
        if count is None:
            count = game.shot_count(seat)
        if radar is None:
            radar = rules.radar and not game.boards[1 - seat].radar_used
        hint = shot_hint(count, radar, can_resign)
        async with self.countdown(clock, "to call your shot"):
            while True:
                text = await self.ask(f"your shot ({hint}){self._left(clock)}: ")
                move = typed_move(self, text, rules, count, can_resign)
                if move != AGAIN:
                    return move


# ================================================================================================
# Watching (seabattle watch)
# ================================================================================================

#: How often the board view of ``watch`` is drawn again for its clock (seconds).
_WATCH_TICK = 0.5


async def watch_match(
    events: AsyncIterable[m.Message],
    *,
    board: bool,
    console: Console | None = None,
    echo: Callable[[str], None] | None = None,
) -> bool:
    """``seabattle watch``: follow a match from its snapshot (the shots before we came are in
    it) through its public events (:class:`~seabattle.cli.render.Spectator`); whether it ended.

    ``board``: both boards, drawn again in place at every event and as the clock runs, when
    standard output is a terminal that can (not ``TERM=dumb``); otherwise one line of text an
    event, through ``echo`` (a pipe, a log, ``--plain``).
    """
    import os

    spectator = Spectator()
    term = os.environ.get("TERM", "")
    if not (board and sys.stdout.isatty() and term not in ("", "dumb")):
        say = echo or (lambda line: print(line, flush=True))
        async for msg in events:
            say(spectator.feed(msg, trio.current_time()))
            if spectator.finished:
                return True
        return False
    from rich.live import Live

    console = console or Console()
    # Drawn from this task only (no refresh thread): the spectator is never read mid-update.
    with Live(console=console, auto_refresh=False, transient=False) as live:

        def draw() -> None:
            live.update(spectator.view(trio.current_time(), console.width), refresh=True)

        async def tick() -> None:
            while True:
                await trio.sleep(_WATCH_TICK)
                draw()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            async for msg in events:
                spectator.feed(msg, trio.current_time())
                draw()
                if spectator.finished:
                    break
            nursery.cancel_scope.cancel()
    if spectator.finished and spectator.recent:
        console.print(Text(spectator.recent[-1], style="bold"), soft_wrap=True)
    return spectator.finished
