"""The sans-IO connection: frames in, validated messages out, and the handshake's state machine.

``Connection(role)`` owns no socket. The shell feeds it bytes (:meth:`Connection.receive_data`) and
gets back messages, or errors to answer; it turns messages into bytes with :meth:`Connection.send`.

Handshake (``spec/protocol.md`` section "Session"): the client sends ``hello``; the server answers
``welcome`` with its identity key and a 32-byte challenge; the client proves its key with ``auth``;
the server answers ``authed``. Until then only these messages may pass: any other is answered with
``HANDSHAKE_REQUIRED`` and dropped, and the session goes on.

Peer play (``spec/protocol.md`` 6.7) needs no role of its own: the hosting peer plays
``Role.SERVER``'s rows of the handshake and the joining peer ``Role.CLIENT``'s. What differs is the
direction rule, once both sides have agreed the capability ``peer`` (``hello.caps`` offers it and
``welcome.caps`` lists it): the game messages of :data:`PEER_MESSAGES` then travel both ways, and
the lobby requests and the server's events are refused, except the host's ``start``. The
connection sees the agreement go past in its own handshake, so the shell sets nothing.

Error handling: a frame that breaks framing (too large, truncated) ends the session, because the
byte stream can no longer be trusted to be in step. A well-framed body that is not a valid message
(bad msgpack, ext type, duplicate key, unknown tag, wrong field) is returned as an error value: the
shell answers it with ``error`` and the session goes on, losing nothing.
"""

from __future__ import annotations

from enum import StrEnum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import messages as m
from .codec import FrameDecoder
from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError

__all__ = [
    "MAX_C2S_FRAME",
    "MAX_S2C_FRAME",
    "PEER_MESSAGES",
    "REDIRECT",
    "SUPPORTED_VERSIONS",
    "Connection",
    "Role",
    "State",
    "auth_payload",
    "check_auth",
]

SUPPORTED_VERSIONS = (2,)

MAX_C2S_FRAME = 64 * 1024
"""Largest frame body a client sends and a server accepts: a server reads every client's frames,
so this bounds what one peer can make it buffer (64 KiB)."""

MAX_S2C_FRAME = 16 * 1024 * 1024
"""Largest frame body a server sends and a client accepts (16 MiB): a signed best-of-N record
travels in one ``ok`` and outgrows 64 KiB after two classic games."""


class Role(StrEnum):
    """Which side of the handshake this connection plays."""

    CLIENT = "client"
    SERVER = "server"


class State(StrEnum):
    """Handshake progress."""

    HELLO = "hello"  #: waiting for / about to send hello
    WELCOME = "welcome"  #: client sent hello; server owes welcome
    AUTH = "auth"  #: welcome sent; client owes auth
    AUTHED = "authed"  #: auth sent; server owes authed
    READY = "ready"
    CLOSED = "closed"


#: (role, state, tag received) -> next state. Receiving anything else before READY is refused.
RECV: dict[tuple[Role, State, str], State] = {
    (Role.SERVER, State.HELLO, "hello"): State.WELCOME,
    (Role.SERVER, State.AUTH, "auth"): State.AUTHED,
    (Role.CLIENT, State.WELCOME, "welcome"): State.AUTH,
    (Role.CLIENT, State.AUTHED, "authed"): State.READY,
}
#: (role, state, tag sent) -> next state.
SEND: dict[tuple[Role, State, str], State] = {
    (Role.CLIENT, State.HELLO, "hello"): State.WELCOME,
    (Role.CLIENT, State.AUTH, "auth"): State.AUTHED,
    (Role.SERVER, State.WELCOME, "welcome"): State.AUTH,
    (Role.SERVER, State.AUTHED, "authed"): State.READY,
}
# Framing errors after which the byte stream cannot be trusted to be in step.
_FATAL = frozenset({ErrorCode.FRAME_TOO_LARGE, ErrorCode.TRUNCATED_FRAME})
# Messages that may cross in any state: errors (a refused auth), heartbeats and goodbyes.
_ANY_STATE = frozenset({"error", "ping", "pong", "bye"})
_HANDSHAKE = frozenset({"hello", "welcome", "auth", "authed"})

