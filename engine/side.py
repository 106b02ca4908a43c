"""What one side knows during a game: its shots and their results, the opponent's shots at its
own fleet, whose turn it is. Fed with the pure seat's events; read by every engine kind (the
built-in strategies read :attr:`Side.view`, external engines get :meth:`Side.request`, the JSON
form of spec/engine.md section 4.4, and their answer is held to the rules by :meth:`Side.check`).

Pure: no I/O, no clock (the caller passes the time left), no randomness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seabattle.protocol.fleet import Fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.rules import RuleSet, SunkReport
from seabattle.protocol.seat_events import IncomingShot, MatchEvent, ShotResult, YourTurn
from seabattle.protocol.targeting import CellState, TargetView, feed_view, view_from_snapshot
from seabattle.protocol.verdict import SunkClaim, Verdict, radar_cells

__all__ = ["GRID_MARKS", "Side", "shot_json"]

#: How :meth:`Side.request`'s ``grid`` writes each state of a cell of the opponent's grid.
GRID_MARKS: dict[CellState, str] = {
    CellState.UNKNOWN: ".",
    CellState.MISS: "o",
    CellState.HIT: "x",
    CellState.SUNK: "#",
    CellState.CROSSED: "-",
    CellState.FIRED: "?",
}


def _labels(cells: Sequence[Cell]) -> list[str]:
    return [c.label() for c in cells]


def _claim_json(rules: RuleSet, claim: SunkClaim) -> dict[str, Any]:
    """A sinking as the rules show it: the ship's number, and its cells when shown whole."""
    cells = None
    if claim.opening is not None:
        cells = _labels(claim.opening.placement.cells(rules.fleet[claim.ship].length))
    return {"ship": claim.ship, "cells": cells}


def shot_json(
    rules: RuleSet,
    n: int | None,
    cells: Sequence[Cell],
    radar: bool,
    verdict: Verdict | None,
    crossed: Sequence[Cell] = (),
) -> dict[str, Any]:
    """One shot and its verdict in the engine protocol's form (spec/engine.md 4.5): no opening,
    no salt, only what the rules show."""
    results: list[str] = []
    total = found = None
    sunk: list[dict[str, Any]] = []
    if verdict is not None:
        results = [r.result.value for r in verdict.results]
        total, found = verdict.total, verdict.found
        sunk = [_claim_json(rules, r.sunk) for r in verdict.results if r.sunk is not None]
        sunk += [_claim_json(rules, s) for s in verdict.sunk]
    return {
        "n": n,
        "cells": _labels(cells),
        "radar": radar,
        "results": results,
        "total": total,
        "found": found,
        "sunk": sunk,
        "crossed": _labels(crossed),
    }


