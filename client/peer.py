"""Peer play over TCP: two players, no server, each the referee of the other (spec 6.7).

Theory of operation. The host listens (port 0 picks a free port; the address is reported through
``task_status``), the joiner connects. The handshake is 6.7 step 1, FLOW step 1 with the host in
the server's role (``hello``/``welcome``/``auth``/``authed``); it is here, with the connection.
Everything after it is the pure :class:`~seabattle.protocol.peer.Peer`'s (``start``, the commits,
the coin, shots and answers, reveals, resignations, the record and its co-signatures: its
docstring says how each travels). This shell is a loop: it sends what the peer machine gives,
reads the other side's next message for it, and turns the machine's events into calls on a
:class:`Player`, whose choices (a fleet, a move) it feeds back. A peer that disconnects ends the
match without a record (:class:`~.wire.ConnectionClosed`); one that breaks 6.7 ends it with
:exc:`PeerCheated`.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ProtocolError, RemoteProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Game
from seabattle.protocol.grid import Cell
from seabattle.protocol.match import Match
from seabattle.protocol.peer import TRAVELS, Peer, PeerCheated, RecordSigned
from seabattle.protocol.record import VerifyReport
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat import Out
from seabattle.protocol.seat_events import (
    GameEnded,
    GameStarted,
    IncomingShot,
    Info,
    MatchEvent,
    ShotResult,
    YourTurn,
)
from seabattle.protocol.session import (
    MAX_C2S_FRAME,
    SUPPORTED_VERSIONS,
    Role,
    auth_payload,
    check_auth,
)
from seabattle.protocol.targeting import TargetView, feed_view
from seabattle.protocol.verdict import Shot, Verdict

from .wire import (
    AGENT,
    HANDSHAKE_TIMEOUT,
    ConnectionClosed,
    HandshakeTimeout,
    Wire,
    load_key,
    public_key,
)

__all__ = [
    "BotPlayer",
    "NotAHost",
    "PeerCheated",
    "PeerResult",
    "Player",
    "host",
    "join",
    "play_peer",
]


Move = tuple[str, list[Cell]]
"""``("fire", cells)``, ``("radar", [top_left])`` or ``("resign", [])``."""


class Player:
    """Who decides for one side: a fleet per game and a move per turn. Subclass it."""

    async def fleet(self, rules: RuleSet, game: int) -> Fleet:
        """The fleet to place for ``game`` (default: a random legal one)."""
        return random_fleet(rules, random.SystemRandom())

    async def move(self, game: Game, seat: int, view: Any) -> Move:
        """The next move for ``seat`` in ``game`` given the bot ``view`` of the target grid."""
        raise NotImplementedError

    def answer(self, shot: Shot, verdict: Verdict) -> Verdict:
        """Hook: the verdict we are about to send on ``shot`` (tests override it to lie)."""
        return verdict

    def refused(self, error: ProtocolError) -> None:
        """Hook: our move was refused; :meth:`move` is asked again."""

    # The hooks below let a player that shows the game (the terminal) follow it; ``seat`` is ours.

    def started(self, game: Game, seat: int) -> None:
        """Hook: both fleets are committed and firing begins (``game.first`` moves first)."""

    def shot_answered(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """Hook: our ``shot`` was answered with the (checked) ``verdict``."""

    def shot_at(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """Hook: the opponent's ``shot`` at us, and the verdict we sent."""

    def shot_lost(self, game: Game, seat: int, loser: int, why: str) -> None:
        """Hook: ``loser``'s shot was lost (``why``: ``repeat`` under strict repeat rules)."""

    def game_over(self, game: Game, seat: int) -> None:
        """Hook: ``game`` is over (``game.outcome``; ``game.reveals`` holds the fleets shown)."""


class BotPlayer(Player):
    """A :mod:`seabattle.bots.strategies` strategy playing one side."""

    def __init__(self, strategy: Any, rng: random.Random | None = None) -> None:
        self.strategy = strategy
        self.rng = rng or random.SystemRandom()

    async def fleet(self, rules: RuleSet, game: int) -> Fleet:
        """A random legal fleet from this bot's randomness."""
        return random_fleet(rules, self.rng)

    async def move(self, game: Game, seat: int, view: Any) -> Move:
        """Radar when the strategy wants it and the rules still allow it, else its cells."""
        if game.rules.radar and not game.boards[1 - seat].radar_used:
            at = self.strategy.use_radar(view, self.rng)
            if at is not None:
                return "radar", [at]
        return "fire", list(self.strategy.choose(view, game.shot_count(seat), self.rng))


