"""The suite's side of a client case: the handshake as a server (or hosting peer), a refereed
match whose other seat the suite plays, and a peer match the suite hosts.

Honest play comes from the reference core, and only from it. The refereed match is refereed by
the pure :class:`~seabattle.protocol.referee.Referee`, told whether the client's session is lean
(:meth:`~seabattle.protocol.referee.Referee.set_lean`: the copies 5.7 leaves out are left out
there); the suite's opponent is a :class:`~seabattle.protocol.seat.Seat`, whose player places a
random fleet and fires at the first free cells in grid order. The peer host is a thin shell over
the pure :class:`~seabattle.protocol.peer.Peer`, as our own host is.

A case that lies never plays a seat of its own: it passes a ``lie``, through which every message
for the client goes on its way out (the lie is one altered message in an otherwise honest
match), or bends the host's seat and peer through their hooks (``Seat.tamper``, ``Peer.bend``).
"""

from __future__ import annotations

import os
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

import trio
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from seabattle.protocol import messages as m
from seabattle.protocol.commit import PROTOCOL_VERSION
from seabattle.protocol.errors import ErrorCode, ProtocolError, RemoteProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.peer import TRAVELS, Peer, PeerCheated
from seabattle.protocol.record import (
    build_record,
    dump_record,
    head_of_bytes,
    pack_record,
    sign_as,
)
from seabattle.protocol.referee import Referee, Send, seat_bit
from seabattle.protocol.rules import BadRules, rules_from_dict
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import GameEnded, GameStarted, MatchEvent, YourTurn
from seabattle.protocol.session import LEAN, check_auth
from seabattle.protocol.verdict import Shot, Verdict

from .probe import RULES, describe
from .results import CaseFailed, NotImplementedCase, Trace
from .serve_stage import Remote

__all__ = ["Lie", "PeerHost", "RefereedMatch", "handshake"]

#: Alters one message on its way to the client (return it unchanged to tell the truth).
Lie = Callable[[m.Message], m.Message]


def _truth(msg: m.Message) -> m.Message:
    return msg


