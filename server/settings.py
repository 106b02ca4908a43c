"""The server's settings from four places: defaults, a TOML file, ``SEABATTLE_*`` variables and
the command line, each overriding the one before.

One table, :data:`OPTIONS`, names every setting an operator may change: the ``serve`` options
(``port``, ``db``, ...) and the :class:`~.config.Limits` worth tuning (``rate``, ``max_clients``,
the timeouts, the journal's). A file holds them as top-level keys (``port = 7010``), the
environment as ``SEABATTLE_PORT=7010``; :func:`load` checks each value's type and range and
raises :class:`SettingsError`, one line that names the setting and where it came from. The
limits that the spec gives a floor (a client relies on them, spec 2.5, 4.1, 4.6) cannot go below
it. :func:`render` writes the effective settings back as TOML that :func:`load` reads again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import Limits

__all__ = ["OPTIONS", "Option", "Settings", "SettingsError", "load", "render"]

ENV_PREFIX = "SEABATTLE_"


class SettingsError(ValueError):
    """A setting that cannot be used; the message is one line naming it and its source."""


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its type, default, bounds and what it is for."""

    kind: type  #: str, int, float or bool
    default: Any
    help: str
    optional: bool = False  #: may be unset (``None``); an empty variable unsets it
    lo: float | None = None  #: smallest value allowed
    hi: float | None = None  #: largest value allowed
    choices: tuple[str, ...] = ()
    why_lo: str = ""  #: why ``lo`` is the floor, when the spec sets it
    limit: bool = False  #: a field of :class:`~.config.Limits`, not an argument of ``main``


_LIMITS = Limits()


def _limit(name: str, help: str, lo: float | None = None, **kw: Any) -> Option:
    kind = type(getattr(_LIMITS, name))
    return Option(kind, getattr(_LIMITS, name), help, lo=lo, limit=True, **kw)


