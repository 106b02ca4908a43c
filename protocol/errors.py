"""The one error registry of the seabattle protocol.

Every refusal, on the wire or in the core, carries an :class:`ErrorCode`. The numbers are stable:
they are part of the protocol (``spec/protocol.md`` section "Error registry", checked against this
enum by the tests). Codes are grouped by the layer that raises them:

* 1xxx framing and decoding: the bytes could not become a message;
* 2xxx session: handshake, identity, permissions, flow control;
* 3xxx lobby: matches, invitations, rule sets;
* 4xxx game: a move that the rules refuse (the move is refused, the game goes on);
* 5xxx proofs and records: commitments, openings, reveals, signatures.

What each code means on the wire (:data:`MEANINGS`), which layer it belongs to (:data:`LAYERS`)
and which codes fail the session (:data:`FAILS_SESSION`) are kept here, next to the codes: the
registry of ``spec/protocol.md`` is generated from them.

Following h11, there are two exception kinds. :class:`RemoteProtocolError` means the *other* side
broke the protocol; :class:`LocalProtocolError` means *this* side misused the API. Both carry a
code, so raising the right exception is the same as choosing the right wire code (the h2 idea).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "FAILS_SESSION",
    "LAYERS",
    "MEANINGS",
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
    BAD_TICKET = 3006
    NO_SUCH_PLAYER = 3007
    NO_SUCH_CHALLENGE = 3008

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
    NOT_CAPTAIN = 4014

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

    @property
    def layer(self) -> str:
        """The layer that raises the code (its thousand digit, :data:`LAYERS`), e.g. ``game``."""
        return LAYERS[self // 1000]


#: The layer of each thousand of codes, by its digit, as the registry names it.
LAYERS: dict[int, str] = {
    1: "decoding",
    2: "session",
    3: "lobby",
    4: "game",
    5: "proofs",
}

#: The frame-level codes: after one of them the byte stream cannot be trusted to be in step, so
#: the receiver fails the session (``spec/protocol.md`` 2.5, 4.5). A zero-length frame fails it
#: too, though it is reported as ``BAD_MESSAGE`` (the decoder's failure says so, not the code);
#: so does ``TIMEOUT`` (4.5), which refuses no frame. :class:`.session.Connection` enforces the
#: same set (the tests check that the two agree).
FAILS_SESSION: frozenset[ErrorCode] = frozenset(
    {ErrorCode.FRAME_TOO_LARGE, ErrorCode.TRUNCATED_FRAME}
)

#: What each code means on the wire: one sentence or two, in the registry's words (a code in
#: :data:`FAILS_SESSION` is said to fail the session by the registry, not here). Every code has
#: one. The limits quoted are :data:`.codec.MAX_FRAME` and :data:`.codec.MAX_DEPTH`, written out
#: because the codec imports this module; the tests check that they agree.
MEANINGS: dict[ErrorCode, str] = {
    ErrorCode.FRAME_TOO_LARGE: "A frame header announces a body longer than the receiver's limit "
    "(65536 bytes by default).",
    ErrorCode.TRUNCATED_FRAME: "The stream ended inside a frame (header or body).",
    ErrorCode.MALFORMED_MSGPACK: "The body is not exactly one well-formed msgpack value "
    "(bad byte, bad UTF-8, truncated value, trailing bytes).",
    ErrorCode.FORBIDDEN_TYPE: "A float or an extension type (the timestamp included) "
    "appears anywhere in the body.",
    ErrorCode.DUPLICATE_KEY: "A map repeats a key.",
    ErrorCode.TOO_DEEP: "Maps and arrays nest more than 8 deep.",
    ErrorCode.BAD_MESSAGE: "Well-formed msgpack that is not a valid message: empty frame, top "
    "level not a map, a non-string key, no string `t`, a missing or extra field, a value of the "
    "wrong type or over a limit, a verdict of the wrong shape.",
    ErrorCode.UNKNOWN_TAG: "The `t` tag names no message of the agreed version.",
    ErrorCode.HANDSHAKE_REQUIRED: "A message other than the next handshake message, "
    "`error`, `ping`, `pong` or `bye` arrived before the handshake finished.",
    ErrorCode.UNSUPPORTED_VERSION: "`hello` offers no version the receiver speaks.",
    ErrorCode.AUTH_FAILED: "The `auth` key or signature is malformed or does not verify, or "
    "the key is not admitted.",
    ErrorCode.NOT_ALLOWED: "The sender may not do this: not its seat, not its match, not a "
    "player of it.",
    ErrorCode.RATE_LIMITED: "Too many requests or refused messages; slow down.",
    ErrorCode.BAD_RESUME_TOKEN: "The resume token is unknown, expired or not this key's.",
    ErrorCode.UNEXPECTED_MESSAGE: "A message sent in the wrong direction, a handshake message "
    "after the handshake, or a message to a closed connection.",
    ErrorCode.SHUTTING_DOWN: "The server is shutting down and accepts no new work.",
    ErrorCode.TIMEOUT: "The peer stayed silent past the session's idle limit.",
    ErrorCode.INTERNAL_ERROR: "The sender failed internally; the request may be retried.",
    ErrorCode.NO_SUCH_MATCH: "No match with that id (or invitation code) exists for the sender.",
    ErrorCode.MATCH_FULL: "Both seats of the match are taken.",
    ErrorCode.BAD_RULES: "The rule set is malformed or cannot work (the detail says why).",
    ErrorCode.BAD_INVITE: "The invitation code is unknown, used or expired.",
    ErrorCode.NO_SUCH_RECORD: "No signed record exists for that match (yet).",
    ErrorCode.BAD_TICKET: "A redirect ticket that is forged, expired, another player's, or for "
    "another node.",
    ErrorCode.NO_SUCH_PLAYER: "No player with that id is known where the request needs one, "
    "or a display name given instead names none or more than one (a challenge's target is "
    "looked for among the players online, section 6.9).",
    ErrorCode.NO_SUCH_CHALLENGE: "No challenge with that id is pending for the sender: unknown, "
    "answered, cancelled, expired, or addressed to another player (section 6.9).",
    ErrorCode.NOT_YOUR_TURN: "The other seat is to move.",
    ErrorCode.OFF_BOARD: "A called cell or the radar area is not on the grid, or is not a cell.",
    ErrorCode.ALREADY_FIRED: "A called cell was fired at already (the shot is kept).",
    ErrorCode.CROSSED_OUT: "A called cell is crossed out: it can only be water (shot kept).",
    ErrorCode.GAME_OVER: "The game (or the match) is over.",
    ErrorCode.WRONG_SALVO_SIZE: "The shot calls the wrong number of cells.",
    ErrorCode.DUPLICATE_IN_SALVO: "A salvo calls the same cell twice.",
    ErrorCode.RADAR_USED: "The radar was used already in this game.",
    ErrorCode.RADAR_NOT_ALLOWED: "The rule set has no radar.",
    ErrorCode.NOT_CALLER: "Another team member calls this turn.",
    ErrorCode.ILLEGAL_FLEET: "The fleet breaks the rules (custody `place`); place again.",
    ErrorCode.WRONG_PHASE: "The game is not in a phase that accepts this input.",
    ErrorCode.ALREADY_COMMITTED: "The seat has committed its fleet already.",
    ErrorCode.NOT_CAPTAIN: "Team play: only the team's captain (member 0) places, answers, reveals "
    "and resigns.",
    ErrorCode.BAD_PROOF: "An opening does not match the commitment, or is malformed.",
    ErrorCode.VERDICT_MISMATCH: "A verdict contradicts its own openings or the rules.",
    ErrorCode.MIRRORED_COMMITMENT: "A commitment repeats leaves of the opponent's commitment.",
    ErrorCode.BAD_COMMITMENT: "A commitment of the wrong shape (leaf count or leaf size).",
    ErrorCode.BAD_REVEAL: "A reveal that is malformed or does not open the commitment.",
    ErrorCode.BAD_SIGNATURE: "A signature (co-signature, record signature) does not verify.",
    ErrorCode.RECORD_INVALID: "A record fails verification.",
}


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
