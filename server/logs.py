"""Log output for ``seabattle serve``: plain text for people, JSON lines for log pipelines.

The server's loggers attach their context through :class:`~.config.ContextLog` (``record.ctx``);
:class:`JsonFormatter` writes it as fields of one JSON object per line, beside ``ts``, ``level``,
``logger`` and ``msg``, so that a pipeline can select every line of one match or one peer without
parsing the text prefix.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
"""The values ``--log-format`` accepts."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

#: Context keys written as top-level fields; anything else a caller adds goes there too.
_CONTEXT_FIRST = ("match", "peer", "player", "seat")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``msg``, then
    the record's context (``match``, ``peer``, ``player``, ``seat`` where known) and ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line of JSON (newlines in values are escaped)."""
        ts = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": _bare_message(record),
        }
        ctx = getattr(record, "ctx", None)
        if isinstance(ctx, dict):
            for key in _CONTEXT_FIRST:
                if ctx.get(key) is not None:
                    out[key] = ctx[key]
            for key, value in ctx.items():
                out.setdefault(key, value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, default=str, separators=(",", ":"))


def _bare_message(record: logging.LogRecord) -> str:
    """The message without the text prefix :class:`~.config.ContextLog` put on it."""
    bare = getattr(record, "bare_msg", None)
    if bare is None:
        return record.getMessage()
    text = str(bare)
    return text % record.args if record.args else text


def configure_logging(fmt: str = "text", *, stream: TextIO | None = None) -> logging.Handler:
    """Send INFO and above to ``stream`` (stderr) in ``fmt`` (``text`` or ``json``).

    Replaces the root logger's handlers: this is for the ``seabattle serve`` process, not for a
    program that embeds the server and has its own logging. Returns the handler installed.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r}: one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return handler
