"""The bounded check of a rule set from the wire (:func:`parse_rules_within`): a crafted fleet
must not hold the lobby for minutes (see ``lobby``'s docstring, "Hostile lobbies").
"""

from __future__ import annotations

import sys
import time
from types import FrameType
from typing import Any

from seabattle.protocol.rules import BadRules, RuleSet, rules_from_dict

__all__ = ["parse_rules_within"]


# Options that change the grid or the fleet: the core then searches for a placement of the fleet
# (rules._fleet_fits), which a crafted fleet can make last minutes. Without them the fleet is a
# preset's, whose search is cached.
_SHAPE_KEYS = frozenset({"rows", "cols", "fleet", "touching"})


class _TooSlow(Exception):
    """Raised inside a rule check that ran past its deadline."""


def parse_rules_within(rules: Any, seconds: float) -> RuleSet:
    """``rules_from_dict(rules)``, stopped with ``BadRules`` if it runs over ``seconds``.

    Blocking: run it in a worker thread. The fleet search is pure Python, so a trace function
    that looks at the clock on every call can stop it where a thread could not be cancelled.
    """
    deadline = time.monotonic() + seconds

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and time.monotonic() > deadline:
            raise _TooSlow
        return None  # no line events: only calls are looked at, which keeps this cheap

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        return rules_from_dict(rules)
    except _TooSlow:
        raise BadRules(
            f"the fleet cannot be shown to fit within {seconds:g} s; use a smaller fleet"
        ) from None
    finally:
        sys.settrace(old)
