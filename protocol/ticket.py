"""Redirect tickets: a node's signed word that a player's match runs on another node of the same
cluster (``spec/protocol.md`` 4.10).

A ticket is the canonical msgpack map ``{addr, expires, match, node, player}`` (``addr`` is the
``host:port`` the player connects to, ``expires`` wall-clock Unix seconds); the signature is the
cluster key's Ed25519 signature over ``"seabattle/v1/ticket" 0x00`` followed by those bytes. The
cluster key is the key every node signs records with (``welcome.server``), so a client checks a
ticket with the key it already knows, and the node it is sent to checks it the same way.

Pure: the caller says what time it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .canonical import canonical_pack
from .errors import ErrorCode, RemoteProtocolError

__all__ = ["TICKET_CONTEXT", "Ticket", "issue_ticket", "open_ticket"]

TICKET_CONTEXT = b"seabattle/v1/ticket\x00"
"""What a ticket's signature is over, before the ticket's bytes (domain separation)."""

_MAX_TICKET = 1024  # a ticket is ~150 bytes; a larger one is not worth decoding


@dataclass(frozen=True, slots=True)
class Ticket:
    """What a ticket says: ``player`` may take its seat in ``match`` at node ``node`` (reached at
    ``addr``) until ``expires``."""

    player: str
    match: bytes
    node: str
    addr: str
    expires: int

    def host_port(self) -> tuple[str, int]:
        """``addr`` split into a host and a port (the host may be an IPv6 address in brackets)."""
        host, _, port = self.addr.rpartition(":")
        return host.strip("[]"), int(port)


def issue_ticket(key: Ed25519PrivateKey, ticket: Ticket) -> tuple[bytes, bytes]:
    """The ticket's bytes and the cluster key's signature over them."""
    body = canonical_pack(
        {
            "addr": ticket.addr,
            "expires": ticket.expires,
            "match": ticket.match,
            "node": ticket.node,
            "player": ticket.player,
        }
    )
    return body, key.sign(TICKET_CONTEXT + body)


def open_ticket(server_key: bytes, body: bytes, sig: bytes, now: float) -> Ticket:
    """Check a ticket and return what it says; ``BAD_TICKET`` if it is not signed by
    ``server_key``, malformed, or expired at ``now`` (Unix seconds)."""
    if len(body) > _MAX_TICKET or len(sig) != 64:
        raise RemoteProtocolError(ErrorCode.BAD_TICKET, "a ticket is at most 1 KiB, its sig 64")
    try:
        Ed25519PublicKey.from_public_bytes(server_key).verify(sig, TICKET_CONTEXT + body)
    except (InvalidSignature, ValueError):
        raise RemoteProtocolError(
            ErrorCode.BAD_TICKET, "the ticket is not signed by this cluster's key"
        ) from None
    ticket = _parse(body)
    if now >= ticket.expires:
        raise RemoteProtocolError(ErrorCode.BAD_TICKET, "the ticket has expired")
    return ticket


def _parse(body: bytes) -> Ticket:
    def bad(why: str) -> RemoteProtocolError:
        return RemoteProtocolError(ErrorCode.BAD_TICKET, f"malformed ticket: {why}")

    try:
        value: Any = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as e:  # msgpack raises several unrelated types for bad bytes
        raise bad(type(e).__name__) from None
    want = {"addr": str, "expires": int, "match": bytes, "node": str, "player": str}
    if not isinstance(value, dict) or set(value) != set(want):
        raise bad(f"its fields are {sorted(want)}")
    for name, tp in want.items():
        if type(value[name]) is not tp:
            raise bad(f"{name} is not {tp.__name__}")
    if len(value["match"]) != 16:
        raise bad("match is not 16 bytes")
    if ":" not in value["addr"] or not value["addr"].rpartition(":")[2].isdigit():
        raise bad("addr is not host:port")
    if canonical_pack(value) != body:
        raise bad("it is not in canonical form")
    return Ticket(value["player"], value["match"], value["node"], value["addr"], value["expires"])
