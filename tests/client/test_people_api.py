"""The client library's people (spec 6.9): online, challenge, accept, decline, the account's
events and a match's chat, against a real server over TCP."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing
from seabattle.bots.play import play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import Client, Said, connect
from seabattle.client.people import (
    AccountEvent,
    ChallengeEnded,
    ChallengeFailed,
    ChallengeReceived,
    MatchStarted,
)

SMALL = {"preset": "classic", "rows": 5, "cols": 5, "fleet": [["Boat", 2], ["Raft", 1]]}


async def first(client: Client, kind: type[AccountEvent]) -> AccountEvent:
    async for ev in client.events():
        if isinstance(ev, kind):
            return ev
    raise AssertionError("the events ended")


async def test_challenge_accepted_and_played(server: tuple[str, int]) -> None:
    async with connect(*server, name="alice") as a, connect(*server, name="bob") as b:
        rows = {r["player"]: r for r in await a.online()}
        assert rows[b.player]["name"] == "bob" and rows[b.player]["playing"] is False
        got: dict[str, object] = {}

        async def bob() -> None:
            ev = await first(b, ChallengeReceived)
            assert isinstance(ev, ChallengeReceived)
            assert (ev.player, ev.name, ev.mode) == (a.player, "alice", "custody")
            assert [c.id for c in b.incoming] == [ev.id]
            got["b"] = await b.accept(ev)
            started = await first(b, MatchStarted)
            assert isinstance(started, MatchStarted) and started.match is got["b"]
            assert b.incoming == []

        async with trio.open_nursery() as n:
            n.start_soon(bob)
            match = await a.challenge("bob", SMALL, "custody")
        theirs = got["b"]
        assert match.id == theirs.id  # type: ignore[attr-defined]
        rng = random.Random(3)
        with trio.fail_after(30):
            async with trio.open_nursery() as n:
                n.start_soon(play_match, theirs, make_strategy("random"), rng)
                result = await play_match(match, make_strategy("random"), rng)
        assert result.ended and result.seat == 0


async def test_declined_raises_with_the_reason(server: tuple[str, int]) -> None:
    async with connect(*server, name="alice") as a, connect(*server, name="bob") as b:

        async def bob() -> None:
            ev = await first(b, ChallengeReceived)
            await b.decline(ev, "not now")  # type: ignore[arg-type]

        async with trio.open_nursery() as n:
            n.start_soon(bob)
            with pytest.raises(ChallengeFailed) as caught:
                await a.challenge(b.player, SMALL)
        assert (caught.value.reason, caught.value.detail) == ("declined", "not now")
        assert "declined: not now" in str(caught.value)


async def test_giving_up_the_wait_cancels_the_challenge(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    async with connect(*server, name="alice") as a, connect(*server, name="bob") as b:
        made: list[bytes] = []
        with trio.move_on_after(1):
            await a.challenge(b.player, SMALL, made=made.append)
        ended = await first(b, ChallengeEnded)
        assert isinstance(ended, ChallengeEnded)
        assert (ended.id, ended.reason) == (made[0], "cancelled")
        assert b.incoming == []


async def test_a_challenge_pending_is_known_to_a_later_session(server: tuple[str, int]) -> None:
    async with (
        connect(*server, name="alice") as a,
        connect(*server, name="bob") as b,
        trio.open_nursery() as n,
    ):
        n.start_soon(a.challenge, b.player, SMALL)
        await first(b, ChallengeReceived)
        async with connect(*server, key=b.key, name="bob") as b2:
            (pending,) = await b2.pending()
            assert pending.player == a.player
        n.cancel_scope.cancel()


async def test_chat_both_ways(server: tuple[str, int]) -> None:
    async with connect(*server, name="alice") as a, connect(*server, name="bob") as b:
        async with trio.open_nursery() as n:

            async def bob() -> None:
                ev = await first(b, ChallengeReceived)
                await b.accept(ev)  # type: ignore[arg-type]

            n.start_soon(bob)
            mine = await a.challenge(b.player, SMALL)
        theirs = b.matches[mine.id]
        await mine.wait_started()
        await mine.say("good luck")

        async def said(events: object) -> Said:
            async for ev in events:  # type: ignore[attr-defined]
                if isinstance(ev, Said):
                    return ev
            raise AssertionError("no chat")

        with trio.fail_after(10):
            heard = await said(theirs.events())
            echo = await said(mine.events())
        assert (heard.seat, heard.line, heard.mine) == (0, "good luck", False)
        assert (echo.seat, echo.line, echo.mine) == (0, "good luck", True)
