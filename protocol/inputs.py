"""The typed inputs of a game and the typed events it answers with.

Theory of operation (``spec/protocol.md`` section "The game"). A :class:`~.game.Game` changes
only when it is fed one of the :data:`GameInput` values through :meth:`~.game.Game.feed`, and
every input it accepts is appended to its transcript in the input's *entry* form
(:meth:`Commit.entry` and the like: the map a record carries). :func:`input_from_entry` is the
inverse, so that replaying a transcript is "feed the same inputs to a fresh game": the record
verifier, a peer's mirror and the referee's journal all do exactly that.

Each accepted input returns the :data:`GameEvent` values that follow from it, in order. Consumers
dispatch on them with ``match`` and end with :func:`typing.assert_never`, so that a new event is
a type error in every consumer that forgets it.

All values are frozen and slotted: a live game makes one input and one or two events per shot.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from .commit import Commitment, Reveal, slot_setters
from .errors import ErrorCode, RemoteProtocolError
from .grid import Cell, parse_cell
from .rules import RuleSet
from .state import Deadline, Outcome
from .verdict import Shot, Verdict

__all__ = [
    "Abandon",
    "Answer",
    "Commit",
    "Committed",
    "Expire",
    "Fire",
    "FiringBegan",
    "GameEvent",
    "GameInput",
    "GameOver",
    "Input",
    "Radar",
    "Resign",
    "RevealDue",
    "RevealFleet",
    "Revealed",
    "SetFirst",
    "ShotCalled",
    "ShotLost",
    "VerdictGiven",
    "input_from_entry",
]


class Input(StrEnum):
    """The name of each kind of game input: the ``in`` of its transcript entry."""

    COMMIT = "commit"
    SET_FIRST = "set_first"
    FIRE = "fire"
    RADAR = "radar"
    ANSWER = "answer"
    EXPIRE = "expire"
    RESIGN = "resign"
    ABANDON = "abandon"
    REVEAL = "reveal"


# Labels of called cells: a grid has few cells, and every shot logs its own.
_label = functools.lru_cache(maxsize=4096)(Cell.label)
# Parsing a label is most of the cost of replaying a shot; a grid has few labels.
_cell = functools.lru_cache(maxsize=4096)(parse_cell)


@functools.lru_cache(maxsize=64)
def canonical_cells(rows: int, cols: int) -> dict[str, Cell]:
    """Label -> cell for every cell of the grid, by its canonical label (:meth:`Cell.label`)."""
    return {c.label(): c for c in (Cell(r, k) for r in range(rows) for k in range(cols))}


# -- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Commit:
    """``seat`` commits to its fleet."""

    NAME: ClassVar[Input] = Input.COMMIT
    seat: int
    commitment: Commitment
    #: the player's seat signature (spec 10.10); ``None`` only in version-1 records
    sig: bytes | None = None

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        e: dict[str, Any] = {
            "in": "commit",
            "seat": self.seat,
            "commitment": self.commitment.to_dict(),
        }
        if self.sig is not None:
            e["sig"] = self.sig
        return e


@dataclass(frozen=True, slots=True)
class SetFirst:
    """``seat`` fires first (the lot's result, or the match's rule)."""

    NAME: ClassVar[Input] = Input.SET_FIRST
    seat: int

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "set_first", "seat": self.seat}


@dataclass(frozen=True, slots=True)
class Fire:
    """``seat`` (team member ``member``) calls ``cells``: one cell, or a whole salvo at once.

    ``wire`` is the transcript entry this input was parsed from by :func:`input_from_entry`, when
    that entry is exactly the one :meth:`entry` builds: the game then logs it rather than a copy.
    It is left out of equality, as :attr:`Answer.wire` is.
    """

    NAME: ClassVar[Input] = Input.FIRE
    seat: int
    member: int
    cells: tuple[Cell, ...]
    wire: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        if self.wire is not None:
            return self.wire
        return {
            "in": "fire",
            "seat": self.seat,
            "member": self.member,
            "cells": list(map(_label, self.cells)),
        }


@dataclass(frozen=True, slots=True)
class Radar:
    """``seat`` scans the radar area whose top-left cell is ``at`` instead of firing."""

    NAME: ClassVar[Input] = Input.RADAR
    seat: int
    member: int
    at: Cell

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "radar", "seat": self.seat, "member": self.member, "at": self.at.label()}


@dataclass(frozen=True, slots=True)
class Answer:
    """The defender ``seat`` answers the pending shot with ``verdict``.

    ``wire`` is the map ``verdict`` was parsed from with :meth:`Verdict.from_dict`, when the
    caller has it: the transcript then logs that map instead of building ``verdict.to_dict()``
    again (the two are equal for every map ``from_dict`` accepts from a msgpack decoder). It is
    left out of equality: two answers with the same verdict are the same input.
    """

    NAME: ClassVar[Input] = Input.ANSWER
    seat: int
    verdict: Verdict
    wire: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        v = self.verdict.to_dict() if self.wire is None else self.wire
        return {"in": "answer", "seat": self.seat, "verdict": v}


@dataclass(frozen=True, slots=True)
class Expire:
    """The clock ``clock`` ran out."""

    NAME: ClassVar[Input] = Input.EXPIRE
    clock: Deadline

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "expire", "clock": self.clock.value}


@dataclass(frozen=True, slots=True)
class Resign:
    """``seat`` gives up the game."""

    NAME: ClassVar[Input] = Input.RESIGN
    seat: int

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "resign", "seat": self.seat}


@dataclass(frozen=True, slots=True)
class Abandon:
    """``seat`` stayed away beyond the disconnect grace period."""

    NAME: ClassVar[Input] = Input.ABANDON
    seat: int

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "abandon", "seat": self.seat}


@dataclass(frozen=True, slots=True)
class RevealFleet:
    """``seat`` reveals its fleet and secret."""

    NAME: ClassVar[Input] = Input.REVEAL
    seat: int
    reveal: Reveal

    def entry(self) -> dict[str, Any]:
        """The transcript entry."""
        return {"in": "reveal", "seat": self.seat, "reveal": self.reveal.to_dict()}


GameInput = Commit | SetFirst | Fire | Radar | Answer | Expire | Resign | Abandon | RevealFleet
"""Every input a game accepts."""


# -- parsing a transcript entry --------------------------------------------------------------------

_ENTRY_KEYS: dict[str, frozenset[str]] = {
    "commit": frozenset({"in", "seat", "commitment"}),
    "set_first": frozenset({"in", "seat"}),
    "fire": frozenset({"in", "seat", "member", "cells"}),
    "radar": frozenset({"in", "seat", "member", "at"}),
    "answer": frozenset({"in", "seat", "verdict"}),
    "expire": frozenset({"in", "clock"}),
    "resign": frozenset({"in", "seat"}),
    "abandon": frozenset({"in", "seat"}),
    "reveal": frozenset({"in", "seat", "reveal"}),
}
#: A commit entry with the player's seat signature (version-2 records; version 1 had none).
_SIGNED_COMMIT = _ENTRY_KEYS["commit"] | {"sig"}


def _bad(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.BAD_MESSAGE, detail)


def _int(e: dict[str, Any], key: str) -> int:
    v = e[key]
    if type(v) is not int:
        raise _bad(f"{key} is an integer")
    return v


def _shows_ship(v: Verdict) -> bool:
    # Loops rather than any() over generators: this runs for every verdict replayed.
    for claim in v.sunk:
        if claim.opening is not None:
            return True
    for res in v.results:
        sunk = res.sunk
        if sunk is not None and sunk.opening is not None:
            return True
    return False


def input_from_entry(e: Any, rules: RuleSet) -> GameInput:
    """The input a transcript entry records; raises :class:`RemoteProtocolError` if malformed.

    Feeding the result to a game logs an entry equal to ``e`` whenever ``e`` is in the form the
    game logs; a record verifier compares the two to refuse any other form.
    """
    kind = e.get("in") if isinstance(e, dict) else None
    keys = _ENTRY_KEYS.get(kind) if type(kind) is str else None
    if keys is None:
        raise _bad(f"unknown input {kind!r}")
    if e.keys() != keys and not (kind == "commit" and e.keys() == _SIGNED_COMMIT):
        raise _bad(f"a {kind} entry is {{{', '.join(sorted(keys))}}}")
    # The two entries of every shot first: they are most of any transcript, and a replay's cost.
    if kind == "fire":
        cells = e["cells"]
        seat, member = e["seat"], e["member"]
        if type(seat) is not int or type(member) is not int:
            raise _bad("seat and member are integers")
        if type(cells) is list and len(cells) == 1 and type(cells[0]) is str:
            # A label in its canonical form (what every client sends) is the one entry() writes:
            # the entry itself is then what the game logs.
            cell = canonical_cells(rules.rows, rules.cols).get(cells[0])
            if cell is not None:
                return new_fire(seat, member, (cell,), e)
            return new_fire(seat, member, (_cell(cells[0], rules.rows, rules.cols),))
        if type(cells) is not list or not all(type(c) is str for c in cells):
            raise _bad("cells is a list of cell labels")
        return new_fire(seat, member, tuple([_cell(c, rules.rows, rules.cols) for c in cells]))
    if kind == "answer":
        wire = e["verdict"]
        verdict = Verdict.from_dict(wire)
        # The game logs the recorded map itself rather than verdict.to_dict(), which would equal
        # it: from_dict accepts exact types only and to_dict gives them back. The exception is a
        # shown ship, whose placement from_dict also accepts as a tuple (to_dict gives a list):
        # those verdicts are rebuilt, so that a tuple is caught as a form the game never logs.
        seat = _int(e, "seat")
        results = verdict.results
        if not verdict.sunk and len(results) == 1 and results[0].sunk is None:
            return new_answer(seat, verdict, wire)  # a single cell, not sunk: nothing shown
        return new_answer(seat, verdict, None if _shows_ship(verdict) else wire)
    if kind == "commit":
        sig = e.get("sig")
        if sig is not None and (type(sig) is not bytes or len(sig) != 64):
            raise _bad("a seat signature is 64 bytes")
        return Commit(_int(e, "seat"), Commitment.from_dict(e["commitment"]), sig)
    if kind == "set_first":
        return SetFirst(_int(e, "seat"))
    if kind == "radar":
        if type(e["at"]) is not str:
            raise _bad("at is a cell label")
        return Radar(_int(e, "seat"), _int(e, "member"), _cell(e["at"], rules.rows, rules.cols))
    if kind == "expire":
        try:
            return Expire(Deadline(e["clock"]))
        except ValueError:
            raise _bad(f"unknown clock {e['clock']!r}") from None
    if kind == "resign":
        return Resign(_int(e, "seat"))
    if kind == "abandon":
        return Abandon(_int(e, "seat"))
    return RevealFleet(_int(e, "seat"), Reveal.from_dict(e["reveal"]))


# -- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Committed:
    """``seat``'s commitment was accepted; ``root`` is its root in this game's context."""

    seat: int
    root: bytes


@dataclass(frozen=True, slots=True)
class FiringBegan:
    """Both fleets are committed and the first player known: ``first`` fires first."""

    first: int


@dataclass(frozen=True, slots=True)
class ShotCalled:
    """``shot`` was called; its defender owes a verdict."""

    shot: Shot


@dataclass(frozen=True, slots=True)
class VerdictGiven:
    """``shot`` was answered by ``verdict`` (proved as far as the rules allow).

    ``next`` moves next; ``None`` when the verdict ends the firing (the reveal, or the game's end).
    """

    shot: Shot
    verdict: Verdict
    next: int | None


@dataclass(frozen=True, slots=True)
class ShotLost:
    """``seat``'s turn was lost (``why``: ``clock`` or ``repeat``); ``next`` moves next."""

    seat: int
    why: str
    next: int


@dataclass(frozen=True, slots=True)
class RevealDue:
    """The last ship cell was hit: both fleets must be revealed; ``provisional`` stands if true."""

    provisional: Outcome


@dataclass(frozen=True, slots=True)
class Revealed:
    """``seat`` revealed its fleet; ``fault`` names what the reveal shows it did wrong, if any."""

    seat: int
    reveal: Reveal
    fault: str | None


@dataclass(frozen=True, slots=True)
class GameOver:
    """The game ended with ``outcome``."""

    outcome: Outcome


GameEvent = (
    Committed | FiringBegan | ShotCalled | VerdictGiven | ShotLost | RevealDue | Revealed | GameOver
)
"""Every event a game answers an input with."""


# The inputs and events of every shot, built with their slots' setters rather than the frozen
# dataclass __init__ (see .commit.slot_setters): equal objects, made in a third of the time.
_new = object.__new__
_FIRE_SETTERS = slot_setters(Fire, "seat", "member", "cells", "wire")
_ANSWER_SETTERS = slot_setters(Answer, "seat", "verdict", "wire")
_CALLED_SETTER = slot_setters(ShotCalled, "shot")[0]
_GIVEN_SETTERS = slot_setters(VerdictGiven, "shot", "verdict", "next")


def new_fire(
    seat: int, member: int, cells: tuple[Cell, ...], wire: dict[str, Any] | None = None
) -> Fire:
    """``Fire(seat, member, cells, wire)``, built fast."""
    f: Fire = _new(Fire)
    set_seat, set_member, set_cells, set_wire = _FIRE_SETTERS
    set_seat(f, seat)
    set_member(f, member)
    set_cells(f, cells)
    set_wire(f, wire)
    return f


def new_answer(seat: int, verdict: Verdict, wire: dict[str, Any] | None) -> Answer:
    """``Answer(seat, verdict, wire)``, built fast."""
    a: Answer = _new(Answer)
    set_seat, set_verdict, set_wire = _ANSWER_SETTERS
    set_seat(a, seat)
    set_verdict(a, verdict)
    set_wire(a, wire)
    return a


def new_shot_called(shot: Shot) -> ShotCalled:
    """``ShotCalled(shot)``, built fast."""
    e: ShotCalled = _new(ShotCalled)
    _CALLED_SETTER(e, shot)
    return e


def new_verdict_given(shot: Shot, verdict: Verdict, next: int | None) -> VerdictGiven:
    """``VerdictGiven(shot, verdict, next)``, built fast."""
    e: VerdictGiven = _new(VerdictGiven)
    set_shot, set_verdict, set_next = _GIVEN_SETTERS
    set_shot(e, shot)
    set_verdict(e, verdict)
    set_next(e, next)
    return e
