"""Cases on records (spec 11): what a server's signed records hold and how they are encoded."""

from __future__ import annotations
