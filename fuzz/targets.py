"""The fuzz targets: plain functions of the fuzz input, importable without atheris.

Each raises nothing for any input, except where it finds a bug: an exception that is not the
protocol error the code under test is allowed to raise there, or a broken invariant
(``AssertionError``). :data:`TARGETS` names them for :mod:`fuzz.run` and the tests.

* :func:`frames`: arbitrary bytes into a server's :class:`~seabattle.protocol.session.Connection`,
  cut into chunks the input chooses. Only a framing error may be raised (and it closes the
  connection); everything else comes out as a message or a per-message error, and every message
  that comes out frames again to a message equal to it.
* :func:`handshake`: a server-side connection driven through ``hello`` and ``auth`` the way the
  server drives it, with messages drawn from the input (some honest and signed). Before the
  handshake ends only handshake and session messages come out, after it no handshake message
  does, and an ``auth`` passes only if it carries a signature the input could not have forged.
* :func:`.referee.referee`: the pure referee, see :mod:`fuzz.referee`.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder
from seabattle.protocol.errors import FAILS_SESSION, ErrorCode, RemoteProtocolError
from seabattle.protocol.session import (
    MAX_S2C_FRAME,
    SUPPORTED_VERSIONS,
    Connection,
    Role,
    State,
    auth_payload,
    check_auth,
)

from .data import Data, build
from .referee import referee

__all__ = ["TARGETS", "frames", "handshake", "mixed", "referee"]

_HANDSHAKE = frozenset({"hello", "welcome", "auth", "authed"})
_ANY_STATE = frozenset({"error", "ping", "pong", "bye"})
_LIMITS = (None, 8, 64, 300)  # frame limits: the default, and small ones the input can reach


def _lcg_chunks(data: bytes, seed: int) -> list[bytes]:
    """``data`` cut into pieces of 1 to 40 bytes, the cuts spelled by ``seed`` (0: one piece)."""
    if seed == 0:
        return [data]
    out, at, x = [], 0, seed
    while at < len(data):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        size = 1 + (x >> 16) % 40
        out.append(data[at : at + size])
        at += size
    return out


def _reframed(msg: m.Message) -> m.Message:
    """``msg`` framed and decoded again."""
    dec = FrameDecoder(MAX_S2C_FRAME)
    dec.feed(m.frame(msg, max_frame=MAX_S2C_FRAME))
    body = dec.next_frame()
    assert body is not None
    return m.decode(body)


def frames(data: bytes) -> None:
    """Feed ``data`` to a server connection in chunks; see the module docstring."""
    head = data[:2].ljust(2, b"\0")
    conn = Connection(Role.SERVER, max_recv=_LIMITS[head[0] & 3])
    if head[0] & 4:
        # A session past its handshake, where every client message may come out.
        conn.state = State.READY
    try:
        for chunk in _lcg_chunks(data[2:], head[1]):
            for item in conn.receive_data(chunk):
                if isinstance(item, RemoteProtocolError):
                    assert isinstance(item.code, ErrorCode)
                    assert item.code not in FAILS_SESSION, item
                    continue
                assert item.DIR is not m.Dir.S2C, item
                assert _reframed(item) == item, item
        conn.receive_eof()
    except RemoteProtocolError as e:
        assert _at(conn) is State.CLOSED, e
        assert isinstance(e.code, ErrorCode)


def _key(seed: int) -> tuple[Ed25519PrivateKey, bytes]:
    key = Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
    return key, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


_SERVER, _SERVER_PUB = _key(0)
_CLIENTS = (_key(1), _key(2))
_CHALLENGE = bytes(range(32))
#: Every auth signature the target makes: the only ones that may pass.
_SIGNED: set[tuple[bytes, bytes]] = set()


def _auth(d: Data) -> m.Message:
    """An ``auth``: signed by a client key over the right payload, or bent by ``d``."""
    key, pub = _CLIENTS[d.below(2)]
    kind = d.below(6)
    challenge = _CHALLENGE if kind else d.blob(32)
    server = _SERVER_PUB if kind != 1 else bytes(32)
    payload = auth_payload(challenge, server, pub)
    sig = key.sign(payload)
    if payload == auth_payload(_CHALLENGE, _SERVER_PUB, pub):
        _SIGNED.add((pub, sig))  # (Ed25519 signs deterministically: two entries at most)
    if kind == 2:
        sig = sig[:-1] + bytes([sig[-1] ^ (d.byte() | 1)])
    if kind == 3:
        pub = _CLIENTS[1 - _CLIENTS.index((key, pub))][1]  # another key's name on it
    resume = None if d.flag() else d.blob(24)
    return m.Auth(pub, sig, d.text(), resume)


def _at(conn: Connection) -> State:
    """The connection's state, read afresh (it changes behind the target's back)."""
    return conn.state


def _serve(conn: Connection, item: m.Message | RemoteProtocolError, ready: bool) -> None:
    """Answer what came out of ``conn`` as the server does (``ready``: before this batch)."""
    if isinstance(item, RemoteProtocolError):
        assert isinstance(item.code, ErrorCode)
        return
    tag = item.TAG
    if not ready:
        assert tag in _HANDSHAKE or tag in _ANY_STATE, f"{tag} before the handshake ended"
    if _at(conn) is State.READY and ready:
        assert tag not in _HANDSHAKE, f"{tag} after the handshake"
    if isinstance(item, m.Hello):
        assert _at(conn) is State.WELCOME
        caps = ("peer",) if "peer" in item.caps else ()
        conn.send(m.Welcome(SUPPORTED_VERSIONS[-1], caps, _SERVER_PUB, _CHALLENGE, True))
        assert _at(conn) is State.AUTH
    elif isinstance(item, m.Auth):
        assert _at(conn) is State.AUTHED
        try:
            check_auth(item, _CHALLENGE, _SERVER_PUB)
        except RemoteProtocolError as e:
            assert e.code is ErrorCode.AUTH_FAILED, e
            conn.fail_handshake()
            assert _at(conn) is State.AUTH
            return
        assert (item.key, item.sig) in _SIGNED, "a forged auth passed"
        conn.send(m.Authed(item.key.hex(), bytes(24)))
        assert _at(conn) is State.READY


_TAGS = tuple(sorted(m.MESSAGES))


def handshake(data: bytes) -> None:
    """Drive a server connection through its handshake; see the module docstring."""
    d = Data(data)
    conn = Connection(Role.SERVER)
    for _ in range(64):
        if d.done or _at(conn) is State.CLOSED:
            return
        kind = d.below(8)
        try:
            if kind == 0:
                wire = d.blob(80)
            elif kind <= 2:
                hello = build(m.Hello, d, versions=SUPPORTED_VERSIONS, agent="fuzz", caps=("peer",))
                wire = m.frame(hello)
            elif kind <= 4:
                wire = m.frame(_auth(d))
            elif kind == 5:
                wire = m.frame(build(m.MESSAGES[_TAGS[d.below(len(_TAGS))]], d))
            elif kind == 6:
                try:
                    conn.receive_eof()
                except RemoteProtocolError as e:
                    assert e.code is ErrorCode.TRUNCATED_FRAME, e
                return
            else:
                ping = m.frame(m.Ping(d.integer()))
                wire = ping[: d.below(len(ping) + 1)]  # a frame cut short, completed later
        except RemoteProtocolError as e:
            # The drawn fields broke a message's own checks: no frame is made, as in a sender.
            assert e.code is ErrorCode.BAD_MESSAGE, e
            continue
        ready = _at(conn) is State.READY
        try:
            items = conn.receive_data(wire)
        except RemoteProtocolError as e:
            assert _at(conn) is State.CLOSED, e
            return
        for item in items:
            _serve(conn, item, ready)


#: The targets by name, as ``fuzz.run --target`` takes them.
TARGETS: dict[str, Callable[[bytes], None]] = {
    "frames": frames,
    "handshake": handshake,
    "referee": referee,
}


def mixed(data: bytes) -> None:
    """Every target in one: the first byte picks it (a short run pays one start-up, not three)."""
    if data:
        _BY_BYTE[data[0] % len(_BY_BYTE)](data[1:])


_BY_BYTE = tuple(TARGETS.values())
