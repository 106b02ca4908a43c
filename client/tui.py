"""A terminal player: rich grids and typed coordinates, for ``seabattle play`` and peer play.

Both grids are drawn from the public :class:`~seabattle.protocol.game.Board` of a game mirror (what
the shots found), plus our own fleet on our own grid. Input is read in a worker thread, so the
trio loop keeps answering the opponent's shots while the human thinks.
"""

from __future__ import annotations

import random
from typing import Any

import trio
from rich.console import Console
from rich.text import Text
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Board, Game
from seabattle.protocol.grid import column_label, parse_cell
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.verdict import Result

from .peer import Move, Player

__all__ = ["ConsolePlayer", "parse_move", "play_server", "render_grids"]

_MARK = {Result.MISS: ("·", "blue"), Result.HIT: ("X", "bold red"), Result.SUNK: ("#", "red")}


def _grid(rules: RuleSet, board: Board, own: list[int] | None) -> list[Text]:
    lines = [Text("    " + " ".join(f"{column_label(c):>1}" for c in range(rules.cols)))]
    for r in range(rules.rows):
        line = Text(f"{r + 1:>3} ")
        for c in range(rules.cols):
            i = r * rules.cols + c
            if i in board.fired:
                res = board.fired[i]
                ch, style = _MARK[res] if res is not None else ("?", "yellow")
            elif i in board.crossed:
                ch, style = "-", "dim"
            elif own is not None and own[i]:
                ch, style = "O", "green"
            else:
                ch, style = "~", "dim cyan"
            line.append(ch, style=style)
            line.append(" ")
        lines.append(line)
    return lines


def render_grids(game: Game, seat: int, fleet: Fleet | None) -> Text:
    """Our grid (with our fleet) beside the target grid, as one block of text."""
    rules = game.rules
    own = fleet.occupancy(rules) if fleet is not None else None
    left = _grid(rules, game.boards[seat], own)
    right = _grid(rules, game.boards[1 - seat], None)
    width = 4 + 2 * rules.cols
    out = Text()
    out.append(f"{'your fleet':<{width}}   target\n", style="bold")
    for a, b in zip(left, right, strict=True):
        out.append_text(a)
        out.append(" " * (width - len(a.plain) + 3))
        out.append_text(b)
        out.append("\n")
    return out


def parse_move(text: str, rules: RuleSet, count: int) -> Move:
    """``"E5"``, ``"A1 B2 C3"`` for a salvo, or ``"radar C3"``; raises ``ProtocolError``."""
    words = text.replace(",", " ").split()
    if words and words[0].lower() == "radar":
        if len(words) != 2:
            raise ValueError("radar takes one cell: radar C3")
        return "radar", [parse_cell(words[1], rules.rows, rules.cols)]
    if len(words) != count:
        raise ValueError(f"call {count} cell(s)")
    return "fire", [parse_cell(w, rules.rows, rules.cols) for w in words]


async def _ask(prompt: str) -> str:
    return await trio.to_thread.run_sync(input, prompt, abandon_on_cancel=True)


class ConsolePlayer(Player):
    """A human at the terminal: a random fleet (shown), typed shots."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.current: Fleet | None = None

    async def fleet(self, rules: RuleSet, game: int) -> Fleet:
        """A random legal fleet (typed placement is not offered yet)."""
        self.current = random_fleet(rules, random.SystemRandom())
        self.console.print(f"game {game}: your fleet is placed at random")
        return self.current

    async def move(self, game: Game, seat: int, view: Any) -> Move:
        """Draw both grids and read a move until it parses."""
        self.console.print(render_grids(game, seat, self.current))
        count = game.shot_count(seat)
        radar = game.rules.radar and not game.boards[1 - seat].radar_used
        hint = f"{count} cell(s)" + (" or 'radar C3'" if radar else "")
        while True:
            text = await _ask(f"your shot ({hint}): ")
            try:
                return parse_move(text, game.rules, count)
            except (ProtocolError, ValueError) as e:
                self.console.print(f"[red]{e}[/red]")

    def refused(self, error: ProtocolError) -> None:
        """Tell the human why the move was refused."""
        self.console.print(f"[red]refused: {error.detail}[/red]")


async def play_server(
    host: str,
    port: int,
    *,
    rules: dict[str, Any],
    mode: str,
    key: str | None,
    name: str,
    console: Console,
    invite: str | None = None,
) -> None:
    """Play one match on a server by hand (quick match, or join ``invite``)."""
    from .api import (
        GameEnded,
        GameStarted,
        IncomingShot,
        LieDetected,
        MatchEnded,
        Refused,
        ShotResult,
        YourTurn,
        connect,
    )

    async with connect(host, port, key=key, name=name) as client:
        console.print(f"connected as {client.player[:16]}...; waiting for an opponent")
        match = await (client.join(invite) if invite else client.quick(rules, mode))
        fleet = await match.place()
        async for ev in match.events():
            g = match.mirror
            if isinstance(ev, GameStarted) and not match.placed:
                fleet = await match.place()
            elif isinstance(ev, YourTurn | Refused):
                if isinstance(ev, Refused):
                    console.print(f"[red]refused: {ev.msg}[/red]")
                if g is None or match.seat is None or match.rules is None:
                    continue
                console.print(render_grids(g, match.seat, fleet))
                count = g.shot_count(match.seat)
                while True:
                    try:
                        kind, cells = parse_move(
                            await _ask(f"your shot ({count} cell(s)): "), match.rules, count
                        )
                        break
                    except (ProtocolError, ValueError) as e:
                        console.print(f"[red]{e}[/red]")
                if kind == "radar":
                    await match.radar(cells[0])
                else:
                    await match.fire(cells)
            elif isinstance(ev, ShotResult):
                res = [r.value for r in ev.results] or [f"{ev.verdict.total or ev.verdict.found}"]
                labels = " ".join(c.label() for c in ev.cells)
                console.print(f"you fired {labels}: {', '.join(res)}")
            elif isinstance(ev, IncomingShot):
                labels = " ".join(c.label() for c in ev.cells)
                console.print(f"opponent fired {labels}")
            elif isinstance(ev, LieDetected):
                console.print(f"[bold red]lie detected[/bold red] ({ev.source}): {ev.detail}")
            elif isinstance(ev, GameEnded):
                console.print(f"game {ev.game}: {'you won' if ev.won else 'you lost'}")
            elif isinstance(ev, MatchEnded):
                console.print(f"match over: {ev.result}; record {match.id.hex()}")
