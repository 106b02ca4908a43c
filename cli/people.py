"""``seabattle`` commands about people: players' figures, who is online, challenges."""

from __future__ import annotations
