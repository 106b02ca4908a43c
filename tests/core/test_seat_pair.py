"""A referee and its seats, all pure, in memory: whole matches with no sockets (h11's
``ConnectionPair``). Every preset and 002 variant, both trust modes, lean seats, team play with
one seat machine per member, and seats that drop and resume from a snapshot: every honest seat
ends with no lie seen, co-signs, and the record it co-signed verifies."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import build_record, head_of_bytes, pack_record, sign_as
from seabattle.protocol.referee import SEAT0, SEAT1, Referee
from seabattle.protocol.rules import PRESETS, RuleSet, rules_from_dict
from seabattle.protocol.seat import Seat
from seabattle.protocol.seat_events import (
    GameStarted,
    LieDetected,
    MatchEnded,
    MatchEvent,
    Resumed,
    ShotResult,
    YourTurn,
)
from seabattle.protocol.verify import verify_record

MID = bytes(range(16))
REFEREE = Ed25519PrivateKey.from_private_bytes(bytes(32))

#: 002's variants on top of the presets (the rule texts' options).
VARIANTS: dict[str, dict[str, Any]] = {
    "salvo": {"preset": "classic", "shots": "salvo-afloat"},
    "salvo-totals": {"preset": "classic", "shots": "salvo-fixed", "salvo_report": "total"},
    "radar": {"preset": "classic", "radar": True},
    "best-of-3": {"preset": "classic", "match": {"kind": "best-of", "games": 3}},
}


def _pub(k: Ed25519PrivateKey) -> bytes:
    return k.public_key().public_bytes_raw()


class Pair:
    """One :class:`Referee` and a :class:`Seat` for each player (each member, in team play),
    wired together in memory; each player places a random fleet and calls free cells at random.

    A seat may drop (:meth:`drop`): what it sent that was not yet delivered is lost, and what
    the referee sends it is lost, until :meth:`back` gives it a new connection and a snapshot.
    """

    def __init__(
        self,
        rules: RuleSet,
        mode: str,
        *,
        seed: int = 0,
        teams: bool = False,
        lean: tuple[bool, bool] = (False, False),
    ) -> None:
        self.rng = random.Random(seed)
        self.rules = rules
        size = rules.team_size if teams else 1
        self.keys = [
            [Ed25519PrivateKey.from_private_bytes(self.rng.randbytes(32)) for _ in range(size)]
            for _ in (0, 1)
        ]
        ids = [[_pub(k).hex() for k in team] for team in self.keys]
        self.ref = Referee(
            match_id=MID,
            rules=rules,
            mode=mode,
            players=(ids[0][0], ids[1][0]),
            lot=self.rng.randbytes(32),
            teams=(tuple(ids[0]), tuple(ids[1])) if teams else None,
        )
        self.team = teams
        self.seats = {
            (s, k): Seat(MID, key, ids[s][k], lean=lean[s])
            for s in (0, 1)
            for k, key in enumerate(self.keys[s])
        }
        for s, k in self.seats:
            self.ref.set_lean(s, lean[s], k)
        self.now = 0.0
        self.inbox: deque[tuple[tuple[int, int], m.Message]] = deque()  # seat -> referee
        self.away: set[int] = set()
        self.events: dict[tuple[int, int], list[MatchEvent]] = {k: [] for k in self.seats}
        self.cosigns: dict[int, m.CoSign] = {}
        self.refused: list[ProtocolError] = []
        self.seq = 0
        self.drops = 0
        self.got: dict[tuple[int, int], list[m.Message]] = {}
        self.closed: dict[tuple[tuple[int, int], int], set[int]] = {}

    # -- wiring --------------------------------------------------------------------------------

    def to_seats(self, sends: list[Any]) -> None:
        for to, msg, member in sends:
            for s, bit in ((0, SEAT0), (1, SEAT1)):
                if not to & bit or s in self.away:
                    continue
                for (seat, k), machine in self.seats.items():
                    if seat == s and (member is None or member == k):
                        self.got.setdefault((seat, k), []).append(msg)
                        self.feed((seat, k), machine.receive(msg, self.now))

    def feed(self, who: tuple[int, int], out: Any) -> None:
        """Queue what a seat sends (its connection carries it) and let its player react."""
        machine = self.seats[who]
        for msg in out.sends:
            self.inbox.append((who, msg))
            machine.carried(msg, machine.epoch)
        for ev in out.events:
            self.events[who].append(ev)
            self.react(who, ev)

    def react(self, who: tuple[int, int], ev: MatchEvent) -> None:
        machine = self.seats[who]
        if isinstance(ev, GameStarted) and who[1] == 0:
            fleet = random_fleet(self.rules, self.rng)
            self.feed(who, machine.place(fleet, self.rng.randbytes(32)))
        elif isinstance(ev, YourTurn):
            self.move(who, ev.count)
        elif isinstance(ev, Resumed) and ev.game is not None and machine.seat is not None:
            # What the player called that was lost with the connection is open again: the
            # snapshot's board of the opponent says what was fired, and what is crossed out.
            board = ev.view["boards"][1 - machine.seat]
            closed = {i for i, _ in board["fired"]} | set(board["crossed"])
            self.closed[(who, ev.game)] = closed
        elif isinstance(ev, ShotResult):
            cols = self.rules.cols
            closed = self.closed.setdefault((who, ev.game), set())
            closed.update(c.row * cols + c.col for c in ev.cells + ev.crossed)

    def move(self, who: tuple[int, int], count: int) -> None:
        """Call ``count`` cells at random among those not known to be closed: by the mirror, or
        after a gap that stopped it, by the snapshot and the results since (a refused call makes
        the player choose again)."""
        machine = self.seats[who]
        assert machine.seat is not None
        g = machine.mirror
        if g is not None:
            board = g.boards[1 - machine.seat]
            closed = set(board.fired) | set(board.crossed)
        else:
            closed = self.closed.get((who, machine.game_no), set())
        free = [i for i in range(self.rules.cells) if i not in closed]
        cells = self.rng.sample(free, min(count, len(free)))
        self.seq += 1
        labels = [Cell(*divmod(i, self.rules.cols)) for i in cells]
        self.feed(who, machine.fire(labels, self.seq))

    def pump(self, drops: float = 0.0) -> None:
        """Deliver everything queued, in order; a refusal leaves the match as it was.
        ``drops``: the chance, before each delivery, that a seat drops (what it had in flight
        is lost) and stays away for a few deliveries (what the referee sends it is lost)."""
        gone: dict[int, int] = {}  # seat -> deliveries until it is back
        while self.inbox or gone:
            for seat in [s for s, left in gone.items() if left <= 0 or not self.inbox]:
                del gone[seat]
                self.back(seat)
            if not self.inbox:
                continue
            if drops and self.rng.random() < drops:
                seat = self.rng.randrange(2)
                if seat not in gone:
                    self.drop(seat)
                    gone[seat] = self.rng.randrange(4)
                    self.drops += 1
                    continue
            for seat in gone:
                gone[seat] -= 1
            (seat, k), msg = self.inbox.popleft()
            if isinstance(msg, m.CoSign):
                self.cosigns[seat] = msg
                continue
            member = k if self.team else None
            try:
                sends = self.ref.receive(seat, msg, self.now, member)
            except ProtocolError as e:
                self.refused.append(e)
                again = e.code in (ErrorCode.ALREADY_FIRED, ErrorCode.CROSSED_OUT)
                if again and isinstance(msg, m.Fire):
                    self.move((seat, k), len(msg.cells))  # the player hears why, and re-chooses
                continue
            self.to_seats(sends)

    def drop(self, seat: int) -> None:
        """``seat``'s connection drops: what it had queued is lost with it."""
        self.away.add(seat)
        self.inbox = deque((w, x) for w, x in self.inbox if w[0] != seat)
        self.to_seats(self.ref.seat_gone(seat, self.now))

    def back(self, seat: int) -> None:
        """``seat`` is back on a new connection: the referee's snapshot, then what it owes."""
        self.away.discard(seat)
        self.to_seats(self.ref.seat_back(seat, self.now))
        for (s, k), machine in self.seats.items():
            if s == seat:
                machine.epoch += 1
                self.feed((s, k), machine.receive(self.ref.snapshot(seat, self.now), self.now))

    def run(self, *, drops: float = 0.0, limit: int = 20_000) -> None:
        """Play to the end; ``drops``: see :meth:`pump`."""
        self.to_seats(self.ref.start(self.now))
        for _ in range(limit):
            self.pump(drops)
            if self.ref.over:
                break
            # Nobody owes anything now: let time decide (a clock, if the rules have one).
            self.now = max(self.now, self.ref.wake_at)
            self.to_seats(self.ref.tick(self.now))
        else:
            raise AssertionError("the match did not end")
        self.conclude()

    def conclude(self) -> None:
        """The record a referee signs, sent to every seat in ``match_over``."""
        ref = self.ref
        teams = [[_pub(k) for k in t] for t in self.keys] if self.team else None
        players = [_pub(t[0]) for t in self.keys]
        self.record = build_record(ref.match, players, _pub(REFEREE), teams=teams)
        packed = pack_record(self.record)
        self.head = head_of_bytes(packed)
        over = m.MatchOver(MID, ref.match.to_dict(), None, self.head, packed)
        self.to_seats([(SEAT0 | SEAT1, over, None)])
        self.pump()

    def check(self) -> None:
        """No lie seen by any honest seat; every captain co-signed a record that verifies."""
        for who, evs in self.events.items():
            lies = [e for e in evs if isinstance(e, LieDetected)]
            assert not lies, (who, lies)
            assert any(isinstance(e, MatchEnded) for e in evs), who
            assert self.seats[who].disputed is None
        assert set(self.cosigns) == {0, 1}
        sigs = [sign_as(self.record, REFEREE, "referee")]
        for s, c in self.cosigns.items():
            assert c.head == self.head
            sigs.append({"key": _pub(self.keys[s][0]), "role": f"seat{s}", "sig": c.sig})
        report = verify_record({"record": self.record, "sigs": sigs})
        assert report.ok, report.problems


