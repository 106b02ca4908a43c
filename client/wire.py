"""The framed message stream and the identity keys every client connection uses.

:class:`Wire` is a thin trio shell over the sans-IO :class:`~seabattle.protocol.session.Connection`,
as the server's connection is: received bytes are fed to it and messages pulled from it, and every
message sent is framed by it. So the session's state machine checks the handshake order in both
directions, its direction rule what may arrive, and its frame limits each direction's frames.

One wire serves refereed play (:func:`~.api.connect`, the client's role) and peer play
(:mod:`.peer`: the host plays the server's role of the handshake, the joiner the client's). Peer
play needs nothing of the wire: the connection sees both sides agree the capability ``peer`` in
the handshake, and from then on lets the game messages travel both ways (``spec/protocol.md`` 6.7).
"""

from __future__ import annotations

import os
from pathlib import Path

import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.common.keys import KeyFileError, load_or_create_key
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import SUPPORTED_VERSIONS, Connection, Role, auth_payload

__all__ = [
    "AGENT",
    "HANDSHAKE_TIMEOUT",
    "ConnectionClosed",
    "ConnectionLost",
    "HandshakeTimeout",
    "KeyFileError",
    "RequestFailed",
    "Wire",
    "client_handshake",
    "error_slug",
    "load_key",
    "public_key",
]

AGENT = "seabattle-client/0.1"

#: Seconds a new connection may take, from opening it to the end of the handshake: the default
#: of ``connect(handshake_timeout=...)`` and of peer ``join``. Spec 4.1 gives a client 10 to
#: complete the handshake, so an honest server answers well within it.
HANDSHAKE_TIMEOUT = 10.0


# ================================================================================================
# Errors
# ================================================================================================


class ConnectionClosed(Exception):
    """The server closed the connection (or it broke) while something was waiting on it."""


class ConnectionLost(ConnectionClosed):
    """The client gave up getting back in: the connection dropped and no server took it back
    within ``reconnect_for`` (or reconnecting was off). Every match of the client has ended
    for it (their event streams end); a move or request made after this raises it."""


class HandshakeTimeout(TimeoutError):
    """No handshake within the timeout: ``address`` (``host:port``) did not take the connection
    (``connected`` false), or took it and did not answer (``connected`` true: a process stopped
    or wedged, or something that is no seabattle server nor host).

    A ``TimeoutError`` (so an ``OSError``), as the bounded handshake raised before it had a
    class of its own."""

    def __init__(self, address: str, seconds: float, *, connected: bool) -> None:
        if connected:
            said = "accepted the connection but did not answer the handshake"
        else:
            said = "did not accept the connection"
        super().__init__(f"{address} {said} within {seconds:g} s")
        self.address = address
        self.seconds = seconds
        self.connected = connected


class RequestFailed(Exception):
    """A lobby request was refused: ``code`` from the error registry and the server's message."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{error_slug(code)}: {msg}")
        self.code = code
        self.msg = msg


def error_slug(code: int) -> str:
    """The lower-case registry name of ``code`` (``already_fired``), or the number if unknown."""
    try:
        return str(ErrorCode(code).slug)
    except ValueError:
        return str(code)


# ================================================================================================
# Keys
# ================================================================================================


def load_key(path: str | os.PathLike[str] | None, *, create: bool = True) -> Ed25519PrivateKey:
    """The Ed25519 identity key at ``path`` (PEM, or 32 raw bytes); a fresh guest key for ``None``.

    With ``create`` a missing file is created (PEM, mode 0600), so that ``--key me.pem`` gives a
    stable identity from the first run on; its folder must exist. A file that holds no key, or a
    missing folder, raises :class:`~seabattle.common.keys.KeyFileError` (an ``OSError``).
    """
    if path is None:
        return Ed25519PrivateKey.generate()
    if not create and not Path(path).exists():
        raise FileNotFoundError(path)
    # One implementation for players and the server: it creates the file with owner-only
    # permissions from the start (O_EXCL), so the key is never readable by others, not even briefly.
    return load_or_create_key(path)


def public_key(key: Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of ``key``'s public half (the player id is their hex)."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# ================================================================================================
# The wire
# ================================================================================================


def _now() -> float:
    """trio's clock, or 0 outside ``trio.run`` (a wire may be made before the loop runs)."""
    try:
        return trio.current_time()
    except RuntimeError:
        return 0.0


