"""Who is online, named challenges and a match's chat on a real server over TCP (spec 6.9,
capability ``people``)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, TC, Bot, connect, play_both, raw
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.session import PEOPLE, auth_payload

Addr = tuple[str, int]


async def person(
    addr: Addr,
    nursery: trio.Nursery,
    name: str,
    key: Ed25519PrivateKey | None = None,
    caps: tuple[str, ...] = (PEOPLE,),
) -> TC:
    """A raw test connection whose hello offers ``caps`` (``people`` by default)."""
    c = await raw(addr, nursery, key)
    await c.send(m.Hello((2,), "test", caps))
    w = await c.expect(m.Welcome)
    assert (PEOPLE in w.caps) == (PEOPLE in caps)
    await c.send(m.Auth(c.pub, c.key.sign(auth_payload(w.challenge, w.server, c.pub)), name, None))
    a = await c.expect(m.Authed)
    c.player, c.token = a.player, a.resume
    return c


async def ask(c: TC, msg: Any) -> tuple[Any, list[Any]]:
    """Send request ``msg``; its answer, and what came before it."""
    await c.send(msg)
    seen = []
    while not (isinstance(r := await c.recv(), m.Ok | m.Error) and r.ref == msg.id):
        seen.append(r)
    return r, seen


async def challenge(c: TC, target: str, rules: dict[str, Any] | None = None, rid: int = 1) -> bytes:
    ok = await c.request(m.Challenge(rid, target, rules or SMALL, "blind"))
    assert isinstance(ok, m.Ok), ok
    cid = ok.data["challenge"]
    assert isinstance(cid, bytes)
    return cid


async def test_a_challenge_accepted_is_played_to_the_end(
    server: Addr, nursery: trio.Nursery
) -> None:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    cid = await challenge(a, b.player)
    got = await b.expect(m.Challenged)
    assert (got.challenge, got.player, got.name, got.mode) == (cid, a.player, "alice", "blind")
    assert got.rules["rows"] == 5 and got.rules["fleet"]  # the rule set in full
    ok = await b.request(m.Accept(2, cid))
    assert isinstance(ok, m.Ok), ok
    mid = ok.data["match"]
    gone = await a.expect(m.ChallengeGone)
    assert (gone.challenge, gone.reason, gone.match) == (cid, "accepted", mid)
    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.result is not None and bb.result is not None
    assert ba.seat == 0 and bb.seat == 1  # the challenger sits first, as a host does
    assert ba.result.result["over"]
    assert ba.errors == bb.errors == []


async def test_declined_with_a_reason(server: Addr, nursery: trio.Nursery) -> None:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    cid = await challenge(a, b.player)
    await b.expect(m.Challenged)
    ok = await b.request(m.Decline(2, cid, "  later, please "))
    assert isinstance(ok, m.Ok) and ok.data == {"challenge": cid}, ok
    gone = await a.expect(m.ChallengeGone)
    assert (gone.reason, gone.detail, gone.match) == ("declined", "later, please", None)
    # Answered: it can be neither accepted nor declined again.
    again = await b.request(m.Accept(3, cid))
    assert isinstance(again, m.Error) and again.code == ErrorCode.NO_SUCH_CHALLENGE


async def test_cancelled_by_the_challenger(server: Addr, nursery: trio.Nursery) -> None:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    cid = await challenge(a, b.player)
    await b.expect(m.Challenged)
    # Only the challenger cancels, only the target answers.
    wrong = await b.request(m.Cancel(2, cid))
    assert isinstance(wrong, m.Error) and wrong.code == ErrorCode.NO_SUCH_CHALLENGE
    wrong = await a.request(m.Accept(3, cid))
    assert isinstance(wrong, m.Error) and wrong.code == ErrorCode.NO_SUCH_CHALLENGE
    ok, before = await ask(a, m.Cancel(4, cid))
    assert isinstance(ok, m.Ok), ok
    gone = await b.expect(m.ChallengeGone)
    assert [(gone.challenge, gone.reason)] == [(x.challenge, x.reason) for x in before]
    assert (gone.challenge, gone.reason) == (cid, "cancelled")
    late = await b.request(m.Accept(5, cid))
    assert isinstance(late, m.Error) and late.code == ErrorCode.NO_SUCH_CHALLENGE


async def test_expired_after_the_timeout(
    server: Addr, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    t0 = trio.current_time()
    cid = await challenge(a, b.player)
    await b.expect(m.Challenged)
    gone = await a.expect(m.ChallengeGone)
    assert (gone.challenge, gone.reason) == (cid, "expired")
    assert trio.current_time() - t0 >= 60  # the default challenge_timeout
    assert (await b.expect(m.ChallengeGone)).reason == "expired"
    late = await b.request(m.Accept(2, cid))
    assert isinstance(late, m.Error) and late.code == ErrorCode.NO_SUCH_CHALLENGE


async def test_target_offline_or_gone(server: Addr, nursery: trio.Nursery) -> None:
    a = await person(server, nursery, "alice")
    nobody = "ab" * 32
    refused = await a.request(m.Challenge(1, nobody, SMALL, "blind"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NO_SUCH_PLAYER
    refused = await a.request(m.Challenge(2, a.player, SMALL, "blind"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NOT_ALLOWED
    # A player online without the capability is not online for people.
    plain = await person(server, nursery, "plain", caps=())
    refused = await a.request(m.Challenge(3, plain.player, SMALL, "blind"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NO_SUCH_PLAYER
    # The target's last people session ends: the challenge is gone, offline.
    b = await person(server, nursery, "bob")
    cid = await challenge(a, b.player, rid=4)
    await b.expect(m.Challenged)
    await b.close()
    gone = await a.expect(m.ChallengeGone)
    assert (gone.challenge, gone.reason) == (cid, "offline")
    # The challenger goes: its target is told.
    c = await person(server, nursery, "carol")
    cid = await challenge(a, c.player, rid=5)
    await c.expect(m.Challenged)
    await a.close()
    gone = await c.expect(m.ChallengeGone)
    assert (gone.challenge, gone.reason) == (cid, "offline")


async def test_by_name_and_to_every_session_of_the_target(
    server: Addr, nursery: trio.Nursery
) -> None:
    a = await person(server, nursery, "alice")
    key = Ed25519PrivateKey.generate()
    b1 = await person(server, nursery, "Bob", key)
    b2 = await person(server, nursery, "Bob", key)
    cid = await challenge(a, " bob")  # a display name, matched without case
    assert (await b1.expect(m.Challenged)).challenge == cid
    assert (await b2.expect(m.Challenged)).challenge == cid
    # A third session of the target comes later: it is told at once.
    b3 = await person(server, nursery, "Bob", key)
    assert (await b3.expect(m.Challenged)).challenge == cid
    ok = await b2.request(m.Accept(7, cid))
    assert isinstance(ok, m.Ok), ok
    for c in (a, b1, b3):  # the other sessions learn it was accepted
        gone = await c.expect(m.ChallengeGone, skip=(m.Clock, m.Start, m.GameStart))
        assert (gone.reason, gone.match) == ("accepted", ok.data["match"])
    # Two players online named alike: a name is no longer enough.
    await person(server, nursery, "bob")
    refused = await a.request(m.Challenge(8, "bob", SMALL, "blind"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NO_SUCH_PLAYER


async def test_online_lists_people_and_who_plays(server: Addr, nursery: trio.Nursery) -> None:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    await person(server, nursery, "plain", caps=())
    ok = await a.request(m.Online(1))
    assert isinstance(ok, m.Ok), ok
    rows = {r["player"]: r for r in ok.data["players"]}
    assert set(rows) == {a.player, b.player}
    assert rows[b.player]["name"] == "bob" and rows[b.player]["playing"] is False
    assert isinstance(rows[b.player]["rating"], int)
    cid = await challenge(a, b.player, rid=2)
    await b.expect(m.Challenged)
    assert isinstance(await b.request(m.Accept(3, cid)), m.Ok)
    ok = await b.request(m.Online(4))
    assert all(r["playing"] for r in ok.data["players"])


async def test_pending_challenges_are_bounded(server: Addr, nursery: trio.Nursery) -> None:
    a = await person(server, nursery, "alice")
    targets = [await person(server, nursery, f"t{i}") for i in range(5)]
    for i, t in enumerate(targets[:4]):
        await challenge(a, t.player, rid=10 + i)
    refused = await a.request(m.Challenge(20, targets[4].player, SMALL, "blind"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NOT_ALLOWED


async def test_refused_without_the_capability(server: Addr, nursery: trio.Nursery) -> None:
    plain = await person(server, nursery, "plain", caps=())
    b = await person(server, nursery, "bob")
    # Who is online is answered in any session; what answers the rest are events it never gets.
    ok = await plain.request(m.Online(1))
    assert isinstance(ok, m.Ok) and [r["player"] for r in ok.data["players"]] == [b.player]
    for i, msg in enumerate(
        [
            m.Challenge(2, b.player, SMALL, "blind"),
            m.Accept(3, b"\0" * 8),
            m.Decline(4, b"\0" * 8, None),
            m.Cancel(5, b"\0" * 8),
            m.Say(6, b"\0" * 16, "hi"),
        ]
    ):
        refused = await plain.request(msg)
        assert isinstance(refused, m.Error) and refused.code == ErrorCode.NOT_ALLOWED, (i, refused)
        assert refused.ref == msg.id  # type: ignore[attr-defined]


async def _match_of_two(server: Addr, nursery: trio.Nursery) -> tuple[TC, TC, bytes]:
    a = await person(server, nursery, "alice")
    b = await person(server, nursery, "bob")
    cid = await challenge(a, b.player)
    await b.expect(m.Challenged)
    ok = await b.request(m.Accept(2, cid))
    assert isinstance(ok, m.Ok), ok
    return a, b, ok.data["match"]


async def _next_said(c: TC) -> m.Said:
    while True:
        msg = await c.recv()
        if isinstance(msg, m.Said):
            return msg


async def test_chat_reaches_the_players_not_the_spectators(
    server: Addr, nursery: trio.Nursery
) -> None:
    a, b, mid = await _match_of_two(server, nursery)
    watcher = await person(server, nursery, "watcher")
    ok = await watcher.request(m.Watch(1, mid))
    assert isinstance(ok, m.Ok), ok
    said, before = await ask(a, m.Say(10, mid, " good luck "))
    assert isinstance(said, m.Ok), said
    # The sender hears its own line too, in the order the server took it.
    for got in (await _next_said(b), next(x for x in before if isinstance(x, m.Said))):
        assert (got.match, got.seat, got.member, got.line) == (mid, 0, 0, "good luck")
    said = await b.request(m.Say(11, mid, "you too 🙂"))
    assert isinstance(said, m.Ok), said
    assert (await _next_said(a)).line == "you too 🙂"
    # A spectator may not chat, and was sent no line: its next message after a request of its
    # own is that request's answer, with nothing of the chat before it.
    refused = await watcher.request(m.Say(12, mid, "hello"))
    assert isinstance(refused, m.Error) and refused.code == ErrorCode.NOT_ALLOWED
    _, seen = await ask(watcher, m.Online(13))
    assert not [x for x in seen if isinstance(x, m.Said)]


async def test_chat_limits(
    server: Addr, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, _b, mid = await _match_of_two(server, nursery)
    too_long = await a.request(m.Say(10, mid, "x" * (m.CHAT_MAX + 1)))
    assert isinstance(too_long, m.Error) and too_long.code == ErrorCode.BAD_MESSAGE
    assert too_long.ref == 10
    control = await a.request(m.Say(11, mid, "hi\x1b[2J"))
    assert isinstance(control, m.Error) and control.code == ErrorCode.BAD_MESSAGE
    empty = await a.request(m.Say(12, mid, "   "))
    assert isinstance(empty, m.Error) and empty.code == ErrorCode.BAD_MESSAGE
    unknown = await a.request(m.Say(13, b"\1" * 16, "hi"))
    assert isinstance(unknown, m.Error) and unknown.code == ErrorCode.NO_SUCH_MATCH
    exactly = await a.request(m.Say(14, mid, "é" * m.CHAT_MAX))  # code points, not bytes
    assert isinstance(exactly, m.Ok), exactly
    answers = [await a.request(m.Say(20 + i, mid, f"line {i}")) for i in range(8)]
    codes = [x.code if isinstance(x, m.Error) else 0 for x in answers]
    assert ErrorCode.RATE_LIMITED in codes and codes[:4] == [0, 0, 0, 0]
    await trio.sleep(10)
    assert isinstance(await a.request(m.Say(40, mid, "again")), m.Ok)


async def test_chat_is_not_in_the_record(server: Addr, nursery: trio.Nursery) -> None:
    a, b, mid = await _match_of_two(server, nursery)
    # Sent, not awaited as a request: the bots take the match's messages from here on.
    await a.send(m.Say(10, mid, "a secret word"))
    ba, bb = Bot(a, "blind", 1), Bot(b, "blind", 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    ok = await a.request(m.GetRecord(11, mid))
    assert isinstance(ok, m.Ok), ok
    assert b"a secret word" not in ok.data["record"]


async def test_a_plain_session_is_sent_none_of_it(server: Addr, nursery: trio.Nursery) -> None:
    # A player with a plain session and a people one: only the people one is told.
    key = Ed25519PrivateKey.generate()
    plain = await connect(server, nursery, key, name="bob")
    b = await person(server, nursery, "bob", key)
    a = await person(server, nursery, "alice")
    await challenge(a, b.player)
    await b.expect(m.Challenged)
    _, seen = await ask(plain, m.Ladder(5))
    assert seen == []
