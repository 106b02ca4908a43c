"""Fleets shown after an early end: courtesy reveals (spec 7.3 decision 20), with a pure
referee and two pure seats in memory (the :class:`Pair` of ``test_seat_pair``).

A game that reached ``firing`` and ended before ``reveal`` (here: a resignation) shows both
fleets after its ``game_over`` where the rules show fleets at the end: the custody referee sends
both, a blind seat sends its own and the referee checks and relays it. Nothing of it enters the
transcript or the record: the record verifies and both seats co-sign as before."""

from __future__ import annotations

from typing import Any

import pytest
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Reveal
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Phase
from seabattle.protocol.referee import ALL
from seabattle.protocol.rules import PRESETS, RuleSet
from seabattle.protocol.seat_events import FleetShown, LieDetected, MatchEvent, YourTurn
from seabattle.protocol.verdict import Verdict

from tests.core.test_seat_pair import Pair


class Resigning(Pair):
    """A pair in which seat ``quitter`` resigns on its turn number ``after + 1`` (0: on its
    first turn), or, with ``after=None``, in setup as soon as its game starts."""

    def __init__(
        self, rules: RuleSet, mode: str, *, quitter: int = 1, after: int | None = 2, seed: int = 3
    ) -> None:
        super().__init__(rules, mode, seed=seed)
        self.quitter, self.after, self.turns = quitter, after, 0

    def react(self, who: tuple[int, int], ev: MatchEvent) -> None:
        machine = self.seats[who]
        if who == (self.quitter, 0) and machine.game_no == 1:
            if self.after is None and type(ev).__name__ == "GameStarted":
                self.feed(who, machine.resign())
                return
            if self.after is not None and isinstance(ev, YourTurn):
                self.turns += 1
                if self.turns > self.after:
                    self.feed(who, machine.resign())
                    return
        super().react(who, ev)


def _shown(pair: Pair, seat: int) -> list[FleetShown]:
    return [e for e in pair.events[(seat, 0)] if isinstance(e, FleetShown)]


def _revealed(pair: Pair, seat: int) -> list[m.Revealed]:
    return [x for x in pair.got.get((seat, 0), []) if isinstance(x, m.Revealed)]


def _after_game_over(pair: Pair, seat: int) -> list[m.Message]:
    got = pair.got[(seat, 0)]
    over = next(i for i, x in enumerate(got) if isinstance(x, m.GameOver))
    return got[over + 1 :]


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_a_resignation_in_firing_shows_each_player_the_other_fleet(mode: str) -> None:
    pair = Resigning(PRESETS["classic"], mode)
    pair.run()
    g = pair.ref.match.games[0]
    assert g.outcome is not None and g.outcome.reason.value == "resigned"
    for seat in (0, 1):
        other = pair.seats[(1 - seat, 0)].committed
        assert other is not None
        shown = [e for e in _shown(pair, seat) if e.seat == 1 - seat]
        assert [(e.game, e.fleet) for e in shown] == [(1, other.fleet)]
        # Both came after game_over (and before match_over), each with no fault.
        late = [x for x in _after_game_over(pair, seat) if isinstance(x, m.Revealed)]
        assert sorted(x.seat for x in late) == [0, 1] and all(x.fault is None for x in late)
        got = pair.got[(seat, 0)]
        assert max(got.index(x) for x in late) < next(
            i for i, x in enumerate(got) if isinstance(x, m.MatchOver)
        )
    # The record holds no reveal: the transcript was closed at game_over; it verifies, and
    # both co-sign it (no lie seen).
    ops = [e.get("in") for e in pair.record["games"][0]["transcript"]]
    assert "reveal" not in ops, ops
    pair.check()


def test_a_custody_referee_sends_both_reveals_right_after_game_over_to_all() -> None:
    sends: list[Any] = []

    class Spied(Resigning):
        def to_seats(self, out: list[Any]) -> None:
            sends.extend(out)
            super().to_seats(out)

    pair = Spied(PRESETS["russian"], "custody")
    pair.run()
    over = next(i for i, s in enumerate(sends) if isinstance(s.msg, m.GameOver))
    after = sends[over + 1 : over + 3]
    assert [type(s.msg) for s in after] == [m.Revealed, m.Revealed]
    assert [s.msg.seat for s in after] == [0, 1]
    # Both players and spectators (lean ones too), as a custody game's reveals at its end.
    assert all(s.to == ALL and s.msg.fault is None for s in after)
    pair.check()


@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_under_sea_battle_nothing_crosses_after_a_resignation(mode: str) -> None:
    pair = Resigning(PRESETS["sea-battle"], mode)
    pair.run()
    for seat in (0, 1):
        assert not _revealed(pair, seat) and not _shown(pair, seat)
        assert not any(isinstance(x, m.RevealMsg) for _, x in pair.inbox)
    pair.check()
    # A reveal sent all the same is refused: 004 shows no fleet after the end.
    if mode == "blind":
        seat = pair.seats[(0, 0)]
        assert seat.committed is not None
        msg = m.RevealMsg(pair.ref.match_id, 1, seat.committed.reveal().to_dict())
        with pytest.raises(ProtocolError) as e:
            pair.ref.receive(0, msg, pair.now)
        assert e.value.code == ErrorCode.GAME_OVER  # as before: nothing to take it for