@dataclass
class PeerResult:
    """The end of a peer match: the match, the signed record and its verification."""

    seat: int
    match: Match
    signed: dict[str, Any]
    report: VerifyReport
    opponent: str

    @property
    def won(self) -> bool | None:
        """Whether we won the match (``None``: a draw)."""
        w = self.match.winner
        return None if w is None else w == self.seat


Reporter = Callable[[str, Any], None]


class NotAHost(PeerCheated):
    """What :func:`join` reached answered the handshake without the capability ``peer``: a
    seabattle server (or another refereed service), not a peer hosting a match. A
    :class:`PeerCheated`, what it raised before it had a class of its own; nothing was played."""


# ================================================================================================
# Handshakes
# ================================================================================================


async def _host_handshake(wire: Wire, key: Ed25519PrivateKey) -> tuple[bytes, str]:
    """Take the server's role; return the joiner's key and its name.

    What the host refuses on the way (a hello with no version in common, an auth that does not
    verify, a message out of order) is answered with ``error`` before the host gives up, so that
    the joiner learns why.
    """
    wire.set_role(Role.SERVER)
    challenge = os.urandom(32)
    pub = public_key(key)
    try:
        await wire.expect(m.Hello)
        await wire.send(m.Welcome(SUPPORTED_VERSIONS[-1], ("peer",), pub, challenge, True))
        auth = await wire.expect(m.Auth)
        assert isinstance(auth, m.Auth)
        check_auth(auth, challenge, pub)
    except RemoteProtocolError as e:
        with contextlib.suppress(ConnectionClosed):
            await wire.send(m.Error(e.code, e.detail, None))
        raise
    await wire.send(m.Authed(auth.key.hex(), b""))
    return auth.key, auth.name


async def _join_handshake(wire: Wire, key: Ed25519PrivateKey, name: str) -> Peer:
    """Take the client's role; return our peer machine for the match the host's ``start``
    offers."""
    wire.set_role(Role.CLIENT)
    await wire.send(m.Hello(SUPPORTED_VERSIONS, AGENT, ("peer",)))
    welcome = await wire.expect(m.Welcome)
    assert isinstance(welcome, m.Welcome)
    if not wire.conn.peer:
        # Without the capability the session keeps the refereed direction rule, and the host's
        # game messages would all be refused. Only a refereed server answers so: it is no host.
        raise NotAHost(
            "a server answered, not a hosting peer (its welcome does not agree the capability peer)"
        )
    pub = public_key(key)
    await wire.send(
        m.Auth(pub, key.sign(auth_payload(welcome.challenge, welcome.server, pub)), name, None)
    )
    await wire.expect(m.Authed)
    start = await wire.expect(m.Start)
    assert isinstance(start, m.Start)
    return Peer.joining(start, key, welcome.server, entropy=os.urandom)


# ================================================================================================
# The match
# ================================================================================================


class _Shell:
    """Carries one peer machine's sends over ``wire`` and its events to ``player``."""

    def __init__(self, wire: Wire, peer: Peer, player: Player, hook: Reporter) -> None:
        self.wire = wire
        self.peer = peer
        self.player = player
        self.hook = hook
        self.view = TargetView(peer.rules)
        self.events: deque[MatchEvent] = deque()
        # The lying hook of a test's player: the verdicts our seat gives pass through it.
        peer.player.tamper = player.answer

    async def run(self) -> None:
        await self.take(self.peer.start())
        while True:
            while self.events:
                await self.react(self.events.popleft())
            if self.peer.done:
                return
            await self.take(self.peer.receive(await self.wire.expect(*TRAVELS)))

    async def take(self, out: Out) -> None:
        for msg in out.sends:
            await self.wire.send(msg)
        self.events.extend(out.events)

    def game(self, n: int) -> Game:
        return self.peer.referee.match.games[n - 1]

    async def react(self, ev: MatchEvent) -> None:
        peer, player, seat = self.peer, self.player, self.peer.seat
        rules = peer.rules
        if isinstance(ev, GameStarted):
            self.view = TargetView(rules)
            fleet = await player.fleet(rules, ev.game)
            await self.take(peer.place(fleet, os.urandom(32)))
        elif isinstance(ev, YourTurn):
            await self.move(self.game(ev.game))
        elif isinstance(ev, ShotResult):
            g = self.game(ev.game)
            if g.outcome is None:
                feed_view(self.view, rules, ev.cells, ev.radar, ev.verdict, ev.crossed)
            self.hook("result", {"game": ev.game, "cells": list(ev.cells), "verdict": ev.verdict})
            player.shot_answered(g, seat, Shot(ev.n, seat, ev.cells, ev.radar), ev.verdict)
        elif isinstance(ev, IncomingShot):
            assert ev.verdict is not None  # blind: the verdict is our own
            shot = Shot(ev.n, 1 - seat, ev.cells, ev.radar)
            self.hook("incoming", {"game": ev.game, "shot": shot, "verdict": ev.verdict})
            player.shot_at(self.game(ev.game), seat, shot, ev.verdict)
        elif isinstance(ev, GameEnded):
            self.hook("game_over", {"game": ev.game, "outcome": dict(ev.outcome)})
            player.game_over(self.game(ev.game), seat)
        elif isinstance(ev, RecordSigned):
            self.hook("match_over", {"result": peer.referee.match.to_dict(), "report": ev.report})
        elif isinstance(ev, Info):
            msg = ev.message
            if isinstance(msg, m.Firing):
                self.hook("firing", {"game": msg.game, "first": msg.first})
                player.started(self.game(msg.game), seat)
            elif isinstance(msg, m.ShotLost):
                player.shot_lost(self.game(msg.game), seat, msg.seat, msg.why)

    async def move(self, g: Game) -> None:
        """Ask the player until our own game takes its move."""
        peer, seat = self.peer, self.peer.seat
        while True:
            kind, cells = await self.player.move(g, seat, self.view)
            try:
                if kind == "resign":
                    out = peer.resign()
                elif kind == "radar":
                    out = peer.radar(cells[0])
                else:
                    out = peer.fire(cells)
            except ProtocolError as e:
                self.player.refused(e)
                continue
            await self.take(out)
            return


