"""Cases on the bounds and the order of a message's checks (spec 2.4, 5.2-5.4)."""

from __future__ import annotations
