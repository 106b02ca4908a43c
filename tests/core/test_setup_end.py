"""A game that ends in setup (spec 8.9): by a resignation, a player leaving, absence beyond grace
or the setup clock, before both fleets are committed, in both trust modes.

What a user relies on: every player and spectator is told the end (``game_over``) and nothing
more: no reveal is asked for or sent, and a fleet placed in setup stays secret; the snapshot
view shows the roots committed and ``nil`` for the others; the record holds the commits and the
entry that ended the game, verifies, and both honest players co-sign it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.record import build_record, head_of_bytes, pack_record, sign_as
from seabattle.protocol.referee import SEAT0, SEAT1, SPECTATORS, Referee, Send
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.seat import Out, Seat
from seabattle.protocol.seat_events import LieDetected
from seabattle.protocol.verify import verify_record

MID = bytes(range(16))
REFEREE = Ed25519PrivateKey.from_private_bytes(bytes(32))
#: A small game with a setup clock, so that every way of ending in setup can happen.
SMALL = rules_from_dict(
    {"preset": "classic", "rows": 6, "cols": 6, "fleet": [["Boat", 2], ["Raft", 1]]}
    | {"clocks": {"setup": 60, "grace": 30}}
)
GRACE = SMALL.clocks.grace


def _pub(k: Ed25519PrivateKey) -> bytes:
    return k.public_key().public_bytes_raw()


class Table:
    """A referee and an honest :class:`Seat` for each player, wired in memory; a seat whose
    session ended (:meth:`gone`) is sent nothing until it is back."""

    def __init__(self, rules: RuleSet, mode: str) -> None:
        self.rng = random.Random(35)
        self.rules = rules
        self.keys = [Ed25519PrivateKey.from_private_bytes(self.rng.randbytes(32)) for _ in "ab"]
        ids = tuple(_pub(k).hex() for k in self.keys)
        assert len(ids) == 2
        self.ref = Referee(
            match_id=MID, rules=rules, mode=mode, players=ids, lot=self.rng.randbytes(32)
        )
        self.seats = [Seat(MID, k, i) for k, i in zip(self.keys, ids, strict=True)]
        self.got: dict[int, list[m.Message]] = {0: [], 1: [], -1: []}  # -1: a spectator
        self.away: set[int] = set()
        self.now = 0.0
        self.cosigns: dict[int, m.CoSign] = {}

    def deliver(self, sends: list[Send]) -> None:
        for to, msg, _member in sends:
            if to & SPECTATORS:
                self.got[-1].append(msg)
            for s, bit in ((0, SEAT0), (1, SEAT1)):
                if to & bit and s not in self.away:
                    self.got[s].append(msg)
                    self.send(s, self.seats[s].receive(msg, self.now))

    def send(self, s: int, out: Out) -> None:
        for msg in out.sends:
            if isinstance(msg, m.CoSign):
                self.cosigns[s] = msg
            else:
                self.deliver(self.ref.receive(s, msg, self.now))

    def place(self, s: int) -> None:
        fleet = random_fleet(self.rules, self.rng)
        self.send(s, self.seats[s].place(fleet, self.rng.randbytes(32)))

    def gone(self, s: int) -> None:
        self.away.add(s)
        self.deliver(self.ref.seat_gone(s, self.now))

    def back(self, s: int) -> None:
        self.away.discard(s)
        self.deliver(self.ref.seat_back(s, self.now))

    def tick(self, at: float) -> None:
        self.now = at
        self.deliver(self.ref.tick(at))

    def match_over(self) -> dict[str, Any]:
        """The record the referee signs, sent to both seats in ``match_over``."""
        players = [_pub(k) for k in self.keys]
        record = build_record(self.ref.match, players, _pub(REFEREE))
        packed = pack_record(record)
        over = m.MatchOver(MID, self.ref.match.to_dict(), None, head_of_bytes(packed), packed)
        self.deliver([Send(SEAT0 | SEAT1, over)])
        return record


def _end(t: Table, how: str, committed: tuple[int, ...]) -> tuple[int | None, str]:
    """Commit ``committed`` and end game 1 in setup ``how``; the outcome it must have."""
    for s in committed:
        t.place(s)
    if how == "clock":
        t.tick(t.ref.wake_at)
        if not committed:
            return None, "nobody_placed"
        return committed[0], "setup_timeout"
    if how == "resign":
        t.send(0, t.seats[0].resign())
    elif how == "leave":
        t.deliver(t.ref.leave(0, t.now))
    else:
        t.gone(0)
        t.tick(t.now + GRACE)
        assert t.ref.game is not None and t.ref.game.outcome is not None
        t.back(0)  # it comes back to the match's end: a snapshot shows it, not a game_over
    return 1, "abandoned" if how == "abandon" else "resigned"


WAYS = ["resign", "leave", "abandon", "clock"]


@pytest.mark.parametrize("committed", [(), (0,), (1,)], ids=["none", "seat0", "seat1"])
@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_a_game_ended_in_setup_shows_the_end_and_nothing_more(
    mode: str, how: str, committed: tuple[int, ...]
) -> None:
    t = Table(SMALL, mode)
    t.deliver(t.ref.start(t.now))
    winner, reason = _end(t, how, committed)
    g = t.ref.game
    assert g is not None and g.outcome is not None
    assert (g.outcome.winner, g.outcome.reason.value) == (winner, reason)

    # Every player present and every spectator is told the end, and no reveal is asked or sent.
    for who, msgs in t.got.items():
        assert not [x for x in msgs if isinstance(x, m.RevealNow | m.Revealed)], who
        ends = [x.outcome for x in msgs if isinstance(x, m.GameOver)]
        if who == 0 and how == "abandon":
            assert ends == []  # it was away: its snapshot tells it
        else:
            assert [(o["winner"], o["reason"]) for o in ends] == [(winner, reason)], who
    assert not any(isinstance(x, m.RevealMsg) for x in t.got[-1])

    # The snapshot view: the roots committed, nil for the others; nothing fired, no commitments.
    roots: list[bytes | None] = [None, None]
    for x in t.got[-1]:
        if isinstance(x, m.Committed):
            roots[x.seat] = x.root
    view = t.ref.snapshot(None, t.now).view
    assert view["phase"] == "over" and view["turn"] is None and view["pending"] is None
    assert view["committed"] == [s in committed for s in (0, 1)]
    assert view["roots"] == roots
    assert all(not b["fired"] for b in view["boards"])
    assert "commitments" not in view and "fleet" not in view
    assert (view["outcome"]["winner"], view["outcome"]["reason"]) == (winner, reason)
    if how == "abandon":
        back = next(x for x in t.got[0] if isinstance(x, m.Snapshot))
        assert back.view["phase"] == "over" and back.view["roots"] == roots

    # The record: the commits announced, then the entry that ended the game; it verifies and
    # both honest players co-sign it.
    record = t.match_over()
    game = record["games"][0]
    assert game["roots"] == roots
    kinds = [e["in"] for e in game["transcript"]]
    last = {"resign": "resign", "leave": "resign", "abandon": "abandon", "clock": "expire"}[how]
    assert kinds == ["set_first", *["commit"] * len(committed), last]
    assert [e["seat"] for e in game["transcript"] if e["in"] == "commit"] == list(committed)
    for s in (0, 1):
        lies = [x for x in t.seats[s].lies if isinstance(x, LieDetected)]
        assert not lies and t.seats[s].disputed is None, (s, lies)
    assert set(t.cosigns) == {0, 1}
    sigs = [sign_as(record, REFEREE, "referee")]
    for s, c in sorted(t.cosigns.items()):
        sigs.append({"key": _pub(t.keys[s]), "role": f"seat{s}", "sig": c.sig})
    report = verify_record({"record": record, "sigs": sigs})
    assert report.ok, report.problems


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_after_a_game_ended_in_setup_the_next_game_starts(mode: str) -> None:
    rules = rules_from_dict(SMALL.to_dict() | {"match": {"kind": "best-of", "games": 3}})
    t = Table(rules, mode)
    t.deliver(t.ref.start(t.now))
    t.place(1)
    owed = t.seats[1].committed
    assert owed is not None
    _end(t, "resign", ())
    starts = [x.game for x in t.got[1] if isinstance(x, m.GameStart)]
    assert starts == [1, 2]
    g = t.ref.game
    assert g is not None and g.number == 2 and g.phase.value == "setup"
    # A reveal for the game that ended is nobody's to send: the referee refuses it.
    with pytest.raises(Exception, match="game 2 is being played"):
        t.ref.receive(1, m.RevealMsg(MID, 1, owed.reveal().to_dict()), t.now)
