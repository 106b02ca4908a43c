"""The reference client under the faults an operator meets (issue 33, the client's side).

A server that falls silent (stopped, cut off) is given up after the silence timeout (spec 4.6);
one that takes the connection and never answers is passed over after the handshake timeout; a
script's moves made while the client gets back in wait for the resume instead of failing; a
redirect to a node that just died sends the client back through the nodes it knows until one
seats it (4.10); and the entries the referee accepted while the client was away are no lie when
the snapshot it got on resuming agrees with them (5.5). Real TCP, virtual time.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, TC, Bot, Closed, connect, fire_honestly, start_server
from seabattle.bots.play import BotResult, play_match
from seabattle.bots.strategies import make_strategy
from seabattle.client import api
from seabattle.client.events import (
    GameEnded,
    GameStarted,
    MatchEnded,
    Reconnecting,
    Resumed,
    ShotResult,
    YourTurn,
)
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.record import verify_record
from seabattle.protocol.rules import rules_from_dict
from seabattle.protocol.seat_check import Shown, _held
from seabattle.protocol.seat_check import entries as kept_entries
from seabattle.protocol.ticket import Ticket, issue_ticket
from seabattle.protocol.verdict import Defender

pytest.importorskip("seabattle.server.app")


# -- a proxy that can freeze: a stopped node, as the network sees it ------------------------------


class Proxy:
    """A TCP listener that forwards each connection to ``target``, until :meth:`freeze`: then it
    forwards nothing more either way and answers no new connection, yet keeps every connection
    open (what a SIGSTOPped server looks like from outside)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frozen = trio.Event()
        self.addr: tuple[str, int] = ("", 0)
        self.accepted = 0

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.addr = listeners[0].socket.getsockname()[:2]
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        if self.frozen.is_set():
            await trio.sleep_forever()  # taken, never answered
        server = await trio.open_tcp_stream(*self.target)

        async def pump(src: trio.SocketStream, dst: trio.SocketStream) -> None:
            while True:
                try:
                    data = await src.receive_some(65536)
                except trio.BrokenResourceError:
                    data = b""
                if self.frozen.is_set():
                    await trio.sleep_forever()
                if not data:
                    await dst.aclose()
                    return
                await dst.send_all(data)

        async with server, client, trio.open_nursery() as n:
            n.start_soon(pump, client, server)
            n.start_soon(pump, server, client)

    def freeze(self) -> None:
        self.frozen.set()


class Watched:
    """Keeps a handle's events as they are emitted; ``then`` runs once, at our ``after``-th
    verdict (bots at full speed finish without virtual time passing)."""

    def __init__(self, h: api.MatchHandle, after: int, then: Any) -> None:
        self.seen: list[Any] = []
        original = h._emit

        def emit(ev: Any) -> None:
            self.seen.append(ev)
            if isinstance(ev, ShotResult) and sum(isinstance(e, ShotResult) for e in self.seen) == (
                after
            ):
                then()
            original(ev)

        h._emit = emit  # type: ignore[method-assign]


async def _bot(h: api.MatchHandle, seed: int, out: dict[int, BotResult]) -> None:
    out[seed] = await play_match(h, make_strategy("random"), random.Random(seed))


# -- 4.1 and 4.6: a server that answers nothing does not hold the client ---------------------------


async def test_a_server_that_takes_the_connection_and_never_answers_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()  # the kernel completes the TCP handshake; nobody ever reads
    start = trio.current_time()
    with pytest.raises(TimeoutError, match="handshake"):
        async with api.connect(*listener.getsockname()[:2], handshake_timeout=10):
            pass  # pragma: no cover
    assert 10 <= trio.current_time() - start < 11
    listener.close()
    with pytest.raises(ValueError, match=r"spec 4\.6"):
        async with api.connect("127.0.0.1", 1, silence=30):
            pass  # pragma: no cover


