"""A failover gap, seen by the reference client: its node stops mid-match, another node takes the
match over from the journal, and the client gets back in there. Whatever happened while it was
away is in the snapshot; the record it is asked to co-sign then holds entries its mirror never
saw. That is no lie (issue 34's false ``LIE DETECTED (referee)``): both players finish, see no
lie, co-sign, and the record verifies. And a move made while the client is back on the node that
is about to take its match over waits for the match there: it is not refused and forgotten.

A hang fails here with a dump of where every task stood (``helpers_watchdog``): the matches have
no clocks, so a match that cannot end would otherwise wait for ever.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing
from helpers import SMALL, cluster_node
from helpers_watchdog import watchdog
from seabattle.client import api
from seabattle.protocol.record import verify_record

#: Trio seconds and wall seconds a test here may take (they take 12 to 35, and 1 to 4): past
#: either it fails with a dump (``helpers_watchdog``). Entered once node a runs: its lease
#: renewals keep the autojump clock from leaping to the deadline while a store call runs.
VIRTUAL, REAL = 120.0, 120.0


async def _play(
    c: api.Client, match: api.MatchHandle, shots: list[int], pause: float
) -> api.MatchHandle:
    """Play like README's script, ``pause`` seconds before each call; count our calls.

    The cells go round: a refused call must not use its cell up for good, or a ship could be
    left that no call reaches, and the match would wait for ever (CI hung so, when the calls
    made on the node about to take the match over were refused)."""
    cells: itertools.cycle[str] | None = None
    async for ev in match.events():
        if isinstance(ev, api.GameStarted):
            await match.place()
            assert match.rules is not None
            rules = match.rules
            board = [f"{chr(65 + c)}{r + 1}" for r in range(rules.rows) for c in range(rules.cols)]
            cells = itertools.cycle(board)
        elif isinstance(ev, api.YourTurn | api.Refused):
            await trio.sleep(pause)
            if cells is not None:
                await match.fire(next(cells))
                shots[0] += 1
    return match


async def test_a_failover_gap_is_no_lie_to_the_reference_client(
    postgres_db: str, tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, stop_a = await cluster_node(nursery, postgres_db, tmp_path, "a")
    async with watchdog(VIRTUAL, REAL, postgres=postgres_db):
        await _failover_gap(postgres_db, tmp_path, a)
    stop_a.set()


@asynccontextmanager
async def _match_on(
    b: tuple[str, int], a: tuple[str, int]
) -> AsyncIterator[tuple[api.Client, api.Client, api.MatchHandle, api.MatchHandle]]:
    """alice and bob on node b (knowing node a too), in a blind match alice hosts there."""
    async with (
        api.connect(*b, name="alice", also=[a]) as alice,
        api.connect(*b, name="bob", also=[a]) as bob,
    ):
        host, invite = await alice.create(SMALL, "blind")
        assert invite is not None
        yield alice, bob, host, await bob.join(invite)


async def _failover_gap(postgres_db: str, tmp_path: Path, a: tuple[str, int]) -> None:
    handles: dict[str, api.MatchHandle] = {}
    async with trio.open_nursery() as node_b:
        b, stop_b = await cluster_node(node_b, postgres_db, tmp_path, "b")
        shots = [0]
        async with _match_on(b, a) as (alice, bob, host, guest), trio.open_nursery() as players:

            async def play(name: str, c: api.Client, h: api.MatchHandle) -> None:
                handles[name] = await _play(c, h, shots, 0.5)

            players.start_soon(play, "alice", alice, host)
            players.start_soon(play, "bob", bob, guest)
            while shots[0] < 4:
                await trio.sleep(0.1)
            stop_b.set()  # node b stops mid-match: a takes the match over
    assert set(handles) == {"alice", "bob"}
    for name, h in handles.items():
        assert not h.lies, (name, h.lies)
        assert h.disputed is None, name
        assert h.result is not None and h.head is not None, name
    winners = {h.result.get("winner") for h in handles.values() if h.result is not None}
    assert len(winners) == 1
    async with api.connect(*a, name="reader") as c:
        with trio.fail_after(10):
            while True:  # a co-signature is stored a moment after the player sent it
                signed = await c.get_record(handles["alice"].id)
                verify_record(signed)
                roles = {s["role"] for s in signed["sigs"]}
                if {"seat0", "seat1"} <= roles:  # both co-signed what the new node recorded
                    break
                await trio.sleep(0.2)


async def test_a_move_made_before_the_takeover_waits_for_the_match(
    postgres_db: str, tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """The player whose turn it is gets back in on node a before a has taken the match over (a
    sweeps only every 30 s) and calls its shot there: the call waits for the match, goes out
    with its snapshot, and is answered. A node without the match refuses the call
    (NO_SUCH_MATCH); the client used to send it all the same, and the snapshot that came next
    found it carried, owed nothing and gave no turn: the match stood still for ever."""
    a, stop_a = await cluster_node(nursery, postgres_db, tmp_path, "a", sweep=30.0)
    async with watchdog(VIRTUAL, REAL, postgres=postgres_db):
        seen: dict[str, list[api.MatchEvent]] = {"alice": [], "bob": []}
        turn = trio.Event()
        async with trio.open_nursery() as node_b:
            b, stop_b = await cluster_node(node_b, postgres_db, tmp_path, "b")
            async with (
                _match_on(b, a) as (alice, bob, host, guest),
                trio.open_nursery() as players,
            ):
                mover: list[tuple[api.Client, api.MatchHandle]] = []

                async def follow(name: str, c: api.Client, h: api.MatchHandle) -> None:
                    async for ev in h.events():
                        seen[name].append(ev)
                        if isinstance(ev, api.GameStarted):
                            await h.place()
                        elif isinstance(ev, api.YourTurn) and not turn.is_set():
                            mover.append((c, h))
                            turn.set()

                players.start_soon(follow, "alice", alice, host)
                players.start_soon(follow, "bob", bob, guest)
                await turn.wait()
                stop_b.set()  # node b stops at the first turn: a takes the match over
                c, h = mover[0]
                name = "alice" if c is alice else "bob"
                while c._at != a or not c._online:  # back on node a (not yet in the match)
                    await trio.sleep(0.05)
                assert not any(isinstance(ev, api.Resumed) for ev in seen[name]), "taken over"
                await h.fire("A1")
                while not any(isinstance(ev, api.ShotResult) for ev in seen[name]):
                    await trio.sleep(0.1)
                assert not [ev for ev in seen[name] if isinstance(ev, api.Refused)]
                assert any(isinstance(ev, api.Resumed) for ev in seen[name])
                players.cancel_scope.cancel()
    stop_a.set()