async def play_peer(
    wire: Wire, peer: Peer, player: Player, on_event: Reporter | None = None
) -> PeerResult:
    """Play ``peer``'s match to its end over ``wire`` (after the handshake), co-signatures and
    all. ``on_event(kind, data)`` is told ``firing``, ``result``, ``incoming``, ``game_over`` and
    ``match_over`` as they happen."""
    await _Shell(wire, peer, player, on_event or (lambda kind, data: None)).run()
    assert peer.signed is not None and peer.report is not None
    return PeerResult(peer.seat, peer.referee.match, peer.signed, peer.report, peer.peer_key.hex())


async def host(
    player: Player,
    *,
    rules: RuleSet,
    port: int = 0,
    bind: str = "127.0.0.1",
    key: Ed25519PrivateKey | str | None = None,
    on_event: Reporter | None = None,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> PeerResult:
    """Listen for one joiner, then play a match as seat 0 under ``rules``.

    ``task_status.started`` reports the ``(host, port)`` actually bound (port 0 picks one). A
    connection that does not finish the handshake within ``handshake_timeout`` seconds (a port
    scanner, a client that is no seabattle peer) is closed, and the host listens on for the
    joiner.
    """
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    listeners = await trio.open_tcp_listeners(port, host=bind)
    sockname = listeners[0].socket.getsockname()
    task_status.started((sockname[0], sockname[1]))
    try:
        while True:
            stream = await listeners[0].accept()
            wire = Wire(stream, MAX_C2S_FRAME)
            try:
                with trio.move_on_after(handshake_timeout):
                    joiner, _name = await _host_handshake(wire, k)
                    break
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
            await trio.aclose_forcefully(stream)
    finally:
        for lst in listeners:
            await lst.aclose()
    async with stream:
        peer = Peer.hosting(rules, k, joiner, entropy=os.urandom)
        return await play_peer(wire, peer, player, on_event)


async def join(
    player: Player,
    address: str,
    port: int,
    *,
    key: Ed25519PrivateKey | str | None = None,
    name: str = "peer",
    on_event: Reporter | None = None,
    connect: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> PeerResult:
    """Connect to a host and play the match it offers, as seat 1.

    ``handshake_timeout``: seconds from connecting to the host's ``start``; a host that does
    not take the connection in time, or takes it and never answers, raises
    :class:`~.wire.HandshakeTimeout`. A seabattle server at the address raises
    :class:`NotAHost`.
    """
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    stream: trio.abc.Stream | None = None
    peer: Peer | None = None
    # The host sends ``start`` as soon as the joiner is authenticated, with no person's choice
    # in between: the whole of it is bounded.
    with trio.move_on_after(handshake_timeout):
        stream = await (connect or trio.open_tcp_stream)(address, port)
        wire = Wire(stream, MAX_C2S_FRAME)
        try:
            peer = await _join_handshake(wire, k, name)
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
    if peer is None:  # the time ran out (the stream, if opened, was closed on the way out)
        raise HandshakeTimeout(f"{address}:{port}", handshake_timeout, connected=stream is not None)
    assert stream is not None
    async with stream:
        return await play_peer(wire, peer, player, on_event)
