"""Fuzz target: the pure referee fed messages and time built from the fuzz input.

The input picks a rule set and a trust mode, then a sequence of steps. Most steps are what an
honest player would send next (so a run gets past the setup into firing, answers and reveals);
the others bend it: a field of the honest message replaced, a seat that is not to move, any game
message with fields drawn from the input, a decoded frame body, time passing, a seat leaving or
coming back, a shot resent. In team play (spec 6.8) each step also names the member who sends
it: mostly the one an honest team would (the turn's caller for a shot, the captain otherwise),
else another (a member calling out of turn, a non-captain sending the captain's messages), and
members go and come back one by one. What the referee may do with any of it:

* refuse a message by raising a :class:`~seabattle.protocol.errors.ProtocolError` that an error
  reply can carry (never :class:`~seabattle.protocol.errors.LocalProtocolError`, which would mean
  the referee misused its own API), and then nothing in the game has changed;
* otherwise return :class:`~seabattle.protocol.referee.Send` values whose audience is a non-empty
  subset of the two seats and the spectators, each message one the server can frame (a ``Send``
  to one member goes to one seat, in team play only, to a member it has), and name at most a seat
  (0 or 1) as urgent.

Most runs play small rule sets: each preset and each variant on a grid of 9 to 40 cells with two
or three of its ships, so that a run reaches the end of a match (and of a best-of) in a few dozen
steps and one execution costs a fraction of a full-size one, whose commitments hash 100 leaves and
whose games last a hundred shots. The full-size presets stay: a rule byte of 240 or more picks
one (one run in sixteen, for random bytes).

Any other exception, or a broken invariant (an ``AssertionError``), is a crash.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from seabattle.protocol import codec
from seabattle.protocol import commit as _commit
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import (
    ErrorCode,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.referee import ALL, MODES, SEAT0, SEAT1, Referee, Send
from seabattle.protocol.rules import (
    MatchFormat,
    MatchKind,
    RepeatShot,
    RuleSet,
    SalvoReport,
    ShotMode,
    SunkReport,
    preset,
    rules_from_dict,
)
from seabattle.protocol.session import MAX_S2C_FRAME
from seabattle.protocol.state import Phase
from seabattle.protocol.verdict import Defender

from .data import Data, build

__all__ = ["FULL", "RULES", "SMALL", "referee", "rule_byte"]

MID = bytes(range(16))
#: The seats' players: real keys, since every commitment carries its player's seat signature.
KEYS = tuple(Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (1, 2))
PLAYERS = (
    KEYS[0].public_key().public_bytes_raw().hex(),
    KEYS[1].public_key().public_bytes_raw().hex(),
)
SECRETS = (bytes([1]) * 32, bytes([2]) * 32)
_CLASSIC = preset("classic")


def _small(r: RuleSet, rows: int, cols: int, *ships: int) -> RuleSet:
    """``r`` on a ``rows`` x ``cols`` grid with only the ships of its fleet at ``ships``."""
    return r.replace(rows=rows, cols=cols, fleet=tuple(r.fleet[i] for i in ships))


# Cruiser and Destroyer on 4 rows of 10: two-digit labels, and a game of a few shots.
_SMALL = _small(_CLASSIC, 4, 10, 2, 4)
_TINY = _small(_CLASSIC, 3, 3, 4)
_BEST_OF_3 = MatchFormat(MatchKind.BEST_OF, 3)
#: The small rule sets (see the module docstring): each preset, and a variant of each rule the
#: referee branches on.
SMALL: tuple[RuleSet, ...] = (
    _SMALL,
    _small(preset("russian"), 5, 5, 1, 3, 6),
    _small(preset("six-ship"), 6, 4, 3, 5),
    _small(preset("sea-battle"), 3, 6, 2, 4),
    _small(preset("classic-8x8"), 4, 4, 1, 3),
    _TINY,
    _SMALL.replace(shots=ShotMode.SALVO_AFLOAT),
    _SMALL.replace(shots=ShotMode.SALVO_FIXED, salvo_size=3, salvo_report=SalvoReport.TOTAL),
    _SMALL.replace(hit_again=True),
    _SMALL.replace(sunk=SunkReport.SILENT),
    _SMALL.replace(radar=True),
    _SMALL.replace(team_size=2),
    _TINY.replace(team_size=3, shots=ShotMode.SALVO_FIXED, salvo_size=2),
    _SMALL.replace(repeat=RepeatShot.WASTED),
    _SMALL.replace(match=_BEST_OF_3),
    _TINY.replace(team_size=2, match=_BEST_OF_3),
)
#: The full-size rule sets: the presets, and the variants of the small ones that differ most.
FULL: tuple[RuleSet, ...] = (
    _CLASSIC,
    preset("russian"),
    preset("six-ship"),
    preset("sea-battle"),
    rules_from_dict({"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}}),
    _CLASSIC.replace(team_size=2),
    _CLASSIC.replace(shots=ShotMode.SALVO_FIXED, salvo_size=3, salvo_report=SalvoReport.TOTAL),
)
#: Every rule set a run may pick, by the index :func:`rule_byte` spells.
RULES: tuple[RuleSet, ...] = SMALL + FULL
_FULL_FROM = 240  # a rule byte from here up picks a full-size rule set


def rule_byte(index: int) -> int:
    """The first input byte that picks ``RULES[index]``."""
    return index if index < len(SMALL) else _FULL_FROM + index - len(SMALL)


def _rules_of(byte: int) -> int:
    if byte < _FULL_FROM:
        return byte % len(SMALL)
    return len(SMALL) + (byte - _FULL_FROM) % len(FULL)


#: Team play's members beyond the captain: ids of keys no seat holds (nothing they send is
#: signed).
_MEMBERS = tuple(
    Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32).public_key().public_bytes_raw().hex()
    for n in range(3, 17)
)
_FLEETS_PER_RULES = 3
_STEPS = 200
# Game messages a seat may send, and a few it may not, for the "any message" step.
_SENT = (m.Commit, m.Place, m.Fire, m.Radar, m.Answer, m.RevealMsg, m.Resign, m.Coin, m.CoSign)


@functools.cache
def _fleets(rules: int) -> tuple[Fleet, ...]:
    # Drawing a fleet costs milliseconds: a few per rule set, drawn once, serve every run.
    rng = random.Random(rules)
    return tuple(random_fleet(RULES[rules], rng) for _ in range(_FLEETS_PER_RULES))


@functools.cache
def _committed(rules: int, fleet: int, game: int, seat: int) -> Committed:
    # Never changed by use (a Defender keeps the hits), so one serves every run.
    return Committed(RULES[rules], _fleets(rules)[fleet], SECRETS[seat], MID, game, seat)


@functools.cache
def _setup(rules: int, fleet: int, game: int, seat: int, mode: str) -> m.Message:
    # The honest commit or place, and the reveal below: signed and encoded once for every run
    # (messages are frozen).
    c = _committed(rules, fleet, game, seat)
    sig = c.seat_sig(KEYS[seat])
    if mode == "custody":
        return m.Place(MID, game, tuple(c.fleet.to_list()), c.secret, sig)
    return m.Commit(MID, game, c.commitment.to_dict(), sig)


@functools.cache
def _reveal(rules: int, fleet: int, game: int, seat: int) -> m.Message:
    return m.RevealMsg(MID, game, _committed(rules, fleet, game, seat).reveal().to_dict())


class _Run:
    """One run: the referee, the honest players' fleets, and the invariants checked."""

    def __init__(self, d: Data) -> None:
        self.d = d
        self.ri = _rules_of(d.byte())
        self.rules = r = RULES[self.ri]
        self.mode = MODES[d.below(len(MODES))]
        lot = None if d.below(8) == 0 else d.take(32).ljust(32, b"\0")
        teams = None
        if r.team_size > 1 and d.below(4):
            # One connection per member (spec 6.8); else one plays every member (002).
            k = r.team_size - 1
            teams = ((PLAYERS[0], *_MEMBERS[:k]), (PLAYERS[1], *_MEMBERS[k : 2 * k]))
        self.teams = teams
        self.ref = Referee(
            match_id=MID, rules=r, mode=self.mode, players=PLAYERS, lot=lot, teams=teams
        )
        self.now = 0.0
        self.defenders: dict[tuple[int, int], tuple[int, Defender]] = {}
        self.seq = 0
        self.last_shot: tuple[int, m.Message] | None = None

    # -- the honest players ---------------------------------------------------------------------

    def defender(self, game: int, seat: int) -> tuple[int, Defender]:
        """The fleet (its index) and the defender of ``seat`` in ``game``."""
        key = (game, seat)
        got = self.defenders.get(key)
        if got is None:
            fleet = self.d.below(_FLEETS_PER_RULES)
            got = self.defenders[key] = (fleet, Defender(_committed(self.ri, fleet, game, seat)))
        return got

    def honest(self) -> tuple[int, m.Message] | None:
        """The seat that is to act and what an honest player there sends."""
        g = self.ref.game
        if g is None or self.ref.over:
            return None
        n = g.number
        if g.phase is Phase.SETUP:
            seats = [s for s in (0, 1) if g.commitments[s] is None] or [0, 1]
            seat = seats[self.d.below(len(seats))]
            return seat, _setup(self.ri, self.defender(n, seat)[0], n, seat, self.mode)
        if g.phase is Phase.FIRING and g.turn is not None:
            return g.turn, self.shot(g.turn)
        if g.phase is Phase.ANSWER and g.pending is not None:
            seat = 1 - g.pending.seat
            verdict = self.defender(n, seat)[1].answer(g.pending).to_dict()
            return seat, m.Answer(MID, n, verdict)
        if g.phase is Phase.REVEAL:
            seats = [s for s in (0, 1) if g.reveals[s] is None] or [0, 1]
            seat = seats[self.d.below(len(seats))]
            return seat, _reveal(self.ri, self.defender(n, seat)[0], n, seat)
        return None

    def member(self, msg: m.Message) -> int | None:
        """Team play: the member who sends ``msg`` (mostly the one an honest team's would be:
        the caller its shot names, else the captain); else ``None``."""
        if self.teams is None:
            return None
        k = self.d.below(8)
        if k == 7:
            return self.d.below(self.rules.team_size)  # perhaps not the one who may
        if k == 6:
            return None  # the captain, as a shell names it
        if isinstance(msg, m.Fire | m.Radar):
            return msg.member
        return 0

    def shot(self, seat: int) -> m.Message:
        g = self.ref.game
        assert g is not None
        r = self.rules
        target = g.boards[1 - seat]
        self.seq += 1
        if r.radar and not target.radar_used and self.d.below(8) == 7:
            at = Cell(self.d.below(r.rows), self.d.below(r.cols)).label()
            return m.Radar(MID, g.number, at, self.ref.caller(seat), self.seq)
        # Mostly at the ships the shooter is told of (the harness holds both fleets): a run
        # reaches a game's end in a few dozen steps rather than a few hundred.
        count = g.shot_count(seat)
        occupancy = self.defender(g.number, 1 - seat)[1].committed.occupancy
        fresh = [i for i, o in enumerate(occupancy) if o and i not in target.fired]
        if len(fresh) < count or self.d.below(4) == 3:
            fresh = [i for i in range(r.cells) if i not in target.fired and i not in target.crossed]
        picked: list[int] = []
        for _ in range(min(count, len(fresh))):
            picked.append(fresh.pop(self.d.below(len(fresh))))
        if target.fired and self.d.below(8) == 7:
            picked[-1:] = [next(iter(target.fired))]  # a repeat
        cells = tuple(Cell(*divmod(i, r.cols)).label() for i in picked)
        return m.Fire(MID, g.number, cells, self.ref.caller(seat), self.seq)

    # -- the steps ------------------------------------------------------------------------------

    def step(self) -> None:
        d, ref = self.d, self.ref
        op = d.below(16)
        if op <= 8:
            move = self.honest()
            if move is None:
                self.send(d.below(2), m.Resign(MID, 1))
                return
            seat, msg = move
            if op == 6:
                bent = _made(lambda: _bent(msg, d))
                if bent is None:
                    return
                msg = bent
            elif op == 7:
                seat = 1 - seat
            self.send(seat, msg)
        elif op == 9:
            g = ref.game
            game = g.number if g is not None else 1
            cls = _SENT[d.below(len(_SENT))]
            made = _made(lambda: build(cls, d, match=MID, game=game, seq=self.seq))
            if made is not None:
                self.send(d.below(2), made)
        elif op == 10:
            made = _made(lambda: m.decode(codec.strict_unpack(d.blob(200))))
            if made is not None:
                self.send(d.below(2), made)
        elif op == 11:
            wake = ref.wake_at
            if math.isfinite(wake) and d.flag():
                self.now = max(self.now, wake)
            else:
                self.now += d.below(400)
            self.check(ref.tick(self.now))
        elif op == 12:
            self.check(ref.seat_gone(d.below(2), self.now, self.away()))
        elif op == 13:
            self.check(ref.seat_back(d.below(2), self.now, self.away()))
        elif op == 14:
            if d.below(4) == 0:
                self.check(ref.leave(d.below(2), self.now))
            elif ref.game is not None and not ref.over and ref.game.first is None:
                self.check(ref.draw(d.below(2), self.now))
        elif self.last_shot is not None:
            self.send(*self.last_shot)  # a resend after a drop: applies once

    def away(self) -> int:
        """The member who goes or comes back (team play; else the seat's one player, 0)."""
        return 0 if self.teams is None else self.d.below(self.rules.team_size)

    def send(self, seat: int, msg: m.Message) -> None:
        ref = self.ref
        before = _state(ref)
        try:
            out = ref.receive(seat, msg, self.now, self.member(msg))
        except LocalProtocolError:
            raise
        except ProtocolError as e:
            assert isinstance(e.code, ErrorCode)
            assert _state(ref) == before, f"refused {msg.TAG} ({e}) changed the game"
            return
        if isinstance(msg, m.Fire | m.Radar):
            self.last_shot = (seat, msg)
        self.check(out)

    def check(self, out: list[Send]) -> None:
        for send in out:
            to, msg, member = send.to, send.msg, send.member
            assert to and to & ALL == to, f"{msg.TAG} sent to audience {to}"
            if member is not None:
                assert self.teams is not None, f"{msg.TAG} to member {member} without teams"
                assert to in (SEAT0, SEAT1), f"{msg.TAG} to member {member} of audience {to}"
                assert 0 <= member < self.rules.team_size, f"{msg.TAG} to member {member}"
            assert isinstance(msg, m.Message)
            m.frame(msg, max_frame=MAX_S2C_FRAME)
        assert self.ref.urgent in (None, 0, 1), self.ref.urgent


