"""Running the client cases: for each case a fresh listener, the client under test started
against it (a command, or an async callable in tests), the case judged, the client stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import trio

from .results import CaseResult, Outcome, Report, Trace
from .runner import judge, result
from .serve_cases import CLIENT_CASES, ClientCase
from .serve_stage import Launcher, Stage

__all__ = ["run_client_case", "run_client_suite"]


def _selected(c: ClientCase, peer: bool, only: Sequence[str]) -> bool:
    if c.peer != peer:
        return False
    return not only or any(c.id.startswith(o) or c.section.startswith(o) for o in only)


async def run_client_case(
    c: ClientCase, launcher: Launcher, *, timeout: float, settle: float, case_timeout: float
) -> CaseResult:
    """Start the client under test against a fresh listener, run ``c``, judge it."""
    t = Trace(expected=[c.expected])
    start = time.monotonic()
    stage = Stage(launcher, t, timeout, settle)
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            await stage.open(nursery)
            await c.run(stage, stage.trace)
            stage.check_alive()

        try:
            outcome, detail = await judge(run, case_timeout)
            crashed = stage.crashed  # what the client does once it is stopped does not count
        finally:
            await stage.close()
            nursery.cancel_scope.cancel()  # stops the client under test
    if outcome is Outcome.FAILED and crashed and "crash" not in detail:
        detail += f" (the client crashed: {crashed})"
    if t.notes:
        detail = "; ".join([detail, *t.notes]) if detail else "; ".join(t.notes)
    return result(c, t, outcome, detail, start)


async def run_client_suite(
    launcher: Launcher,
    *,
    target: str = "client",
    peer: bool = False,
    only: Sequence[str] = (),
    timeout: float = 5.0,
    settle: float = 0.5,
    case_timeout: float = 60.0,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run the selected client cases (``peer``: the cases of a joining peer instead).

    ``timeout`` bounds every wait for one message from the client; ``settle`` how long a case
    waits, after the client answered a barrier ``ping``, for what the client must not send.
    """
    results = []
    for c in CLIENT_CASES:
        if not _selected(c, peer, only):
            continue
        r = await run_client_case(
            c, launcher, timeout=timeout, settle=settle, case_timeout=case_timeout
        )
        results.append(r)
        if on_result is not None:
            on_result(r)
    return Report(target, results)