class Wire:
    """One framed message stream over a :class:`~seabattle.protocol.session.Connection`:
    serialised sends, one receiver.

    ``recv`` returns a message, a :class:`RemoteProtocolError` for a frame that held no message
    this side may accept (the session goes on), or ``None`` at the end of the stream. ``send``
    raises :class:`~seabattle.protocol.errors.LocalProtocolError` for a message the session may
    not send now (out of handshake order, or too large).

    ``role`` is the side of the handshake this wire plays. Without one, a wire takes it from its
    first use: one that sends first is the client (which opens with ``hello``), one that waits
    first the server; so ``Wire(stream)`` can also stand in for a server in a test. Frame limits
    are the connection's, by direction and role: a client receives frames of up to
    :data:`~seabattle.protocol.session.MAX_S2C_FRAME` (a long match's record comes in one) and
    sends at most :data:`~seabattle.protocol.session.MAX_C2S_FRAME`. ``max_frame`` sets both (peer
    play, where each side only ever sends game messages).
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        max_frame: int | None = None,
        *,
        max_recv: int | None = None,
        max_send: int | None = None,
        role: Role | None = None,
    ) -> None:
        self.stream = stream
        self._limits = (max_frame, max_recv, max_send)
        #: the capabilities the handshake agreed, and the resume token it gave (client side)
        self.caps: tuple[str, ...] = ()
        self.resume: bytes | None = None
        #: The session: the handshake's state, the direction rule, the frame limits.
        self.conn = self._connection(role if role is not None else Role.CLIENT)
        self._settled = role is not None  # the role was given, or taken by the first use
        # What the last read completed and recv has not returned yet, last first: pop() hands
        # each one over and drops the wire's reference to it, with no allocation per message.
        self._ready: list[m.Message | RemoteProtocolError] = []
        self._failed: RemoteProtocolError | None = None  # the framing error that ended the stream
        self._lock = trio.Lock()
        self._eof = False
        self.closed = False
        #: ``trio.current_time()`` when the last bytes arrived (or the wire was made): what a
        #: silence timeout (spec 4.6) measures from
        self.last_recv = _now()

    def _connection(self, role: Role) -> Connection:
        max_frame, max_recv, max_send = self._limits
        return Connection(role, max_frame, max_recv=max_recv, max_send=max_send)

    def set_role(self, role: Role) -> None:
        """Play ``role`` in the handshake; only before any message has crossed, or in the role
        already taken."""
        if self.conn.role is role:
            self._settled = True
            return
        if self._settled:
            raise ValueError(f"this wire already plays the {self.conn.role.value}")
        self.conn = self._connection(role)
        self._settled = True

    @property
    def role(self) -> Role:
        """The side of the handshake this wire plays (the client's until settled otherwise)."""
        return self.conn.role

    @property
    def max_recv(self) -> int:
        """The largest frame body accepted from the other side."""
        return self.conn.max_recv

    @property
    def max_send(self) -> int:
        """The largest frame body this side sends."""
        return self.conn.max_send

    async def send(self, msg: m.Message) -> None:
        """Send one message; sends from several tasks never interleave."""
        async with self._lock:
            if self.closed:
                raise ConnectionClosed("the connection is closed")
            self._settled = True
            # Framed under the lock, so that the session's state moves in the order the frames
            # leave (a handshake message that waited for the lock must not overtake another).
            frame = self.conn.send(msg)
            try:
                await self.stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from None

    async def recv(self) -> m.Message | RemoteProtocolError | None:
        """The next message (see the class docstring)."""
        ready = self._ready
        while not ready:
            if self._failed is not None:
                raise self._failed.with_traceback(None)  # as often as asked: the stream is lost
            if self._eof:
                return None
            if not self._settled:
                self.set_role(Role.SERVER)  # waiting before sending anything: a server
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            self.last_recv = trio.current_time()
            try:
                if not data:
                    self._eof = self.closed = True
                    self.conn.receive_eof()  # TRUNCATED_FRAME if the stream stopped mid-frame
                    return None
                ready = self.conn.receive_data(data)
            except RemoteProtocolError as e:
                self.closed = True  # framing is lost: nothing after this can be trusted
                self._failed = e
                raise
            ready.reverse()
            self._ready = ready
        return ready.pop()

    async def expect(self, *types: type[m.Message]) -> m.Message:
        """The next message, which must be one of ``types`` (heartbeats are answered on the way)."""
        while True:
            msg = await self.recv()
            if msg is None:
                raise ConnectionClosed("the peer closed the connection")
            if isinstance(msg, RemoteProtocolError):
                raise msg
            if isinstance(msg, m.Ping):
                await self.send(m.Pong(msg.n))
                continue
            if isinstance(msg, m.Pong):
                continue
            if isinstance(msg, types):
                return msg
            if isinstance(msg, m.Error):
                raise RequestFailed(msg.code, msg.msg)
            if isinstance(msg, m.Bye):
                raise ConnectionClosed(f"the peer said bye: {msg.reason}")
            raise RemoteProtocolError(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"expected {'/'.join(t.TAG for t in types)}, got {msg.TAG!r}",
            )

    async def aclose(self) -> None:
        """Close the stream (idempotent)."""
        self.closed = True
        await self.stream.aclose()

    async def abort(self) -> None:
        """Close the stream at once, without a graceful TLS close: for a peer that no longer
        answers, whose ``close_notify`` would never be read. A task blocked in :meth:`recv`
        then sees the end of the stream, one blocked in :meth:`send` :class:`ConnectionClosed`."""
        self.closed = True
        await trio.aclose_forcefully(self.stream)


async def client_handshake(
    wire: Wire,
    key: Ed25519PrivateKey,
    name: str,
    *,
    caps: tuple[str, ...] = (),
    resume: bytes | None = None,
    expect_server: bytes | None = None,
) -> tuple[str, bytes]:
    """Run FLOW step 1 as the client; return (player id, the server's public key).

    ``caps`` are offered in ``hello`` (the agreed ones are in ``wire.caps`` afterwards, the resume
    token in ``wire.resume``); ``resume`` is sent in ``auth``; ``expect_server`` pins the
    server's key (spec 4.3): another key fails the session with ``AUTH_FAILED``.
    """
    await wire.send(m.Hello(SUPPORTED_VERSIONS, AGENT, caps))
    welcome = await wire.expect(m.Welcome)
    assert isinstance(welcome, m.Welcome)
    if welcome.version not in SUPPORTED_VERSIONS:
        # Spec 4.2: a version this side did not offer fails the session.
        await wire.send(m.Error(int(ErrorCode.UNSUPPORTED_VERSION), "version not offered", None))
        raise RequestFailed(ErrorCode.UNSUPPORTED_VERSION, f"welcome.version {welcome.version}")
    if expect_server is not None and welcome.server != expect_server:
        await wire.send(m.Error(int(ErrorCode.AUTH_FAILED), "not the server key expected", None))
        raise RequestFailed(ErrorCode.AUTH_FAILED, "the server's key is not the one expected")
    wire.caps = tuple(c for c in welcome.caps if c in caps)
    pub = public_key(key)
    sig = key.sign(auth_payload(welcome.challenge, welcome.server, pub))
    await wire.send(m.Auth(pub, sig, name, resume))
    authed = await wire.expect(m.Authed)
    assert isinstance(authed, m.Authed)
    wire.resume = authed.resume
    return authed.player, welcome.server