async def test_a_silent_node_is_given_up_and_a_frozen_one_passed_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The host plays through a proxy that then freezes (the node stopped): its connection falls
    # silent, it is given up after 60 s, the frozen proxy is tried again and passed over after
    # the handshake timeout, and the server's own address (``also``) takes it back in.
    async with trio.open_nursery() as servers:
        addr, _stop = await start_server(servers, tmp_path)
        proxy = Proxy(addr)
        await servers.start(proxy.run)
        async with (
            api.connect(*proxy.addr, name="host", also=[addr]) as a,
            api.connect(*addr, name="guest") as b,
        ):
            ha, invite = await a.create(SMALL, "custody")
            assert invite is not None
            hb = await b.join(invite)
            out: dict[int, BotResult] = {}
            frozen_at: list[float] = []

            def freeze() -> None:
                proxy.freeze()
                frozen_at.append(trio.current_time())

            async with trio.open_nursery() as n:
                wa = Watched(ha, 2, freeze)
                n.start_soon(_bot, ha, 1, out)
                n.start_soon(_bot, hb, 2, out)
            tries = [e for e in wa.seen if isinstance(e, Reconnecting)]
            assert tries and "silent for 60 s" in tries[0].reason
            addrs = [t.addr for t in tries]
            assert addrs[:2] == [f"{proxy.addr[0]}:{proxy.addr[1]}", f"{addr[0]}:{addr[1]}"]
            resumed = [i for i, e in enumerate(wa.seen) if isinstance(e, Resumed)]
            assert resumed and wa.seen.index(tries[0]) < resumed[0]
            assert out[1].result["over"] and {out[1].won, out[2].won} == {True, False}
            assert not ha.lies and not ha.disputed
            # back within silence + handshake timeout + the backoff, not as long as the freeze
            assert a._pings >= 1 and frozen_at
            signed = await a.get_record(ha.id)
            assert verify_record(signed).ok
            games = signed["record"]["games"]
            assert all(g["outcome"]["reason"] != "abandoned" for g in games)
        servers.cancel_scope.cancel()  # the proxy's frozen connections never end by themselves


# -- 4.7 and 4.9: README's scripting loop survives a server restart --------------------------------