@dataclass
class Side:
    """One side of one game: ``seat`` playing ``rules`` with ``fleet`` (once placed)."""

    rules: RuleSet
    seat: int
    game: int = 1
    fleet: Fleet | None = None
    #: The opponent's grid as our verdicts showed it (what the strategies read).
    view: TargetView = field(init=False)
    #: Our shots and the opponent's at us, in order.
    shots: list[ShotResult] = field(default_factory=list)
    incoming: list[IncomingShot] = field(default_factory=list)
    #: The call we owe now (``None``: not our turn).
    turn: YourTurn | None = None
    #: Seconds left on the match's shot clock when the turn was asked (``None``: none runs).
    clock: float | None = None
    #: Cells of the opponent's grid we fired at (radar scans fire at none).
    fired: set[Cell] = field(default_factory=set)
    #: Cells of the opponent's grid the rules crossed out (8.7): calls there are refused.
    crossed: set[Cell] = field(default_factory=set)
    # Our shots, the opponent's and the ships we sank, in the engine protocol's form (the
    # properties below).
    _shots_json: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _incoming_json: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _sunk_json: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    # Shots not yet in the lists above: put in the engine protocol's form only when a request
    # is made (a built-in engine, which reads the view, never makes one).
    _unlisted: list[ShotResult | IncomingShot] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.view = TargetView(self.rules)

    def feed(self, ev: MatchEvent) -> None:
        """Take one of the seat's events for this game; others are ignored."""
        if isinstance(ev, YourTurn):
            self.turn = ev
        elif isinstance(ev, ShotResult):
            self.turn = None
            self.shots.append(ev)
            feed_view(self.view, self.rules, ev.cells, ev.radar, ev.verdict, ev.crossed)
            if not ev.radar:
                self.fired.update(ev.cells)
            self.crossed.update(ev.crossed)
            self._unlisted.append(ev)
        elif isinstance(ev, IncomingShot):
            self.incoming.append(ev)
            self._unlisted.append(ev)

    def _listed(self) -> None:
        """Put the shots taken since the last request in the engine protocol's form."""
        for ev in self._unlisted:
            if isinstance(ev, ShotResult):
                shot = shot_json(self.rules, ev.n, ev.cells, ev.radar, ev.verdict, ev.crossed)
                self._shots_json.append(shot)
                self._sunk_json.extend(shot["sunk"])
            else:
                self._incoming_json.append(
                    shot_json(self.rules, ev.n, ev.cells, ev.radar, ev.verdict)
                )
        self._unlisted.clear()

    @property
    def shots_json(self) -> list[dict[str, Any]]:
        """Our shots in the engine protocol's form; after a reconnect, what the snapshot shows
        (each fired cell a shot of its own, numbers unknown)."""
        self._listed()
        return self._shots_json

    @property
    def incoming_json(self) -> list[dict[str, Any]]:
        """The opponent's shots at us, in the engine protocol's form."""
        self._listed()
        return self._incoming_json

    @property
    def sunk_json(self) -> list[dict[str, Any]]:
        """Ships of the opponent's we sank, as the rules show them (``{"ship", "cells"}``)."""
        self._listed()
        return self._sunk_json

    def resume(self, view: dict[str, Any]) -> None:
        """Pick up again from a snapshot's view (spec 6.6) after a reconnect: whatever happened
        while we were away is in its boards only, so the shots are rebuilt from them. The
        sinkings this side saw itself keep what they showed (the snapshot names a ship sunk,
        not the cell that sank it)."""
        boards = view.get("boards")
        if not isinstance(boards, list) or len(boards) != 2:
            return
        rules, cols = self.rules, self.rules.cols
        theirs, ours = boards[1 - self.seat], boards[self.seat]
        seen = [
            (c, r.sunk.ship)
            for ev in self.shots
            for c, r in zip(ev.cells, ev.verdict.results, strict=False)
            if r.sunk is not None and r.sunk.opening is None
        ]
        self.view = view_from_snapshot(rules, theirs)
        for c, ship in seen:
            self.view.sunk(c, ship)
        self.turn = None

        def cell(i: Any) -> Cell | None:
            ok = isinstance(i, int) and not isinstance(i, bool) and 0 <= i < rules.cells
            return Cell(*divmod(i, cols)) if ok else None

        def fired(board: Any) -> list[tuple[Cell, str | None]]:
            out = []
            for entry in board.get("fired", ()) if isinstance(board, dict) else ():
                c = cell(entry[0]) if isinstance(entry, list) and len(entry) == 2 else None
                if c is not None:
                    out.append((c, entry[1] if entry[1] in ("miss", "hit", "sunk") else None))
            return out

        def one(c: Cell, result: str | None) -> dict[str, Any]:
            return {
                "n": None,
                "cells": [c.label()],
                "radar": False,
                "results": [] if result is None else [result],
                "total": None,
                "found": None,
                "sunk": [],
                "crossed": [],
            }

        mine = fired(theirs)
        self.fired = {c for c, _ in mine}
        self._unlisted.clear()  # the snapshot shows them all
        self._shots_json = [one(c, r) for c, r in mine]
        self._incoming_json = [one(c, r) for c, r in fired(ours)]
        self.crossed = set()
        for i in theirs.get("crossed", ()) if isinstance(theirs, dict) else ():
            c2 = cell(i)
            if c2 is not None:
                self.crossed.add(c2)
        self._sunk_json = []
        for entry in theirs.get("sunk", ()) if isinstance(theirs, dict) else ():
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)):
                continue
            shown = entry[1]
            cells = None
            if isinstance(shown, list):
                cells = [c.label() for c in (cell(i) for i in shown) if c is not None]
            self._sunk_json.append({"ship": entry[0], "cells": cells})

    # -- what an external engine is told -----------------------------------------------------

    def grid(self) -> list[str]:
        """The opponent's grid as we know it, one string a row (:data:`GRID_MARKS`)."""
        rules, view = self.rules, self.view
        return [
            "".join(GRID_MARKS[view.state(Cell(r, c))] for c in range(rules.cols))
            for r in range(rules.rows)
        ]

    def afloat(self) -> list[int]:
        """The opponent's ships not known sunk, by number in the fleet (when sinkings are
        silent, a conservative set: only ships found whole are left out)."""
        if self.rules.sunk is not SunkReport.SILENT:
            gone = {int(s["ship"]) for s in self.sunk_json}
            return [k for k in range(len(self.rules.fleet)) if k not in gone]
        index = {s.name: k for k, s in enumerate(self.rules.fleet)}
        return sorted(index[s.name] for s in self.view.remaining_ships())

    def request(self, *, move_time: float, clock: float | None = None) -> dict[str, Any]:
        """The ``move`` request (spec/engine.md 4.4): everything this side knows, so that an
        engine with no memory of its own can answer. ``move_time``: the seconds the engine has
        to answer; ``clock``: the seconds left on the match's shot clock (``None``: none runs)."""
        turn = self.turn
        count, radar = (turn.count, turn.radar) if turn is not None else (0, False)
        cols = self.rules.cols
        return {
            "type": "move",
            "game": self.game,
            "seat": self.seat,
            "rules": self.rules.to_dict(),
            "count": count,
            "radar": radar,
            "grid": self.grid(),
            "shots": self.shots_json,
            "sunk": sorted(self.sunk_json, key=lambda s: int(s["ship"])),
            "afloat": self.afloat(),
            "crossed": [c.label() for c in sorted(self.crossed, key=lambda c: c.index(cols))],
            "incoming": self.incoming_json,
            "fleet": None if self.fleet is None else self.fleet.to_list(),
            "time": {"move": move_time, "clock": clock},
        }

    def illegal(self, cells: Sequence[Cell], radar: Cell | None) -> str | None:
        """Why the call is not one the rules allow now (``None``: it is): the wrong number of
        cells, a cell off the grid, called twice, fired at already or crossed out, or a radar
        scan the turn does not allow or whose area leaves the grid."""
        rules, turn = self.rules, self.turn
        if turn is None:
            return "it is not this side's turn"
        if radar is not None:
            if not turn.radar:
                return "no radar scan is allowed now"
            if not all(c.on(rules.rows, rules.cols) for c in radar_cells(rules, radar)):
                return f"the radar area at {radar.label()} leaves the grid"
            return None
        if len(cells) != turn.count:
            return f"this shot calls {turn.count} cell(s), got {len(cells)}"
        if len(set(cells)) != len(cells):
            return "a salvo calls different cells"
        for c in cells:
            if not c.on(rules.rows, rules.cols):
                return f"{c.label()} is off the {rules.rows} x {rules.cols} grid"
            if c in self.fired:
                return f"{c.label()} was fired at already"
            if c in self.crossed:
                return f"{c.label()} is crossed out"
        return None

