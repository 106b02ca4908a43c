"""What a match says goes to those it was said to: a player who comes back while a move is being
journaled is sent its ``start`` and snapshot first, and never the move's own relay after a
snapshot that shows the move already (before, a failover's reconnecting team member was sent a
teammate's ``shot_called`` ahead of its snapshot, and its mirror cried "lie").
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import FakePeer, place_msg, player_id
from seabattle.protocol import messages as m
from seabattle.protocol.fleet import random_fleet
from seabattle.server.config import Limits
from seabattle.server.journal import Journal, Row
from seabattle.server.lobby import Lobby
from seabattle.server.store import Fence, Store
from test_fencing import _Blinking


class _Held(_Blinking):
    """A journal's store that takes rows only while ``open`` is set."""

    def __init__(self) -> None:
        super().__init__(away=0)
        self.open = trio.Event()
        self.open.set()

    async def append_journal(
        self, rows: list[Row], fences: Mapping[str, Fence] | None = None
    ) -> frozenset[str]:
        await self.open.wait()
        self.rows += rows
        return frozenset()


async def test_a_player_back_while_a_move_is_journaled_gets_its_snapshot_and_no_stale_relay(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    held = _Held()
    journal = Journal(held)  # type: ignore[arg-type]
    await nursery.start(journal.run)
    async with Store.open(":memory:") as store:
        lobby = Lobby(
            store, Ed25519PrivateKey.generate(), nursery, Limits(create_burst=100), journal=journal
        )
        host, guest = FakePeer(player_id("host")), FakePeer(player_id("guest"))
        for p in (host, guest):
            await store.upsert_player(p.player, p.name, 0)
        await lobby.request(host, m.Create(1, {"preset": "classic"}, "custody", True))
        mid = host.of(m.Ok)[-1].data["match"]
        await lobby.request(guest, m.Join(2, mid, None))
        await trio.testing.wait_all_tasks_blocked()
        ref = lobby.running[mid]
        rng = random.Random(3)
        for seat, (p, tag) in enumerate(((host, "host"), (guest, "guest"))):
            fleet = tuple(random_fleet(ref.rules, rng).to_list())
            await lobby.game_message(
                p, place_msg(mid, 1, fleet, rng.randbytes(32), seat, ref.rules, tag)
            )
        await trio.testing.wait_all_tasks_blocked()
        g = ref.game
        assert g is not None and g.turn is not None and guest.of(m.Firing, mid)
        shooter, other = (host, guest) if g.turn == 0 else (guest, host)
        # The store stalls: the shot is accepted, its relay waits for its journal row, and the
        # other player drops and comes back meanwhile.
        held.open = trio.Event()
        await lobby.game_message(shooter, m.Fire(mid, 1, ("A1",), 0, 7))
        lobby.disconnected(other)
        back = FakePeer(other.player)
        lobby.authenticated(back, True)
        await trio.testing.wait_all_tasks_blocked()
        assert back.got == []  # nothing before the journal has it
        held.open.set()
        await trio.testing.wait_all_tasks_blocked()
        kinds = [type(x) for x in back.got]
        assert kinds[0] is m.Start and m.Snapshot in kinds, kinds
        # The snapshot shows the shot: it is not sent again as news after it, nor before.
        assert m.ShotCalled not in kinds and m.VerdictMsg not in kinds, kinds
        snap = back.of(m.Snapshot, mid)[-1]
        assert snap.view["shots"] == 1
