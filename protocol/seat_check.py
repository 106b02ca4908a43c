"""What a seat was shown of each game, held against the record it is asked to co-sign (spec 5.5).

A seat co-signs a record only if the record holds what the seat saw: each game's entries as its
mirror entered them, in place, and the outcome ``game_over`` announced. Where the seat was away (a
reconnect, a failover) the record may hold entries it was never shown; they are no lie if the
snapshot it got on resuming agrees with them. :func:`check_record` says what is wrong, or ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import messages as m
from .commit import Commitment
from .errors import ProtocolError
from .game import Game, Phase
from .record import head_of_bytes, load_record, pack_record
from .verify import verify_record

__all__ = ["Shown", "check_record", "entries", "in_step", "move_entry"]


@dataclass(slots=True)
class Shown:
    """What we were shown of one game, to hold the record's transcript to (spec 5.5)."""

    #: the mirror that followed the game (``None``: it stopped on a lie, or we missed the game)
    game: Game | None
    #: what ``game_over`` announced (``None``: the game ended while we were away)
    outcome: dict[str, Any] | None
    roots: dict[int, bytes] = field(default_factory=dict)  # ``committed`` roots, in order
    #: (entries the mirror held, the snapshot's view) at each resume the mirror followed across:
    #: there the record may hold entries we were away for, if the snapshot agrees with them
    gaps: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: the mirror stopped at a resume (out of step with the snapshot): the record must hold the
    #: first ``cut`` of its entries, and what follows is the replay's to check
    cut: int | None = None
    #: whether the order of the commitments is known (``committed`` seen for all but the last)
    ordered: bool = True
    #: the transcript entries our own unanswered ``fire`` or ``radar`` would make: a lean session
    #: gets no copy of its move, so a game that ended before its verdict (the opponent abandoned,
    #: or its clock ran out) holds an entry of ours we were never shown
    unanswered: list[dict[str, Any]] = field(default_factory=list)


def check_record(
    msg: m.MatchOver,
    seen: dict[int, Shown],
    *,
    match_id: bytes,
    seat: int | None,
    key: bytes,
    member: int | None = None,
) -> str | None:
    """What is wrong with the record ``msg`` asks us to co-sign (spec 5.5), or ``None``.

    ``seen`` is what we were shown of each game; ``key`` our public key, which the record must
    put on our ``seat`` (in team play, ``member``: our place on our seat's team).

    It must be canonical bytes (spec 11.3: other bytes are malformed, whatever they decode to)
    whose head is ``msg.head``, verify as 11.3 says with the referee's signature aside (it is not
    sent): a version-2 record, since version 1 binds no seat to a key, whose replay holds; name
    this match and our key on our seat, and hold every game we saw:
    each game's entries as our mirror entered them, in place (``set_first`` aside, whose place
    11.1 fixes, and commit signatures, which ``firing`` does not relay), then at most the one
    entry no other message shows (an ``expire``, ``resign`` or ``abandon``) when the game ended
    before our mirror did, and the outcome ``game_over`` announced. A game that ended in setup
    showed only the roots of its commitments (``committed``): its commit entries must be of
    those roots, in that order.

    Where we were away (a reconnect, a failover) the record may hold entries we were never
    shown, and they are no lie if the snapshot we got on resuming agrees with them: replayed
    up to the resume, the record gives the snapshot's view (``_held``). A game whose end
    we missed is held to what we saw of it; the replay checks the rest.
    """
    try:
        rec = load_record(msg.record)
        canonical = pack_record(rec) == msg.record
    except (ValueError, TypeError, ProtocolError) as e:
        return f"the record in match_over does not decode: {e}"
    # Never a co-signature over bytes that are not canonical: whatever head they give, it is not
    # the head a verifier computes from the record they decode to.
    if not canonical:
        return "the record in match_over is not canonically encoded (spec 3, 11.3: malformed)"
    if head_of_bytes(msg.record) != msg.head:
        return "match_over's head is not the head of the record it carries"
    # A version-1 record is refused here (old_version): a referee of version 2 writes none, and
    # its seats would be bound by nothing but co-signatures.
    report = verify_record({"record": rec, "sigs": []})
    problems = [p for p in report.problems if not p.startswith("missing_signature")]
    if problems:
        return f"the record does not verify: {problems[0]}"
    if rec["match"] != match_id or seat is None:
        return "the record is of another match"
    if member is not None:
        team = (rec.get("teams") or [[], []])[seat]
        if len(team) <= member or team[member] != key:
            return "the record puts another key in our place on our team"
    elif rec["players"][seat] != key:
        return "the record puts another key on our seat"
    games = rec["games"]
    if len(games) != len(seen):
        return f"the record holds {len(games)} games, we played {len(seen)}"
    for n, shown in sorted(seen.items()):
        gd = games[n - 1]
        outcome = shown.outcome
        if outcome is not None and {k: gd["outcome"].get(k) for k in ("winner", "reason")} != {
            k: outcome.get(k) for k in ("winner", "reason")
        }:
            return f"game {n}: the record's outcome is not the one game_over announced"
        if shown.game is None:
            continue  # a game we missed, or whose mirror stopped on a lie: the replay checks
        problem = _held(gd, shown, seat)
        if problem is not None:
            return f"game {n}: {problem}"
    return None


