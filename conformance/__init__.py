"""A conformance suite for seabattle servers: any implementation, over TCP, against ``spec/``.

Theory of operation (h2spec and Autobahn style). Each :class:`Case` is named after the section of
``spec/protocol.md`` it checks and quotes the sentence it checks. A case opens its own
connections, sends bytes or messages, and compares what comes back with what the spec requires;
it reports what it sent, what it expected and what it got, and a verdict: ``passed``,
``failed``, or ``not implemented`` (an optional feature the server does not offer).

The suite deliberately does not use :mod:`seabattle.client.api`: it talks to the server through
the codec (:mod:`seabattle.protocol.codec`, :mod:`seabattle.protocol.messages`) over raw trio
streams, so that it tests the server and not our own client. It plays both seats of every match
itself, each with the pure player's machine (:class:`~seabattle.protocol.seat.Seat`: it commits or
places, answers and reveals; the case says when), and checks every opening the server relays
against the commitments itself. Records are checked with
:func:`~seabattle.protocol.record.verify_record`.

Use :func:`run_suite` from code, or the click command :data:`conformance`
(``seabattle conformance HOST:PORT [--json] [--report FILE] [--only SECTION]``).

The package: :mod:`.results` (verdicts, traces, the report), :mod:`.probe` (one traced raw
connection; a match the suite plays both seats of), :mod:`.suite` (the shared steps and the
registry of cases), the cases by spec section - :mod:`.framing` (2), :mod:`.handshake` (4.1 to
4.6), :mod:`.lobby` (5.3, 6.1, 6.2, 7.4), :mod:`.game` (the shared honest blind game: 8, 10.7,
6.5, 11.2), :mod:`.refusals` (5.4, 10.7, custody) and :mod:`.resume` (4.7) - then :mod:`.runner`
(running and reporting) and :mod:`.command` (``seabattle conformance``).
"""

from __future__ import annotations

# The case modules register their cases as they are imported, and the registry's order is the
# order cases run and are listed in: these imports keep that order and must not be sorted.
# isort: off
from . import framing  # noqa: F401
from . import handshake  # noqa: F401
from . import lobby  # noqa: F401
from . import game  # noqa: F401
from . import refusals  # noqa: F401
from . import resume  # noqa: F401
from . import teams  # noqa: F401
from . import lean  # noqa: F401
from . import bounds  # noqa: F401
from . import records  # noqa: F401
from . import seeds  # noqa: F401

# isort: on
from .command import conformance
from .probe import AGENT, NOISE, RULES, Probe, Table, describe
from .results import CaseFailed, CaseResult, NotImplementedCase, Outcome, Report, Trace
from .runner import render_table, run_case, run_suite
from .suite import (
    CASES,
    Case,
    CaseFn,
    Suite,
    case,
    check_verdict,
    expect_game_over,
    fire_and_answer,
)

__all__ = [
    "AGENT",
    "CASES",
    "NOISE",
    "RULES",
    "Case",
    "CaseFailed",
    "CaseFn",
    "CaseResult",
    "NotImplementedCase",
    "Outcome",
    "Probe",
    "Report",
    "Suite",
    "Table",
    "Trace",
    "case",
    "check_verdict",
    "conformance",
    "describe",
    "expect_game_over",
    "fire_and_answer",
    "render_table",
    "run_case",
    "run_suite",
]
