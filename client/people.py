"""The client's side of people (spec 6.9): challenges, who is online, and a match's chat."""

from __future__ import annotations
