"""Running the cases and reporting them: one case judged (:func:`run_case`; :func:`judge` and
:func:`result` serve the client cases too), a selection run against one server
(:func:`run_suite`), and the report as a rich table.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol.errors import ProtocolError

from .results import CaseFailed, CaseResult, NotImplementedCase, Outcome, Report, Trace
from .suite import CASES, Case, Suite

if TYPE_CHECKING:
    from .serve_cases import ClientCase

__all__ = ["judge", "render_table", "result", "run_case", "run_suite"]


def _selected(c: Case, only: Sequence[str]) -> bool:
    if not only:
        return True
    return any(c.id.startswith(o) or c.section.startswith(o) for o in only)


async def judge(run: Callable[[], Awaitable[None]], case_timeout: float) -> tuple[Outcome, str]:
    """Run a case's body within ``case_timeout`` seconds; its verdict and why (``""`` if it
    passed). What the other end did wrong at the protocol or socket level fails the case."""
    try:
        with trio.fail_after(case_timeout):
            await run()
    except CaseFailed as e:
        return Outcome.FAILED, str(e)
    except NotImplementedCase as e:
        return Outcome.NOT_IMPLEMENTED, str(e)
    except trio.TooSlowError:
        return Outcome.FAILED, f"the case did not finish within {case_timeout:g} s"
    except (ProtocolError, OSError, trio.BrokenResourceError) as e:
        return Outcome.FAILED, f"{type(e).__name__}: {e}"
    return Outcome.PASSED, ""


def result(
    c: Case | ClientCase, t: Trace, outcome: Outcome, detail: str, start: float
) -> CaseResult:
    """The report entry of case ``c``, begun at ``start`` (``time.monotonic``)."""
    return CaseResult(
        c.id,
        c.section,
        c.title,
        c.quote,
        outcome,
        t.sent,
        t.expected,
        t.got,
        detail,
        time.monotonic() - start,
    )


async def run_case(s: Suite, c: Case, case_timeout: float) -> CaseResult:
    """Run one case and judge it."""
    t = Trace(expected=[c.expected])
    start = time.monotonic()
    try:
        outcome, detail = await judge(partial(c.run, s, t), case_timeout)
    finally:
        opened, s.opened = s.opened, []
        for p in opened:
            if not p.keep:
                await p.aclose()
    if t.notes and outcome is Outcome.PASSED:
        detail = "; ".join(t.notes)
    elif t.notes:
        detail += " (" + "; ".join(t.notes) + ")"
    return result(c, t, outcome, detail, start)


async def run_suite(
    host: str,
    port: int,
    *,
    only: Sequence[str] = (),
    timeout: float = 5.0,
    case_timeout: float = 30.0,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run the cases selected by ``only`` (ids, id prefixes or section prefixes; all if empty).

    ``timeout`` bounds every wait for one message; ``case_timeout`` a whole case.
    """
    s = Suite(host, port, timeout)
    results = []
    for c in CASES:
        if not _selected(c, only):
            continue
        r = await run_case(s, c, case_timeout)
        results.append(r)
        if on_result is not None:
            on_result(r)
    for obs in s.cache.values():
        # Close the shared game's spectator and seats now that every case has looked.
        if isinstance(obs, dict):
            for p in [*obs["table"].seats, obs["watcher"]]:
                await p.aclose()
    return Report(f"{host}:{port}", results)


_STYLE = {Outcome.PASSED: "green", Outcome.FAILED: "bold red", Outcome.NOT_IMPLEMENTED: "yellow"}


def render_table(report: Report, *, verbose: bool = False) -> Any:
    """A rich table of the report (failed cases show what was sent, expected and got)."""
    from rich.table import Table as RichTable

    tbl = RichTable(title=f"seabattle conformance: {report.target}", show_lines=verbose)
    tbl.add_column("Case")
    tbl.add_column("Section")
    tbl.add_column("Result")
    tbl.add_column("Detail", overflow="fold")
    for r in report.results:
        detail = r.detail
        if r.outcome is Outcome.FAILED:
            detail = (
                f"{r.detail}\nquote: {r.quote}\nexpected: {'; '.join(r.expected)}\n"
                f"sent (last 3): {' | '.join(r.sent[-3:])}\ngot (last 3): {' | '.join(r.got[-3:])}"
            )
        tbl.add_row(
            r.id, r.section, f"[{_STYLE[r.outcome]}]{r.outcome.value}[/]", detail or r.title
        )
    c = report.counts()
    tbl.caption = ", ".join(f"{v} {k}" for k, v in c.items())
    return tbl