RULES = {name: rules for name, rules in PRESETS.items()} | {
    name: rules_from_dict(d) for name, d in VARIANTS.items()
}


@pytest.mark.parametrize("lean", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("mode", ["blind", "custody"])
@pytest.mark.parametrize("name", sorted(RULES))
def test_every_preset_plays_to_a_cosigned_record(
    name: str, mode: str, lean: tuple[bool, bool]
) -> None:
    """Lean seats (spec 5.7) are sent no copy of their own moves: they play all the same."""
    pair = Pair(RULES[name], mode, seed=len(name), lean=lean)
    pair.run()
    pair.check()
    for s in (0, 1):
        own = [x for x in pair.got[(s, 0)] if isinstance(x, m.ShotCalled) and x.seat == s]
        assert bool(own) is not lean[s]  # a lean seat learns its shot from the verdict
    assert pair.ref.match.over
    assert not pair.refused


@pytest.mark.parametrize("name", ["classic", "russian", "salvo", "salvo-totals"])
def test_a_seat_that_does_not_check_still_plays_by_the_rules(name: str) -> None:
    """A load generator's seat keeps no mirror: it still owes what an honest seat owes, and
    calls as many cells as the rules ask (from the verdicts alone)."""
    pair = Pair(RULES[name], "blind", seed=5)
    for machine in pair.seats.values():
        machine.checking = False
        machine.quiet = name == "classic"  # a load generator's: told only whose turn it is
    pair.run()
    pair.check()
    # Which cells the rules cross out is the mirror's to work out: without it, only those; a
    # quiet seat's player is not told its results, so it may call a cell again.
    allowed = {ErrorCode.CROSSED_OUT} | ({ErrorCode.ALREADY_FIRED} if name == "classic" else set())
    assert all(e.code in allowed for e in pair.refused)
    if name == "classic":
        assert not any(isinstance(e, ShotResult) for evs in pair.events.values() for e in evs)


@pytest.mark.parametrize("lean", [(False, False), (True, True)])
@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_team_play_one_seat_machine_per_member(mode: str, lean: tuple[bool, bool]) -> None:
    rules = rules_from_dict({"preset": "classic", "team_size": 2})
    pair = Pair(rules, mode, seed=3, teams=True, lean=lean)
    pair.run()
    pair.check()
    callers = {who for who, evs in pair.events.items() if any(isinstance(e, YourTurn) for e in evs)}
    assert callers == set(pair.seats)  # every member called shots, in the referee's turns


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(["classic", "russian", "salvo", "best-of-3"]),
    mode=st.sampled_from(["blind", "custody"]),
    lean=st.tuples(st.booleans(), st.booleans()),
)
def test_seats_that_drop_and_resume_finish_without_a_false_lie(
    seed: int, name: str, mode: str, lean: tuple[bool, bool]
) -> None:
    """A seat that drops at any point (losing what it had in flight) and resumes from the
    snapshot sends again what it owes, and still finds the record true."""
    pair = Pair(RULES[name], mode, seed=seed, lean=lean)
    pair.run(drops=0.02)
    pair.check()


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_many_drops_in_one_match(mode: str) -> None:
    pair = Pair(RULES["russian"], mode, seed=11, lean=(True, False))
    pair.run(drops=0.2)
    pair.check()
    assert pair.drops > 10