def _made(make: Callable[[], m.Message]) -> m.Message | None:
    """The message ``make`` builds, or ``None`` where its checks refuse it (as decoding would)."""
    try:
        return make()
    except RemoteProtocolError as e:
        assert e.code in (ErrorCode.BAD_MESSAGE, ErrorCode.UNKNOWN_TAG) or e.code < 2000, e
        return None


def _state(ref: Referee) -> tuple[Any, ...]:
    """What a refused message must leave as it was."""
    g = ref.game
    if g is None:
        return (ref.over,)
    return (ref.over, g.number, g.phase, g.turn, len(g.transcript), g.pending, tuple(g.reveals))


def _bent(msg: m.Message, d: Data) -> m.Message:
    """``msg`` with one field, or one value deep inside a map field, replaced from ``d``."""
    fields = m.encode(msg)
    del fields["t"]
    name = list(fields)[d.below(len(fields))]
    value = fields[name]
    if isinstance(value, dict) and d.flag():
        fields[name] = _bend_tree(value, d)
    else:
        return build(type(msg), d, **fields)
    return type(msg)(**fields)


def _bend_tree(value: Any, d: Data) -> Any:
    """A copy of ``value`` with one entry somewhere inside replaced (or dropped, or added)."""
    if isinstance(value, dict) and value and d.below(4):
        out = dict(value)
        key = list(out)[d.below(len(out))]
        if d.below(8) == 0:
            del out[key]
        else:
            out[key] = _bend_tree(out[key], d)
        return out
    if isinstance(value, list | tuple) and value and d.below(4):
        items = list(value)
        i = d.below(len(items))
        items[i] = _bend_tree(items[i], d)
        return items
    if isinstance(value, bytes) and value and d.flag():
        i = d.below(len(value))
        return value[:i] + bytes([value[i] ^ (d.byte() | 1)]) + value[i + 1 :]
    if isinstance(value, int) and not isinstance(value, bool) and d.flag():
        return value + d.below(5) - 2
    return d.value()


