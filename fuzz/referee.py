"""Fuzz target: the pure referee fed messages and time built from the fuzz input.

The input picks a rule set, a trust mode, whether each seat's session agreed ``lean`` (spec 4.2)
and whether the seats check, then a sequence of steps. The players are
:class:`~seabattle.protocol.seat.Seat` machines, one per seat (in team play, spec 6.8, one per
member), fed everything the referee sends them: what an honest seat sends (its commitment or
placement, its answers, its reveal, what it owes after a resume) is theirs to decide, and the
harness only plays the players' part, placing one of a few fleets when a game starts and calling
cells when it is their turn. What each seat sends waits in its connection's queue; most steps
deliver the next message of a queue the input picks (so a run gets past the setup into firing,
answers and reveals). The others bend it: a copy of such a message with a field replaced, or sent
by the other seat, ahead of it; any game message with fields drawn from the input; a decoded
frame body; time passing; a connection dropping (what its queue held is lost) and coming back,
perhaps with ``lean`` turned the other way (the seat resumes from the snapshot); a seat leaving;
a shot resent; and now and then a seat lying in its answer (through its ``tamper`` hook). In team
play each message is mostly sent by the member whose machine made it, else by another (a member
calling out of turn, a non-captain sending the captain's messages) or by no one named. What the
referee may do with any of it:

* refuse a message by raising a :class:`~seabattle.protocol.errors.ProtocolError` that an error
  reply can carry (never :class:`~seabattle.protocol.errors.LocalProtocolError`, which would mean
  the referee misused its own API), and then nothing in the game has changed;
* otherwise return :class:`~seabattle.protocol.referee.Send` values whose audience is a non-empty
  subset of the two seats and the spectators, each message one the server can frame (a ``Send``
  to one member goes to one seat, in team play only, to a member it has), and name at most a seat
  (0 or 1) as urgent.

And the seats, fed only what an honest referee sends, never raise; in a run where nothing was
bent, forged or lied, none of them sees a lie.

Most runs play small rule sets: each preset and each variant on a grid of 9 to 40 cells with two
or three of its ships, so that a run reaches the end of a match (and of a best-of) in a few dozen
steps and one execution costs a fraction of a full-size one, whose commitments hash 100 leaves and
whose games last a hundred shots. The full-size presets stay: a rule byte of 240 or more picks
one (one run in sixteen, for random bytes). Everything comes from the input (the fleets are a
few drawn once per rule set, the secrets fixed), so that an input replays the same run.

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
from seabattle.protocol import seat as _seat
from seabattle.protocol.commit import Committed, sign_seat
from seabattle.protocol.errors import (
    ErrorCode,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from seabattle.protocol.fleet import Fleet, random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.referee import ALL, MODES, SEAT0, SEAT1, Referee, Send, seat_bit
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
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import GameStarted, LieDetected, YourTurn
from seabattle.protocol.session import MAX_S2C_FRAME
from seabattle.protocol.verdict import Shot, Verdict

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


#: Team play's members beyond the captain, and their keys (nothing a member sends is signed but
#: the captain's).
_MEMBER_KEYS = tuple(Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in range(3, 17))
_MEMBERS = tuple(k.public_key().public_bytes_raw().hex() for k in _MEMBER_KEYS)
_FLEETS_PER_RULES = 3
_STEPS = 200
# Game messages a seat may send, and a few it may not, for the "any message" step.
_SENT = (m.Commit, m.Place, m.Fire, m.Radar, m.Answer, m.RevealMsg, m.Resign, m.Coin, m.CoSign)
#: The refusals after which a player calls again (the cells it chose were closed).
_CALL_AGAIN = (ErrorCode.ALREADY_FIRED, ErrorCode.CROSSED_OUT)

Who = tuple[int, int]  # a seat, and the member of its team who plays it (0: the captain)


@functools.cache
def _fleets(rules: int) -> tuple[Fleet, ...]:
    # Drawing a fleet costs milliseconds: a few per rule set, drawn once, serve every run.
    rng = random.Random(rules)
    return tuple(random_fleet(RULES[rules], rng) for _ in range(_FLEETS_PER_RULES))


@functools.cache
def _ships(rules: int, fleet: int) -> frozenset[int]:
    """The cells the fleet occupies, by index."""
    occupancy = _fleets(rules)[fleet].occupancy(RULES[rules])
    return frozenset(i for i, o in enumerate(occupancy) if o)


def _forged_miss(verdict: Verdict) -> Verdict:
    """``verdict`` with every result a miss (a lie the openings give away)."""
    d = verdict.to_dict()
    for r in d["results"]:
        r["r"], r["open"]["occ"], r["sunk"] = "miss", False, None
    return Verdict.from_dict(d)


class _Run:
    """One run: the referee, a :class:`~seabattle.protocol.seat.Seat` for each seat (for each
    member, in team play) and what each has to send, and the invariants checked."""

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
        # Bits 0 and 1: that seat's sessions agreed ``lean``; bits 2 and 3 both set: the seats
        # keep no mirror (a load generator's, which play from the verdicts alone).
        options = d.byte()
        self.now = 0.0
        self.seats: dict[Who, Seat] = {}
        for s in (0, 1):
            keys = (KEYS[s], *_MEMBER_KEYS[(r.team_size - 1) * s :][: r.team_size - 1])
            for k in range(r.team_size if teams is not None else 1):
                player = teams[s][k] if teams is not None else PLAYERS[s]
                seat = Seat(MID, keys[k], player, lean=bool(options >> s & 1))
                seat.checking = options & 12 != 12
                seat.tamper = self.tamper
                self.seats[(s, k)] = seat
                self.ref.set_lean(s, seat.lean, k)
        #: What each seat's connection has yet to carry to the referee, in order.
        self.outbox: dict[Who, list[m.Message]] = {who: [] for who in self.seats}
        self.away: set[Who] = set()  # connections that dropped: nothing reaches them
        self.fleets: dict[tuple[int, int], int] = {}  # (game, seat) -> the fleet placed
        self.counts: dict[Who, int] = {}  # how many cells each one's last turn called
        self.seq = 0
        self.last_shot: tuple[int, m.Message, int | None] | None = None
        # Whether every message so far was what an honest seat sends, from the seat it sends it
        # (nothing bent, forged or lied): then no seat may see a lie.
        self.honest = True

    # -- the seats and their players ------------------------------------------------------------

    def deliver(self, out: list[Send]) -> None:
        """Check what the referee sends, and feed it to every seat it is for that is connected."""
        self.check(out)
        for send in out:
            for who, seat in self.seats.items():
                if (
                    send.to & seat_bit(who[0])
                    and send.member in (None, who[1])
                    and who not in self.away
                ):
                    self.feed(who, seat.receive(send.msg, self.now))

    def feed(self, who: Who, out: Out) -> None:
        """Queue what a seat sends, and let its player react to its events."""
        self.outbox[who].extend(out.sends)
        for ev in out.events:
            assert not (self.honest and isinstance(ev, LieDetected)), f"{who} saw {ev} in play"
            if isinstance(ev, GameStarted):
                self.place(who, ev.game)
            elif isinstance(ev, YourTurn):
                self.counts[who] = ev.count
                self.call(who, ev.count, ev.radar)

    def place(self, who: Who, game: int) -> None:
        """The player places one of the rule set's fleets (the input picks which)."""
        s, k = who
        if k:
            return  # in team play the captain places for the team
        fleet = self.d.below(_FLEETS_PER_RULES)
        self.fleets[(game, s)] = fleet
        self.feed(who, self.seats[who].place(_fleets(self.ri)[fleet], SECRETS[s]))

    def call(self, who: Who, count: int, radar: bool) -> None:
        """The player calls ``count`` cells, or the radar. Mostly at the ships (the harness knows
        both fleets), so that a run reaches a game's end in a few dozen steps rather than a few
        hundred; now and then at a cell already fired."""
        d, r, g = self.d, self.rules, self.ref.game
        if g is None:
            return
        s = who[0]
        seat = self.seats[who]
        target = g.boards[1 - s]
        self.seq += 1
        if radar and d.below(8) == 7:
            at = Cell(d.below(r.rows), d.below(r.cols))
            self.feed(who, seat.radar(at, self.seq))
            return
        fleet = self.fleets.get((g.number, 1 - s))
        ships = _ships(self.ri, fleet) if fleet is not None else frozenset()
        fresh = [i for i in sorted(ships) if i not in target.fired]
        if len(fresh) < count or d.below(4) == 3:
            fresh = [i for i in range(r.cells) if i not in target.fired and i not in target.crossed]
        picked: list[int] = []
        for _ in range(min(count, len(fresh))):
            picked.append(fresh.pop(d.below(len(fresh))))
        if target.fired and d.below(8) == 7:
            picked[-1:] = [next(iter(target.fired))]  # a repeat
        if picked:
            self.feed(who, seat.fire([Cell(*divmod(i, r.cols)) for i in picked], self.seq))

    def tamper(self, shot: Shot, verdict: Verdict) -> Verdict:
        """A seat's verdict, now and then a lie (every result a miss)."""
        if verdict.results and self.d.below(32) == 31:
            self.honest = False
            return _forged_miss(verdict)
        return verdict

    def ready(self) -> list[Who]:
        return [who for who, box in self.outbox.items() if box]

    def member(self, msg: m.Message, who: Who) -> int | None:
        """Team play: the member who sends ``msg`` (mostly the one whose seat machine it came
        from); else ``None``."""
        if self.teams is None:
            return None
        k = self.d.below(8)
        if k == 7:
            self.honest = False
            return self.d.below(self.rules.team_size)  # perhaps not the one who may
        if k == 6:
            self.honest = False
            return None  # the captain, as a shell names it
        return who[1]

    # -- the steps ------------------------------------------------------------------------------

    def step(self) -> None:
        d, ref = self.d, self.ref
        op = d.below(16)
        if op <= 8:
            ready = self.ready()
            if not ready:
                self.idle()
                return
            who = ready[d.below(len(ready))]
            msg = self.outbox[who][0]
            seat = who[0]
            if op == 6:
                # A copy with a field bent goes first; the honest one stays queued.
                self.honest = False
                bent = _made(lambda: _bent(msg, d))
                if bent is not None:
                    self.send(seat, bent, self.member(bent, who))
                return
            if op == 7:
                self.honest = False
                self.send(1 - seat, msg, self.member(msg, who))  # the other seat sends it
                return
            del self.outbox[who][0]
            self.seats[who].carried(msg, self.seats[who].epoch)
            refused = self.send(seat, msg, self.member(msg, who))
            if refused in _CALL_AGAIN and isinstance(msg, m.Fire):
                # The player hears why, and calls again.
                self.call(who, self.counts.get(who, len(msg.cells)), False)
        elif op == 9:
            self.honest = False
            g = ref.game
            game = g.number if g is not None else 1
            cls = _SENT[d.below(len(_SENT))]
            made = _made(lambda: build(cls, d, match=MID, game=game, seq=self.seq))
            if made is not None:
                self.send(d.below(2), made, self.member(made, (0, 0)))
        elif op == 10:
            self.honest = False
            made = _made(lambda: m.decode(codec.strict_unpack(d.blob(200))))
            if made is not None:
                self.send(d.below(2), made, self.member(made, (0, 0)))
        elif op == 11:
            wake = ref.wake_at
            if math.isfinite(wake) and d.flag():
                self.now = max(self.now, wake)
            else:
                self.now += d.below(400)
            self.deliver(ref.tick(self.now))
        elif op == 12:
            self.gone((d.below(2), self.away_member()))
        elif op == 13:
            self.back((d.below(2), self.away_member()))
        elif op == 14:
            if d.below(4) == 0:
                self.deliver(ref.leave(d.below(2), self.now))
            elif ref.game is not None and not ref.over and ref.game.first is None:
                self.deliver(ref.draw(d.below(2), self.now))
        elif self.last_shot is not None:
            self.send(*self.last_shot)  # a resend after a drop: applies once

    def idle(self) -> None:
        """Nothing is owed: the players draw the lot (peer play, where the referee has none), a
        seat comes back, time passes, or a player resigns (the match over: a late ``resign``)."""
        ref, d = self.ref, self.d
        g = ref.game
        if g is not None and g.first is None and not ref.over:
            self.deliver(ref.draw(d.below(2), self.now))
        elif self.away and d.below(4) != 3:
            self.back(min(self.away))
        elif math.isfinite(ref.wake_at) and not ref.over and d.below(4) != 3:
            self.now = max(self.now, ref.wake_at)
            self.deliver(ref.tick(self.now))
        else:
            who = (d.below(2), 0)
            seat = self.seats[who]
            if seat.game_no and not ref.over:
                self.feed(who, seat.resign())
            else:
                self.send(who[0], m.Resign(MID, 1), None)

    def away_member(self) -> int:
        """The member who goes or comes back (team play; else the seat's one player, 0)."""
        return 0 if self.teams is None else self.d.below(self.rules.team_size)

    def gone(self, who: Who) -> None:
        """``who``'s connection drops: what it had not sent yet is lost with it."""
        self.away.add(who)
        self.outbox[who].clear()
        self.deliver(self.ref.seat_gone(who[0], self.now, who[1]))

    def back(self, who: Who) -> None:
        """``who`` plays again on a new connection (perhaps one that agreed ``lean`` where the
        last did not, or the other way): the referee's ``start`` and snapshot, then whatever the
        seat owes."""
        self.away.discard(who)
        self.outbox[who].clear()
        seat = self.seats[who]
        seat.epoch += 1
        if self.d.below(8) == 7:
            seat.lean = not seat.lean
            self.ref.set_lean(who[0], seat.lean, who[1])
        self.deliver(self.ref.seat_back(who[0], self.now, who[1]))

    def send(self, seat: int, msg: m.Message, member: int | None) -> ErrorCode | None:
        """``msg`` from ``seat`` (its ``member``) to the referee; the refusal's code, if any."""
        ref = self.ref
        before = _state(ref)
        try:
            out = ref.receive(seat, msg, self.now, member)
        except LocalProtocolError:
            raise
        except ProtocolError as e:
            assert isinstance(e.code, ErrorCode)
            assert _state(ref) == before, f"refused {msg.TAG} ({e}) changed the game"
            return e.code
        if isinstance(msg, m.Fire | m.Radar):
            self.last_shot = (seat, msg, member)
        self.deliver(out)
        return None

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


