"""What a verdict proves at once, and what the reveal shows false later.

The two halves of the referee's judgement (``spec/protocol.md`` section "Commitments and proofs"):
:func:`check_proofs` runs when a verdict arrives and checks every opening it carries against the
defender's commitment; :func:`first_lie` runs on the reveal and replays every verdict against the
true fleet with :func:`.verdict.true_answer`, the same function an honest defender answers with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .commit import Commitment
from .errors import ErrorCode, ProtocolError, RemoteProtocolError
from .rules import RuleSet, SalvoReport, ShotMode, SunkReport
from .state import Board
from .verdict import Result, Shot, Verdict, true_answer

__all__ = ["check_proofs", "check_shape", "first_lie"]


# Enum members and codes read on every verdict, bound once: reading one off its class costs
# ~0.1 us, several times a shot.
_MISS, _SUNK = Result.MISS, Result.SUNK
_SINGLE, _TOTAL = ShotMode.SINGLE, SalvoReport.TOTAL
_SILENT, _SHOWN = SunkReport.SILENT, SunkReport.SHOWN
_BAD_MESSAGE, _BAD_PROOF = ErrorCode.BAD_MESSAGE, ErrorCode.BAD_PROOF
_MISMATCH = ErrorCode.VERDICT_MISMATCH


def check_shape(r: RuleSet, shot: Shot, v: Verdict) -> None:
    """Refuse a verdict whose shape does not answer ``shot`` (``BAD_MESSAGE``/``BAD_PROOF``).

    Nothing is decided by a malformed verdict: the defender may send it again.
    """
    bad = _BAD_MESSAGE
    if shot.radar:
        if v.found is None or v.results or v.total is not None or v.sunk:
            raise RemoteProtocolError(bad, "a radar verdict carries only 'found'")
        return
    if v.found is not None:
        raise RemoteProtocolError(bad, "'found' answers a radar scan only")
    if r.shots is not _SINGLE and r.salvo_report is _TOTAL:
        if v.results or v.total is None or not 0 <= v.total <= len(shot.cells):
            raise RemoteProtocolError(
                bad, f"this salvo is answered by a total of 0..{len(shot.cells)}"
            )
        if len(v.sunk) > v.total:
            raise RemoteProtocolError(bad, "more ships sunk than hits")
        return
    if v.total is not None or v.sunk:
        raise RemoteProtocolError(bad, "this shot is answered cell by cell")
    cells, results = shot.cells, v.results
    if len(results) != len(cells):
        raise RemoteProtocolError(bad, f"{len(cells)} cells called, {len(results)} answered")
    cols = r.cols
    # By index rather than zip(..., strict=True): a keyword makes zip() cost twice as much, and
    # the lengths are equal (checked above).
    for k, c in enumerate(cells):
        res = results[k]
        if res.opening.index != c.row * cols + c.col:  # c.index(cols), inline
            raise RemoteProtocolError(
                _BAD_PROOF,
                f"the opening is for cell {res.opening.index}, not {c.label()}",
            )
        if (res.result is _SUNK) != (res.sunk is not None):
            raise RemoteProtocolError(bad, "a sunk result carries a sunk claim, and only it")


def check_proofs(
    r: RuleSet, com: Commitment, ctx: bytes, board: Board, shot: Shot, v: Verdict
) -> None:
    """Check everything about ``v`` that can be proved now; raise ``ProtocolError`` on a lie.

    ``board`` is the defender's public board before this verdict; ``com`` and ``ctx`` its
    commitment and context. ``v`` has the shape :func:`check_shape` checks.
    """
    if shot.radar:
        return  # a radar answer opens nothing (it would leak): it is checked at the reveal
    results, cells = v.results, shot.cells
    claimed = False
    # zip(cells, results, strict=False) by index (see check_shape).
    for k in range(len(results) if len(results) <= len(cells) else len(cells)):
        c, res = cells[k], results[k]
        opening = res.opening
        com.check_cell(ctx, opening)
        if opening.occupied != (res.result is not _MISS):
            raise ProtocolError(
                _MISMATCH, f"{c.label()} said {res.result.value}, opening says otherwise"
            )
        if res.sunk:
            claimed = True
    if claimed or v.sunk:
        _check_claims(r, com, ctx, board, shot, v)


def _check_claims(
    r: RuleSet, com: Commitment, ctx: bytes, board: Board, shot: Shot, v: Verdict
) -> None:
    """The sunk claims of ``v`` (a few a game): ships that can sink now, shown as the rules say."""
    mismatch = _MISMATCH
    claims = [res.sunk for res in v.results if res.sunk] + list(v.sunk)
    if v.total is not None:
        # A salvo reported as a total proves no cell: any cell it called may be a hit.
        hit_now = {c.index(r.cols) for c in shot.cells}
    else:
        hit_now = {
            c.index(r.cols)
            for c, res in zip(shot.cells, v.results, strict=True)
            if res.result is not _MISS
        }
    seen: set[int] = set()
    for claim in claims:
        if r.sunk is _SILENT:
            raise ProtocolError(mismatch, "silent sinking announces no ship")
        if not 0 <= claim.ship < len(r.fleet) or claim.ship in board.sunk or claim.ship in seen:
            raise ProtocolError(mismatch, f"ship {claim.ship} cannot sink now")
        seen.add(claim.ship)
        if r.sunk is _SHOWN:
            if claim.opening is None or claim.opening.ship != claim.ship:
                raise ProtocolError(mismatch, "a sunk ship is shown whole with its opening")
            com.check_ship(ctx, claim.opening)
            cells = claim.opening.placement.cells(r.fleet[claim.ship].length)
            for x in cells:
                if not x.on(r.rows, r.cols):
                    raise ProtocolError(mismatch, "the shown ship lies off the board")
                i = x.index(r.cols)
                before = board.fired.get(i, _MISS)
                if before is _MISS and i not in hit_now:
                    raise ProtocolError(mismatch, f"shown ship has unhit cell {x.label()}")
        elif claim.opening is not None:
            raise ProtocolError(mismatch, "these rules do not show sunk ships")


def first_lie(
    r: RuleSet, shots: Iterable[tuple[Shot, Verdict]], seat: int, occ: Sequence[int]
) -> str | None:
    """The first verdict ``seat`` gave that its revealed fleet ``occ`` shows false, or ``None``."""
    hit: set[int] = set()
    cols = r.cols
    # Runs over every shot of a game at each reveal (twice a game, and in every verification):
    # the prose of a lie is built only for the lie.
    for shot, v in shots:
        if shot.seat == seat:
            continue
        truth, found = true_answer(r, occ, hit, shot)
        if shot.radar:
            if v.found != found:
                at = shot.cells[0].label()
                return f"shot {shot.n}: radar at {at} answered {v.found}, truth {found}"
            continue
        for c in shot.cells:
            i = c.row * cols + c.col
            if occ[i]:
                hit.add(i)
        if v.total is not None:
            sunk_true = sorted(t.ship for t in truth if t.ship is not None)
            total = sum(t.result is not _MISS for t in truth)
            if v.total != total:
                return f"shot {shot.n}: salvo total {v.total}, truth {total}"
            if sorted(s.ship for s in v.sunk) != sunk_true:
                return f"shot {shot.n}: sunk ships {[s.ship for s in v.sunk]}, truth {sunk_true}"
            continue
        results = v.results
        if len(results) == 1 and len(truth) == 1:  # a single shot: no zip (see check_shape)
            res, t = results[0], truth[0]
            if res.result is t.result and (res.sunk is None or res.sunk.ship == t.ship):
                continue
        for c, res, t in zip(shot.cells, results, truth, strict=True):
            if res.result is not t.result:
                return (
                    f"shot {shot.n}: {c.label()} answered {res.result.value}, "
                    f"truth {t.result.value}"
                )
            if res.sunk is not None and res.sunk.ship != t.ship:
                return f"shot {shot.n}: {c.label()} sank ship {res.sunk.ship}, truth {t.ship}"
    return None
