"""The framed message stream and the identity keys every client connection uses.

:class:`Wire` frames with :mod:`seabattle.protocol.codec` directly rather than through
``session.Connection``, so that the same wire serves peer play, where both sides send messages the
session table marks as client-to-server (``commit``, ``fire``, ``answer``). The handshake order
(:func:`client_handshake`) is the session's (``spec/protocol.md`` 5.6, step 1).
"""

from __future__ import annotations

import os
from pathlib import Path

import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.common.keys import load_or_create_key
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.session import (
    MAX_C2S_FRAME,
    MAX_S2C_FRAME,
    SUPPORTED_VERSIONS,
    auth_payload,
)

__all__ = [
    "AGENT",
    "ConnectionClosed",
    "RequestFailed",
    "Wire",
    "client_handshake",
    "error_slug",
    "load_key",
    "public_key",
]

AGENT = "seabattle-client/0.1"


# ================================================================================================
# Errors
# ================================================================================================


class ConnectionClosed(Exception):
    """The server closed the connection (or it broke) while something was waiting on it."""


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
    stable identity from the first run on.
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


class Wire:
    """One framed message stream: serialised sends, one receiver.

    ``recv`` returns a message, a :class:`RemoteProtocolError` for a frame that held no valid
    message (the session goes on), or ``None`` at the end of the stream.

    Frame limits differ by direction, as in ``session.Connection``: a client receives frames of up
    to :data:`~seabattle.protocol.session.MAX_S2C_FRAME` (a long match's record comes in one) and
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
    ) -> None:
        self.stream = stream
        self.max_recv = max_recv or max_frame or MAX_S2C_FRAME
        self.max_send = max_send or max_frame or MAX_C2S_FRAME
        self._decoder = FrameDecoder(self.max_recv)
        self._lock = trio.Lock()
        self._eof = False
        self.closed = False

    async def send(self, msg: m.Message) -> None:
        """Send one message; sends from several tasks never interleave."""
        frame = encode_frame(m.encode(msg), max_frame=self.max_send)
        async with self._lock:
            if self.closed:
                raise ConnectionClosed("the connection is closed")
            try:
                await self.stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from None

    async def recv(self) -> m.Message | RemoteProtocolError | None:
        """The next message (see the class docstring)."""
        while True:
            try:
                d = self._decoder.next_frame()
            except RemoteProtocolError:
                self.closed = True
                raise
            if d is not None:
                try:
                    return m.decode(d)
                except RemoteProtocolError as e:
                    return e
            if self._eof:
                return None
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._eof = True
                self.closed = True
                self._decoder.eof()
            else:
                self._decoder.feed(data)

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


async def client_handshake(wire: Wire, key: Ed25519PrivateKey, name: str) -> tuple[str, bytes]:
    """Run FLOW step 1 as the client; return (player id, the server's public key)."""
    await wire.send(m.Hello(SUPPORTED_VERSIONS, AGENT, ()))
    welcome = await wire.expect(m.Welcome)
    assert isinstance(welcome, m.Welcome)
    pub = public_key(key)
    sig = key.sign(auth_payload(welcome.challenge, welcome.server, pub))
    await wire.send(m.Auth(pub, sig, name, None))
    authed = await wire.expect(m.Authed)
    assert isinstance(authed, m.Authed)
    return authed.player, welcome.server
