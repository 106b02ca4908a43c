"""Peer play: two players, no server, each the referee of the other.

Theory of operation. The host listens (port 0 picks a free port; the address is reported through
``task_status``), the joiner connects. The handshake is FLOW step 1 with the host in the server's
role (``hello``/``welcome``/``auth``/``authed``). Then both sides run the *same* pure core: one
:class:`~seabattle.protocol.match.Match` each, fed the same inputs in the same order, so that both
end with the same transcript, the same record and the same record head.

Message use, and where it differs from ``spec/protocol.md`` 5.6 (which describes refereed play):

* After ``authed`` the host sends ``start{match, seat: 1, rules, mode: "peer", players}``: the host
  draws the match id and the rules, and always sits in seat 0.
* Each game: there is no ``game`` message; both sides start game ``n`` when game ``n - 1`` is over.
  Each side sends ``commit{match, game, commitment}`` (a client-to-server message in FLOW; here it
  goes peer to peer). When the match needs a lot for the first shot, each side then sends
  ``coin{hash, nonce: None}`` and, once it holds the other's hash, ``coin{hash: None, nonce}``;
  ``first = coin_result(nonce0, nonce1)``. There is no ``firing``: each side applies
  ``commit(0)``, ``commit(1)`` and then ``set_first`` to its own game, in that order.
* The mover sends ``fire`` (or ``radar``) directly; there is no ``shot`` relay. A move the
  defender's referee refuses is answered with ``error{code, msg, ref: seq}`` and nothing changes.
  The defender answers with ``answer{verdict}``; there is no ``verdict`` relay. Each side checks the
  other's openings at once, in its own game.
* No ``reveal_now``: when the game's phase becomes ``reveal`` both sides send ``reveal``, and each
  applies the reveals in seat order.
* At the end each side builds the record (``referee: None``), signs its head, and sends
  ``cosign{match, head, sig}``; a head that differs means the two transcripts differ, and the match
  is reported as disputed. The signed record carries both signatures (roles ``seat0``, ``seat1``).
* Clocks are not enforced (a peer cannot be forced to play on time without a referee); a peer that
  disconnects forfeits nothing on the record, which simply ends.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed, coin_commit, coin_result, sign_seat
from seabattle.protocol.errors import ProtocolError, Refused, RemoteProtocolError
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.game import Deadline, Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.inputs import Expire
from seabattle.protocol.match import Match
from seabattle.protocol.record import VerifyReport, build_record, record_head, verify_record
from seabattle.protocol.referee import Referee
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.session import (
    MAX_C2S_FRAME,
    SUPPORTED_VERSIONS,
    Role,
    auth_payload,
    check_auth,
)
from seabattle.protocol.verdict import Defender, Shot, Verdict

from .targeting import feed_view
from .wire import AGENT, ConnectionClosed, Wire, load_key, public_key

__all__ = [
    "BotPlayer",
    "PeerCheated",
    "PeerResult",
    "Player",
    "host",
    "join",
    "play_peer",
]


#: Peer play runs no clocks (a peer cannot be made to play on time without a referee), so the
#: referee each side runs is told one time throughout.
_NOW = 0.0


class PeerCheated(Exception):
    """The peer broke the protocol in a way no game outcome covers (a false coin, a bad record)."""


Move = tuple[str, list[Cell]]
"""``("fire", cells)`` or ``("radar", [top_left])``."""


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


# ================================================================================================
# Handshakes
# ================================================================================================


async def _host_handshake(
    wire: Wire, key: Ed25519PrivateKey, rules: RuleSet
) -> tuple[bytes, bytes, str]:
    """Take the server's role; return (match id, the joiner's key, its name).

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
    match_id = os.urandom(16)
    players = (pub.hex(), auth.key.hex())
    await wire.send(m.Start(match_id, 1, rules.to_dict(), "peer", players))
    return match_id, auth.key, auth.name


async def _join_handshake(
    wire: Wire, key: Ed25519PrivateKey, name: str
) -> tuple[bytes, bytes, RuleSet]:
    """Take the client's role; return (match id, the host's key, the rules)."""
    wire.set_role(Role.CLIENT)
    await wire.send(m.Hello(SUPPORTED_VERSIONS, AGENT, ("peer",)))
    welcome = await wire.expect(m.Welcome)
    assert isinstance(welcome, m.Welcome)
    if not wire.conn.peer:
        # Without the capability the session keeps the refereed direction rule, and the host's
        # game messages would all be refused.
        raise PeerCheated("the host's welcome does not agree the capability peer")
    pub = public_key(key)
    await wire.send(
        m.Auth(pub, key.sign(auth_payload(welcome.challenge, welcome.server, pub)), name, None)
    )
    await wire.expect(m.Authed)
    start = await wire.expect(m.Start)
    assert isinstance(start, m.Start)
    if start.seat != 1 or start.players[1] != pub.hex() or start.players[0] != welcome.server.hex():
        raise PeerCheated("the host's start names other players or seats")
    return start.match, welcome.server, rules_from_dict(start.rules)


