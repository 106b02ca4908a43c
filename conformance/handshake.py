"""Cases of ``spec/protocol.md`` section 4, the session: handshake (4.1), version and
capabilities (4.2), identity (4.3) and heartbeat (4.6). Resume (4.7) needs a running game:
its cases are in :mod:`.resume`, and run last.

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from seabattle.protocol import messages as m
from seabattle.protocol.commit import PROTOCOL_VERSION
from seabattle.protocol.errors import ErrorCode

from .probe import AGENT, describe
from .results import CaseFailed, Trace
from .suite import Suite, case


@case(
    "4.1-handshake-required",
    "4.1 Handshake",
    "Message before the handshake",
    "Before `ready`, a message that the table does not allow [...] MUST be refused with "
    "`HANDSHAKE_REQUIRED`; it is dropped and the session goes on.",
    "error{HANDSHAKE_REQUIRED}; then hello -> welcome",
)
async def _handshake_required(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send(m.ListMatches(1))
    await p.expect_error(ErrorCode.HANDSHAKE_REQUIRED)
    w = await p.hello()
    await p.send(m.Ladder(2))  # welcome sent, auth owed: still before ready
    await p.expect_error(ErrorCode.HANDSHAKE_REQUIRED)
    await p.send(p.auth_message())
    await p.expect(m.Authed)
    t.notes.append(f"welcome.version={w.version}")


@case(
    "4.1-handshake-twice",
    "4.1 Handshake",
    "Handshake message after ready",
    "After `ready`, a handshake message (`hello`, `welcome`, `auth`, `authed`) MUST be refused "
    "with `UNEXPECTED_MESSAGE`.",
    "error{UNEXPECTED_MESSAGE} for a second hello",
)
async def _handshake_twice(s: Suite, t: Trace) -> None:
    p = await s.player(t, "C")
    await p.send(m.Hello((2,), AGENT, ()))
    await p.expect_error(ErrorCode.UNEXPECTED_MESSAGE)
    await p.alive()


@case(
    "4.2-version",
    "4.2 Version and capabilities",
    "Version choice and capabilities",
    "The server MUST choose the highest version that both speak [...] `welcome.caps` [...] MUST be "
    "a subset of `hello.caps`.",
    f"welcome{{version: {PROTOCOL_VERSION}, caps within hello.caps, server: 32 bytes, "
    "challenge: 32 bytes}",
)
async def _version(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    w = await p.hello(versions=(PROTOCOL_VERSION, 1000), caps=("x-conformance",))
    if w.version != PROTOCOL_VERSION:
        raise CaseFailed(
            f"welcome.version is {w.version}; {PROTOCOL_VERSION} is the highest both speak"
        )
    if not set(w.caps) <= {"x-conformance"}:
        raise CaseFailed(f"welcome.caps {list(w.caps)} is not a subset of hello.caps")
    if len(w.server) != 32 or len(w.challenge) != 32:
        raise CaseFailed("welcome.server and welcome.challenge are 32 bytes each")
    q = await s.connect(t, "D")
    w2 = await q.hello()
    if w2.challenge == w.challenge:
        raise CaseFailed("two sessions got the same challenge")


@case(
    "4.2-unsupported-version",
    "4.2 Version and capabilities",
    "No common version",
    "If there is none, the server MUST refuse `hello` with `UNSUPPORTED_VERSION`",
    "error{UNSUPPORTED_VERSION}; then the session fails, or hello may be sent again",
)
async def _unsupported(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.send(m.Hello((1000,), AGENT, ()))
    await p.expect_error(ErrorCode.UNSUPPORTED_VERSION)
    # The server MAY fail the session; if it does not, it is still in state hello.
    msg: m.Message | None = None
    try:
        await p.send(m.Hello((2,), AGENT, ()))
        msg = await p.recv(timeout=3)
    except CaseFailed:
        msg = None
    if msg is None:
        t.notes.append("the server failed the session")
    elif not isinstance(msg, m.Welcome):
        raise CaseFailed(f"after UNSUPPORTED_VERSION, hello got {describe(msg)}")
    else:
        t.notes.append("the server kept the session in state hello")


@case(
    "4.3-auth",
    "4.3 Identity",
    "Bad signature, then a good one",
    "The server MUST refuse `auth` with `AUTH_FAILED` when [...] the signature does not verify "
    "[...] After a refused `auth` the handshake returns to state `auth` and the client MAY try "
    "again",
    "error{AUTH_FAILED}; then authed{player: hex of the key, resume: bin}",
)
async def _auth(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.hello()
    await p.send(p.auth_message(good=False))
    await p.expect_error(ErrorCode.AUTH_FAILED, None)
    await p.send(m.Auth(p.pub[:31], bytes(64), "short", None))
    await p.expect_error(ErrorCode.AUTH_FAILED, None)
    await p.send(p.auth_message())
    a = await p.expect(m.Authed)
    assert isinstance(a, m.Authed)
    if a.player != p.pub.hex():
        raise CaseFailed(f"authed.player {a.player!r} is not the lower-case hex of the key")
    if not a.resume:
        raise CaseFailed("authed.resume is empty: a server issues a resume token (4.7)")
    await p.alive()


@case(
    "4.6-heartbeat",
    "4.6 Heartbeat",
    "Ping in every state",
    "Either endpoint MAY send `ping{n}` in any state; the receiver MUST answer `pong{n}` with the "
    "same `n` promptly.",
    "pong{n} before hello, and after authed",
)
async def _heartbeat(s: Suite, t: Trace) -> None:
    p = await s.connect(t, "C")
    await p.alive()
    await p.login()
    await p.alive()