@functools.lru_cache(maxsize=1024)
def _committed(
    rules: RuleSet, fleet: Fleet, secret: bytes, match: bytes, game: int, seat: int
) -> Committed:
    # Never changed by use (a Defender keeps the hits), so one serves every run.
    return Committed(rules, fleet, secret, match, game, seat)


@functools.lru_cache(maxsize=1024)
def _sign_seat(key: Ed25519PrivateKey, ctx: bytes, root: bytes) -> bytes:
    return sign_seat(key, ctx, root)


_RULES_OF: dict[str, RuleSet] = {}


def _rules_from_dict(d: dict[str, Any]) -> RuleSet:
    key = repr(d)
    rules = _RULES_OF.get(key)
    if rules is None:
        rules = _RULES_OF[key] = rules_from_dict(d)
    return rules


#: What the seats build again and again in every run, the same each time (the few fleets, the
#: one rule set of a run): made once. Placing cost a third of a run (the leaves, the seat
#: signature), reading ``start`` a tenth.
_SEAT_CACHES: dict[str, Callable[..., Any]] = {
    "Committed": _committed,
    "sign_seat": _sign_seat,
    "rules_from_dict": _rules_from_dict,
}


def referee(data: bytes) -> None:
    """Drive a referee with the steps ``data`` spells; see the module docstring."""
    d = Data(data)
    # For this run only (a rename in the seat's module fails here, not silently).
    saved = {name: getattr(_seat, name) for name in _SEAT_CACHES}
    for name, cached in _SEAT_CACHES.items():
        setattr(_seat, name, cached)
    setattr(_commit, _KEY_NAME, _Key)
    try:
        run = _Run(d)
        run.deliver(run.ref.start(run.now))
        after = 4  # steps tried once the match is over: every one is refused
        for _ in range(_STEPS):
            if d.done or after < 0:
                break
            run.step()
            after -= run.ref.over
    finally:
        setattr(_commit, _KEY_NAME, Ed25519PublicKey)
        for name, real in saved.items():
            setattr(_seat, name, real)