#: Every setting, by its key in a file (its variable is ``SEABATTLE_`` and the key in capitals).
OPTIONS: dict[str, Option] = {
    "host": Option(str, "127.0.0.1", "address to listen on"),
    "port": Option(int, 7010, "port to listen on (0: any free port)", lo=0, hi=65535),
    "db": Option(str, "seabattle.db", "SQLite file, or a postgresql://user@host/db URL"),
    "key": Option(str, "server.key", "the server's identity key file (created if missing)"),
    "guests": Option(bool, True, "admit any key; false: only keys registered (seabattle keys)"),
    "tls_cert": Option(str, None, "TLS certificate chain (PEM), with tls_key", optional=True),
    "tls_key": Option(str, None, "TLS private key (PEM), with tls_cert", optional=True),
    "json_status": Option(bool, False, "status as JSON lines on stdout"),
    "log_format": Option(str, "text", "log lines on stderr", choices=("text", "json")),
    "metrics_port": Option(
        int, None, "serve Prometheus /metrics on this port (0: any)", optional=True, lo=0, hi=65535
    ),
    "metrics_host": Option(str, "127.0.0.1", "address the metrics endpoint binds"),
    "node": Option(str, "main", "this server's name among nodes sharing one database"),
    "cluster": Option(
        bool, None, "join the other nodes on the database (unset: on PostgreSQL)", optional=True
    ),
    "advertise": Option(str, None, "HOST:PORT other nodes send players to", optional=True),
    "lease": Option(
        float,
        10.0,
        "seconds before another node takes over a silent one's matches",
        lo=0.5,
        hi=3600,
    ),
    "workers": Option(
        int,
        1,
        "server processes on this port, sharing the store as cluster nodes do",
        lo=1,
        hi=256,
    ),
    "cpu_latency_us": Option(
        int,
        None,
        "hold idle CPUs to this wake-up latency while serving, in µs (Linux, root; 0: poll)",
        optional=True,
        lo=0,
        hi=2**31 - 1,
    ),
    "handshake_timeout": _limit(
        "handshake_timeout",
        "seconds from connecting to authenticated",
        10.0,
        hi=3600,
        why_lo="spec 4.1",
    ),
    "idle_timeout": _limit(
        "idle_timeout",
        "seconds of silence after which a peer is gone",
        60.0,
        hi=86400,
        why_lo="spec 4.6",
    ),
    "ping_interval": _limit("ping_interval", "ping a peer quiet this many seconds", 0.1, hi=3600),
    "rate": _limit(
        "rate", "messages a second one peer may send, on average", 20.0, hi=1e6, why_lo="spec 2.5"
    ),
    "burst": _limit(
        "burst", "messages one peer may send at once", 50, hi=1_000_000, why_lo="spec 2.5"
    ),
    "max_clients": _limit(
        "max_clients", "connections served at once; more are told busy", 1, hi=10_000_000
    ),
    "send_queue": _limit(
        "send_queue", "frames queued for one peer before it is dropped", 16, hi=1_000_000
    ),
    "open_per_peer": _limit("open_per_peer", "open matches one connection may host", 1, hi=1000),
    "finished_kept": _limit(
        "finished_kept", "finished matches kept in memory (cosign, rematch)", 0, hi=10_000_000
    ),
    "shutdown_grace": _limit(
        "shutdown_grace",
        "seconds running matches get on shutdown (without journal)",
        0.0,
        hi=3600,
    ),
    "flush_timeout": _limit("flush_timeout", "seconds a closing connection may drain", 0.0, hi=600),
    "arrive_timeout": _limit(
        "arrive_timeout",
        "seconds a match paired across nodes waits for its player",
        0.1,
        hi=3600,
    ),
    "challenge_timeout": _limit(
        "challenge_timeout", "seconds a challenge waits for its answer", 1.0, hi=86400
    ),
    "journal": _limit("journal", "store every move first, so matches survive a restart"),
    "journal_window": _limit(
        "journal_window", "seconds the journal waits to batch moves (0: one pass)", 0.0, hi=10
    ),
    "journal_keep_mb": _limit(
        "journal_keep_mb",
        "MiB of journal file kept for running matches (SQLite alone)",
        0,
        hi=1 << 20,
    ),
}


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective settings: every key of :data:`OPTIONS`, and where each value came from."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]  #: "default", the file's path, the variable, or "command line"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def limits(self) -> Limits:
        """The :class:`~.config.Limits` these settings give."""
        return dataclasses.replace(
            _LIMITS, **{k: v for k, v in self.values.items() if OPTIONS[k].limit}
        )

    def main_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`.app.main` (``limits`` included)."""
        out = {k: v for k, v in self.values.items() if not OPTIONS[k].limit}
        out["limits"] = self.limits()
        return out


def load(
    given: Mapping[str, Any] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """The settings from the defaults, the TOML file ``config``, ``env`` (``os.environ`` if
    ``None``) and ``given`` (the command line: keys of :data:`OPTIONS`; ``None`` values are
    not given), each over the one before. Raises :class:`SettingsError`."""
    values = {k: o.default for k, o in OPTIONS.items()}
    sources = dict.fromkeys(OPTIONS, "default")
    if config is not None:
        where = os.fspath(config)
        for k, v in _read_file(where).items():
            values[k], sources[k] = _check(k, v, where, _from_toml), where
    for k in OPTIONS:
        var = ENV_PREFIX + k.upper()
        raw = (os.environ if env is None else env).get(var)
        if raw is not None:
            values[k], sources[k] = _check(k, raw, var, _from_env), var
    for k, v in (given or {}).items():
        if k not in OPTIONS:
            raise SettingsError(f"unknown setting {k!r}")
        if v is not None:
            flag = "--" + k.replace("_", "-")
            values[k], sources[k] = _check(k, v, flag, _from_toml), "command line"
    if values["ping_interval"] >= values["idle_timeout"]:
        raise SettingsError(
            f"ping_interval ({values['ping_interval']:g}, {sources['ping_interval']}) must be"
            f" less than idle_timeout ({values['idle_timeout']:g}, {sources['idle_timeout']})"
        )
    if (values["tls_cert"] is None) != (values["tls_key"] is None):
        raise SettingsError("TLS needs both tls_cert and tls_key (--tls-cert, --tls-key)")
    return Settings(values, sources)


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise SettingsError(f"cannot read the config file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"the config file {path} is not TOML: {e}") from None
    for k in data:
        if k not in OPTIONS:
            raise SettingsError(
                f"unknown setting {k!r} in {path} (seabattle serve --print-config lists them)"
            )
    return data


def _from_toml(o: Option, v: Any) -> Any:
    # bool is an int in Python, but `port = true` is a mistake worth naming.
    if o.kind is float and isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, o.kind) and (o.kind is bool or not isinstance(v, bool)):
        return v
    raise TypeError


def _from_env(o: Option, raw: str) -> Any:
    text = raw.strip()
    if o.kind is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise TypeError
    if o.kind is str:
        return raw
    try:
        return o.kind(text)
    except ValueError:
        raise TypeError from None


_KIND = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _check(key: str, value: Any, where: str, parse: Callable[[Option, Any], Any]) -> Any:
    o = OPTIONS[key]
    if o.optional and (value is None or value == ""):
        return None
    try:
        v = parse(o, value)
    except TypeError:
        raise SettingsError(f"{key} ({where}): expected {_KIND[o.kind]}, got {value!r}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise SettingsError(f"{key} ({where}): {v!r} is not a finite number")
    if o.choices and v not in o.choices:
        raise SettingsError(f"{key} ({where}): {v!r} is not one of {', '.join(o.choices)}")
    if o.lo is not None and o.hi is not None and not o.lo <= v <= o.hi:
        why = f" (the floor of {o.why_lo})" if o.why_lo and v < o.lo else ""
        raise SettingsError(f"{key} ({where}): {v!r} is not in {o.lo:.15g}..{o.hi:.15g}{why}")
    return v


def render(settings: Settings, redact: Callable[[str], str] = lambda s: s) -> str:
    """The settings as TOML that :func:`load` reads back, each with where it came from; the
    ``db`` URL through ``redact`` (a password is never printed). Unset values are comments."""
    lines = ["# seabattle serve: the effective settings (key = value  # source)"]
    for k, o in OPTIONS.items():
        v = settings.values[k]
        source = settings.sources[k]
        if v is None:
            lines.append(f"# {k} = (unset)  # {o.help}")
            continue
        if k == "db":
            v = redact(v)
        lines.append(f"{k} = {_toml(v)}  # {source}")
    return "\n".join(lines) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        # A JSON string is a TOML basic string (the same escapes, \uXXXX included).
        return json.dumps(v)
    return repr(v)
