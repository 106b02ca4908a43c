"""What one input makes a peer receive leaves in one write, and the peer who must act next is
written to first; frames are never reordered or lost on the way (direct write or backlog).
"""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, Bot, pair, place_msg, play_both, player_id, player_key, start_server
from seabattle.protocol import messages as m
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.rules import rules_from_dict
from seabattle.protocol.session import State
from seabattle.protocol.verdict import Defender
from seabattle.server.config import Limits
from seabattle.server.lobby import Lobby
from seabattle.server.metrics import Metrics
from seabattle.server.outbox import one_flight
from seabattle.server.session import Client
from seabattle.server.store import Store


class _Recorder(trio.abc.SendStream):
    """A send stream (no socket: frames go through the writer task) recording each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class _Ident:
    """What a Client needs of its server, and no more."""

    limits = Limits()
    metrics = Metrics()
    nursery: trio.Nursery | None = None


def _client() -> tuple[Client, _Recorder, _Ident]:
    """A ready Client over a recording stream (no socket: frames go through the writer task)."""
    stream, ident = _Recorder(), _Ident()
    client = Client(ident, stream, "test")  # type: ignore[arg-type]
    client.conn.state = State.READY
    return client, stream, ident


def _frames(data: bytes) -> list[m.Message]:
    dec = FrameDecoder()
    dec.feed(data)
    out: list[m.Message] = []
    while (body := dec.next_frame()) is not None:
        out.append(m.decode(body))
    return out


async def test_a_backlog_leaves_in_one_write_and_frames_are_shared() -> None:
    # What queued up while no writer ran leaves in one write, in order, shared frames included.
    client, stream, ident = _client()
    msgs = [m.Ping(1), m.Pong(2), m.Bye("x")]
    client.send(msgs[0])
    client.send_frame(encode_frame(m.encode(msgs[1])), msgs[1])
    client.send(msgs[2])
    async with trio.open_nursery() as n:
        ident.nursery = n
        client.send(m.Ping(3))  # starts the writer
        await trio.testing.wait_all_tasks_blocked()
    assert [_frames(w) for w in stream.writes] == [[*msgs, m.Ping(3)]]
    assert client.metrics.messages_out == 4 and client._queued == 0
    assert client._writer_scope is None  # the writer ended with the backlog


async def test_a_corked_client_writes_what_it_held_in_one_write_in_order() -> None:
    client, stream, ident = _client()
    async with trio.open_nursery() as n:
        ident.nursery = n
        assert client.cork()
        assert not client.cork()  # already corked: the first corker uncorks
        for i in range(3):
            client.send(m.Ping(i))
        await trio.testing.wait_all_tasks_blocked()
        assert stream.writes == []  # held
        client.uncork()
        await trio.testing.wait_all_tasks_blocked()
        client.send(m.Pong(9))  # uncorked: goes on its own
        await trio.testing.wait_all_tasks_blocked()
    assert [_frames(w) for w in stream.writes] == [
        [m.Ping(0), m.Ping(1), m.Ping(2)],
        [m.Pong(9)],
    ]


async def test_one_flight_gives_each_client_one_write_for_several_corked_inputs() -> None:
    # The journal releases a batch of inputs in one flight: a client that two inputs wrote to
    # (a lean defender's answer and its next fire: the verdict, then the next shot) gets one
    # write, and only at the flight's end; a cork of its own inside the flight changes nothing.
    (a, sa, ident), (b, sb, _) = _client(), _client()
    b.ident = ident
    async with trio.open_nursery() as n:
        ident.nursery = n
        with one_flight():
            for msg in (m.Ping(1), m.Ping(2)):  # as a referee writes one input's sends
                corked = [c for c in (a, b) if c.cork()]
                assert corked == []  # the flight holds them: the referee does not uncork
                a.send(msg)
            b.send(m.Pong(3))
            await trio.testing.wait_all_tasks_blocked()
            assert sa.writes == sb.writes == []
        await trio.testing.wait_all_tasks_blocked()
        a.send(m.Pong(4))  # after the flight: at once, on its own
        await trio.testing.wait_all_tasks_blocked()
    assert [_frames(w) for w in sa.writes] == [[m.Ping(1), m.Ping(2)], [m.Pong(4)]]
    assert [_frames(w) for w in sb.writes] == [[m.Pong(3)]]


async def test_a_bye_sent_while_corked_still_leaves() -> None:
    client, stream, ident = _client()
    async with trio.open_nursery() as n:
        ident.nursery = n
        client.cork()
        client.send(m.Ping(1))
        client.close("done")
        client.uncork()
        await trio.testing.wait_all_tasks_blocked()
    assert [_frames(w) for w in stream.writes] == [[m.Ping(1), m.Bye("done")]]


class _Wire:
    """The socket under a :class:`Client` (its direct writes): each write goes to ``log``, as the
    messages it carries, with the player it went to."""

    def __init__(self, player: str, log: list[tuple[str, list[m.Message]]]) -> None:
        self.player, self.log = player, log

    def try_send(self, data: bytes) -> int:
        self.log.append((self.player, _frames(bytes(data))))
        return len(data)


def _peer(tag: str, log: list[tuple[str, list[m.Message]]], lean: bool = False) -> Client:
    """A ready Client for player ``tag`` whose every write goes to ``log`` (``lean``: its
    session agreed the capability)."""
    client, _, _ = _client()
    client.player, client.name, client.lean = player_id(tag), tag, lean
    client._direct = _Wire(client.player, log)  # type: ignore[assignment]
    return client


async def _match(
    store: Store,
    nursery: trio.Nursery,
    mode: str,
    log: list[tuple[str, list[m.Message]]],
    lean: bool = False,
) -> tuple[Lobby, Client, Client, bytes]:
    """A classic match in ``mode`` between two connections whose writes go to ``log``
    (``lean``: both agreed the capability)."""
    lobby = Lobby(store, Ed25519PrivateKey.generate(), nursery, Limits())
    a, b = _peer("a", log, lean), _peer("b", log, lean)
    for p in (a, b):
        await store.upsert_player(p.player, p.name, 0)
    await lobby.request(a, m.Create(1, {"preset": "classic"}, mode, True))
    mid = next(msg for _, w in log for msg in w if isinstance(msg, m.Ok)).data["match"]
    await lobby.request(b, m.Join(2, mid, None))
    await trio.testing.wait_all_tasks_blocked()
    return lobby, a, b, mid


@pytest.mark.parametrize("lean", [False, True])
async def test_a_custody_shot_is_one_write_per_player_the_shooter_first(
    nursery: trio.Nursery, lean: bool
) -> None:
    log: list[tuple[str, list[m.Message]]] = []
    async with Store.open(":memory:") as store:
        lobby, a, b, mid = await _match(store, nursery, "custody", log, lean)
        ref = lobby.running[mid]
        rules = rules_from_dict({"preset": "classic"})
        rng = random.Random(7)
        for seat, (p, tag) in enumerate(((a, "a"), (b, "b"))):
            fleet = random_fleet(rules, rng).to_list()
            msg = place_msg(mid, 1, fleet, secrets.token_bytes(32), seat, rules, tag)
            await lobby.game_message(p, msg)
        await trio.testing.wait_all_tasks_blocked()
        labels = [f"{col}{row}" for row in range(1, 11) for col in "ABCDEFGHIJ"]
        unfired = {a.player: iter(labels), b.player: iter(labels)}
        for seq in range(1, 41):  # enough shots to see hits (the shooter goes on) and misses
            g = ref.game
            assert g is not None and g.turn is not None
            shooter = (a, b)[g.turn]
            del log[:]
            await lobby.game_message(
                shooter, m.Fire(mid, 1, (next(unfired[shooter.player]),), 0, seq)
            )
            writes = [(who, [type(x) for x in w]) for who, w in log]
            # One write per player: the shot and its verdict (a clock may follow) together; to a
            # lean session the verdict alone, which repeats the shot.
            assert sorted(who for who, _ in writes) == sorted([a.player, b.player])
            for _, kinds in writes:
                if lean:
                    assert kinds[0] is m.VerdictMsg and m.ShotCalled not in kinds
                else:
                    assert kinds[:2] == [m.ShotCalled, m.VerdictMsg]
            # The shooter, whom the verdict answers, is written to first.
            assert writes[0][0] == shooter.player
            verdict = next(x for _, w in log for x in w if isinstance(x, m.VerdictMsg))
            if verdict.next is None:
                break


@pytest.mark.parametrize("lean", [False, True])
async def test_a_blind_shot_reaches_the_defender_first_and_its_verdict_the_shooter_first(
    nursery: trio.Nursery, lean: bool
) -> None:
    # With ``lean`` the copies go: the shooter is not sent its own shot, nor the defender the
    # verdict it gave.
    log: list[tuple[str, list[m.Message]]] = []
    async with Store.open(":memory:") as store:
        lobby, a, b, mid = await _match(store, nursery, "blind", log, lean)
        ref = lobby.running[mid]
        rules = rules_from_dict({"preset": "classic"})
        rng = random.Random(3)
        defenders = {}
        for seat, p in enumerate((a, b)):
            c = Committed(rules, random_fleet(rules, rng), secrets.token_bytes(32), mid, 1, seat)
            defenders[p.player] = Defender(c)
            sig = c.seat_sig(player_key("ab"[seat]))
            await lobby.game_message(p, m.Commit(mid, 1, c.commitment.to_dict(), sig))
        g = ref.game
        assert g is not None and g.turn is not None
        shooter, defender = (a, b)[g.turn], (a, b)[1 - g.turn]
        del log[:]
        await lobby.game_message(shooter, m.Fire(mid, 1, ("E5",), 0, 1))
        copies = [] if lean else [shooter.player]
        assert [who for who, _ in log] == [defender.player, *copies]
        assert g.pending is not None
        verdict = defenders[defender.player].answer(g.pending)
        del log[:]
        await lobby.game_message(defender, m.Answer(mid, 1, verdict.to_dict()))
        copies = [] if lean else [defender.player]
        assert [who for who, _ in log] == [shooter.player, *copies]
        assert all(isinstance(w[0], m.VerdictMsg) for _, w in log)


async def test_a_reader_that_falls_behind_gets_every_frame_in_order_once_it_reads(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    # Past what the socket buffers take, the server keeps a backlog and a writer task drains it
    # once the peer reads again: nothing is lost, reordered or duplicated on the way.
    limits = Limits(rate=1e6, burst=1_000_000)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a, b, mid = await pair(addr, nursery, SMALL, "custody")
    await play_both(Bot(a, "custody"), Bot(b, "custody"))
    a.scope.cancel()  # a stops reading (its reader task ends)
    await trio.testing.wait_all_tasks_blocked()
    count = 500  # under send_queue (512 frames): further behind, a peer is dropped
    for i in range(count):
        await a.stream.send_all(a.conn.send(m.GetRecord(i, mid)))
    got: list[int] = []
    first: m.Ok | None = None
    with trio.fail_after(30):
        while len(got) < count:
            data = await a.stream.receive_some(65536)
            assert data, "the server closed the connection"
            for item in a.conn.receive_data(data):
                if isinstance(item, m.Ok):
                    got.append(item.ref)
                    first = first or item
                    assert item.data == first.data
    assert got == list(range(count))
