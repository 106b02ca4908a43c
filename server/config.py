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

from seabattle.protocol import messages as m

__all__ = ["ContextLog", "Limits", "Peer"]


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
    max_frame: int = 65536  #: largest frame body accepted or sent
    shutdown_grace: float = 5.0  #: how long running matches get to finish on shutdown
    flush_timeout: float = 2.0  #: how long a closing connection may take to drain its queue
    finished_kept: int = 1024  #: finished matches kept in memory for cosign, rematch and records


class Peer(Protocol):
    """One authenticated connection, as the lobby and the referees see it."""

    player: str
    name: str

    def send(self, msg: m.Message) -> None:
        """Queue ``msg``; never blocks (a peer that cannot keep up is dropped instead)."""

    def close(self, reason: str) -> None:
        """Send ``bye{reason}`` and close the connection after its queue drains."""


class ContextLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger that prefixes every line with its context (peer, match), e.g. ``[match=ab12]``."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        """Prefix ``msg`` with the adapter's context."""
        ctx = " ".join(f"{k}={v}" for k, v in (self.extra or {}).items())
        return f"[{ctx}] {msg}", kwargs
