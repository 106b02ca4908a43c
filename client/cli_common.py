"""What the ``seabattle`` commands share: the console, and the parsing of their common arguments."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from seabattle.protocol.rules import PRESETS, BadRules, RuleSet, preset, rules_from_dict

__all__ = ["_hostport", "_rules_arg", "_rules_map", "_unwrap", "console"]

console = Console()


def _rules_arg(value: str) -> RuleSet:
    """``--rules`` takes a preset name or a JSON map (``{"preset": "classic", "radar": true}``)."""
    value = value.strip()
    try:
        if value.startswith("{"):
            return rules_from_dict(json.loads(value))
        return preset(value)
    except (BadRules, json.JSONDecodeError) as e:
        raise click.BadParameter(str(e), param_hint="--rules") from None


def _rules_map(rules: RuleSet) -> dict[str, Any]:
    return {"preset": rules.name} if rules.name in PRESETS else rules.to_dict()


def _hostport(value: str) -> tuple[str, int]:
    h, sep, p = value.rpartition(":")
    if not sep or not p.isdigit():
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    return h or "127.0.0.1", int(p)


def _unwrap(e: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (trio's nurseries wrap them)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e
