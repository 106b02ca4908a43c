"""What the terminal player sees: grids, the rule set and its house rules, refusals, game ends.

Everything here is pure (rules, boards and fleets in, :mod:`rich` renderables or strings out), so
that the terminal shells (:mod:`seabattle.cli.tui`) and the command line share one wording. The
glyphs are ASCII so that the grids read the same on a plain terminal as on a colour one; colour
only adds to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import Fleet, Placement
from seabattle.protocol.game import Board, EndReason, Game
from seabattle.protocol.grid import column_label
from seabattle.protocol.rules import PRESETS, RuleSet
from seabattle.protocol.verdict import Result

__all__ = [
    "LEGEND",
    "board_glyph",
    "describe_rules",
    "explain_end",
    "explain_refusal",
    "grid_lines",
    "house_badge",
    "house_rules",
    "placement_glyph",
    "render_end",
    "render_grids",
    "render_placement",
    "rules_panel",
    "ship_list",
]

Glyph = tuple[str, str]  # (character, rich style)

_WATER: Glyph = ("~", "dim cyan")
_SHIP: Glyph = ("O", "green")
_MARK: dict[Result | None, Glyph] = {
    Result.MISS: (".", "blue"),
    Result.HIT: ("X", "bold red"),
    Result.SUNK: ("#", "red"),
    None: ("?", "yellow"),  # fired within a salvo whose answer was a total only
}
_CROSSED: Glyph = ("-", "dim")
_START: Glyph = ("+", "yellow")  # the game screen: where the next ship may start

#: One line that says what every glyph means.
LEGEND = "~ water  O ship  X hit  # sunk  . miss  - crossed out (no ship can be there)  ? unknown"


def grid_lines(
    rules: RuleSet,
    glyph: Callable[[int], Glyph],
    title: str | Text,
    overlay: Callable[[int], str | None] | None = None,
) -> list[Text]:
    """One grid as lines: ``title``, the column labels, then each row's glyphs.

    ``overlay`` adds a style to some cells (the game screen's cursor and chosen cells), so that
    the glyph underneath still reads.
    """
    header = "    " + " ".join(column_label(c) for c in range(rules.cols))
    head = title if isinstance(title, Text) else Text(title, style="bold")
    lines = [head, Text(header)]
    for r in range(rules.rows):
        line = Text(f"{r + 1:>3} ")
        # One span per run of cells that look alike, the blank after a cell in its style: a
        # terminal is sent one style change per run rather than two per cell.
        run, run_style = "", ""
        for c in range(rules.cols):
            i = r * rules.cols + c
            ch, style = glyph(i)
            extra = overlay(i) if overlay is not None else None
            if extra:
                line.append(run, style=run_style)
                line.append(ch, style=f"{style} {extra}")
                run, run_style = " ", style
            elif style == run_style:
                run += ch + " "
            else:
                line.append(run, style=run_style)
                run, run_style = ch + " ", style
        line.append(run, style=run_style)
        lines.append(line)
    return lines


#: The old private name, which ``show`` still imports.
_grid = grid_lines


def board_glyph(board: Board, own: list[int] | None) -> Callable[[int], Glyph]:
    """What each cell of ``board`` shows: shots and their results, crossed-out cells, and the
    ships of ``own`` (an occupancy list: ours, or a revealed fleet) under them."""
    # A sunk ship is drawn whole where its cells are known: shown by the rules, or ours/revealed.
    cols = board.rules.cols
    sunk = {c.index(cols) for cells in board.sunk.values() if cells for c in cells}
    if own is not None:
        sunk.update(i for i, o in enumerate(own) if o and o - 1 in board.sunk)

    def glyph(i: int) -> Glyph:
        if i in board.fired:
            return _MARK[Result.SUNK] if i in sunk else _MARK[board.fired[i]]
        if i in board.crossed:
            return _CROSSED
        if own is not None and own[i]:
            return _SHIP
        return _WATER

    return glyph


def _side_by_side(left: list[Text], right: list[Text], width: int | None) -> Text:
    """Two grids beside each other, or one above the other when ``width`` is too narrow."""
    lw = max(len(t.plain) for t in left)
    out = Text()
    if width is not None and lw + 3 + max(len(t.plain) for t in right) > width:
        for line in [*left, Text(""), *right]:
            out.append_text(line)
            out.append("\n")
        return out
    for a, b in zip(left, right, strict=True):
        out.append_text(a)
        out.append(" " * (lw - len(a.plain) + 3))
        out.append_text(b)
        out.append("\n")
    return out


def render_grids(
    game: Game,
    seat: int,
    fleet: Fleet | None,
    their_fleet: Fleet | None = None,
    width: int | None = None,
) -> Text:
    """Our grid (our fleet and the shots at it) beside the target grid (our shots at theirs).

    ``their_fleet`` (known once revealed) is drawn under our shots on the target grid.
    """
    rules = game.rules
    own = fleet.occupancy(rules) if fleet is not None else None
    theirs = their_fleet.occupancy(rules) if their_fleet is not None else None
    left = grid_lines(rules, board_glyph(game.boards[seat], own), "your fleet")
    target = "their fleet" if their_fleet is not None else "target"
    right = grid_lines(rules, board_glyph(game.boards[1 - seat], theirs), target)
    return _side_by_side(left, right, width)


def render_placement(
    rules: RuleSet, placed: Mapping[int, Placement], next_ship: int | None
) -> Text:
    """The grid being placed on, and the ship list: where each ship lies, and which is next."""
    grid = grid_lines(rules, placement_glyph(rules, placed), "your fleet")
    ships = ship_list(rules, placed, next_ship)
    while len(ships) < len(grid):
        ships.append(Text(""))
    while len(grid) < len(ships):
        grid.append(Text(""))
    return _side_by_side(grid, ships, None)


def placement_glyph(
    rules: RuleSet,
    placed: Mapping[int, Placement],
    starts: AbstractSet[int] = frozenset(),
    preview: Mapping[int, bool] | None = None,
) -> Callable[[int], Glyph]:
    """The grid being placed on: the ships down, ``starts`` (cells the next ship may start on,
    004's marks) and ``preview`` (the next ship where the cursor is: cell to whether it fits)."""
    occ = [0] * rules.cells
    for k, p in placed.items():
        for c in p.cells(rules.fleet[k].length):
            if c.on(rules.rows, rules.cols):
                occ[c.index(rules.cols)] = k + 1

    def glyph(i: int) -> Glyph:
        if preview is not None and i in preview:
            return ("o", "bold green") if preview[i] else ("o", "bold red")
        if occ[i]:
            return _SHIP
        return _START if i in starts else _WATER

    return glyph


def ship_list(rules: RuleSet, placed: Mapping[int, Placement], next_ship: int | None) -> list[Text]:
    """The fleet as lines: where each placed ship lies, and which one is asked for next."""
    ships = [Text("ships", style="bold"), Text("")]
    for k, spec in enumerate(rules.fleet):
        at = placed.get(k)
        line = Text(f"{spec.name} ({spec.length})".ljust(20))
        if at is not None:
            way = "" if spec.length == 1 else " down" if at.vertical else " across"
            line.append(f"{at.cells(1)[0].label()}{way}", style="green")
        elif k == next_ship:
            line.append("<- next", style="bold yellow")
        else:
            line.append("-", style="dim")
        ships.append(line)
    return ships


# ================================================================================================
# Rules
# ================================================================================================


def describe_rules(r: RuleSet) -> list[tuple[str, str]]:
    """Every option of ``r`` as (what, value) lines for people."""
    fleet = ", ".join(f"{s.name} ({s.length})" for s in r.fleet)
    shots = r.shots.value
    if r.is_salvo:
        size = f"{r.salvo_size} cells" if shots == "salvo-fixed" else "one per ship afloat"
        shots += f" ({size}, reported {r.salvo_report.value})"
    ck = r.clocks
    clocks = ", ".join(
        f"{k} {v}s" for k, v in (("setup", ck.setup), ("shot", ck.shot)) if v is not None
    )
    return [
        ("grid", f"{r.rows} x {r.cols}"),
        ("fleet", f"{fleet}  = {r.fleet_cells} cells"),
        ("ships may touch", "yes" if r.touching else "no (corners included)"),
        ("placed in order", "yes" if r.ordered_placement else "no"),
        ("shots per turn", shots),
        ("a hit shoots again", "yes" if r.hit_again else "no"),
        ("a sinking is", r.sunk.value),
        ("repeated call", r.repeat.value),
        ("crossed-out cells", "yes" if r.crossed_out else "no"),
        ("radar", f"once, {r.radar_size}x{r.radar_size}" if r.radar else "no"),
        ("team size", str(r.team_size)),
        ("first player", r.first_player.value),
        ("match", f"{r.match.kind.value}, {r.match.games} game(s)"),
        ("clocks", clocks or "none"),
    ]


def _base_preset(r: RuleSet) -> RuleSet | None:
    base = r.name.removesuffix("+custom")
    return PRESETS.get(base) if base != r.name or r.name in PRESETS else None


def house_rules(r: RuleSet) -> list[str]:
    """The options where ``r`` departs from the preset it is named after, as ``what: value``.

    A rule set built as ``{"preset": "classic", "radar": true}`` is called ``classic+custom``; its
    house rules are what the players agreed on top of classic, and both must see them.
    """
    base = _base_preset(r)
    if base is None or base == r:
        return []
    mine, theirs = dict(describe_rules(r)), dict(describe_rules(base))
    return [f"{k}: {v}" for k, v in mine.items() if theirs.get(k) != v]


def rules_panel(r: RuleSet, *, peer: bool = False) -> RenderableType:
    """The rule set as a table, the house rules under it, and 003's badge when the rules ask."""
    base = _base_preset(r)
    title = f"Rules: {base.name} with house rules" if base and base != r else f"Rules: {r.name}"
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("option", style="bold")
    table.add_column("value")
    for k, v in describe_rules(r):
        if k == "clocks" and peer and v != "none":
            v += " (not enforced in peer play: there is no referee)"
        table.add_row(k, v)
    parts: list[RenderableType] = [table]
    extra = house_rules(r)
    if extra:
        parts.append(Text("house rules: " + "; ".join(extra), style="yellow"))
    badge = house_badge(r)
    if badge is not None:
        parts.append(badge)
    return Group(*parts)


def house_badge(r: RuleSet) -> Text | None:
    """003's badge: "a hit shoots again", shown to both players while they play, whenever the
    rules say so (a house rule where the preset says otherwise, as on 003's six-ship)."""
    if not r.hit_again:
        return None
    base = _base_preset(r)
    house = r.hit_again_shown or base is None or not base.hit_again
    label = " HOUSE RULE: a hit shoots again " if house else " a hit shoots again "
    return Text(label, style="bold black on yellow")


# ================================================================================================
# Refusals and game ends
# ================================================================================================

_REFUSALS: dict[int, str] = {
    ErrorCode.NOT_YOUR_TURN: "it is not your turn",
    ErrorCode.OFF_BOARD: "that is not a cell of this board",
    ErrorCode.ALREADY_FIRED: "you have fired at that cell already; call another",
    ErrorCode.CROSSED_OUT: "that cell is crossed out: no ship can be there",
    ErrorCode.WRONG_SALVO_SIZE: "this turn calls another number of cells",
    ErrorCode.DUPLICATE_IN_SALVO: "a salvo names each cell once",
    ErrorCode.RADAR_USED: "the radar is used once per game, and it is used",
    ErrorCode.RADAR_NOT_ALLOWED: "these rules have no radar",
    ErrorCode.NOT_CALLER: "another member of your team calls this turn",
    ErrorCode.ILLEGAL_FLEET: "the fleet breaks the rules; place it again",
    ErrorCode.WRONG_PHASE: "that is not possible at this point of the game",
    ErrorCode.ALREADY_COMMITTED: "your fleet is placed already",
    ErrorCode.GAME_OVER: "the game is over",
}


def explain_refusal(code: int, detail: str) -> str:
    """One line for people: why a move was refused, then the referee's own words."""
    why = _REFUSALS.get(code)
    if why is None:
        try:
            why = ErrorCode(code).slug.replace("_", " ")
        except ValueError:
            why = f"error {code}"
    return f"refused: {why}" + (f" ({detail})" if detail else "")


_ENDS: dict[str, str] = {
    EndReason.FLEET_SUNK: "{loser} fleet was sunk",
    EndReason.SETUP_TIMEOUT: "{loser_s} did not place a fleet in time",
    EndReason.NOBODY_PLACED: "neither fleet was placed in time",
    EndReason.SHOT_TIMEOUTS: "{loser_s} let too many shot clocks run out in a row",
    EndReason.NO_ANSWER: "{loser_s} did not answer a shot in time",
    EndReason.RESIGNED: "{loser_s} resigned",
    EndReason.ABANDONED: "{loser_s} left and did not come back in time",
    EndReason.FALSE_PROOF: "{loser} answer did not match the fleet committed to (a lie, proved)",
    EndReason.FALSE_VERDICT: "{loser} reveal shows an answer to have been false",
    EndReason.ILLEGAL_FLEET: "{loser} fleet breaks the rules",
    EndReason.BAD_REVEAL: "{loser} revealed fleet is not the one committed to",
    EndReason.NO_REVEAL: "{loser_s} did not reveal the fleet",
    EndReason.BOTH_AT_FAULT: "both sides were at fault",
}


def explain_end(outcome: Mapping[str, Any], seat: int | None) -> str:
    """``"you won: your opponent's fleet was sunk"`` and the like, from an outcome map.

    ``seat`` is ours (``None`` for a spectator, who is told seat numbers instead).
    """
    winner = outcome.get("winner")
    reason = str(outcome.get("reason", ""))
    if winner is None:
        head = "a draw"
        loser: int | None = None
    else:
        loser = 1 - int(winner)
        head = f"seat {winner} won" if seat is None else "you won" if winner == seat else "you lost"
    if loser is None:
        who, whose = "nobody", "nobody's"
    elif seat is None:
        who, whose = f"seat {loser}", f"seat {loser}'s"
    elif loser == seat:
        who, whose = "you", "your"
    else:
        who, whose = "your opponent", "your opponent's"
    text = _ENDS.get(reason, reason.replace("_", " ") or "the game ended")
    return f"{head}: " + text.format(loser=whose, loser_s=who)


def render_end(
    number: int,
    game: Game | None,
    seat: int,
    outcome: Mapping[str, Any],
    fleet: Fleet | None,
    their_fleet: Fleet | None,
    width: int | None = None,
) -> RenderableType:
    """The end of a game: who won and why, then both fleets with every shot on them."""
    head = Text(f"game {number} over: ", style="bold")
    head.append(explain_end(outcome, seat))
    detail = outcome.get("detail")
    parts: list[RenderableType] = [head]
    if detail:
        parts.append(Text(f"  ({detail})", style="dim"))
    parts.append(Text(f"  reason: {outcome.get('reason')}", style="dim"))
    if game is not None:
        parts.append(render_grids(game, seat, fleet, their_fleet, width))
        if their_fleet is None:
            parts.append(Text("their fleet was not revealed in this game", style="dim"))
        parts.append(Text(LEGEND, style="dim"))
    return Group(*parts)