PEER_MESSAGES = frozenset(
    {"commit", "fire", "radar", "answer", "reveal", "resign", "coin", "cosign"}
)
"""What travels in both directions in a ``peer`` session (``spec/protocol.md`` 6.7): the game
inputs, which in refereed play only a client sends, go from each peer to the other."""

# The tags each role may receive: by direction (spec 2.4), and in a peer session (6.7) the
# session messages, the game messages both ways, and the host's ``start`` for the joiner. A set
# of tags per connection costs the hot path one lookup, however the rule came about.
_INBOUND = {
    role: frozenset(t for t, cls in m.MESSAGES.items() if cls.DIR is not refused)
    for role, refused in ((Role.CLIENT, m.Dir.C2S), (Role.SERVER, m.Dir.S2C))
}
_PEER_INBOUND = {
    role: (tags & (_HANDSHAKE | _ANY_STATE | {"start"})) | PEER_MESSAGES
    for role, tags in _INBOUND.items()
}
_PEER = "peer"  # the capability (spec 4.2)
REDIRECT = "redirect"
"""The capability of a client that follows ``redirect`` to another node of a cluster (4.10)."""
TEAMS = "teams"
"""The capability of a client that plays team matches, one session per member (6.8)."""
LEAN = "lean"
"""The capability of a client that is sent no copy of what it said itself (4.2, 5.7): not the
``shot`` its own ``fire`` or ``radar`` called, nor the ``verdict`` on its own ``answer``, and in
custody mode no ``shot`` at all (the ``verdict`` that comes with it repeats every field)."""
PEOPLE = "people"
"""The capability of a client that takes the people messages of 6.9: the lobby's player
figures, running matches, challenges and chat, and ``seated`` (the seats' names and ratings)
after every ``start``."""


def auth_payload(challenge: bytes, server_key: bytes, client_key: bytes) -> bytes:
    """The bytes a client signs to prove its key: bound to this server and this challenge."""
    return b"seabattle/v1/auth\x00" + challenge + server_key + client_key


def check_auth(msg: m.Auth, challenge: bytes, server_key: bytes) -> None:
    """Raise ``AUTH_FAILED`` unless ``msg.sig`` is ``msg.key``'s signature of the auth payload."""
    if len(msg.key) != 32 or len(msg.sig) != 64:
        raise RemoteProtocolError(ErrorCode.AUTH_FAILED, "key is 32 bytes, sig 64")
    try:
        Ed25519PublicKey.from_public_bytes(msg.key).verify(
            msg.sig, auth_payload(challenge, server_key, msg.key)
        )
    except (InvalidSignature, ValueError):
        raise RemoteProtocolError(ErrorCode.AUTH_FAILED, "signature does not verify") from None


