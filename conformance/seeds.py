"""Cases on the seeds' presets and the decisions of spec 7.3."""

from __future__ import annotations
