"""Team play over TCP (spec 6.8): one session per member, the referee naming each turn's caller.

What a team relies on: four players can form two teams from the invitations `create` hands out,
play a match to its end and get a record that verifies and names who called every shot; a member
who is not due is refused; a member who drops does not stop its team while another is there; and
a client that does not speak team play never meets it.
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio
from helpers import connect as raw_connect
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client.api import (
    Client,
    Info,
    MatchHandle,
    Refused,
    RequestFailed,
    ShotResult,
    YourTurn,
    connect,
)
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import verify_record

TEAMS = {"preset": "classic", "team_size": 2}
NAMES = ("alice", "bob", "carol", "dave")


async def _teams(
    stack: AsyncExitStack, addr: tuple[str, int], rules: dict[str, Any], mode: str
) -> tuple[list[Client], list[MatchHandle]]:
    """Four clients in one team match: alice hosts (seat 0), bob joins her team by its
    invitation, carol joins seat 1 by its invitation, dave by the match's own code."""
    clients = [
        await stack.enter_async_context(connect(*addr, name=n, reconnect_for=0)) for n in NAMES
    ]
    host, invite = await clients[0].create(rules, mode)
    assert host.team_invites is not None and invite is not None
    handles = [host]
    async with trio.open_nursery() as n:
        joined: dict[int, MatchHandle] = {}

        async def join(i: int, code: str) -> None:
            joined[i] = await clients[i].join(code)

        # Each join waits for the match to fill, so they run side by side.
        n.start_soon(join, 1, host.team_invites[0])
        n.start_soon(join, 2, host.team_invites[1])
        await trio.testing.wait_all_tasks_blocked()
        n.start_soon(join, 3, invite)
    handles += [joined[1], joined[2], joined[3]]
    for h in handles:
        await h.wait_started()
    return clients, handles


async def _play_all(handles: list[MatchHandle]) -> list[BotResult]:
    out: list[Any] = [None] * len(handles)

    async def one(i: int) -> None:
        out[i] = await play_match(handles[i], make_strategy("hunt"), random.Random(i))

    async with trio.open_nursery() as n:
        for i in range(len(handles)):
            n.start_soon(one, i)
    return out