class Connection:
    """One side of one connection, as a pure state machine."""

    # A server holds one per connection, thousands at once.
    __slots__ = (
        "_decoder",
        "_inbound",
        "_peer_offered",
        "max_recv",
        "max_send",
        "peer",
        "role",
        "state",
    )

    def __init__(
        self,
        role: Role,
        max_frame: int | None = None,
        *,
        max_recv: int | None = None,
        max_send: int | None = None,
    ) -> None:
        """A connection in ``role``; frame limits default by direction.

        A client sends at most :data:`MAX_C2S_FRAME` and receives up to :data:`MAX_S2C_FRAME`; a
        server the other way round. ``max_frame`` sets both limits at once (a peer match, a test);
        ``max_recv`` / ``max_send`` override one.
        """
        self.role = role
        self.state = State.HELLO
        c2s, s2c = MAX_C2S_FRAME, MAX_S2C_FRAME
        default_recv, default_send = (s2c, c2s) if role is Role.CLIENT else (c2s, s2c)
        both = max_frame
        self.max_recv = max_recv if max_recv is not None else both or default_recv
        self.max_send = max_send if max_send is not None else both or default_send
        self._decoder = FrameDecoder(self.max_recv)
        self._inbound = _INBOUND[role]
        #: Whether the handshake agreed the capability ``peer``: a peer session (spec 6.7).
        self.peer = False
        self._peer_offered = False  # hello listed ``peer``; welcome decides

    def receive_data(
        self, data: bytes | bytearray | memoryview
    ) -> list[m.Message | RemoteProtocolError]:
        """Feed bytes; return the messages (and per-message errors) they complete, in order.

        Raises :class:`RemoteProtocolError` for a framing error, after which the session is over.
        """
        if self.state is State.CLOSED:
            raise LocalProtocolError(ErrorCode.UNEXPECTED_MESSAGE, "the connection is closed")
        try:
            self._decoder.feed(data)
        except RemoteProtocolError:
            self.state = State.CLOSED
            raise
        out: list[m.Message | RemoteProtocolError] = []
        while True:
            try:
                body = self._decoder.next_frame()
            except RemoteProtocolError as e:
                if e.code in _FATAL or self._decoder.failed:
                    self.state = State.CLOSED
                    raise
                out.append(e)  # a bad body inside a good frame: the stream is still in step
                continue
            if body is None:
                return out
            try:
                out.append(self._accept(m.decode(body)))
            except RemoteProtocolError as e:
                out.append(e)

    def receive_eof(self) -> None:
        """The peer closed; raises ``TRUNCATED_FRAME`` if it stopped inside a frame."""
        self.state = State.CLOSED
        self._decoder.eof()

    def _accept(self, msg: m.Message) -> m.Message:
        tag = msg.TAG
        if tag not in self._inbound:
            raise RemoteProtocolError(ErrorCode.UNEXPECTED_MESSAGE, self._misdirected(tag))
        if self.state is State.READY or tag in _ANY_STATE:
            if self.state is State.READY and tag in _HANDSHAKE:
                raise RemoteProtocolError(ErrorCode.UNEXPECTED_MESSAGE, "the handshake is done")
            return msg
        nxt = RECV.get((self.role, self.state, tag))
        if nxt is None:
            raise RemoteProtocolError(
                ErrorCode.HANDSHAKE_REQUIRED,
                f"{tag!r} received in handshake state {self.state.value!r}",
            )
        if isinstance(msg, m.Hello) and not set(msg.versions) & set(SUPPORTED_VERSIONS):
            raise RemoteProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"versions {list(msg.versions)} offered; "
                f"this side speaks {list(SUPPORTED_VERSIONS)}",
            )
        self._caps(msg)
        self.state = nxt
        return msg

    def _misdirected(self, tag: str) -> str:
        if self.peer and tag in _INBOUND[self.role]:
            return f"{tag!r} is not used in peer play"
        return f"{tag!r} is not sent to a {self.role.value}"

    def _caps(self, msg: m.Message) -> None:
        """Follow the capability ``peer`` through the handshake, sent or received alike."""
        if isinstance(msg, m.Hello):
            self._peer_offered = _PEER in msg.caps
        elif isinstance(msg, m.Welcome) and self._peer_offered and _PEER in msg.caps:
            # Only what both sides listed is agreed (spec 4.2): a welcome naming ``peer`` to a
            # hello that did not offer it starts no peer session.
            self.peer = True
            self._inbound = _PEER_INBOUND[self.role]

    def send(self, msg: m.Message) -> bytes:
        """The frame for ``msg``; raises :class:`LocalProtocolError` if it may not be sent now."""
        tag = msg.TAG
        if self.state is State.CLOSED:
            raise LocalProtocolError(ErrorCode.UNEXPECTED_MESSAGE, "the connection is closed")
        if self.state is not State.READY and tag not in _ANY_STATE:
            nxt = SEND.get((self.role, self.state, tag))
            if nxt is None:
                raise LocalProtocolError(
                    ErrorCode.HANDSHAKE_REQUIRED,
                    f"cannot send {tag!r} in handshake state {self.state.value!r}",
                )
            # Framed first: a message too large to send leaves the state as it was.
            frame = m.frame(msg, max_frame=self.max_send)
            self._caps(msg)
            self.state = nxt
            return frame
        return m.frame(msg, max_frame=self.max_send)

    @property
    def max_frame(self) -> int:
        """The larger of the two frame limits (compatibility with the single-limit API)."""
        return max(self.max_recv, self.max_send)

    def fail_handshake(self) -> None:
        """Go back to waiting for ``auth`` after a refused one (the client may try again)."""
        if self.role is Role.SERVER and self.state is State.AUTHED:
            self.state = State.AUTH
