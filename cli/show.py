"""``seabattle show``: a signed match record replayed move by move, in the terminal or as a page.

Theory of operation. :func:`replay_record` first judges the record with
:func:`~seabattle.protocol.record.verify_bytes` (its encoding, signatures and the full replay; the
decoded map alone with :func:`~seabattle.protocol.record.verify_record`), then drives the
game engine itself through the transcript once more, one entry at a time, to see the boards after
every move: the same :class:`~seabattle.protocol.match.Match`, :func:`~seabattle.protocol.inputs.
input_from_entry` and :meth:`~seabattle.protocol.game.Game.feed` the verifier uses, so the boards
shown are the game's own and no second interpreter of the rules exists. Each accepted entry that
says something becomes a :class:`Step`, worded from the events the game answered it with.

A record is published after the match, so its reveals are public: both fleets are drawn from the
start of each game (a seat that never revealed, having resigned say, is drawn as unknown). Every
verdict's proof is named: ``verified`` (its openings matched the commitment when the referee got
it), ``deferred`` (what no opening can show, a salvo total, a radar answer, a named sinking: the
reveal checks it) or ``false`` (the proof or the reveal caught a lie).
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, assert_never

import click
from seabattle.protocol.commit import Reveal
from seabattle.protocol.errors import ProtocolError
from seabattle.protocol.game import EndReason, Game, Phase
from seabattle.protocol.inputs import (
    Committed,
    FiringBegan,
    GameEvent,
    GameOver,
    RevealDue,
    Revealed,
    ShotCalled,
    ShotLost,
    VerdictGiven,
    input_from_entry,
)
from seabattle.protocol.match import Match
from seabattle.protocol.record import RecordError, load_record, verify_bytes, verify_record
from seabattle.protocol.rules import BadRules, RuleSet, rules_from_dict
from seabattle.protocol.verdict import Result, Shot, Verdict

from .common import console

__all__ = ["GameReplay", "Replay", "ShowError", "Step", "replay_record", "show"]

_LIES = (EndReason.FALSE_PROOF, EndReason.FALSE_VERDICT, EndReason.BAD_REVEAL)


class ShowError(Exception):
    """A record that cannot be replayed at all (not a record, or rules that cannot be built)."""


@dataclass(slots=True)
class Step:
    """One move of a game as shown: what happened, on which grid, and how it was proved."""

    text: str
    seat: int | None = None  #: who moved (``None``: the clock, or the game itself)
    target: int | None = None  #: the seat whose grid ``cells`` are on
    cells: list[int] = field(default_factory=list)  #: cell indices the move touched
    proof: str = ""  #: ``verified``, ``deferred``, ``false`` or ``""`` (nothing to prove)
    proof_text: str = ""
    boards: list[dict[str, Any]] = field(default_factory=list)  #: both grids after the move

    def to_dict(self) -> dict[str, Any]:
        """Plain form (the page's data and ``--json``)."""
        return {
            "text": self.text,
            "seat": self.seat,
            "target": self.target,
            "cells": self.cells,
            "proof": self.proof,
            "proof_text": self.proof_text,
            "boards": self.boards,
        }


@dataclass(slots=True)
class GameReplay:
    """One game of the record: the revealed fleets and every step."""

    number: int
    fleets: list[list[int] | None]  #: per seat, the occupancy (ship index + 1 or 0) if revealed
    steps: list[Step] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    stopped: str = ""  #: why the replay of this game stopped early, if it did

    def to_dict(self) -> dict[str, Any]:
        """Plain form."""
        return {
            "number": self.number,
            "fleets": self.fleets,
            "steps": [s.to_dict() for s in self.steps],
            "outcome": self.outcome,
            "stopped": self.stopped,
        }


@dataclass(slots=True)
class Replay:
    """A whole record, replayed: who played, the verifier's verdict, and every game."""

    match: str
    rules: RuleSet
    players: list[str]
    referee: str | None
    ok: bool
    reason: str
    signatures: list[dict[str, Any]]
    result: dict[str, Any]
    games: list[GameReplay] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (JSON-ready: keys and ids in hex)."""
        return {
            "match": self.match,
            "rules": self.rules.to_dict(),
            "players": self.players,
            "referee": self.referee,
            "ok": self.ok,
            "reason": self.reason,
            "signatures": self.signatures,
            "result": self.result,
            "games": [g.to_dict() for g in self.games],
        }


def load(path: str) -> dict[str, Any]:
    """The signed record in file ``path``; raises :class:`ShowError` naming what is wrong."""
    return _decode(path, _read(path))


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ShowError(f"{path}: {e.strerror or e}") from None


def _decode(path: str, data: bytes) -> dict[str, Any]:
    try:
        return load_record(data)
    except RecordError as e:
        from .records import damaged

        raise ShowError(f"{path}: {damaged(data) or e.detail}") from None


def replay_record(signed: Any, *, data: bytes | None = None) -> Replay:
    """Verify ``signed`` and replay it step by step (see the module docstring).

    ``data``: the bytes ``signed`` was decoded from, when it came as bytes (a file), which are
    then judged too: bytes that are not its canonical encoding are malformed (spec 11.3).
    A record that fails verification is still replayed as far as its transcript goes, with the
    verifier's reason; one that has no shape of a record raises :class:`ShowError`.
    """
    report = verify_record(signed) if data is None else verify_bytes(data)
    if report.reason.startswith("malformed"):
        raise ShowError(report.reason)
    rec = signed["record"]
    try:
        rules = rules_from_dict(rec["rules"])
    except BadRules as e:
        raise ShowError(f"bad_rules: {e.detail}") from None
    referee = rec["referee"]
    out = Replay(
        match=rec["match"].hex(),
        rules=rules,
        players=[k.hex() for k in rec["players"]],
        referee=referee.hex() if referee is not None else None,
        ok=report.ok,
        reason=report.reason,
        signatures=report.signatures,
        result=rec["result"],
    )
    m = Match(rules, rec["match"], compact=False)
    for gd in rec["games"]:
        try:
            g = m.new_game()
        except ProtocolError as e:
            out.games.append(GameReplay(len(out.games) + 1, [None, None], stopped=e.detail))
            break
        replayed = _replay_game(g, gd["transcript"])
        out.games.append(replayed)
        if g.phase is not Phase.OVER:
            break  # as the verifier: nothing after an unfinished game can be replayed
        m.game_over()
    return out


def _replay_game(g: Game, transcript: list[Any]) -> GameReplay:
    rules = g.rules
    out = GameReplay(g.number, _fleets(transcript, rules))
    for j, entry in enumerate(transcript, 1):
        pending = g.pending
        try:
            events = g.feed(input_from_entry(entry, rules))
        except ProtocolError as e:
            out.stopped = f"entry {j}: {e.detail or e}"
            break
        except Exception as e:  # an untrusted record must never crash the viewer
            out.stopped = f"entry {j}: {type(e).__name__}: {e}"
            break
        step = _step(rules, events, pending)
        if step is not None:
            step.boards = [g.boards[0].to_dict(), g.boards[1].to_dict()]
            out.steps.append(step)
    out.outcome = g.outcome.to_dict() if g.outcome else None
    return out


def _fleets(transcript: list[Any], rules: RuleSet) -> list[list[int] | None]:
    """Each seat's revealed fleet, read from the reveal entries (the game checks them later)."""
    fleets: list[list[int] | None] = [None, None]
    for e in transcript:
        if isinstance(e, dict) and e.get("in") == "reveal" and e.get("seat") in (0, 1):
            # Off the board or malformed: the replay says why when it gets there.
            with contextlib.suppress(ProtocolError, IndexError, TypeError, ValueError):
                fleets[e["seat"]] = Reveal.from_dict(e["reveal"]).fleet.occupancy(rules)
    return fleets


def _step(rules: RuleSet, events: list[GameEvent], pending: Shot | None) -> Step | None:
    """The step an entry's events make; ``None`` for one with nothing to show (a called shot,
    whose verdict is the step)."""
    step: Step | None = None
    lines: list[str] = []
    for ev in events:
        match ev:
            case Committed(seat, root):
                step = step or Step("", seat)
                lines.append(f"seat {seat} commits to its fleet (root {root.hex()[:16]}...)")
            case FiringBegan(first):
                step = step or Step("")
                lines.append(f"seat {first} fires first")
            case ShotCalled():
                pass
            case VerdictGiven(shot, verdict, _):
                step = _verdict_step(rules, shot, verdict)
                lines.append(step.text)
            case ShotLost(seat, why, _):
                step = step or Step("", seat)
                lines.append(f"seat {seat} loses its turn ({why})")
            case RevealDue():
                step = step or Step("")
                lines.append("the last ship cell is hit: both fleets are to be revealed")
            case Revealed(seat, _, fault):
                step = step or Step("", seat)
                lines.append(f"seat {seat} reveals its fleet")
                if fault:
                    step.proof, step.proof_text = "false", fault
                else:
                    step.proof = "verified"
                    step.proof_text = (
                        "the fleet opens its commitment and every deferred claim holds"
                    )
            case GameOver(outcome):
                if step is None:
                    step = Step("")
                    if pending is not None and outcome.reason is EndReason.FALSE_PROOF:
                        # The answer that ended the game is the lie: it is the step.
                        step = Step(
                            f"seat {1 - pending.seat} answers shot {pending.n}",
                            1 - pending.seat,
                            1 - pending.seat,
                            [c.index(rules.cols) for c in pending.cells],
                        )
                        lines.append(step.text)
                if outcome.reason in _LIES and step.proof != "false":
                    step.proof, step.proof_text = "false", outcome.detail
                who = "a draw" if outcome.winner is None else f"seat {outcome.winner} wins"
                lines.append(f"game over: {who} ({outcome.reason.value})")
            case _:
                assert_never(ev)
    if step is not None:
        step.text = "; ".join(dict.fromkeys(lines))
    return step


def _verdict_step(rules: RuleSet, shot: Shot, v: Verdict) -> Step:
    cols = rules.cols
    labels = [c.label() for c in shot.cells]
    step = Step("", shot.seat, 1 - shot.seat, [c.index(cols) for c in shot.cells])
    who = f"seat {shot.seat}"
    if shot.radar:
        found = "ship cells in range" if v.found else "nothing in range"
        step.text = f"{who} scans by radar from {labels[0]}: {found}"
        step.proof, step.proof_text = "deferred", "a radar answer is checked at the reveal"
        return step
    if v.total is not None:
        step.text = f"{who} fires {', '.join(labels)}: {v.total} hit(s)"
        step.proof, step.proof_text = "deferred", "a salvo total is checked at the reveal"
        return step
    said = []
    deferred = False
    for label, res in zip(labels, v.results, strict=True):
        part = f"{label} {'hit' if res.result is not Result.MISS else 'miss'}"
        if res.sunk is not None:
            part += f", sinks the {rules.fleet[res.sunk.ship].name}"
            deferred = deferred or res.sunk.opening is None
        said.append(part)
    for claim in v.sunk:
        said.append(f"sinks the {rules.fleet[claim.ship].name}")
        deferred = deferred or claim.opening is None
    step.text = f"{who} fires {', '.join(said)}"
    step.proof = "verified"
    step.proof_text = "every cell opened against the commitment"
    if deferred:
        step.proof_text += "; which ship sank is checked at the reveal"
    return step


# -- the terminal ----------------------------------------------------------------------------------

_BADGE = {"verified": "[green]proof verified[/green]", "deferred": "[yellow]deferred[/yellow]"}


def _print_boards(rp: Replay, game: GameReplay, boards: list[dict[str, Any]]) -> None:
    from seabattle.cli.render import _side_by_side

    rules = rp.rules
    grids = [_text_grid(rules, boards[s], game.fleets[s], f"seat {s}") for s in (0, 1)]
    console.print(_side_by_side(grids[0], grids[1], console.width))


def _text_grid(rules: RuleSet, board: dict[str, Any], occ: list[int] | None, title: str) -> Any:
    from seabattle.cli.render import _CROSSED, _MARK, _WATER, _afloat_glyph, _grid, _sunk_glyph

    fired = {i: Result(r) if r else None for i, r in board["fired"]}
    # Each ship its letter, as on the game's grids (lower case once sunk), so that touching
    # ships read as two: where its cells are known, shown by the rules or by the revealed fleet.
    ship_at = {i: k for k, cells in board["sunk"] if cells for i in cells}
    sunk = set(ship_at)
    if occ is not None:
        ship_at.update((i, o - 1) for i, o in enumerate(occ) if o)
        gone = {k for k, _ in board["sunk"]}
        sunk.update(i for i, o in enumerate(occ) if o and o - 1 in gone)
    crossed = set(board["crossed"])

    def glyph(i: int) -> tuple[str, str]:
        if i in fired:
            if i not in sunk:
                return _MARK[fired[i]]
            k = ship_at.get(i)
            return _MARK[Result.SUNK] if k is None else _sunk_glyph(k)
        if i in crossed:
            return _CROSSED
        return _afloat_glyph(occ[i] - 1) if occ is not None and occ[i] else _WATER

    shown = "" if occ is not None else " (fleet not revealed)"
    return _grid(rules, glyph, title + shown)


def print_replay(rp: Replay, *, boards: bool = False) -> None:
    """Print ``rp`` move by move: the verdict, each game's fleets, every step and its proof."""
    from seabattle.cli.render import GAME_LEGEND

    verdict = "[green]verifies[/green]" if rp.ok else f"[red]does not verify[/red]: {rp.reason}"
    console.print(
        f"[bold]match {rp.match}[/bold] ({rp.rules.name}): the record {verdict}", soft_wrap=True
    )
    for s, key in enumerate(rp.players):
        console.print(f"  seat {s}: {key[:16]}...")
    signed = ", ".join(f"{s['role']} {'ok' if s['ok'] else 'BAD'}" for s in rp.signatures)
    console.print(f"  signatures: {signed or 'none'}", highlight=False)
    empty: dict[str, Any] = {"fired": [], "sunk": [], "crossed": []}
    for game in rp.games:
        console.print(f"\n[bold]game {game.number}[/bold]: the fleets as revealed")
        _print_boards(rp, game, [empty, empty])
        for n, step in enumerate(game.steps, 1):
            badge = _BADGE.get(step.proof, "[red]FALSE[/red]" if step.proof else "")
            why = f" ({step.proof_text})" if step.proof_text and step.proof != "verified" else ""
            console.print(f"{n:>4}. {step.text}  {badge}{why}", highlight=False, soft_wrap=True)
            if boards:
                _print_boards(rp, game, step.boards)
        if game.stopped:
            console.print(f"[red]the replay stopped at {game.stopped}[/red]", soft_wrap=True)
        if game.steps and not boards:
            _print_boards(rp, game, game.steps[-1].boards)
    console.print(f"\nresult: {json.dumps(rp.result)}", highlight=False, soft_wrap=True)
    console.print(GAME_LEGEND, style="dim", highlight=False, soft_wrap=True)


@click.command()
@click.argument("record", type=click.Path(dir_okay=False))
@click.option(
    "--html",
    "html_out",
    default=None,
    type=click.Path(dir_okay=False, writable=True),
    help="Write one self-contained HTML page that steps through the game to this file.",
)
@click.option("--boards", is_flag=True, help="Draw both boards after every move.")
@click.option("--json", "as_json", is_flag=True, help="The replay as JSON, every step's boards.")
def show(record: str, html_out: str | None, boards: bool, as_json: bool) -> None:
    """Replay RECORD move by move: both fleets, every shot, every proof's verdict.

    Exits 0 when the record verifies, 1 when it does not (it is still shown as far as it goes).
    """
    try:
        data = _read(record)
        rp = replay_record(_decode(record, data), data=data)
    except ShowError as e:
        # Nothing to show: an error, on stderr (stdout is the replay, or --json's).
        raise click.ClickException(str(e)) from None
    if html_out is not None:
        from .show_page import render_page

        try:
            Path(html_out).write_text(render_page(rp), encoding="utf-8")
        except OSError as e:
            raise click.ClickException(f"cannot write {html_out}: {e.strerror or e}") from None
        console.print(f"wrote {html_out}", highlight=False)
    elif as_json:
        click.echo(json.dumps(rp.to_dict(), indent=1))
    else:
        print_replay(rp, boards=boards)
    if not rp.ok:
        sys.exit(1)
