"""What the command line takes for an engine (``bot --engine``, ``host``/``join --engine``, the
arena's ENGINE arguments): one text that names a built-in strategy, an HTTP engine's URL, or a
command line that runs an engine process (spec/engine.md)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from seabattle.engine.base import Engine, Hello

__all__ = ["MOVE_TIME", "engine_from_spec", "engine_option_help", "started_engine"]

#: The help text of an option that takes an engine.
engine_option_help = (
    "An engine: a built-in strategy's name (best, density, hunt, random), an HTTP engine's "
    "URL (http://HOST:PORT/PATH), or a command that runs one, quoted as a shell would "
    "('node examples/engine.js'); see spec/engine.md."
)

#: ``--move-time``, one option for every command that plays an engine (bot, host/join,
#: challenge/accept, arena).
MOVE_TIME = click.option(
    "--move-time",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Seconds an external engine has for each answer; one that takes longer loses the game.",
)


def engine_from_spec(text: str, *, move_time: float) -> Engine:
    """The engine ``text`` names: a built-in strategy's name gives a
    :class:`~seabattle.engine.builtin.BuiltinEngine`; ``http://`` or ``https://`` an
    :class:`~seabattle.engine.http.HttpEngine`; anything else is split as a shell would
    (:func:`shlex.split`) into the command line of a
    :class:`~seabattle.engine.process.ProcessEngine`. ``move_time``: seconds an external engine
    has for each answer. Raises :class:`click.BadParameter` for an empty or unparsable text."""
    text = text.strip()
    if not text:
        raise click.BadParameter("an engine is a strategy's name, a URL or a command; got nothing")
    from seabattle.bots.strategies import STRATEGIES

    if text in STRATEGIES:
        from seabattle.engine.builtin import BuiltinEngine

        return BuiltinEngine(text)
    if text.startswith(("http://", "https://")):
        from seabattle.engine.http import HttpEngine

        return HttpEngine(text, move_time=move_time)
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise click.BadParameter(f"cannot split the engine command {text!r}: {e}") from None
    from seabattle.engine.process import ProcessEngine

    return ProcessEngine(argv, move_time=move_time)


async def started_engine(text: str, *, move_time: float) -> tuple[Engine, Hello]:
    """The engine ``text`` names (:func:`engine_from_spec`), started, and its hello; an
    engine that does not start is closed, and that is the command's one-line error."""
    from seabattle.engine.base import EngineFault

    engine = engine_from_spec(text, move_time=move_time)
    try:
        hello = await engine.start()
    except EngineFault as e:
        await engine.close()
        raise click.ClickException(f"the engine did not start: {e}") from None
    return engine, hello