async def _serve(
    tmp_path: Path,
    port: int,
    shutdown: trio.Event,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """A server on ``port`` (0: any) over the store in ``tmp_path``, until ``shutdown``."""
    from seabattle.server.app import serve

    await serve(
        "127.0.0.1",
        port,
        db_path=tmp_path / "db.sqlite",
        key_path=tmp_path / "server.key",
        shutdown=shutdown,
        task_status=task_status,
    )


async def test_the_readme_loop_survives_a_server_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as outer:
        down, stopped = trio.Event(), trio.Event()

        async def first(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            await _serve(tmp_path, 0, down, task_status=task_status)
            stopped.set()

        addr = await outer.start(first)
        restarted, done = trio.Event(), trio.Event()

        async def restart() -> None:
            await stopped.wait()
            await trio.sleep(3)  # down for a while: the script fires into the gap
            await outer.start(_serve, tmp_path, addr[1], done)
            restarted.set()

        outcomes: list[Any] = []
        fired: list[str] = []
        seen: list[Any] = []

        async def script() -> None:
            # README's loop, as written there, plus the restart at its fourth turn.
            async with api.connect(*addr, name="script") as client:
                match = await client.quick(rules=SMALL, mode="blind")
                await match.place()
                cells = iter(f"{c}{r}" for r in range(1, 6) for c in "ABCDE")
                turns = 0
                async for ev in match.events():
                    seen.append(ev)
                    if isinstance(ev, YourTurn):
                        turns += 1
                        if turns == 4:
                            down.set()  # a deploy: the server stops (bye "shutdown")
                            outer.start_soon(restart)
                            await stopped.wait()  # gone: the fire must wait for the new one
                        cell = next(cells)
                        fired.append(cell)
                        await match.fire(cell)
                    elif isinstance(ev, GameEnded):
                        outcomes.append(ev.outcome)
                assert not match.lies and not match.disputed

        async def bot(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            async with api.connect(*addr, name="bot") as c:
                task_status.started()
                match = await c.quick(SMALL, "blind")
                await play_match(match, make_strategy("random"), random.Random(5))

        async with trio.open_nursery() as n:
            n.start_soon(script)
            n.start_soon(bot)
        assert restarted.is_set()
        assert outcomes and outcomes[-1]["reason"] != "abandoned"
        kinds = [type(e) for e in seen]
        assert Reconnecting in kinds and Resumed in kinds
        assert len(fired) == len(set(fired))  # each cell called once: no shot went twice
        done.set()


async def test_a_move_made_while_the_connection_is_down_waits_and_goes_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The connection drops just before our move: fire() waits for the new connection instead
    # of raising, and the move the snapshot still wants goes out once, with its seq.
    async with trio.open_nursery() as servers:
        addr, stop = await start_server(servers, tmp_path)
        async with api.connect(*addr, name="a") as a, api.connect(*addr, name="b") as b:
            ha, invite = await a.create(SMALL, "custody")
            assert invite is not None
            hb = await b.join(invite)
            await ha.place()
            await hb.place()
            sent: list[m.Message] = []
            real = a._deliver

            async def deliver(msg: m.Message, *, wait: bool) -> int | None:
                epoch = await real(msg, wait=wait)
                if epoch is not None:
                    sent.append(msg)  # it went out (None: it waited for the resume instead)
                return epoch

            a._deliver = deliver  # type: ignore[method-assign]
            async for ev in ha.events():
                if isinstance(ev, YourTurn):
                    break
                firing = isinstance(ev, api.Info) and isinstance(ev.message, m.Firing)
                if firing and ha.first != ha.seat:
                    await hb.fire("A1")  # the other side fires first: then it is our turn
            await a.wire.stream.aclose()  # the network drops us, right at our turn
            while a._online:
                await trio.sleep(0.01)
            await ha.fire("C3")  # during the reconnect: waits, does not raise
            assert a._online and a.epoch == 1
            async for ev in ha.events():
                if isinstance(ev, ShotResult):
                    assert [c.label() for c in ev.cells] == ["C3"]
                    break
                assert not isinstance(ev, YourTurn), "the move was owed: no second YourTurn"
            fires = [x for x in sent if isinstance(x, m.Fire)]
            assert len(fires) == 1  # the script's call waited; the resume sent it, once
        stop.set()


# -- 4.10: a redirect to a node that just died does not park the player ----------------------------


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


class FakeNode:
    """A node of a cluster, scripted: every connection gets the handshake with the cluster key,
    then ``script(wire, n, player)`` (``n``: which connection of the node this is)."""

    def __init__(self, key: Ed25519PrivateKey, script: Any) -> None:
        self.key, self.script = key, script
        self.addr: tuple[str, int] = ("", 0)
        self.connections = 0

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.addr = listeners[0].socket.getsockname()[:2]
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        n = self.connections
        wire = api.Wire(stream)
        try:
            await wire.expect(m.Hello)
            pub = api.public_key(self.key)
            await wire.send(m.Welcome(2, ("redirect", "lean"), pub, os.urandom(32), True))
            auth = await wire.expect(m.Auth)
            assert isinstance(auth, m.Auth)
            await wire.send(m.Authed(auth.key.hex(), b"r" * 24))
            await self.script(wire, n, auth.key.hex())
            while await wire.recv() is not None:
                pass
        except (api.ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass


MID = b"\x07" * 16
RULES = rules_from_dict(SMALL).to_dict()


async def test_a_redirect_to_a_dead_node_sends_the_client_back_until_it_is_seated(
    autojump_clock: trio.testing.MockClock,
) -> None:
    key = Ed25519PrivateKey.generate()
    dead = f"127.0.0.1:{_closed_port()}"

    def ticket(player: str, addr: str) -> m.Redirect:
        body, sig = issue_ticket(key, Ticket(player, MID, "x", addr, int(time.time()) + 60))
        return m.Redirect(MID, body, sig)

    async def seat(wire: api.Wire) -> None:
        await wire.send(m.Start(MID, 0, RULES, "custody", ("a" * 64, "b" * 64)))
        view = {"game": 1, "phase": "setup", "committed": [False, False], "roots": [None, None]}
        await wire.send(m.Snapshot(MID, 0, view))

    async def new_node(wire: api.Wire, n: int, player: str) -> None:
        await seat(wire)

    async def old_node(wire: api.Wire, n: int, player: str) -> None:
        if n == 1:  # the match starts here
            await wire.send(m.Start(MID, 0, RULES, "custody", ("a" * 64, "b" * 64)))
            await wire.send(m.GameStart(MID, 1, 0))
            await trio.sleep(1)
            await wire.send(ticket(player, dead))  # its node died; its lease runs on
        elif n <= 3:
            await wire.send(ticket(player, dead))  # still the dead node
        else:  # taken over by the new node
            await wire.send(ticket(player, f"{new.addr[0]}:{new.addr[1]}"))

    new = FakeNode(key, new_node)
    old = FakeNode(key, old_node)
    async with trio.open_nursery() as nodes:
        await nodes.start(new.run)
        await nodes.start(old.run)
        async with api.connect(*old.addr, name="p") as client:
            while MID not in client.matches:
                await trio.sleep(0.01)
            h = client.matches[MID]
            start = trio.current_time()
            seen: list[Any] = []
            async for ev in h.events():
                seen.append(ev)
                if isinstance(ev, Resumed):
                    break
            took = trio.current_time() - start
            tries = [e for e in seen if isinstance(e, Reconnecting)]
            assert len(tries) == 3 and all(t.delay <= 1.5 for t in tries)
            assert all("could not be reached" in t.reason for t in tries)
            assert old.connections == 4 and new.connections == 1
            assert client.moves == [f"{new.addr[0]}:{new.addr[1]}"]
            notes = [e.msg for e in client.errors if "redirect not followed" in e.msg]
            assert len(notes) == 3
            assert took < 5  # handshakes and pauses only: nobody parked
        nodes.cancel_scope.cancel()


# -- 5.5: what the referee accepted while we were away is no lie -----------------------------------


def _honest_game(seed: int) -> tuple[Game, list[Committed], dict[str, Any]]:
    """A blind game on SMALL played honestly to its reveals (seat 1 reveals first), its
    commitments, and its record game map."""
    rules = rules_from_dict(SMALL)
    rng = random.Random(seed)
    g = Game(rules, MID, 1, compact=False)
    committed = []
    for s in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, s)
        committed.append(c)
        g.commit(s, c.commitment)
    g.set_first(0)
    fire_honestly(g, [Defender(c) for c in committed], rng)
    g.reveal(1, committed[1].reveal())
    g.reveal(0, committed[0].reveal())
    assert g.outcome is not None
    gd = {"number": 1, "first": 0, "transcript": list(g.transcript)}
    return g, committed, gd


def _mirror_of(entries: list[dict[str, Any]]) -> Game:
    """A mirror that was shown ``entries``."""
    mirror = Game(rules_from_dict(SMALL), MID, 1, compact=False)
    for e in entries:
        mirror.replay(e)
    return mirror


def test_entries_accepted_while_away_are_no_lie_when_the_snapshot_agrees() -> None:
    g, committed, gd = _honest_game(3)
    entries = list(g.transcript)
    outcome = g.outcome.to_dict() if g.outcome else {}
    # Away in the reveal phase: the opponent revealed meanwhile (no view shows a reveal), and
    # the snapshot agreed with our mirror; then our own reveal was shown to us.
    mirror = _mirror_of(entries[:-2])
    gap = (len(kept_entries(mirror.transcript)), mirror.view())
    mirror.reveal(0, committed[0].reveal())
    assert _held(gd, Shown(mirror, outcome, gaps=[gap]), 0) is None
    # Without the gap, the same record holds an entry we were never shown.
    assert _held(gd, Shown(mirror, outcome), 0) is not None

    # Away mid-game, the mirror out of step with the snapshot: it stopped, keeping what it saw.
    seen = _mirror_of(entries[:7])
    cut = len(kept_entries(seen.transcript))
    assert _held(gd, Shown(seen, None, cut=cut), 0) is None
    # A record altered in what we were shown before the gap is still caught...
    forged = dict(gd, transcript=[dict(e) for e in entries])
    answer = next(i for i, e in enumerate(entries[:7]) if e["in"] == "answer")
    forged["transcript"][answer]["verdict"] = {**entries[answer]["verdict"], "n": 99}
    assert _held(forged, Shown(seen, None, cut=cut), 0) is not None
    assert _held(forged, Shown(mirror, outcome, gaps=[gap]), 0) is not None
    # ... and so is a gap that does not lead to the view the snapshot showed.
    elsewhere = (gap[0], _mirror_of(entries[:5]).view())
    assert _held(gd, Shown(mirror, outcome, gaps=[elsewhere]), 0) is not None


# -- no false lie: the opponent abandons with our shot in flight ---------------------------------


class _Deserter(Bot):
    """An honest opponent that walks away the moment it is shot at, without answering."""

    def __init__(self, c: TC, mode: str, seed: int = 0) -> None:
        super().__init__(c, mode, seed)
        self.gone = trio.Event()

    async def on(self, msg: Any) -> None:
        if isinstance(msg, m.ShotCalled) and msg.seat != self.seat:
            await self.c.close()
            self.gone.set()
            return
        await super().on(msg)

    async def desert(self) -> None:
        """Play until shot at, then be gone."""
        with contextlib.suppress(Closed):
            await self.play()


@pytest.mark.parametrize("lean", [True, False])
async def test_an_opponent_who_abandons_with_our_shot_unanswered_is_no_referee_lie(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, lean: bool
) -> None:
    # Our shot was called, the opponent never answered and is gone past its grace: we win by
    # abandonment, and the record (our fire, then the abandonment) is honest, though our mirror
    # never saw the shot (a lean session gets no copy of its own) nor the abandonment's entry.
    addr, _ = await start_server(nursery, tmp_path)
    rules = {**SMALL, "clocks": {"grace": 5}}
    ended: list[Any] = []
    async with api.connect(*addr, name="script", lean=lean) as client:
        host, invite = await client.create(rules, "blind")
        assert invite is not None
        other = await connect(addr, nursery, name="deserter")
        ok = await other.request(m.Join(1, None, invite))
        assert isinstance(ok, m.Ok)
        deserter = _Deserter(other, "blind", 4)
        nursery.start_soon(deserter.desert)
        cells = iter(f"{c}{r}" for r in range(1, 6) for c in "ABCDE")
        with trio.fail_after(300):
            async for ev in host.events():
                if isinstance(ev, GameStarted):
                    await host.place()
                elif isinstance(ev, YourTurn) and not deserter.gone.is_set():
                    await host.fire(next(cells))
                elif isinstance(ev, GameEnded | MatchEnded):
                    ended.append(ev)
        assert deserter.gone.is_set()
        assert [e.outcome["reason"] for e in ended if isinstance(e, GameEnded)] == ["abandoned"]
        assert host.lies == [] and host.disputed is None


async def test_an_error_in_the_script_comes_out_as_itself(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A bug in a user's own loop is reported as that bug, not as an exception group wrapping it.
    addr, _ = await start_server(nursery, tmp_path)
    with pytest.raises(KeyError, match="no such cell"):
        async with api.connect(*addr, name="script") as client:
            await client.list()
            raise KeyError("no such cell")
