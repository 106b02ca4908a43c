"""One side of a peer match, pure: two players, no server, each the referee of the other
(``spec/protocol.md`` 6.7).

Theory of operation. A :class:`Peer` is the local peer's half of the match: one
:class:`~.referee.Referee` that runs the game for both seats, as each peer must, and one
:class:`~.seat.Seat`, the local player's machine, wired to it as a server would wire a seat to its
referee. The other peer stands where the server's other connection would be. The shell feeds the
peer what the other peer sends, :meth:`Peer.receive`, and the local player's choices,
:meth:`Peer.place`, :meth:`Peer.fire`, :meth:`Peer.radar`, :meth:`Peer.resign`; each call returns
an :class:`~.seat.Out`: the messages to send to the other peer, in order, and the player's events
(:mod:`.seat_events`, and :class:`RecordSigned` at the very end). There is no I/O, no clock (peer
play enforces none: the referee is told one time throughout) and no randomness of its own: the
shell passes ``entropy`` (``os.urandom``, or a test's seeded bytes) for the match id and the coin.

Inside, three kinds of message move:

* what our referee sends to our seat is fed to the seat (``clock`` aside: no clock runs). The
  seat answers a shot at us at once and reveals on ``reveal_now``, exactly as on a server; it
  keeps its own mirror of the game and checks every opening it is shown;
* what the seat sends (``commit``, ``answer``, ``reveal``) goes to the other peer, and to our
  referee as our seat's move, in the order 6.7 fixes;
* what the other peer sends goes to our referee as the other seat's move.

Both peers feed their referees the same inputs in the same order, so both end with the same
transcript and the same record head. 6.7's orderings are kept here, once:

* step 2, ``start``: the host draws the match id (:meth:`hosting`) and its :meth:`start` sends
  ``start``; the joiner checks it (:meth:`joining`). The host sits in seat 0;
* step 3, each game: no ``game`` message travels. Our seat is told the game began before any lot
  (its player places at once). Each peer's ``commit`` is held until both are in, then both are
  applied in seat order; a commitment our game refuses stops the match. If the match needs a lot,
  the coin of 10.9 runs once both commits are exchanged (``coin{hash}``, then, holding the other's
  hash, ``coin{nonce}``), and its result is applied after them (``set_first``);
* step 4, shots: our move is applied to our game before it goes (a refused one raises, and
  nothing is sent); the other's is applied as it comes, and one our game refuses is answered
  ``error{code, msg, ref: seq}``, nothing changed. An ``error`` from the other peer means it
  refused ours: the transcripts can no longer agree, and the match stops (no record). ``seq``
  counts from 1 in each game. A wasted repeat is not answered;
* step 5, reveals: both are held, then applied in seat order; one that cannot be parsed counts
  as none (the game then ends ``no_reveal`` for it, by the reveal clock's expiry);
* step 6, the record: at the end each peer builds it (``referee: nil``), signs its head and sends
  ``cosign``; with the other's co-signature :attr:`Peer.signed` holds both, verified in
  :attr:`Peer.report` (a co-signature of another head: disputed). The co-signature is the peer's
  own, of the record its own game gives: the seat's check of a referee's record (5.5) has nothing
  to check here, and is not asked;
* resignation: ``resign{match, game}`` travels in place of a ``commit`` (in setup; the two setup
  messages are applied in seat order, and no coin runs) or of a shot (on our turn), where nothing
  of the other peer's can cross it. :meth:`Peer.resign` called at another time waits for our next
  turn in that game (and lapses if the game ends first).

The other peer breaking 6.7 in a way no game outcome covers (a message out of turn, a coin that
breaks 10.9, a commitment or verdict our game refuses, a ``cosign`` before the end) raises
:exc:`PeerCheated` from :meth:`Peer.receive`: the match stops without a record, and every later
call raises it again. A false proof is a game outcome (``false_proof``), not a stop.

Bending. A test or the conformance suite makes a peer lie through two hooks: the seat's
:attr:`~.seat.Seat.tamper` (``peer.player.tamper``) alters the verdicts we give, and
:attr:`Peer.bend` alters (or drops) any message on its way to the other peer, after our own game
applied the honest one.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import messages as m
from .commit import coin_commit, coin_result
from .errors import ErrorCode, LocalProtocolError, ProtocolError, Refused
from .fleet import Fleet
from .game import Deadline, Game, Phase
from .grid import Cell
from .inputs import Expire
from .record import VerifyReport, build_record, record_head, verify_record
from .referee import Referee, Send, seat_bit
from .rules import RuleSet, rules_from_dict
from .seat import Bend, Out, Seat, labels
from .seat_events import MatchEnded, MatchEvent, YourTurn

__all__ = ["TRAVELS", "Entropy", "Peer", "PeerCheated", "RecordSigned"]

#: Peer play runs no clocks: the referee is told one time throughout.
_NOW = 0.0

#: Where the shell's randomness comes from: ``entropy(n)`` gives ``n`` unpredictable bytes.
Entropy = Callable[[int], bytes]

#: The messages :meth:`Peer.receive` takes from the other peer once ``start`` is past (6.7: the
#: game messages both ways, and ``error``); a shell reads these and answers heartbeats itself.
TRAVELS: tuple[type[m.Message], ...] = (
    m.Commit,
    m.Coin,
    m.Fire,
    m.Radar,
    m.Answer,
    m.RevealMsg,
    m.Resign,
    m.CoSign,
    m.Error,
)


class PeerCheated(Exception):
    """The match stops without a record: the other peer broke 6.7 in a way no game outcome
    covers (a message out of turn, a false coin, a commitment or verdict its game refuses, a bad
    ``start``), or refused a move of ours, after which the transcripts cannot agree."""


@dataclass(frozen=True, slots=True)
class RecordSigned(MatchEvent):
    """Both peers co-signed (6.7 step 6): the record with both signatures, and its verification
    (``report.ok`` is false if the other peer signed another head: the match is disputed)."""

    signed: dict[str, Any]
    report: VerifyReport


def _pub(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes_raw()


class Peer:
    """Our side of peer match ``match_id`` under ``rules``: we sit in ``seat`` with ``key``, the
    other peer plays with ``peer_key`` (32 bytes). See the module's theory of operation.

    :meth:`hosting` and :meth:`joining` make one for each side of the handshake."""

    def __init__(
        self,
        match_id: bytes,
        rules: RuleSet,
        key: Ed25519PrivateKey,
        peer_key: bytes,
        seat: int,
        *,
        entropy: Entropy,
    ) -> None:
        if seat not in (0, 1):
            raise ValueError(f"seat {seat} does not exist")
        self.match_id = match_id
        self.rules = rules
        self.key = key
        self.peer_key = peer_key
        self.seat = seat
        self._entropy = entropy
        keys = (_pub(key), peer_key) if seat == 0 else (peer_key, _pub(key))
        #: Both seats' public keys, in seat order (the record's ``players``).
        self.keys = keys
        #: The game both peers run, for both seats: blind, lots drawn by the coin.
        self.referee = Referee(
            match_id=match_id,
            rules=rules,
            mode="blind",
            players=(keys[0].hex(), keys[1].hex()),
            lot=None,
        )
        #: The local player's machine, fed what our referee sends our seat.
        self.player = Seat(match_id, key, keys[seat].hex(), courtesy=False)
        #: Alters (or, returning ``None``, drops) what we send the other peer (tests, liars).
        self.bend: Bend | None = None
        #: The record, its head and both co-signatures, once the match is over.
        self.record: dict[str, Any] | None = None
        self.head: bytes | None = None
        self._sig: bytes | None = None  # ours, of the head
        self.signed: dict[str, Any] | None = None
        self.report: VerifyReport | None = None
        #: Why the match stopped without a record (:exc:`PeerCheated`), or ``None``.
        self.stopped: str | None = None
        self._started = False
        self._announced = 0  # the last game our seat was told of
        # The current game: each seat's setup message (``commit`` or ``resign``) and reveal,
        # whether the setup messages were applied, the coin, and our moves' ``seq``.
        self._setup: list[m.Commit | m.Resign | None] = [None, None]
        self._settled = False
        self._nonce: bytes | None = None  # ours, once the coin runs
        self._their_hash: bytes | None = None
        self._reveals: list[m.RevealMsg | None] = [None, None]
        self._seq = 0
        self._resign_for: int | None = None  # a resignation waiting for our turn in that game
        self._todo: deque[m.Message] = deque()  # what the seat sent, not yet carried out
        self._sends: list[m.Message] = []
        self._events: list[MatchEvent] = []

    @classmethod
    def hosting(
        cls, rules: RuleSet, key: Ed25519PrivateKey, joiner: bytes, *, entropy: Entropy
    ) -> Peer:
        """The hosting peer, seat 0, of a new match under ``rules`` against ``joiner`` (its
        key, from its ``auth``); the match id is drawn here (6.7 step 2)."""
        return cls(entropy(16), rules, key, joiner, 0, entropy=entropy)

    @classmethod
    def joining(
        cls, start: m.Start, key: Ed25519PrivateKey, host: bytes, *, entropy: Entropy
    ) -> Peer:
        """The joining peer, seat 1, of the match the host's ``start`` offers; ``host`` is the
        key ``welcome.server`` named. Raises :exc:`PeerCheated` unless ``start`` puts us in
        seat 1 and the host in seat 0 (6.7 step 2) under rules that parse."""
        players = tuple(start.players)
        if start.seat != 1 or len(players) != 2 or players != (host.hex(), _pub(key).hex()):
            raise PeerCheated("the host's start names other players or seats")
        try:
            rules = rules_from_dict(start.rules)
        except (ProtocolError, ValueError, TypeError) as e:
            raise PeerCheated(f"the host's start has no rule set: {e}") from None
        return cls(start.match, rules, key, host, 1, entropy=entropy)

    # -- what the shell reads ----------------------------------------------------------------

    @property
    def game(self) -> Game | None:
        """The current (or last) game, as our referee runs it."""
        return self.referee.game

    @property
    def over(self) -> bool:
        """Whether the match is over (the co-signatures may still be on their way)."""
        return self.referee.over

    @property
    def done(self) -> bool:
        """Whether the match is over and both co-signatures are in: nothing more comes or goes."""
        return self.signed is not None

    # -- the calls ---------------------------------------------------------------------------

    def start(self) -> Out:
        """Begin the match: the host's ``start`` for the joiner, and the first game."""
        return self._call(self._start)

    def receive(self, msg: m.Message) -> Out:
        """Feed one message the other peer sent (one of :data:`TRAVELS`)."""
        return self._call(lambda: self._on_peer(msg))

    def place(self, fleet: Fleet, secret: bytes) -> Out:
        """Place ``fleet`` with the 32-byte ``secret`` for the current game: its commitment goes
        to the other peer. Raises (nothing changed) for an illegal fleet or outside setup."""

        def place() -> None:
            g = self.referee.game
            if g is None or g.phase is not Phase.SETUP or self._setup[self.seat] is not None:
                raise LocalProtocolError(ErrorCode.WRONG_PHASE, "no fleet to place now")
            self._take(self.player.place(fleet, secret))

        return self._call(place)

    def fire(self, cells: str | Cell | Sequence[str | Cell]) -> Out:
        """Call one cell or a salvo on our turn. Raises :class:`~.errors.ProtocolError` if our
        own game refuses it: nothing is sent and nothing changes; choose again."""
        return self._call(lambda: self._move(labels(cells), radar=False))

    def radar(self, at: str | Cell) -> Out:
        """Scan the radar area whose top-left cell is ``at`` on our turn (refused as
        :meth:`fire` is)."""
        return self._call(lambda: self._move(labels(at), radar=True))

    def resign(self) -> Out:
        """Give up the current game: at once in setup before our ``commit`` and on our turn, else
        on our next turn in this game (the resignation lapses if the game ends first)."""

        def resign() -> None:
            g = self.referee.game
            if g is None or self.referee.over:
                raise Refused(ErrorCode.GAME_OVER, "the match is over")
            self._resign_for = g.number

        return self._call(resign)

    # -- inside: calls, outputs --------------------------------------------------------------

    def _call(self, fn: Callable[[], None]) -> Out:
        if self.stopped is not None:
            raise PeerCheated(self.stopped)
        try:
            fn()
            self._settle()
        except PeerCheated as e:
            self.stopped = str(e)
            raise
        except Exception:
            # A refusal (a move our game refuses, a fleet placed out of time): nothing changed,
            # and nothing of this call goes out.
            self._sends, self._events = [], []
            self._todo.clear()
            raise
        out = Out(self._sends, self._events)
        self._sends, self._events = [], []
        return out

    def _send(self, msg: m.Message) -> None:
        if self.bend is not None:
            bent = self.bend(msg)
            if bent is None:
                return
            msg = bent
        self._sends.append(msg)

    def _take(self, out: Out) -> None:
        """What the seat gave: its events for the player, its sends to carry out in order."""
        self._events.extend(out.events)
        self._todo.extend(out.sends)

    def _deliver(self, sends: list[Send]) -> None:
        """Feed our seat what our referee sends it (the other seat's copies need no carrying:
        the other peer's own referee makes them)."""
        bit = seat_bit(self.seat)
        for send in sends:
            msg = send.msg
            if not send.to & bit or type(msg) is m.Clock:
                continue
            if type(msg) is m.GameStart:
                game = msg.game
                if game <= self._announced:
                    continue  # told already, before its lot
                self._new_game(game)
            self._take(self.player.receive(msg, _NOW))
        g = self.referee.game
        if g is not None and g.number > self._announced and not self.referee.over:
            # A game whose lot the players draw: the referee announces it with the lot, but its
            # players place first (6.7 step 3), so our seat is told now, with no first player.
            self._new_game(g.number)
            self._take(self.player.receive(m.GameStart(self.match_id, g.number, None), _NOW))

    def _new_game(self, game: int) -> None:
        self._announced = game
        self._setup = [None, None]
        self._settled = False
        self._nonce = self._their_hash = None
        self._reveals = [None, None]
        self._seq = 0

    def _settle(self) -> None:
        """Carry out what the seat sent, a resignation whose time came, and the end."""
        self._drain()
        g = self.referee.game
        if self._resign_for is not None and g is not None:
            if g.number != self._resign_for or g.phase in (Phase.REVEAL, Phase.OVER):
                self._resign_for = None  # the game it was for ended first
            elif g.phase is Phase.SETUP and self._setup[self.seat] is None:
                self._resign_for = None
                self._own_setup(m.Resign(self.match_id, g.number))
            elif g.phase is Phase.FIRING and g.turn == self.seat:
                self._resign_for = None
                n = g.number
                # The turn it takes is no longer the player's to play.
                self._events = [e for e in self._events if not _turn_of(e, n)]
                msg = m.Resign(self.match_id, n)
                sends = self.referee.receive(self.seat, msg, _NOW)
                self._send(msg)
                self._deliver(sends)
            self._drain()
        if self.referee.over and self.record is None:
            self._sign()

    def _drain(self) -> None:
        while self._todo:
            self._from_seat(self._todo.popleft())

    # -- our seat's messages -----------------------------------------------------------------

    def _from_seat(self, msg: m.Message) -> None:
        """Carry out one message our seat sent: to the other peer, and to our referee."""
        if isinstance(msg, m.Commit):
            self._own_setup(msg)
        elif isinstance(msg, m.Answer):
            try:
                sends = self.referee.receive(self.seat, msg, _NOW)
            except ProtocolError as e:
                # Only a tampered verdict can be refused: the other peer would stop on it too.
                raise LocalProtocolError(e.code, f"our own answer is refused: {e}") from None
            self._send(msg)
            self._deliver(sends)
        elif isinstance(msg, m.RevealMsg):
            self._send(msg)
            self._reveals[self.seat] = msg
            self._reveal()
        # Nothing else goes anywhere: our moves and resignations go from the calls that make them,
        # the co-signature is the peer's own (see the module docstring).

    def _own_setup(self, msg: m.Commit | m.Resign) -> None:
        self._send(msg)
        self._setup[self.seat] = msg
        self._setup_both()

    def _move(self, cells: tuple[str, ...], *, radar: bool) -> None:
        g = self.referee.game
        if g is None:
            raise Refused(ErrorCode.WRONG_PHASE, "no game is running")
        msg: m.Fire | m.Radar
        member, seq = g.caller(self.seat), self._seq + 1
        if radar:
            msg = m.Radar(self.match_id, g.number, cells[0], member, seq)
        else:
            msg = m.Fire(self.match_id, g.number, cells, member, seq)
        sends = self.referee.receive(self.seat, msg, _NOW)  # raises to refuse: nothing changed
        self._seq = seq
        self._send(msg)
        self._deliver(sends)

    # -- the other peer's messages -----------------------------------------------------------

    def _on_peer(self, msg: m.Message) -> None:
        other = 1 - self.seat
        g = self.referee.game
        if not self._started or g is None:
            raise PeerCheated(f"{msg.TAG!r} before the match started")
        if isinstance(msg, m.Error):
            what = "the session" if msg.ref is None else f"our move {msg.ref}"
            raise PeerCheated(f"the peer refused {what}: {_slug(msg.code)}: {msg.msg}")
        if getattr(msg, "match", self.match_id) != self.match_id:
            raise PeerCheated(f"{msg.TAG!r} of another match")
        if isinstance(msg, m.CoSign):
            self._cosigned(msg)
            return
        if self.referee.over:
            raise PeerCheated(f"{msg.TAG!r} after the end of the match")
        if isinstance(msg, m.Fire | m.Radar):
            try:
                sends = self.referee.receive(other, msg, _NOW)
            except ProtocolError as e:
                self._send(m.Error(int(e.code), e.detail, msg.seq))  # 6.7 step 4
                return
            self._deliver(sends)
            return
        game = getattr(msg, "game", None)
        if game != g.number:
            raise PeerCheated(f"{msg.TAG!r} for game {game} in game {g.number}")
        phase = g.phase
        if isinstance(msg, m.Commit | m.Resign) and phase is Phase.SETUP:
            if self._setup[other] is not None:
                raise PeerCheated(f"a second setup message ({msg.TAG!r}) in game {g.number}")
            self._setup[other] = msg
            self._setup_both()
        elif isinstance(msg, m.Resign) and phase is Phase.FIRING and g.turn == other:
            self._deliver(self._apply(other, msg))
        elif isinstance(msg, m.Coin):
            self._coin(msg)
        elif isinstance(msg, m.Answer):
            pending = g.pending
            if phase is not Phase.ANSWER or pending is None or pending.seat != self.seat:
                raise PeerCheated("an answer with no shot of ours to answer")
            self._deliver(self._apply(other, msg))
        elif isinstance(msg, m.RevealMsg) and phase is Phase.REVEAL:
            if self._reveals[other] is not None:
                raise PeerCheated(f"a second reveal in game {g.number}")
            self._reveals[other] = msg
            self._reveal()
        else:
            raise PeerCheated(f"{msg.TAG!r} out of turn (game {g.number}, phase {phase.value})")

    def _apply(self, seat: int, msg: m.Message) -> list[Send]:
        """Apply a message of ``seat`` that the match cannot go on without: refused, it stops."""
        try:
            return self.referee.receive(seat, msg, _NOW)
        except ProtocolError as e:
            whose = "our" if seat == self.seat else "the peer's"
            raise PeerCheated(f"{whose} {msg.TAG!r} is refused: {e}") from None

    # -- setup, the coin, the reveal, the record ---------------------------------------------

    def _setup_both(self) -> None:
        """Both setup messages in: apply them in seat order (6.7 step 3); then, if the game
        needs a lot, the coin begins."""
        g = self.referee.game
        if None in self._setup or self._settled or g is None:
            return
        self._settled = True
        for s in (0, 1):
            msg = self._setup[s]
            assert msg is not None
            self._deliver(self._apply(s, msg))
            if g.phase is Phase.OVER:
                return  # a resignation: the other setup message is moot, no coin runs
        if g.phase is Phase.SETUP and g.first is None:
            # Both commits are exchanged: neither can commit knowing the lot (10.9).
            self._nonce = self._entropy(32)
            self._send(m.Coin(self.match_id, g.number, self._coin_hash(self.seat), None))

    def _coin_hash(self, seat: int, nonce: bytes | None = None) -> bytes:
        n = self._nonce if nonce is None else nonce
        assert n is not None and self.referee.game is not None
        return coin_commit(self.match_id, self.referee.game.number, seat, n)

    def _coin(self, msg: m.Coin) -> None:
        g = self.referee.game
        if self._nonce is None or g is None or g.first is not None:
            raise PeerCheated("a coin with no lot being drawn (both commits come first)")
        if self._their_hash is None:
            if msg.hash is None or msg.nonce is not None:
                raise PeerCheated("the coin opens with a hash, and a hash only")
            self._their_hash = msg.hash
            # Our nonce goes out only now: the other is bound to its nonce before it sees ours.
            self._send(m.Coin(self.match_id, g.number, None, self._nonce))
            return
        theirs = msg.nonce
        if theirs is None or len(theirs) != 32:
            raise PeerCheated("the coin closes with a 32-byte nonce")
        other = 1 - self.seat
        if self._coin_hash(other, theirs) != self._their_hash:
            raise PeerCheated("the peer's coin nonce does not match its hash")
        nonces = (self._nonce, theirs) if self.seat == 0 else (theirs, self._nonce)
        self._deliver(self.referee.draw(coin_result(*nonces), _NOW))

    def _reveal(self) -> None:
        """Both reveals in: apply them in seat order (6.7 step 5)."""
        g = self.referee.game
        if None in self._reveals or g is None:
            return
        for s, reveal in enumerate(self._reveals):
            assert reveal is not None
            sends: list[Send] = []
            with contextlib.suppress(ProtocolError):
                sends = self.referee.receive(s, reveal, _NOW)  # unparseable: no reveal at all
            self._deliver(sends)
        if g.phase is Phase.REVEAL:
            self._deliver(self.referee.feed(Expire(Deadline.REVEAL), _NOW))

    def _sign(self) -> None:
        """The match is over: our record, its head, our co-signature (6.7 step 6)."""
        match = self.referee.match
        self.record = build_record(match, list(self.keys), None)
        self.head = head = record_head(self.record)
        self._sig = self.key.sign(head)
        self._send(m.CoSign(self.match_id, head, self._sig))
        w = match.winner
        won = None if w is None else w == self.seat
        self._events.append(MatchEnded(match.to_dict(), None, head, won))

    def _cosigned(self, msg: m.CoSign) -> None:
        if self.record is None or self.head is None or self._sig is None:
            raise PeerCheated("a cosign before the end of the match")
        if self.signed is not None:
            raise PeerCheated("a second cosign")
        sigs = [
            {
                "key": self.keys[s],
                "sig": self._sig if s == self.seat else msg.sig,
                "role": f"seat{s}",
            }
            for s in (0, 1)
        ]
        signed = {"record": self.record, "sigs": sigs}
        report = verify_record(signed)
        if msg.head != self.head:
            report.ok = False
            report.reason = "disputed: the peer signed another head (its transcript differs)"
            report.problems.insert(0, report.reason)
        self.signed, self.report = signed, report
        self._events.append(RecordSigned(signed, report))

    def _start(self) -> None:
        if self._started:
            raise LocalProtocolError(ErrorCode.WRONG_PHASE, "the match has started")
        self._started = True
        if self.seat == 0:
            players = (self.keys[0].hex(), self.keys[1].hex())
            self._send(m.Start(self.match_id, 1, self.rules.to_dict(), "peer", players))
        self._deliver(self.referee.start(_NOW))


def _turn_of(ev: MatchEvent, game: int) -> bool:
    return isinstance(ev, YourTurn) and ev.game == game


def _slug(code: int) -> str:
    try:
        return str(ErrorCode(code).slug)
    except ValueError:
        return str(code)