def test_a_game_that_ended_in_setup_shows_nothing() -> None:
    pair = Resigning(PRESETS["classic"], "blind", quitter=1, after=None)
    pair.run()
    g = pair.ref.match.games[0]
    assert g.outcome is not None and g.outcome.reason.value == "resigned"
    for seat in (0, 1):
        assert not _revealed(pair, seat) and not _shown(pair, seat)
    pair.check()
    # Seat 0 committed before the end: its reveal is refused, nothing is relayed.
    seat0 = pair.seats[(0, 0)]
    assert seat0.committed is not None and g.commitments[0] is not None
    msg = m.RevealMsg(pair.ref.match_id, 1, seat0.committed.reveal().to_dict())
    with pytest.raises(ProtocolError) as e:
        pair.ref.receive(0, msg, pair.now)
    assert e.value.code == ErrorCode.GAME_OVER  # as before: nothing to take it for


def test_a_custody_game_that_ended_in_setup_shows_nothing() -> None:
    pair = Resigning(PRESETS["classic"], "custody", quitter=1, after=None)
    pair.run()
    for seat in (0, 1):
        assert not _revealed(pair, seat) and not _shown(pair, seat)
    pair.check()


def test_a_forged_courtesy_reveal_is_refused_and_nothing_is_relayed() -> None:
    pair = Resigning(PRESETS["classic"], "blind", quitter=1)
    liar = pair.seats[(1, 0)]
    rules = PRESETS["classic"]

    def forge(msg: m.Message) -> m.Message:
        if isinstance(msg, m.RevealMsg) and liar.mirror is not None:
            assert liar.committed is not None
            other = liar.committed.fleet
            import random

            rng = random.Random(9)
            fleet = random_fleet(rules, rng)
            while fleet == other:
                fleet = random_fleet(rules, rng)
            forged = Reveal(fleet, liar.committed.secret).to_dict()
            return m.RevealMsg(msg.match, msg.game, forged)
        return msg

    liar.bend = forge
    pair.run()
    bad = [e for e in pair.refused if e.code == ErrorCode.BAD_REVEAL]
    assert len(bad) == 1, pair.refused
    # Seat 0's own reveal crossed; the forged one did not.
    assert [x.seat for x in _revealed(pair, 0)] == [0]
    assert [x.seat for x in _revealed(pair, 1)] == [0]
    assert [e.seat for e in _shown(pair, 1)] == [0]
    assert not [e for e in _shown(pair, 0) if e.seat == 1]
    assert pair.ref.courtesy_owed == frozenset({1})
    pair.check()  # the record is untouched: both co-sign it


def test_a_courtesy_reveal_that_shows_a_false_verdict_is_a_lie_and_the_record_is_cosigned() -> None:
    """The liar hid a sinking (a 'hit' that was the sinking cell: only a reveal shows it, 7.3
    decision 6), then resigned; its courtesy reveal opens its commitment, so the referee relays
    it with the fault, and the honest seat reports the lie and still co-signs the true record."""
    pair = Resigning(PRESETS["classic"], "blind", quitter=1, after=0, seed=5)
    liar = pair.seats[(1, 0)]
    lied: list[int] = []

    def hide_sinking(shot: Any, verdict: Verdict) -> Verdict:
        d = verdict.to_dict()
        for r in d["results"]:
            if r.get("sunk") is not None and not lied:
                r["r"], r["sunk"] = "hit", None
                lied.append(shot.n)
        return Verdict.from_dict(d)

    liar.tamper = hide_sinking
    pair.after = 10_000  # resign only once the lie is told

    real = pair.react

    def react(who: tuple[int, int], ev: MatchEvent) -> None:
        if lied and who == (1, 0) and isinstance(ev, YourTurn) and liar.game_no == 1:
            pair.feed(who, liar.resign())
            return
        real(who, ev)

    pair.react = react  # type: ignore[method-assign]
    pair.run()
    assert lied, "no ship sank before the end"
    g = pair.ref.match.games[0]
    assert g.phase is Phase.OVER and g.outcome is not None
    assert g.outcome.reason.value == "resigned" and pair.ref.match.winner == 0
    relayed = [x for x in _revealed(pair, 0) if x.seat == 1]
    assert len(relayed) == 1 and relayed[0].fault  # the referee says what it shows
    lies = [e for e in pair.events[(0, 0)] if isinstance(e, LieDetected)]
    assert [e.seat for e in lies] == [1] and "courtesy reveal" in lies[0].detail
    assert not [e for e in _shown(pair, 0) if e.seat == 1]
    # The lie changes nothing the record holds: seat 0 co-signs it, and it verifies.
    honest = pair.seats[(0, 0)]
    assert honest.disputed is None and set(pair.cosigns) == {0, 1}
    ops = [e.get("in") for e in pair.record["games"][0]["transcript"]]
    assert "reveal" not in ops


def test_a_courtesy_reveal_is_taken_once_and_only_for_the_last_game() -> None:
    rules = PRESETS["classic"]
    pair = Resigning(rules, "blind", quitter=1)
    pair.run()
    seat1 = pair.seats[(1, 0)]
    assert seat1.committed is not None
    msg = m.RevealMsg(pair.ref.match_id, 1, seat1.committed.reveal().to_dict())
    with pytest.raises(ProtocolError) as e:
        pair.ref.receive(1, msg, pair.now)
    assert e.value.code == ErrorCode.WRONG_PHASE  # revealed already
    pair.ref.shed()  # the server lets go of a recorded match's games
    with pytest.raises(ProtocolError) as e:
        pair.ref.receive(1, msg, pair.now)
    assert e.value.code == ErrorCode.GAME_OVER