#: Seat signature checks already made, by (key, signature, statement): the exception they
#: raised, or ``None``.
_VERIFIED: dict[tuple[bytes, bytes, bytes], type[Exception] | None] = {}


_KEY_NAME = "Ed25519PublicKey"  # what seabattle.protocol.commit.check_seat verifies with


class _Key:
    """An Ed25519 public key that remembers what each verification came to.

    Verifying is deterministic, and the honest commits are the same few in every run: checking
    each again cost a quarter of a run (two to five checks of 0.25 ms each), for no path the
    referee takes that the first check did not."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    @classmethod
    def from_public_bytes(cls, data: bytes) -> _Key:
        return cls(data)

    def verify(self, signature: bytes, data: bytes) -> None:
        key = (self._raw, signature, data)
        try:
            raised = _VERIFIED[key]
        except KeyError:
            raised = None
            try:
                Ed25519PublicKey.from_public_bytes(self._raw).verify(signature, data)
            except (InvalidSignature, ValueError) as e:
                raised = type(e)
            if len(_VERIFIED) >= 4096:
                _VERIFIED.clear()
            _VERIFIED[key] = raised
        if raised is not None:
            raise raised


def referee(data: bytes) -> None:
    """Drive a referee with the steps ``data`` spells; see the module docstring."""
    d = Data(data)
    setattr(_commit, _KEY_NAME, _Key)  # for this run only
    try:
        run = _Run(d)
        run.check(run.ref.start(run.now))
        after = 4  # steps tried once the match is over: every one is refused
        for _ in range(_STEPS):
            if d.done or after < 0:
                break
            run.step()
            after -= run.ref.over
    finally:
        setattr(_commit, _KEY_NAME, Ed25519PublicKey)