# ================================================================================================
# The match
# ================================================================================================


async def _lot(wire: Wire, match_id: bytes, game: int, seat: int) -> int:
    nonce = os.urandom(32)
    await wire.send(m.Coin(match_id, game, coin_commit(match_id, game, seat, nonce), None))
    theirs = await wire.expect(m.Coin)
    assert isinstance(theirs, m.Coin)
    if theirs.hash is None or theirs.nonce is not None:
        raise PeerCheated("the coin opens with a hash, and a hash only")
    # Our nonce goes out only now: the peer is bound to its nonce before it can see ours.
    await wire.send(m.Coin(match_id, game, None, nonce))
    opened = await wire.expect(m.Coin)
    assert isinstance(opened, m.Coin)
    if opened.nonce is None or len(opened.nonce) != 32:
        raise PeerCheated("the coin closes with a 32-byte nonce")
    if coin_commit(match_id, game, 1 - seat, opened.nonce) != theirs.hash:
        raise PeerCheated("the peer's coin nonce does not match its hash")
    nonces = (nonce, opened.nonce) if seat == 0 else (opened.nonce, nonce)
    return coin_result(*nonces)


async def _play_game(
    wire: Wire,
    ref: Referee,
    seat: int,
    key: Ed25519PrivateKey,
    player: Player,
    on_event: Callable[[str, Any], None],
) -> None:
    from .targeting import TargetView

    rules, mid = ref.rules, ref.match_id
    peer = 1 - seat
    g = ref.game
    assert g is not None
    n = g.number
    need_lot = g.first is None
    committed = Committed(rules, await player.fleet(rules, n), os.urandom(32), mid, n, seat)
    defender = Defender(committed)
    sig = sign_seat(key, committed.ctx, committed.root)
    mine = m.Commit(mid, n, committed.commitment.to_dict(), sig)
    await wire.send(mine)
    theirs = await wire.expect(m.Commit)
    assert isinstance(theirs, m.Commit)
    first = await _lot(wire, mid, n, seat) if need_lot else None
    commits = (mine, theirs) if seat == 0 else (theirs, mine)
    try:
        # Both sides feed the commits in seat order, then the lot: the same transcript.
        for s in (0, 1):
            ref.receive(s, commits[s], _NOW)
        if first is not None:
            ref.draw(first, _NOW)
    except ProtocolError as e:
        raise PeerCheated(f"the peer's commitment is refused: {e}") from None
    on_event("firing", {"game": n, "first": g.first})
    player.started(g, seat)
    view = TargetView(rules)
    seq = 0
    while g.phase in (Phase.FIRING, Phase.ANSWER):
        if g.turn == seat:
            kind, cells = await player.move(g, seat, view)
            move: m.Fire | m.Radar
            if kind == "radar":
                move = m.Radar(mid, n, cells[0].label(), g.caller(seat), seq + 1)
            else:
                move = m.Fire(mid, n, tuple(c.label() for c in cells), g.caller(seat), seq + 1)
            try:
                ref.receive(seat, move, _NOW)
            except ProtocolError as e:
                player.refused(e)
                continue
            seq += 1
            await wire.send(move)
            shot = g.pending
            if shot is None:
                player.shot_lost(g, seat, seat, "repeat")
                continue  # a wasted repeat: the turn passed, nothing to answer
            ans = await wire.expect(m.Answer)
            assert isinstance(ans, m.Answer)
            before = set(g.boards[peer].crossed)
            try:
                v = Verdict.from_dict(ans.verdict)
                sends = ref.receive(peer, ans, _NOW)
            except ProtocolError as e:
                raise PeerCheated(f"the peer's answer is malformed: {e}") from None
            if g.outcome is None:
                feed_view(view, rules, cells, kind == "radar", v)
                for i in sorted(g.boards[peer].crossed - before):
                    view.crossed(Cell(*divmod(i, rules.cols)))
            on_event("result", {"game": n, "cells": cells, "verdict": v, "sends": sends})
            player.shot_answered(g, seat, shot, v)
        else:
            msg = await wire.expect(m.Fire, m.Radar)
            assert isinstance(msg, m.Fire | m.Radar)
            try:
                ref.receive(peer, msg, _NOW)
            except (Refused, RemoteProtocolError) as e:
                await wire.send(m.Error(e.code, e.detail, msg.seq))
                continue
            shot = g.pending
            if shot is None:
                player.shot_lost(g, seat, peer, "repeat")
                continue
            verdict = player.answer(shot, defender.answer(shot))
            answer = m.Answer(mid, n, verdict.to_dict())
            await wire.send(answer)
            ref.receive(seat, answer, _NOW)
            on_event("incoming", {"game": n, "shot": shot, "verdict": verdict})
            player.shot_at(g, seat, shot, verdict)
    if g.phase is Phase.REVEAL:
        ours = m.RevealMsg(mid, n, committed.reveal().to_dict())
        await wire.send(ours)
        rv = await wire.expect(m.RevealMsg)
        assert isinstance(rv, m.RevealMsg)
        for s, reveal in enumerate((ours, rv) if seat == 0 else (rv, ours)):
            # A reveal that cannot even be parsed counts as no reveal at all.
            with contextlib.suppress(ProtocolError):
                ref.receive(s, reveal, _NOW)
        if g.phase is Phase.REVEAL:
            ref.feed(Expire(Deadline.REVEAL), _NOW)
    assert g.outcome is not None
    on_event("game_over", {"game": n, "outcome": g.outcome.to_dict()})
    player.game_over(g, seat)


