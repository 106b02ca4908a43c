"""The one error registry of the seabattle protocol.

Every refusal, on the wire or in the core, carries an :class:`ErrorCode`. The numbers are stable:
they are part of the protocol (``spec/protocol.md`` section "Error registry", checked against this
enum by the tests). Codes are grouped by the layer that raises them:

* 1xxx framing and decoding: the bytes could not become a message;
* 2xxx session: handshake, identity, permissions, flow control;
* 3xxx lobby: matches, invitations, rule sets;
* 4xxx game: a move that the rules refuse (the move is refused, the game goes on);
* 5xxx proofs and records: commitments, openings, reveals, signatures.

Following h11, there are two exception kinds. :class:`RemoteProtocolError` means the *other* side
broke the protocol; :class:`LocalProtocolError` means *this* side misused the API. Both carry a
code, so raising the right exception is the same as choosing the right wire code (the h2 idea).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ErrorCode",
    "LocalProtocolError",
    "ProtocolError",
    "Refused",
    "RemoteProtocolError",
]


class ErrorCode(IntEnum):
    """Stable wire error codes. Never renumber; only add."""

    # 1xxx framing and decoding
    FRAME_TOO_LARGE = 1001
    TRUNCATED_FRAME = 1002
    MALFORMED_MSGPACK = 1003
    FORBIDDEN_TYPE = 1004
    DUPLICATE_KEY = 1005
    TOO_DEEP = 1006
    BAD_MESSAGE = 1007
    UNKNOWN_TAG = 1008

    # 2xxx session
    HANDSHAKE_REQUIRED = 2001
    UNSUPPORTED_VERSION = 2002
    AUTH_FAILED = 2003
    NOT_ALLOWED = 2004
    RATE_LIMITED = 2005
    BAD_RESUME_TOKEN = 2006
    UNEXPECTED_MESSAGE = 2007
    SHUTTING_DOWN = 2008
    TIMEOUT = 2009
    INTERNAL_ERROR = 2010

    # 3xxx lobby
    NO_SUCH_MATCH = 3001
    MATCH_FULL = 3002
    BAD_RULES = 3003
    BAD_INVITE = 3004
    NO_SUCH_RECORD = 3005

    # 4xxx game: refusals that keep the shot unless the rules say otherwise
    NOT_YOUR_TURN = 4001
    OFF_BOARD = 4002
    ALREADY_FIRED = 4003
    CROSSED_OUT = 4004
    GAME_OVER = 4005
    WRONG_SALVO_SIZE = 4006
    DUPLICATE_IN_SALVO = 4007
    RADAR_USED = 4008
    RADAR_NOT_ALLOWED = 4009
    NOT_CALLER = 4010
    ILLEGAL_FLEET = 4011
    WRONG_PHASE = 4012
    ALREADY_COMMITTED = 4013

    # 5xxx proofs and records
    BAD_PROOF = 5001
    VERDICT_MISMATCH = 5002
    MIRRORED_COMMITMENT = 5003
    BAD_COMMITMENT = 5004
    BAD_REVEAL = 5005
    BAD_SIGNATURE = 5006
    RECORD_INVALID = 5007

    @property
    def slug(self) -> str:
        """The lower-case name used in human reports, e.g. ``not_your_turn``."""
        return self.name.lower()


class ProtocolError(Exception):
    """Base class: an error with a registry code and a human detail."""

    def __init__(self, code: ErrorCode, detail: str = "") -> None:
        super().__init__(f"{code.slug} ({int(code)}): {detail}" if detail else code.slug)
        self.code = code
        self.detail = detail


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids; reply with ``code`` (or fail the session)."""


class LocalProtocolError(ProtocolError):
    """This side asked for something the protocol or the rules forbid (an API misuse)."""


class Refused(ProtocolError):
    """A move the rules refuse. Nothing changes: the game goes on and the mover keeps its turn."""
