"""A failover gap, seen by the reference client: its node stops mid-match, another node takes the
match over from the journal, and the client gets back in there. Whatever happened while it was
away is in the snapshot; the record it is asked to co-sign then holds entries its mirror never
saw. That is no lie (issue 34's false ``LIE DETECTED (referee)``): both players finish, see no
lie, co-sign, and the record verifies.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from helpers import SMALL, cluster_node
from seabattle.client import api
from seabattle.protocol.record import verify_record


async def _play(
    c: api.Client, match: api.MatchHandle, shots: list[int], pause: float
) -> api.MatchHandle:
    """Play like README's script, ``pause`` seconds before each call; count our calls."""
    cells: list[str] = []
    async for ev in match.events():
        if isinstance(ev, api.GameStarted):
            await match.place()
            assert match.rules is not None
            rules = match.rules
            cells = [
                f"{chr(65 + col)}{row + 1}"
                for row in range(rules.rows)
                for col in range(rules.cols)
            ]
        elif isinstance(ev, api.YourTurn | api.Refused):
            await trio.sleep(pause)
            if cells:
                await match.fire(cells.pop(0))
                shots[0] += 1
    return match


async def test_a_failover_gap_is_no_lie_to_the_reference_client(
    postgres_db: str, tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    a, stop_a = await cluster_node(nursery, postgres_db, tmp_path, "a")
    handles: dict[str, api.MatchHandle] = {}
    async with trio.open_nursery() as node_b:
        b, stop_b = await cluster_node(node_b, postgres_db, tmp_path, "b")
        shots = [0]
        async with (
            api.connect(*b, name="alice", also=[a]) as alice,
            api.connect(*b, name="bob", also=[a]) as bob,
            trio.open_nursery() as players,
        ):
            host, invite = await alice.create(SMALL, "blind")
            assert invite is not None
            guest = await bob.join(invite)

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
    stop_a.set()