async def play_peer(
    wire: Wire,
    ref: Referee,
    seat: int,
    key: Ed25519PrivateKey,
    peer_key: bytes,
    player: Player,
    on_event: Callable[[str, Any], None] | None = None,
) -> PeerResult:
    """Play the match ``ref`` referees to its end over ``wire``; exchange co-signatures."""
    hook = on_event or (lambda kind, data: None)
    ref.start(_NOW)
    while not ref.over:
        await _play_game(wire, ref, seat, key, player, hook)
    match = ref.match
    keys = [public_key(key), peer_key] if seat == 0 else [peer_key, public_key(key)]
    record = build_record(match, keys, None)
    head = record_head(record)
    sig = key.sign(head)
    mine: dict[str, Any] = {"key": public_key(key), "sig": sig, "role": f"seat{seat}"}
    await wire.send(m.CoSign(match.match_id, head, sig))
    co = await wire.expect(m.CoSign)
    assert isinstance(co, m.CoSign)
    theirs: dict[str, Any] = {"key": peer_key, "sig": co.sig, "role": f"seat{1 - seat}"}
    sigs = [mine, theirs] if seat == 0 else [theirs, mine]
    signed = {"record": record, "sigs": sigs}
    report = verify_record(signed)
    if co.head != head:
        report.ok = False
        report.reason = "disputed: the peer signed another head (its transcript differs)"
        report.problems.insert(0, report.reason)
    hook("match_over", {"result": match.to_dict(), "report": report})
    return PeerResult(seat, match, signed, report, peer_key.hex())


def _referee(match_id: bytes, rules: RuleSet, keys: tuple[bytes, bytes]) -> Referee:
    """The referee each side runs: blind (each holds its own fleet), lots drawn by the coin."""
    players = (keys[0].hex(), keys[1].hex())
    return Referee(match_id=match_id, rules=rules, mode="blind", players=players, lot=None)


Reporter = Callable[[str, Any], None]


async def host(
    player: Player,
    *,
    rules: RuleSet,
    port: int = 0,
    bind: str = "127.0.0.1",
    key: Ed25519PrivateKey | str | None = None,
    on_event: Reporter | None = None,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> PeerResult:
    """Listen for one joiner, then play a match as seat 0 under ``rules``.

    ``task_status.started`` reports the ``(host, port)`` actually bound (port 0 picks one).
    """
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    listeners = await trio.open_tcp_listeners(port, host=bind)
    sockname = listeners[0].socket.getsockname()
    task_status.started((sockname[0], sockname[1]))
    try:
        stream = await listeners[0].accept()
    finally:
        for lst in listeners:
            await lst.aclose()
    wire = Wire(stream, MAX_C2S_FRAME)
    async with stream:
        mid, peer_key, _name = await _host_handshake(wire, k, rules)
        ref = _referee(mid, rules, (public_key(k), peer_key))
        return await play_peer(wire, ref, 0, k, peer_key, player, on_event)


async def join(
    player: Player,
    address: str,
    port: int,
    *,
    key: Ed25519PrivateKey | str | None = None,
    name: str = "peer",
    on_event: Reporter | None = None,
    connect: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
) -> PeerResult:
    """Connect to a host and play the match it offers, as seat 1."""
    k = key if isinstance(key, Ed25519PrivateKey) else load_key(key)
    stream = await (connect or trio.open_tcp_stream)(address, port)
    wire = Wire(stream, MAX_C2S_FRAME)
    async with stream:
        mid, peer_key, rules = await _join_handshake(wire, k, name)
        ref = _referee(mid, rules, (peer_key, public_key(k)))
        return await play_peer(wire, ref, 1, k, peer_key, player, on_event)
