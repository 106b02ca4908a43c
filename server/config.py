"""Server settings and the small interfaces that the server's rooms share.

:class:`Limits` gathers every timeout, queue size and rate the server enforces, so that tests can
shrink them and operators can read them in one place. :class:`Peer` is what the lobby and the
referees know of a connection: who it is and how to queue a message to it, never its socket.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.session import MAX_C2S_FRAME, MAX_S2C_FRAME

__all__ = ["ContextLog", "Limits", "Peer", "Timed", "Timers", "TokenBucket", "peer_context"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Timeouts (seconds), queue sizes and rates enforced per connection and per server."""

    handshake_timeout: float = 10.0  #: hello to authed, or the connection is closed
    idle_timeout: float = 60.0  #: nothing received for this long: the peer is gone
    ping_interval: float = 20.0  #: ping a peer that has been quiet this long
    send_queue: int = (
        512  #: frames queued for one peer; a peer that falls further behind is dropped
    )
    rate: float = 100.0  #: messages per second a peer may send, on average (bots are fast)
    burst: int = 200  #: messages a peer may send at once
    #: messages without ``id`` or ``seq`` a peer may send past ``rate`` and ``burst``: they are
    #: never dropped (spec 2.5), so past this credit the session fails instead
    rate_credit: int = 200
    max_recv: int = MAX_C2S_FRAME  #: largest frame body accepted from a client (DoS bound)
    max_send: int = MAX_S2C_FRAME  #: largest frame body sent (a long match's record)
    #: bytes queued for one peer; past this the peer is dropped, as for ``send_queue``
    send_queue_bytes: int = 2 * MAX_S2C_FRAME
    #: the match-request limit (spec 2.5): requests that name rules (create, quick), per second;
    #: the spec's floor, which a client may rely on, is this and ``create_burst``
    create_rate: float = 0.5
    create_burst: int = 5  #: ... of which a peer may send this many at once
    list_max: int = 100  #: open matches one ``list`` answer names at most (spec 2.4)
    open_per_peer: int = 8  #: open matches one connection may host at once
    max_clients: int = 10_000  #: connections served at once; more are told "busy" and closed
    rules_timeout: float = 2.0  #: longest a rule set from the wire may take to check
    shutdown_grace: float = 5.0  #: how long running matches get to finish on shutdown
    flush_timeout: float = 2.0  #: how long a closing connection may take to drain its queue
    finished_kept: int = 1024  #: finished matches kept in memory for cosign, rematch and records
    #: store every accepted move before sending what it caused, so matches survive a restart
    journal: bool = True
    #: how long the journal waits for more moves to write in one transaction (0: one pass)
    journal_window: float = 0.0
    #: MiB of sealed journal file a server alone on SQLite keeps for its running matches before
    #: it copies the oldest into the database (which stalls a busy server for a moment)
    journal_keep_mb: int = 256
    #: moves a journal file takes before it is sealed and a fresh one begun
    journal_seal_rows: int = 8192
    #: how long a match paired across nodes waits for its player from the other node before it
    #: starts without it (whose grace period then runs)
    arrive_timeout: float = 10.0
    #: seconds a named challenge waits for its answer before it expires (spec 6.9.2)
    challenge_timeout: float = 60.0
    challenges_per_peer: int = 4  #: challenges one session may have pending at once
    challenges_per_target: int = 20  #: challenges pending to one player at once
    chat_rate: float = 1.0  #: lines of chat a second one session may say, on average
    chat_burst: int = 5  #: ... of which this many at once


class Peer(Protocol):
    """One authenticated connection, as the lobby and the referees see it."""

    player: str
    name: str
    #: the session agreed the capability ``redirect``: it may be sent to another node
    follows: bool
    #: the session agreed the capability ``teams``: it may play a member of a team (spec 6.8)
    teams: bool
    #: the session agreed the capability ``lean``: it gets no copy of its own moves (spec 4.2)
    lean: bool
    #: the session agreed the capability ``people``: it is sent ``seated`` (spec 6.9)
    people: bool

    def send(self, msg: m.Message) -> None:
        """Queue ``msg``; never blocks (a peer that cannot keep up is dropped instead)."""

    def close(self, reason: str) -> None:
        """Send ``bye{reason}`` and close the connection after its queue drains."""

    @property
    def connected(self) -> bool:
        """Whether the connection is still up (it has not closed nor been dropped)."""


class Timed(Protocol):
    """Something a :class:`Timers` service looks at when it comes due."""

    def tick(self, now: float) -> float | None:
        """Act on trio time ``now``; return when to look again, or ``None`` for never."""


class Timers(Protocol):
    """One task's heap of timers for many objects (:class:`~.timers.Heartbeat`): a timer costs
    a heap entry, not a task or a cancel scope."""

    def add(self, obj: Timed, due: float) -> None:
        """Call ``obj.tick`` at trio time ``due`` (and again when it asks)."""


class ContextLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger that carries its context (peer, player, match, seat) on every record it makes.

    Each record gets the context as ``record.ctx`` (a dict: what the JSON log format writes as
    fields) and a ``[match=ab12cd34 peer=...]`` prefix on its message, so plain-text handlers
    that know nothing of ``ctx`` still show it. A call may add to the context:
    ``log.info("...", extra={"seat": 1})``.
    """

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        """Attach the context to the record and prefix ``msg`` with it."""
        ctx = dict(self.extra or {})
        ctx.update(kwargs.get("extra") or {})
        kwargs["extra"] = {"ctx": ctx, "bare_msg": msg}
        prefix = " ".join(f"{k}={_short(k, v)}" for k, v in ctx.items())
        return f"[{prefix}] {msg}", kwargs


def peer_context(peer: Peer, **more: Any) -> dict[str, Any]:
    """Log context for ``peer``: its player and, for a real connection, its address."""
    ctx: dict[str, Any] = {"player": peer.player, **more}
    # Not part of Peer: a log line must never be what breaks a match with some other peer.
    addr = getattr(peer, "addr", None)
    if addr is not None:
        ctx["peer"] = addr
    return ctx


def _short(key: str, value: Any) -> Any:
    # Full ids go to structured logs, where they are searched for; a text line keeps a prefix,
    # which is enough to tell matches and players apart by eye.
    if isinstance(value, str):
        if key == "match":
            return value[:8]
        if key == "player":
            return value[:12]
    return value


class TokenBucket:
    """A token bucket: ``rate`` tokens a second, at most ``burst`` saved up, and ``credit``
    tokens that :meth:`take` may lend when asked to (the bucket then owes them)."""

    __slots__ = ("at", "burst", "credit", "rate", "tokens")  # one per connection, thousands alive

    def __init__(self, rate: float, burst: int, credit: int = 0) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.credit = float(credit)
        self.tokens = float(burst)
        self.at = trio.current_time()

    def take(self, *, lend: bool = False) -> bool:
        """Take one token if there is one; with ``lend``, also on credit while any is left."""
        now = trio.current_time()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= (1.0 - self.credit if lend else 1.0):
            self.tokens -= 1.0
            return True
        return False