def test_a_winner_is_told_every_hit_and_every_sinking_plainly() -> None:
    rules = PRESETS["classic"]
    pair = Pair(rules, "blind", seed=2)
    pair.run()
    winner = pair.ref.match.winner
    assert winner is not None
    mine = [e for e in pair.events[(winner, 0)] if isinstance(e, ShotResult)]
    assert sum(len(e.cells) for e in mine if e.hit) == sum(s.length for s in rules.fleet)
    assert sorted(k for e in mine for k in e.sunk) == list(range(len(rules.fleet)))
    assert repr(mine[0].results) in ("['miss']", "['hit']", "['sunk']")


@pytest.mark.parametrize("choice", ["place", "fire", "radar", "resign"])
def test_a_choice_before_the_first_game_is_refused_plainly(choice: str) -> None:
    seat = Seat(MID, REFEREE, "p")
    calls = {
        "place": lambda: seat.place(random_fleet(PRESETS["classic"], random.Random(1)), bytes(32)),
        "fire": lambda: seat.fire("A1", 1),
        "radar": lambda: seat.radar("A1", 1),
        "resign": lambda: seat.resign(),
    }
    with pytest.raises(ProtocolError) as e:
        calls[choice]()
    assert e.value.code is ErrorCode.WRONG_PHASE and "no game" in str(e.value)


def test_a_lying_seat_is_caught_through_the_hook() -> None:
    """The hook bends one seat's verdicts; the other seat's mirror catches the lie."""
    pair = Pair(PRESETS["classic"], "blind", seed=7)

    def miss_everything(shot: Any, verdict: Any) -> Any:
        from seabattle.protocol.verdict import Verdict

        d = verdict.to_dict()
        for r in d["results"]:
            r["r"], r["open"]["occ"], r["sunk"] = "miss", False, None
        return Verdict.from_dict(d)

    pair.seats[(1, 0)].tamper = miss_everything
    pair.run()
    assert pair.ref.match.winner == 0
    g = pair.ref.match.games[0]
    assert g.phase is Phase.OVER and g.outcome is not None
    assert g.outcome.reason.value in ("false_proof", "false_verdict"), g.outcome
    seen = [e for e in pair.events[(0, 0)] if isinstance(e, LieDetected)]
    assert seen and all(e.seat == 1 for e in seen)  # the liar, never the referee
    # The record holds the false answer no message showed: the honest seat co-signs it still.
    assert pair.seats[(0, 0)].disputed is None and 0 in pair.cosigns
