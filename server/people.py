"""People on a server: who is online, named challenges, and the chat of a match (spec 6.9)."""

from __future__ import annotations