def _verifies(key: bytes, sig: bytes, data: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(sig, data)
    except (InvalidSignature, ValueError):
        return False
    return True


async def handshake(
    r: Remote,
    key: Ed25519PrivateKey,
    *,
    peer: bool = False,
    version: int = PROTOCOL_VERSION,
    lean: bool = False,
) -> m.Auth:
    """Play the server's side of 5.6 step 1 and check the client's part of it (4.1 to 4.3);
    ``lean``: agree the capability if the client offers it (``r.lean`` says whether it did)."""
    r.trace.expect(
        f"hello{{versions with {PROTOCOL_VERSION}}}, then auth signed over the payload of 4.3"
    )
    hello = await r.expect(m.Hello)
    assert isinstance(hello, m.Hello)
    if PROTOCOL_VERSION not in hello.versions:
        raise NotImplementedCase(
            f"the client offers versions {list(hello.versions)}, not {PROTOCOL_VERSION}"
        )
    if peer and "peer" not in hello.caps:
        raise CaseFailed("a joining peer offers the capability peer in hello.caps (6.7 step 1)")
    pub = key.public_key().public_bytes_raw()
    challenge = os.urandom(32)
    r.lean = lean and not peer and LEAN in hello.caps
    caps = ("peer",) if peer else (LEAN,) if r.lean else ()
    r.peer = peer
    await r.send(m.Welcome(version, caps, pub, challenge, True))
    auth = await r.expect(m.Auth)
    assert isinstance(auth, m.Auth)
    try:
        check_auth(auth, challenge, pub)
    except RemoteProtocolError as e:
        raise CaseFailed(f"auth does not verify over the payload of 4.3: {e.detail}") from None
    await r.send(m.Authed(auth.key.hex(), b"" if peer else os.urandom(24)))
    return auth


def _scan(g: Game, target: int, count: int) -> list[Cell]:
    """The suite's player's choice: the first ``count`` cells of ``target``'s grid in grid order
    not fired at or crossed out."""
    board, cols = g.boards[target], g.rules.cols
    free = (i for i in range(g.rules.cells) if i not in board.fired and i not in board.crossed)
    cells = [Cell(*divmod(i, cols)) for i in islice(free, count)]
    if not cells:
        raise CaseFailed("no cell left to fire at")
    return cells


@dataclass
class RefereedMatch:
    """A match between the client under test and the suite's honest opponent, refereed by the
    reference :class:`Referee`; ``lie`` alters what the client is sent."""

    r: Remote
    trace: Trace
    key: Ed25519PrivateKey
    client_key: bytes
    rng: random.Random
    lie: Lie = _truth
    ref: Referee | None = None
    seat: int = 0  #: the client's seat
    #: The suite's honest opponent, in the other seat.
    opponent: Seat | None = None
    refused: list[str] = field(default_factory=list)
    head: bytes = b""
    signed: dict[str, Any] | None = None

    async def lobby(self) -> None:
        """Wait for the client to ask for a match (``quick``, ``create`` or ``join``), grant it,
        and seat the suite's opponent (5.6 steps 2 and 3)."""
        self.trace.expect("a lobby request for a match: quick, create or join (5.6 step 2)")
        while True:
            msg = await self.r.expect(m.Quick, m.Create, m.Join, m.ListMatches, m.Ladder)
            if isinstance(msg, m.ListMatches):
                await self.r.send(m.Ok(msg.id, {"matches": []}))
            elif isinstance(msg, m.Ladder):
                await self.r.send(m.Ok(msg.id, {"rows": []}))
            else:
                break
        assert isinstance(msg, m.Quick | m.Create | m.Join)
        mid = os.urandom(16)
        rules_map, mode = RULES, "blind"
        if isinstance(msg, m.Quick | m.Create):
            rules_map, mode = msg.rules, msg.mode
        try:
            rules = rules_from_dict(rules_map)
        except BadRules as e:
            await self.r.send(m.Error(int(ErrorCode.BAD_RULES), e.detail, msg.id))
            raise CaseFailed(
                f"the client asked for rules that cannot be built: {e.detail}"
            ) from None
        if mode not in ("blind", "custody"):
            raise CaseFailed(f"the client asked for mode {mode!r}")
        data: dict[str, Any] = {"match": mid}
        if isinstance(msg, m.Create):
            data["invite"] = "CONFORM2"
        await self.r.send(m.Ok(msg.id, data))
        self.seat = self.rng.randrange(2)
        opp_key = Ed25519PrivateKey.generate()
        opp = opp_key.public_key().public_bytes_raw()
        keys = [self.client_key, opp] if self.seat == 0 else [opp, self.client_key]
        self.ref = Referee(
            match_id=mid,
            rules=rules,
            mode=mode,
            players=(keys[0].hex(), keys[1].hex()),
            lot=os.urandom(32),
        )
        self.ref.set_lean(self.seat, self.r.lean)  # 5.7 is the referee's to keep
        self.opponent = Seat(mid, opp_key, opp.hex())

    @property
    def mode(self) -> str:
        """The trust mode the client asked for."""
        assert self.ref is not None
        return self.ref.mode

    async def play(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Referee the match to its end (or until ``stop()``), then send ``match_over``."""
        ref = self.ref
        assert ref is not None
        await self._deliver(ref.start(trio.current_time()))
        moves = (m.Commit, m.Place, m.Fire, m.Radar, m.Answer, m.RevealMsg, m.Resign)
        while not ref.over and not stop():
            msg = await self.r.expect(*moves, m.Error, m.Bye, m.CoSign, m.Ok)
            if isinstance(msg, m.Bye):
                raise CaseFailed(f"the client said bye ({msg.reason!r}) before the match ended")
            if not isinstance(msg, moves):
                continue  # an error the client answered a lie with, or noise
            try:
                sends = ref.receive(self.seat, msg, trio.current_time())
            except ProtocolError as e:
                seq = msg.seq if isinstance(msg, m.Fire | m.Radar) else None
                self.refused.append(f"{describe(msg)}: {e.code.name}")
                await self.r.send(m.Error(int(e.code), e.detail, seq))
                continue
            await self._deliver(sends)
        if ref.over:
            await self._conclude()

    async def _deliver(self, sends: Iterable[Send]) -> None:
        """Carry out what the referee sends: the client's share (through ``lie``) to the
        client, the other seat's to the opponent, whose moves go back to the referee."""
        ref = self.ref
        assert ref is not None
        mine, theirs = seat_bit(self.seat), seat_bit(1 - self.seat)
        pending = deque(sends)
        while pending:
            to, msg, _member = pending.popleft()
            if to & mine:
                await self.r.send(self.lie(msg))
            if to & theirs:
                for move in self._opponent(msg):
                    pending.extend(ref.receive(1 - self.seat, move, trio.current_time()))

    def _opponent(self, msg: m.Message) -> list[m.Message]:
        """Feed the opponent's seat one message; what it sends, with its player's choices (a
        random fleet for each game, the first free cells in grid order on its turn)."""
        seat, ref = self.opponent, self.ref
        assert seat is not None and ref is not None
        out = seat.receive(msg, trio.current_time())
        sends, events = list(out.sends), deque(out.events)
        while events:
            ev = events.popleft()
            if isinstance(ev, GameStarted):
                out = seat.place(random_fleet(ref.rules, self.rng), os.urandom(32))
            elif isinstance(ev, YourTurn):
                g = seat.mirror if seat.mirror is not None else ref.game
                assert g is not None
                out = seat.fire(_scan(g, self.seat, ev.count), self.rng.randrange(1 << 30))
            else:
                continue
            sends += out.sends
            events.extend(out.events)
        return sends

    async def _conclude(self) -> None:
        ref = self.ref
        assert ref is not None
        keys = [bytes.fromhex(p) for p in ref.players]
        record = build_record(ref.match, keys, self.key.public_key().public_bytes_raw())
        packed = pack_record(record)
        self.head = head_of_bytes(packed)
        self.signed = {"record": record, "sigs": [sign_as(record, self.key, "referee")]}
        over = m.MatchOver(ref.match_id, ref.match.to_dict(), None, self.head, packed)
        await self.r.send(self.lie(over))

    async def cosigns(self, settle: float) -> list[m.CoSign]:
        """The ``cosign``s the client sends after ``match_over``: everything up to the answer to
        a barrier ``ping`` (a client handles messages in order), then ``settle`` seconds more."""
        await self.r.send(m.Ping(0x5EA))
        got: list[m.CoSign] = []
        with trio.move_on_after(self.r.timeout):
            # Up to the pong, or the end of the stream: a client may close once it is done.
            while (msg := await self.r.recv()) is not None:
                if isinstance(msg, m.CoSign):
                    got.append(msg)
                elif isinstance(msg, m.Pong) and msg.n == 0x5EA:
                    break
        with trio.move_on_after(settle):
            while True:
                msg = await self.r.recv(timeout=settle + 1)
                if msg is None:
                    break
                if isinstance(msg, m.CoSign):
                    got.append(msg)
                elif isinstance(msg, m.GetRecord) and self.signed is not None:
                    await self.r.send(m.Ok(msg.id, {"record": dump_record(self.signed)}))
        return got

    def check_cosign(self, co: m.CoSign) -> None:
        """A co-signature is of this match's head and verifies with the client's key (11.2)."""
        assert self.ref is not None
        if co.match != self.ref.match_id or co.head != self.head:
            raise CaseFailed("the client co-signed another head than the record's (11.2)")
        if not _verifies(self.client_key, co.sig, co.head):
            raise CaseFailed("the client's co-signature does not verify with its key (11.2)")


@dataclass
class PeerHost:
    """A peer match (6.7) the suite hosts, seat 0, against the joining client in seat 1: a thin
    shell over the pure :class:`Peer`, whose player places a random fleet and fires at the first
    free cell in grid order. Whatever the joiner does that 6.7 forbids fails the case.

    ``answer`` may alter the host's verdicts (its seat's ``tamper``) and ``bad_nonce`` breaks the
    host's coin (``Peer.bend`` on its ``coin{nonce}``); both may be set after :meth:`start`.
    """

    r: Remote
    trace: Trace
    key: Ed25519PrivateKey
    joiner: bytes
    rng: random.Random
    answer: Callable[[Shot, Verdict], Verdict] = lambda s, v: v
    bad_nonce: bool = False
    peer: Peer | None = None
    head: bytes = b""
    #: How many ``coin`` messages the host sent (each game: a hash, then a nonce).
    coins: int = 0
    _events: deque[MatchEvent] = field(default_factory=deque)
    _expected: str = ""

    @property
    def ref(self) -> Referee | None:
        """The peer's referee: the game both peers run for both seats."""
        return self.peer.referee if self.peer is not None else None

    async def start(self) -> None:
        """Send ``start`` (6.7 step 2) for :data:`RULES`."""
        peer = Peer.hosting(rules_from_dict(RULES), self.key, self.joiner, entropy=os.urandom)
        peer.player.tamper = lambda shot, verdict: self.answer(shot, verdict)
        peer.bend = self._bend
        self.peer = peer
        await self._take(peer.start())

    def _bend(self, msg: m.Message) -> m.Message:
        if isinstance(msg, m.Coin) and msg.nonce is not None and self.bad_nonce:
            return replace(msg, nonce=os.urandom(32))  # a nonce that does not open our hash
        return msg

    async def _take(self, out: Out) -> None:
        """Send what the peer gives, and keep its events for the host's player."""
        for msg in out.sends:
            if isinstance(msg, m.Coin):
                self.coins += 1
            await self.r.send(msg)
        self._events.extend(out.events)

    async def play(self, until: Callable[[], bool] = lambda: False) -> None:
        """Every game of the match (6.7 steps 3 to 5), up to the host's co-signature; or only
        until ``until()``."""
        peer = self.peer
        assert peer is not None
        while True:
            while self._events:
                await self._react(self._events.popleft())
            if peer.over or until():
                return
            self._expect(self._due())
            msg = await self.r.expect(*TRAVELS)
            await self._take(self._receive(msg))

    async def _react(self, ev: MatchEvent) -> None:
        """The host's player: a fleet for each game, a move on each turn."""
        peer = self.peer
        assert peer is not None
        if isinstance(ev, GameStarted):
            await self._take(peer.place(random_fleet(peer.rules, self.rng), os.urandom(32)))
        elif isinstance(ev, YourTurn):
            g = peer.game
            assert g is not None
            await self._take(peer.fire(_scan(g, 1, ev.count)))
        elif isinstance(ev, GameEnded):
            g = peer.referee.match.games[ev.game - 1]
            if g.faults[1] is not None:
                raise CaseFailed(f"the joiner's reveal shows a fault: {g.faults[1]}")

    def _receive(self, msg: m.Message) -> Out:
        """Feed the peer what the joiner sent; what it breaks of 6.7 fails the case."""
        peer = self.peer
        assert peer is not None
        try:
            out = peer.receive(msg)
        except PeerCheated as e:
            raise CaseFailed(f"{_BROKE.get(type(msg), 'the joiner broke 6.7')}: {e}") from None
        for sent in out.sends:
            if isinstance(sent, m.Error):  # 6.7 step 4: a shot our game refuses
                raise CaseFailed(f"the joiner called a shot its own game refuses: {sent.msg}")
        return out

    def _due(self) -> str:
        """What the joiner owes next, as the trace shows it."""
        g = self.peer.game if self.peer is not None else None
        if g is None or g.phase is Phase.SETUP:
            if g is not None and g.commitments[1] is not None:
                return "coin{hash} from the joiner, then coin{nonce} (10.9)"
            return "commit under seat 1's context (6.7 step 3)"
        if g.phase is Phase.ANSWER:
            return "answer on the host's shot (6.7 step 4)"
        if g.phase is Phase.REVEAL:
            return "reveal when the game enters phase reveal (6.7 step 5)"
        return "fire or radar from the joiner on its turn (6.7 step 4)"

    def _expect(self, text: str) -> None:
        if text != self._expected:
            self._expected = text
            self.trace.expect(text)

    async def cosign(self) -> m.CoSign:
        """Exchange co-signatures (6.7 step 6: ours went at the end of :meth:`play`); return
        the joiner's."""
        peer = self.peer
        assert peer is not None and peer.head is not None
        self.head = peer.head
        self.trace.expect("cosign of the same head, by the joiner's key (6.7 step 6)")
        co = await self.r.expect(m.CoSign)
        assert isinstance(co, m.CoSign)
        if co.head != self.head:
            raise CaseFailed("the joiner co-signed another head: its transcript differs (6.7)")
        if not _verifies(self.joiner, co.sig, co.head):
            raise CaseFailed("the joiner's co-signature does not verify with its key")
        await self._take(self._receive(co))  # the record, with both co-signatures
        return co


#: How a message of the joiner's that the peer refuses fails the case, by its type.
_BROKE: dict[type[m.Message], str] = {
    m.Commit: "the joiner's commitment is refused",
    m.Coin: "the joiner's coin breaks 10.9",
    m.Answer: "the joiner's verdict is refused",
    m.RevealMsg: "the joiner's reveal is refused",
}