@pytest.mark.parametrize("mode", ["blind", "custody"])
async def test_two_teams_of_two_play_to_the_end_with_a_verified_record(
    server: tuple[str, int], mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with AsyncExitStack() as stack:
        clients, handles = await _teams(stack, server, TEAMS, mode)
        assert [(h.seat, h.member) for h in handles] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert all(h.teams == handles[0].teams for h in handles)
        results = await _play_all(handles)
        assert all(r.ended for r in results)
        assert len({r.match_id for r in results}) == 1
        assert {r.won for r in results[:2]} | {not r.won for r in results[2:]} in ({True}, {False})
        assert not any(r.lies for r in results)
        assert all(r.ratings is None for r in results)  # a team match moves no rating
        signed = await clients[3].get_record(handles[0].id)
    report = verify_record(signed)
    assert report.ok, report.problems
    rec = signed["record"]
    keys = [bytes.fromhex(c.player) for c in clients]
    assert rec["teams"] == [keys[:2], keys[2:]]
    shots = [e for g in rec["games"] for e in g["transcript"] if e["in"] in ("fire", "radar")]
    # Both members of each seat called shots, in turn.
    assert {(e["seat"], e["member"]) for e in shots} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    # The captains co-signed for their teams; the other members did not sign at all.
    roles = {s["role"] for s in signed["sigs"]}
    assert roles <= {"referee", "seat0", "seat1"} and "referee" in roles


async def test_the_member_not_named_is_refused_and_the_named_one_calls(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    async with AsyncExitStack() as stack:
        _, handles = await _teams(stack, server, TEAMS, "custody")
        for h in handles[::2]:
            await h.place()
        turns: list[m.Turn] = []
        due: MatchHandle | None = None
        async for ev in handles[0].events():
            if isinstance(ev, Info) and isinstance(ev.message, m.Turn):
                turns.append(ev.message)
                s, k = ev.message.seat, ev.message.member
                due = next(h for h in handles if (h.seat, h.member) == (s, k))
                break
        assert due is not None and turns
        other = next(h for h in handles if h.seat == due.seat and h is not due)
        await other.fire("A1")
        async for ev in other.events():
            if isinstance(ev, Refused):
                assert ev.code == ErrorCode.NOT_CALLER
                break
        # Only the captain commits or resigns for the team.
        if other.member:
            await other.resign()
            async for ev in other.events():
                if isinstance(ev, Refused):
                    assert ev.code == ErrorCode.NOT_CAPTAIN
                    break
        async for ev in due.events():
            if isinstance(ev, YourTurn):
                break
        await due.fire("A1")
        async for ev in due.events():
            if isinstance(ev, Refused):
                raise AssertionError(f"the member named was refused: {ev}")
            if isinstance(ev, ShotResult):
                assert ev.cells == (Cell(0, 0),)
                break


async def test_a_member_who_drops_does_not_stop_the_team(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    async with AsyncExitStack() as stack:
        clients, handles = await _teams(stack, server, TEAMS, "custody")
        # Bob (seat 0, member 1) goes for good: his team plays on with Alice calling every turn.
        await handles[1].client.wire.aclose()
        results = await _play_all([handles[0], handles[2], handles[3]])
        assert all(r.ended for r in results)
        assert {r.reason for r in results} != {"abandoned"}
        signed = await clients[0].get_record(handles[0].id)
    assert verify_record(signed).ok
    shots = [e for g in signed["record"]["games"] for e in g["transcript"] if e["in"] == "fire"]
    late = [e for e in shots if e["seat"] == 0][2:]  # after the first turns, Bob is known gone
    assert late and all(e["member"] == 0 for e in late)


async def test_a_session_without_the_teams_capability_cannot_create_or_join_a_team_match(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    tc = await raw_connect(server, nursery, name="old")  # offers no capability
    ans = await tc.request(m.Create(1, TEAMS, "blind", True))
    assert isinstance(ans, m.Error) and ans.code == ErrorCode.NOT_ALLOWED
    assert "teams" in ans.msg
    async with connect(*server, name="host") as host:
        _, invite = await host.create(TEAMS, "blind")
        ans = await tc.request(m.Join(2, None, invite))
        assert isinstance(ans, m.Error) and ans.code == ErrorCode.NOT_ALLOWED
        with pytest.raises(RequestFailed) as info:
            await host.quick(TEAMS, "blind")
        assert info.value.code == ErrorCode.NOT_ALLOWED


async def test_spectators_are_told_the_teams_and_every_caller(
    server: tuple[str, int], autojump_clock: trio.testing.MockClock
) -> None:
    async with AsyncExitStack() as stack:
        clients, handles = await _teams(stack, server, TEAMS, "custody")
        watcher = await stack.enter_async_context(connect(*server, name="eve"))
        seen: list[m.Message] = []

        async def watch() -> None:
            async with watcher.watch(handles[0].id) as events:
                async for msg in events:
                    seen.append(msg)
                    if isinstance(msg, m.MatchOver):
                        return

        async with trio.open_nursery() as n:
            n.start_soon(watch)
            await trio.testing.wait_all_tasks_blocked()
            await _play_all(handles)
    teams = [x for x in seen if isinstance(x, m.Team)]
    assert [(t.seat, list(t.members)) for t in teams] == [
        (0, [clients[0].player, clients[1].player]),
        (1, [clients[2].player, clients[3].player]),
    ]
    # Every shot was called by the member the `turn` before it named (in custody a lean
    # spectator is sent the verdict, which names the caller, and no `shot`).
    named: dict[int, int] = {}
    shots = 0
    for x in seen:
        if isinstance(x, m.Turn):
            named[x.seat] = x.member
        elif isinstance(x, m.VerdictMsg):
            assert named.get(x.seat) == x.member
            shots += 1
    assert shots > 0