def move_entry(msg: m.Fire | m.Radar, seat: int) -> dict[str, Any]:
    """The transcript entry our ``msg`` makes once the referee applies it (spec 11.1)."""
    if isinstance(msg, m.Radar):
        return {"in": "radar", "seat": seat, "member": msg.member, "at": msg.at}
    return {"in": "fire", "seat": seat, "member": msg.member, "cells": list(msg.cells)}


def entries(transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript as a client can compare it: without ``set_first`` (whether a first player
    is an entry depends on the lot, and 11.1 fixes where it sits) and commit signatures (a seat
    signature is not relayed; the replay checks it against the record's keys)."""
    out = []
    for e in transcript:
        if e["in"] == "set_first":
            continue
        if e["in"] == "commit" and "sig" in e:
            e = {k: v for k, v in e.items() if k != "sig"}
        out.append(e)
    return out


#: What a snapshot's view and a game's own view must agree on for the game to be in step with it
#: (``first``, ``roots`` and ``callers`` follow from these, or are the match's to say).
_STEP_KEYS = ("phase", "turn", "shots", "expiries", "committed", "pending", "boards", "outcome")


def _plain(v: Any) -> Any:
    """``v`` with every tuple a list: a decoded view and a game's own view compare equal."""
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def in_step(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether two views of one game (6.6) show the same state."""
    return all(_plain(mine.get(k)) == _plain(theirs.get(k)) for k in _STEP_KEYS)


def _unordered(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` with its leading commit entries in seat order: for a game whose commitments
    both came while we were away, in an order we cannot know."""
    k = 0
    while k < len(entries) and entries[k].get("in") == "commit":
        k += 1
    return sorted(entries[:k], key=lambda e: repr(e.get("seat"))) + entries[k:]


def _held(gd: dict[str, Any], shown: Shown, seat: int) -> str | None:
    """What is wrong with the record's game ``gd`` against what we were shown of it, or
    ``None`` (see :func:`check_record`).

    Our mirror's entries come in pieces, split where we were away (``shown.gaps``). The first
    piece must open the transcript. Each later piece must follow, after any entries that bring
    the game (replayed from the record) to the view the snapshot of that resume showed: entries
    the referee accepted while we were away, which that snapshot reflects. After the last piece,
    at most the one entry that ends a game unseen (spec 5.5) may follow, unless the mirror
    stopped at a resume (``cut``), where the replay alone checks the rest.
    """
    g = shown.game
    assert g is not None
    seen, got = entries(g.transcript), entries(gd["transcript"])
    if not g.rules.reveals_cross and not any(_reveal_of(e, 1 - seat) for e in seen):
        # 7.3 decision 19 (004): a custody referee sends no player the other seat's reveal;
        # the record holds it, and the replay (verify_record, above) has checked it.
        got = [e for e in got if not _reveal_of(e, 1 - seat)]
    if shown.cut is not None:
        seen = seen[: shown.cut]
    if not shown.ordered:
        seen, got = _unordered(seen), _unordered(got)
    marks = [pos for pos, _ in shown.gaps] + [len(seen)]
    at = marks[0]
    if got[:at] != seen[:at]:
        return "the record's transcript is not the one we were shown"
    if shown.gaps:
        replay = _Replay(g, gd)
        for k, (pos, view) in enumerate(shown.gaps):
            piece = seen[pos : marks[k + 1]]
            for j in range(at, len(got) - len(piece) + 1):
                if replay.agrees(j, view) and got[j : j + len(piece)] == piece:
                    at = j + len(piece)
                    break
            else:
                return "the record does not hold what we were shown after we resumed"
    rest = got[at:]
    if shown.cut is not None:
        return None
    if g.phase is Phase.SETUP:
        # The game ended before ``firing`` relayed the commitments: each commit entry must be of
        # the root ``committed`` named, in the order those came.
        left = _drop_commits(rest, shown.roots, g, ordered=shown.ordered)
        if left is None:
            return "the record's commitments are not the ones announced"
        rest = left
    if rest and rest[0] in shown.unanswered:
        rest = rest[1:]  # our own move, whose copy a lean session is not sent
    if rest and _false_proof(rest[0], shown):
        return None  # the liar's answer, which ended the game and which no message relays
    unseen = all(e["in"] in ("expire", "resign", "abandon") for e in rest)
    if rest and (g.phase is Phase.OVER or len(rest) > 1 or not unseen):
        return "the record holds entries we were never shown"
    return None


def _reveal_of(entry: dict[str, Any], seat: int) -> bool:
    """Whether ``entry`` is ``seat``'s reveal."""
    return entry.get("in") == "reveal" and entry.get("seat") == seat


def _false_proof(entry: dict[str, Any], shown: Shown) -> bool:
    """Whether ``entry`` is the answer that ended the game on a false proof: the referee relays
    no verdict it refused (the game ends ``false_proof`` there), so it is the one ``answer``
    the record may hold unseen, by the seat that lost."""
    o = shown.outcome or {}
    if o.get("reason") != "false_proof" or entry.get("in") != "answer":
        return False
    w = o.get("winner")
    return isinstance(w, int) and entry.get("seat") == 1 - w


class _Replay:
    """The record's game replayed entry by entry, to see its view after the first ``j`` entries
    that :func:`_entries` keeps (asked for in rising ``j``)."""

    def __init__(self, mirror: Game, gd: dict[str, Any]) -> None:
        raw = list(gd["transcript"])
        # A first player the rules decide is no entry; one the lot decides is (11.1).
        lot = any(e.get("in") == "set_first" for e in raw)
        self.game = Game(mirror.rules, mirror.match_id, mirror.number, None if lot else gd["first"])
        self.raw = raw
        self.fed = 0  # raw entries fed
        self.kept = 0  # of which :func:`_entries` keeps
        self.broken = False

    def agrees(self, j: int, view: dict[str, Any]) -> bool:
        """Whether the game after ``j`` kept entries (and whatever ``_entries`` drops before the
        next) shows ``view``."""
        while not self.broken and self.fed < len(self.raw):
            e = self.raw[self.fed]
            kept = e.get("in") != "set_first"
            if kept and self.kept == j:
                break
            try:
                self.game.replay(e)
            except ProtocolError:
                self.broken = True  # the verifier has said so already; nothing agrees here
            self.fed += 1
            self.kept += kept
        return not self.broken and self.kept == j and in_step(self.game.view(), view)


def _drop_commits(
    rest: list[dict[str, Any]], roots: dict[int, bytes], g: Game, *, ordered: bool = True
) -> list[dict[str, Any]] | None:
    """``rest`` without its leading commit entries, if they commit to ``roots`` (seat -> root) in
    that order (in any order, unless ``ordered``), else ``None``."""
    order = list(roots)
    commits = rest[: len(order)]
    if not ordered:
        order = [s for e in commits for s in roots if e.get("seat") == s]
        if len(order) != len(commits):
            return None
    if [e.get("in") for e in commits] != ["commit"] * len(order):
        return None
    for e, seat in zip(commits, order, strict=True):
        try:
            root = Commitment.from_dict(e["commitment"]).root(g.ctx[seat])
        except (ProtocolError, KeyError, IndexError):
            return None
        if e.get("seat") != seat or root != roots[seat]:
            return None
    return rest[len(order) :]
