"""What a run reports: each case's verdict, what it sent, expected and got, and the report
of a whole run (the ``--json`` output); and the two exceptions a case ends with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from seabattle.protocol.session import SUPPORTED_VERSIONS

__all__ = ["CaseFailed", "CaseResult", "NotImplementedCase", "Outcome", "Report", "Trace"]


class Outcome(StrEnum):
    """A case's verdict."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_IMPLEMENTED = "not implemented"


class CaseFailed(Exception):
    """The server did something the quoted sentence forbids (or did not do what it requires)."""


class NotImplementedCase(Exception):
    """The server does not offer an optional feature the case checks."""


@dataclass(slots=True)
class Trace:
    """What one case sent, expected and got, in order, for the report."""

    sent: list[str] = field(default_factory=list)
    got: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def expect(self, text: str) -> None:
        """Note what the case expects next (shown when it fails)."""
        self.expected.append(text)


@dataclass(slots=True)
class CaseResult:
    """One case's report entry."""

    id: str
    section: str
    title: str
    quote: str
    outcome: Outcome
    sent: list[str]
    expected: list[str]
    got: list[str]
    detail: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "quote": self.quote,
            "outcome": self.outcome.value,
            "sent": self.sent,
            "expected": self.expected,
            "got": self.got,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


@dataclass(slots=True)
class Report:
    """The results of one run against one server."""

    target: str
    results: list[CaseResult]

    @property
    def failed(self) -> list[CaseResult]:
        """The cases that failed."""
        return [r for r in self.results if r.outcome is Outcome.FAILED]

    def counts(self) -> dict[str, int]:
        """How many cases ended with each verdict."""
        return {o.value: sum(r.outcome is o for r in self.results) for o in Outcome}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the ``--json`` output)."""
        return {
            "target": self.target,
            "spec": f"spec/protocol.md, protocol version {max(SUPPORTED_VERSIONS)}",
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }
