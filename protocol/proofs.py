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
from .rules import RuleSet, SalvoReport, SunkReport
from .state import Board
from .verdict import Result, Shot, Verdict, true_answer

__all__ = ["check_proofs", "check_shape", "first_lie"]


def check_shape(r: RuleSet, shot: Shot, v: Verdict) -> None:
    """Refuse a verdict whose shape does not answer ``shot`` (``BAD_MESSAGE``/``BAD_PROOF``).

    Nothing is decided by a malformed verdict: the defender may send it again.
    """
    bad = ErrorCode.BAD_MESSAGE
    if shot.radar:
        if v.found is None or v.results or v.total is not None or v.sunk:
            raise RemoteProtocolError(bad, "a radar verdict carries only 'found'")
        return
    if v.found is not None:
        raise RemoteProtocolError(bad, "'found' answers a radar scan only")
    if r.is_salvo and r.salvo_report is SalvoReport.TOTAL:
        if v.results or v.total is None or not 0 <= v.total <= len(shot.cells):
            raise RemoteProtocolError(
                bad, f"this salvo is answered by a total of 0..{len(shot.cells)}"
            )
        if len(v.sunk) > v.total:
            raise RemoteProtocolError(bad, "more ships sunk than hits")
        return
    if v.total is not None or v.sunk:
        raise RemoteProtocolError(bad, "this shot is answered cell by cell")
    if len(v.results) != len(shot.cells):
        raise RemoteProtocolError(bad, f"{len(shot.cells)} cells called, {len(v.results)} answered")
    for c, res in zip(shot.cells, v.results, strict=True):
        if res.opening.index != c.index(r.cols):
            raise RemoteProtocolError(
                ErrorCode.BAD_PROOF,
                f"the opening is for cell {res.opening.index}, not {c.label()}",
            )
        if (res.result is Result.SUNK) != (res.sunk is not None):
            raise RemoteProtocolError(bad, "a sunk result carries a sunk claim, and only it")


def check_proofs(
    r: RuleSet, com: Commitment, ctx: bytes, board: Board, shot: Shot, v: Verdict
) -> None:
    """Check everything about ``v`` that can be proved now; raise ``ProtocolError`` on a lie.

    ``board`` is the defender's public board before this verdict; ``com`` and ``ctx`` its
    commitment and context.
    """
    if shot.radar:
        return  # a radar answer opens nothing (it would leak): it is checked at the reveal
    mismatch = ErrorCode.VERDICT_MISMATCH
    claims = [res.sunk for res in v.results if res.sunk] + list(v.sunk)
    if v.total is not None:
        # A salvo reported as a total proves no cell: any cell it called may be a hit.
        hit_now = {c.index(r.cols) for c in shot.cells}
    else:
        hit_now = {
            c.index(r.cols)
            for c, res in zip(shot.cells, v.results, strict=True)
            if res.result is not Result.MISS
        }
    for c, res in zip(shot.cells, v.results, strict=False):
        com.check_cell(ctx, res.opening)
        if res.opening.occupied != (res.result is not Result.MISS):
            raise ProtocolError(
                mismatch, f"{c.label()} said {res.result.value}, opening says otherwise"
            )
    seen: set[int] = set()
    for claim in claims:
        if r.sunk is SunkReport.SILENT:
            raise ProtocolError(mismatch, "silent sinking announces no ship")
        if not 0 <= claim.ship < len(r.fleet) or claim.ship in board.sunk or claim.ship in seen:
            raise ProtocolError(mismatch, f"ship {claim.ship} cannot sink now")
        seen.add(claim.ship)
        if r.sunk is SunkReport.SHOWN:
            if claim.opening is None or claim.opening.ship != claim.ship:
                raise ProtocolError(mismatch, "a sunk ship is shown whole with its opening")
            com.check_ship(ctx, claim.opening)
            cells = claim.opening.placement.cells(r.fleet[claim.ship].length)
            for x in cells:
                if not x.on(r.rows, r.cols):
                    raise ProtocolError(mismatch, "the shown ship lies off the board")
                i = x.index(r.cols)
                before = board.fired.get(i, Result.MISS)
                if before is Result.MISS and i not in hit_now:
                    raise ProtocolError(mismatch, f"shown ship has unhit cell {x.label()}")
        elif claim.opening is not None:
            raise ProtocolError(mismatch, "these rules do not show sunk ships")


def first_lie(
    r: RuleSet, shots: Iterable[tuple[Shot, Verdict]], seat: int, occ: Sequence[int]
) -> str | None:
    """The first verdict ``seat`` gave that its revealed fleet ``occ`` shows false, or ``None``."""
    hit: set[int] = set()
    for shot, v in shots:
        if shot.seat == seat:
            continue
        truth, found = true_answer(r, occ, hit, shot)
        where = f"shot {shot.n}"
        if shot.radar:
            if v.found != found:
                at = shot.cells[0].label()
                return f"{where}: radar at {at} answered {v.found}, truth {found}"
            continue
        hit.update(c.index(r.cols) for c in shot.cells if occ[c.index(r.cols)])
        sunk_true = sorted(t.ship for t in truth if t.ship is not None)
        if v.total is not None:
            total = sum(t.result is not Result.MISS for t in truth)
            if v.total != total:
                return f"{where}: salvo total {v.total}, truth {total}"
            if sorted(s.ship for s in v.sunk) != sunk_true:
                return f"{where}: sunk ships {[s.ship for s in v.sunk]}, truth {sunk_true}"
            continue
        for c, res, t in zip(shot.cells, v.results, truth, strict=True):
            if res.result is not t.result:
                return f"{where}: {c.label()} answered {res.result.value}, truth {t.result.value}"
            if res.sunk is not None and res.sunk.ship != t.ship:
                return f"{where}: {c.label()} sank ship {res.sunk.ship}, truth {t.ship}"
    return None
