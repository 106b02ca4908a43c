"""What the game screen shows, drawn from the state of a :class:`~seabattle.cli.screen.ScreenUI`.

Pure: the state in, one :class:`~seabattle.cli.screen_app.View` of :mod:`rich` renderables out
(the grids themselves are :mod:`seabattle.cli.render`'s, shared with the line mode). Drawn on
trio's side, where the clocks are read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.text import Text
from seabattle.bots.placement import PlacementRefused, Placer
from seabattle.client.match import RunningClock
from seabattle.protocol.fleet import Placement
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport

from .render import board_glyph, grid_lines, house_badge, house_rules, placement_glyph, ship_list
from .screen_app import View

if TYPE_CHECKING:
    from .screen import ScreenUI

__all__ = ["draw", "legal_starts"]

_KEYS_PLACING = "arrows move, Enter places, Space turns the ship"
_KEYS_FIRING = "arrows aim, Enter fires, Space marks a salvo's cells"


def legal_starts(placer: Placer, ship: int, vertical: bool) -> set[int]:
    """Every cell index where ``ship`` could start (its top or left end), lying ``vertical``,
    beside the ships already down: 004's marks on the placement board."""
    rules = placer.rules
    out: set[int] = set()
    for i in range(rules.cells):
        trial = Placer(rules)
        trial.placed = dict(placer.placed)
        try:
            trial.place(ship, Cell(i // rules.cols, i % rules.cols), vertical)
        except PlacementRefused:
            continue
        out.add(i)
    return out


def _clock_text(c: RunningClock | None) -> Text:
    if c is None:
        return Text("no clock", style="dim")
    left = math.ceil(c.remaining())
    return Text(f"{c.kind} clock {left} s", style="bold red" if left <= 10 else "bold")


def _used(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


def draw(ui: ScreenUI) -> View:
    """The screen as ``ui`` has it now: what :meth:`ScreenApp.show` draws."""
    rules = ui.rules
    if rules is None:
        empty = Text("")
        return View(
            Text(ui.title, style="bold"),
            empty,
            empty,
            empty,
            empty,
            ui.message,
            ui.prompt,
            "",
        )
    if ui.placer is not None:
        left, right, left_info, right_info = _placing_view(ui, rules, ui.placer)
        hint = _KEYS_PLACING
        board = "left"
    else:
        left, right, left_info, right_info = _boards_view(ui, rules)
        hint = _KEYS_FIRING if ui.prompt else "arrows move the cursor"
        board = "right"
    return View(
        _header(ui, rules),
        left,
        right,
        left_info,
        right_info,
        ui.message,
        ui.prompt,
        hint,
        board,
    )


def _header(ui: ScreenUI, rules: RuleSet) -> Text:
    head = Text(ui.title, style="bold")
    g = ui.game
    if g is not None:
        head.append(f"  game {g.number}")
    head.append("\n")
    extra = house_rules(rules)
    base = rules.name.removesuffix("+custom")
    name = f"{base} + {len(extra)} house rule(s)" if extra else rules.name
    head.append(f" RULES: {name} ", style="bold white on blue")
    head.append("  ")
    head.append(*_turn(ui))
    badge = house_badge(rules)
    if badge is not None:
        head.append("  ")
        head.append_text(badge)
    return head


def _turn(ui: ScreenUI) -> tuple[str, str]:
    g = ui.game
    if ui.placer is not None:
        return " PLACE YOUR FLEET ", "bold black on cyan"
    if ui.over is not None:
        return " GAME OVER ", "bold white on magenta"
    if ui.prompt or (g is not None and g.phase is Phase.FIRING and g.turn == ui.seat):
        return " YOUR TURN ", "bold black on green"
    if g is None:
        return " waiting ", "dim"
    if g.phase is Phase.FIRING:
        return " THEIR TURN ", "bold white on red"
    if g.phase is Phase.SETUP:
        return " waiting for the fleets ", "bold"
    return f" {g.phase.value} ", "bold"


def _placing_view(ui: ScreenUI, rules: RuleSet, placer: Placer) -> tuple[Text, Text, Text, Text]:
    k = placer.next_ship
    preview: dict[int, bool] = {}
    title = Text("your fleet", style="bold")
    if k is not None:
        spec = rules.fleet[k]
        way = "" if spec.length == 1 else " down" if ui.vertical else " across"
        fits = ui.cursor.index(rules.cols) in ui.starts
        for c in Placement(ui.cursor.row, ui.cursor.col, ui.vertical).cells(spec.length):
            if c.on(rules.rows, rules.cols):
                preview[c.index(rules.cols)] = fits
        title = Text(f"place {spec.name} ({spec.length}){way}", style="bold")
    glyph = placement_glyph(rules, placer.placed, ui.starts, preview)
    cur = ui.cursor.index(rules.cols)
    grid = grid_lines(rules, glyph, title, lambda i: "reverse" if i == cur else None)
    info = _clock_line(ui, ui.seat)
    info.append(f"\n+ {len(ui.starts)} square(s) where it can start", style="yellow")
    info.append("\nturn it: Space on the board, or type turn", style="dim")
    ships = ship_list(rules, placer.placed, k)
    ships += [Text("")] * (len(grid) - len(ships))  # the clocks under both sides line up
    return _lines(grid), _lines(ships), info, _clock_line(ui, 1 - ui.seat)


def _boards_view(ui: ScreenUI, rules: RuleSet) -> tuple[Text, Text, Text, Text]:
    g = ui.game or Game(rules, bytes(16), 1)
    own = ui.fleet.occupancy(rules) if ui.fleet is not None else None
    theirs = ui.their_fleet.occupancy(rules) if ui.their_fleet is not None else None
    aim = ui.prompt != "" and ui.placer is None
    cur = ui.cursor.index(rules.cols)
    chosen = {c.index(rules.cols) for c in ui.chosen}

    def overlay(i: int) -> str | None:
        if aim and i == cur:
            return "reverse"
        return "underline bold" if i in chosen else None

    left = grid_lines(rules, board_glyph(g.boards[ui.seat], own), "your fleet")
    title = "their fleet" if ui.their_fleet is not None else "target"
    right = grid_lines(rules, board_glyph(g.boards[1 - ui.seat], theirs), title, overlay)
    left_info = _clock_line(ui, ui.seat)
    left_info.append("\n")
    left_info.append_text(_afloat(ui, g, ui.seat, own))
    right_info = _clock_line(ui, 1 - ui.seat)
    right_info.append("\n")
    right_info.append_text(_afloat(ui, g, 1 - ui.seat, theirs))
    return _lines(left), _lines(right), left_info, right_info


def _clock_line(ui: ScreenUI, seat: int) -> Text:
    """The seat's name (when the match has names: a server's), then its clock and time used."""
    who = "you" if seat == ui.seat else "opponent"
    text = Text("")
    if ui.names is not None:
        text.append(ui.names[seat], style="bold")
        text.append("\n")
    c = ui.clocks() if ui.clocks is not None else None
    g = ui.game
    text.append(f"{who}: ")
    if c is not None and (g is None or c.game == g.number) and c.seat in (None, seat):
        text.append_text(_clock_text(c))
    else:
        text.append("no clock running" if ui.clocks is not None else "no clock", style="dim")
    text.append(f" · used {_used(ui.used[seat])}", style="dim")
    return text


def _afloat(ui: ScreenUI, g: Game, seat: int, occupancy: list[int] | None) -> Text:
    rules = g.rules
    board = g.boards[seat]
    n = len(rules.fleet)
    if occupancy is not None:
        hit = {i for i, r in board.fired.items() if r is not None and occupancy[i]}
        ships: dict[int, list[int]] = {}
        for i, o in enumerate(occupancy):
            if o:
                ships.setdefault(o - 1, []).append(i)
        sunk = sum(all(i in hit for i in cells) for cells in ships.values())
    elif seat != ui.seat and rules.sunk is SunkReport.SILENT:
        return Text(f"ships afloat: ? of {n} (sinkings are not told)", style="dim")
    else:
        sunk = len(board.sunk)
    return Text(f"ships afloat: {n - sunk} of {n}", style="bold")


def _lines(lines: list[Text]) -> Text:
    return Text("\n").join(lines)
