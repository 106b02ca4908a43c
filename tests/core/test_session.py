"""The sans-IO handshake and per-message error handling of protocol/session.py."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from seabattle.protocol.session import (
    PEER_MESSAGES,
    Connection,
    Role,
    State,
    auth_payload,
    check_auth,
)


def _pub(k: Ed25519PrivateKey) -> bytes:
    return k.public_key().public_bytes_raw()


def handshake() -> tuple[Connection, Connection]:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    skey, ckey = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    (hello,) = server.receive_data(client.send(m.Hello((2,), "test", ())))
    assert isinstance(hello, m.Hello)
    challenge = b"c" * 32
    welcome = m.Welcome(2, (), _pub(skey), challenge, True)
    (w,) = client.receive_data(server.send(welcome))
    assert w == welcome
    sig = ckey.sign(auth_payload(challenge, _pub(skey), _pub(ckey)))
    (auth,) = server.receive_data(client.send(m.Auth(_pub(ckey), sig, "me", None)))
    assert isinstance(auth, m.Auth)
    check_auth(auth, challenge, _pub(skey))
    client.receive_data(server.send(m.Authed("id", b"t" * 16)))
    return client, server


def test_handshake_reaches_ready_on_both_sides() -> None:
    client, server = handshake()
    assert client.state is State.READY and server.state is State.READY
    (msg,) = server.receive_data(client.send(m.Ping(7)))
    assert msg == m.Ping(7)


def test_auth_signed_for_another_server_is_refused() -> None:
    key = Ed25519PrivateKey.generate()
    sig = key.sign(auth_payload(b"c" * 32, b"A" * 32, _pub(key)))
    with pytest.raises(RemoteProtocolError) as e:
        check_auth(m.Auth(_pub(key), sig, "me", None), b"c" * 32, b"B" * 32)
    assert e.value.code is ErrorCode.AUTH_FAILED


def test_message_before_handshake_is_refused_and_session_goes_on() -> None:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    # A client that skips the handshake: build the frame with a READY connection.
    rogue, _ = handshake()
    (err,) = server.receive_data(rogue.send(m.ListMatches(1)))
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.HANDSHAKE_REQUIRED
    (hello,) = server.receive_data(client.send(m.Hello((2,), "late", ())))
    assert isinstance(hello, m.Hello) and server.state is State.WELCOME


def test_unknown_version_is_refused() -> None:
    server = Connection(Role.SERVER)
    frame = Connection(Role.CLIENT).send(m.Hello((99,), "future", ()))
    (err,) = server.receive_data(frame)
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.UNSUPPORTED_VERSION


def test_bad_body_is_answered_and_next_frame_still_decodes() -> None:
    client, server = handshake()
    garbage = b"\x00\x00\x00\x02\xc1\xc1"  # 0xc1 is never valid msgpack
    out = server.receive_data(garbage + client.send(m.Ping(1)))
    assert isinstance(out[0], RemoteProtocolError)
    assert out[0].code is ErrorCode.MALFORMED_MSGPACK
    assert out[1] == m.Ping(1)


def test_wrong_direction_is_refused() -> None:
    _client, server = handshake()
    # A client may not send what only a server sends.
    frame = server.send(m.Ok(1, {}))
    (err,) = server.receive_data(frame)
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.UNEXPECTED_MESSAGE


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\xff\xff\xff\xff", ErrorCode.FRAME_TOO_LARGE),
        (b"\x00\x00\x00\x00", ErrorCode.BAD_MESSAGE),
    ],
)
def test_framing_errors_end_the_session(data: bytes, code: ErrorCode) -> None:
    _, server = handshake()
    with pytest.raises(RemoteProtocolError) as e:
        server.receive_data(data)
    assert e.value.code is code
    assert server.state is State.CLOSED
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"")


def test_cannot_send_out_of_handshake_order() -> None:
    with pytest.raises(LocalProtocolError) as e:
        Connection(Role.CLIENT).send(m.ListMatches(1))
    assert e.value.code is ErrorCode.HANDSHAKE_REQUIRED


def test_frame_limits_are_per_direction() -> None:
    from seabattle.protocol.session import MAX_C2S_FRAME, MAX_S2C_FRAME

    client, server = handshake()
    assert (client.max_send, client.max_recv) == (MAX_C2S_FRAME, MAX_S2C_FRAME)
    assert (server.max_send, server.max_recv) == (MAX_S2C_FRAME, MAX_C2S_FRAME)
    # A server may send a 1 MiB answer (a long match's record), and the client takes it.
    big = m.Ok(1, {"record": b"r" * (1 << 20)})
    (got,) = client.receive_data(server.send(big))
    assert got == big
    # A bin in a server->client message may be as large as the frame; a client's may not.
    assert len(m.Committed(b"m" * 16, 1, 0, b"x" * 100_000).root) == 100_000
    with pytest.raises(RemoteProtocolError):
        m.CoSign(b"m" * 16, b"h" * 32, b"s" * 100_000)
    # A client may not send a frame past 64 KiB, and a server refuses one at its header.
    with pytest.raises(LocalProtocolError):
        client.send(m.Create(1, {"x": b"x" * MAX_C2S_FRAME}, "blind", True))
    header = (MAX_C2S_FRAME + 1).to_bytes(4, "big")
    with pytest.raises(RemoteProtocolError) as e:
        server.receive_data(header)
    assert e.value.code == ErrorCode.FRAME_TOO_LARGE and server.state is State.CLOSED


def test_frame_limits_can_be_overridden() -> None:
    c = Connection(Role.CLIENT, max_recv=1000)
    assert (c.max_recv, c.max_send) == (1000, 65536)
    both = Connection(Role.SERVER, max_frame=4096)
    assert (both.max_recv, both.max_send) == (4096, 4096)
    with pytest.raises(LocalProtocolError) as e:
        Connection(Role.CLIENT, max_send=100).send(m.Hello((2,), "x" * 200, ()))
    assert e.value.code == ErrorCode.FRAME_TOO_LARGE


# -- peer play (spec 6.7): the host plays the server's rows, the joiner the client's ------------


def peer_handshake(
    offered: tuple[str, ...] = ("peer",), listed: tuple[str, ...] = ("peer",)
) -> tuple[Connection, Connection]:
    """(host, joiner) after a handshake whose hello offers ``offered``, welcome lists ``listed``."""
    host, joiner = Connection(Role.SERVER, 65536), Connection(Role.CLIENT, 65536)
    hkey, jkey = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    host.receive_data(joiner.send(m.Hello((2,), "test", offered)))
    joiner.receive_data(host.send(m.Welcome(2, listed, _pub(hkey), b"c" * 32, True)))
    sig = jkey.sign(auth_payload(b"c" * 32, _pub(hkey), _pub(jkey)))
    host.receive_data(joiner.send(m.Auth(_pub(jkey), sig, "joiner", None)))
    joiner.receive_data(host.send(m.Authed(_pub(jkey).hex(), b"")))
    assert host.state is State.READY and joiner.state is State.READY
    return host, joiner


PEER_GAME = [
    m.Commit(b"m" * 16, 1, {"root": b"r" * 32}, bytes(64)),
    m.Coin(b"m" * 16, 1, b"h" * 32, None),
    m.Fire(b"m" * 16, 1, ("A1",), 0, 1),
    m.Radar(b"m" * 16, 1, "B2", 0, 2),
    m.Answer(b"m" * 16, 1, {"n": 1}),
    m.RevealMsg(b"m" * 16, 1, {"fleet": []}),
    m.Resign(b"m" * 16, 1),
    m.CoSign(b"m" * 16, b"h" * 32, b"s" * 64),
]


def test_a_peer_session_carries_the_game_messages_both_ways() -> None:
    host, joiner = peer_handshake()
    assert host.peer and joiner.peer
    assert {msg.TAG for msg in PEER_GAME} == PEER_MESSAGES
    for msg in PEER_GAME:
        assert joiner.receive_data(host.send(msg)) == [msg]
        assert host.receive_data(joiner.send(msg)) == [msg]
    start = m.Start(b"m" * 16, 1, {"preset": "classic"}, "peer", ("a" * 64, "b" * 64))
    assert joiner.receive_data(host.send(start)) == [start]


@pytest.mark.parametrize(
    ("to_host", "msg"),
    [
        (True, m.ListMatches(1)),  # a lobby request
        (False, m.Ok(1, {})),  # server events
        (False, m.GameStart(b"m" * 16, 1, 0)),
        (True, m.Start(b"m" * 16, 1, {}, "peer", ("a" * 64, "b" * 64))),  # only the host starts
    ],
)
def test_a_peer_session_refuses_what_peer_play_does_not_use(to_host: bool, msg: m.Message) -> None:
    host, joiner = peer_handshake()
    sender, receiver = (joiner, host) if to_host else (host, joiner)
    (err,) = receiver.receive_data(sender.send(msg))
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.UNEXPECTED_MESSAGE
    assert receiver.receive_data(sender.send(m.Ping(1))) == [m.Ping(1)]  # and it goes on


@pytest.mark.parametrize(("offered", "listed"), [((), ("peer",)), (("peer",), ())])
def test_peer_is_agreed_only_when_hello_offers_it_and_welcome_lists_it(
    offered: tuple[str, ...], listed: tuple[str, ...]
) -> None:
    host, joiner = peer_handshake(offered, listed)
    assert not host.peer and not joiner.peer
    # The refereed direction rule holds: a client is not sent client-to-server messages.
    (err,) = joiner.receive_data(host.send(PEER_GAME[0]))
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.UNEXPECTED_MESSAGE


def test_game_messages_wait_for_the_end_of_a_peer_handshake() -> None:
    host, joiner = Connection(Role.SERVER), Connection(Role.CLIENT)
    host.receive_data(joiner.send(m.Hello((2,), "test", ("peer",))))
    joiner.receive_data(host.send(m.Welcome(2, ("peer",), b"k" * 32, b"c" * 32, True)))
    rogue, _ = peer_handshake()
    (err,) = joiner.receive_data(rogue.send(PEER_GAME[0]))
    assert isinstance(err, RemoteProtocolError) and err.code is ErrorCode.HANDSHAKE_REQUIRED


def test_a_message_too_large_to_send_leaves_the_handshake_where_it_was() -> None:
    client = Connection(Role.CLIENT, max_send=100)
    with pytest.raises(LocalProtocolError):
        client.send(m.Hello((2,), "x" * 200, ()))
    assert client.state is State.HELLO
    client.send(m.Hello((2,), "x", ()))
    assert client.state is State.WELCOME
