"""Fuzz target: the pure referee fed messages and time built from the fuzz input.

The input picks a rule set and a trust mode, then a sequence of steps. Most steps are what an
honest player would send next (so a run gets past the setup into firing, answers and reveals);
the others bend it: a field of the honest message replaced, a seat that is not to move, any game
message with fields drawn from the input, a decoded frame body, time passing, a seat leaving or
coming back, a shot resent. What the referee may do with any of it:

* refuse a message by raising a :class:`~seabattle.protocol.errors.ProtocolError` that an error
  reply can carry (never :class:`~seabattle.protocol.errors.LocalProtocolError`, which would mean
  the referee misused its own API), and then nothing in the game has changed;
* otherwise return :class:`~seabattle.protocol.referee.Send` values whose audience is a non-empty
  subset of the two seats and the spectators, each message one the server can frame, and name at
  most a seat (0 or 1) as urgent.

Any other exception, or a broken invariant (an ``AssertionError``), is a crash.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import codec
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
from seabattle.protocol.referee import ALL, MODES, Referee, Send
from seabattle.protocol.rules import (
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

__all__ = ["RULES", "referee"]

MID = bytes(range(16))
#: The seats' players: real keys, since every commitment carries its player's seat signature.
KEYS = tuple(Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n in (1, 2))
PLAYERS = (
    KEYS[0].public_key().public_bytes_raw().hex(),
    KEYS[1].public_key().public_bytes_raw().hex(),
)
SECRETS = (bytes([1]) * 32, bytes([2]) * 32)
_CLASSIC = preset("classic")

#: The rule sets a run picks from: the presets and a variant of each rule the referee branches on.
RULES: tuple[RuleSet, ...] = (
    _CLASSIC,
    preset("russian"),
    preset("six-ship"),
    preset("sea-battle"),
    preset("classic-8x8"),
    _CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT),
    _CLASSIC.replace(shots=ShotMode.SALVO_FIXED, salvo_size=3, salvo_report=SalvoReport.TOTAL),
    _CLASSIC.replace(hit_again=True),
    _CLASSIC.replace(sunk=SunkReport.SILENT),
    _CLASSIC.replace(radar=True),
    _CLASSIC.replace(team_size=2),
    _CLASSIC.replace(repeat=RepeatShot.WASTED),
    rules_from_dict({"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}}),
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


class _Run:
    """One run: the referee, the honest players' fleets, and the invariants checked."""

    def __init__(self, d: Data) -> None:
        self.d = d
        self.ri = d.below(len(RULES))
        self.rules = RULES[self.ri]
        self.mode = MODES[d.below(len(MODES))]
        lot = None if d.below(8) == 0 else d.take(32).ljust(32, b"\0")
        self.ref = Referee(match_id=MID, rules=self.rules, mode=self.mode, players=PLAYERS, lot=lot)
        self.now = 0.0
        self.defenders: dict[tuple[int, int], Defender] = {}
        self.seq = 0
        self.last_shot: tuple[int, m.Message] | None = None

    # -- the honest players ---------------------------------------------------------------------

    def defender(self, game: int, seat: int) -> Defender:
        key = (game, seat)
        got = self.defenders.get(key)
        if got is None:
            fleet = self.d.below(_FLEETS_PER_RULES)
            got = self.defenders[key] = Defender(_committed(self.ri, fleet, game, seat))
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
            c = self.defender(n, seat).committed
            if self.mode == "custody":
                sig = c.seat_sig(KEYS[seat])
                return seat, m.Place(MID, n, tuple(c.fleet.to_list()), c.secret, sig)
            return seat, m.Commit(MID, n, c.commitment.to_dict(), c.seat_sig(KEYS[seat]))
        if g.phase is Phase.FIRING and g.turn is not None:
            return g.turn, self.shot(g.turn)
        if g.phase is Phase.ANSWER and g.pending is not None:
            seat = 1 - g.pending.seat
            verdict = self.defender(n, seat).answer(g.pending).to_dict()
            return seat, m.Answer(MID, n, verdict)
        if g.phase is Phase.REVEAL:
            seats = [s for s in (0, 1) if g.reveals[s] is None] or [0, 1]
            seat = seats[self.d.below(len(seats))]
            reveal = self.defender(n, seat).committed.reveal().to_dict()
            return seat, m.RevealMsg(MID, n, reveal)
        return None

    def shot(self, seat: int) -> m.Message:
        g = self.ref.game
        assert g is not None
        r = self.rules
        target = g.boards[1 - seat]
        self.seq += 1
        if r.radar and not target.radar_used and self.d.below(8) == 7:
            at = Cell(self.d.below(r.rows), self.d.below(r.cols)).label()
            return m.Radar(MID, g.number, at, g.caller(seat), self.seq)
        # Mostly at the ships the shooter is told of (the harness holds both fleets): a run
        # reaches a game's end in a few dozen steps rather than a few hundred.
        count = g.shot_count(seat)
        occupancy = self.defender(g.number, 1 - seat).committed.occupancy
        fresh = [i for i, o in enumerate(occupancy) if o and i not in target.fired]
        if len(fresh) < count or self.d.below(4) == 3:
            fresh = [i for i in range(r.cells) if i not in target.fired and i not in target.crossed]
        picked: list[int] = []
        for _ in range(min(count, len(fresh))):
            picked.append(fresh.pop(self.d.below(len(fresh))))
        if target.fired and self.d.below(8) == 7:
            picked[-1:] = [next(iter(target.fired))]  # a repeat
        cells = tuple(Cell(*divmod(i, r.cols)).label() for i in picked)
        return m.Fire(MID, g.number, cells, g.caller(seat), self.seq)

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
            self.check(ref.seat_gone(d.below(2), self.now))
        elif op == 13:
            self.check(ref.seat_back(d.below(2), self.now))
        elif op == 14:
            if d.below(4) == 0:
                self.check(ref.leave(d.below(2), self.now))
            elif ref.game is not None and not ref.over and ref.game.first is None:
                self.check(ref.draw(d.below(2), self.now))
        elif self.last_shot is not None:
            self.send(*self.last_shot)  # a resend after a drop: applies once

    def send(self, seat: int, msg: m.Message) -> None:
        ref = self.ref
        before = _state(ref)
        try:
            out = ref.receive(seat, msg, self.now)
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
            # By name, not by unpacking: team play adds a field (member) that this target's
            # invariants do not depend on yet.
            to, msg = send.to, send.msg
            assert to and to & ALL == to, f"{msg.TAG} sent to audience {to}"
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


def referee(data: bytes) -> None:
    """Drive a referee with the steps ``data`` spells; see the module docstring."""
    d = Data(data)
    run = _Run(d)
    run.check(run.ref.start(run.now))
    after = 4  # steps tried once the match is over: every one is refused
    for _ in range(_STEPS):
        if d.done or after < 0:
            break
        run.step()
        after -= run.ref.over
