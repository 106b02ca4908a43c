"""Two pure peers (``protocol/peer.py``) wired in memory: whole peer matches with no sockets.

Each direction delivers in order (a TCP stream), but the two directions, and each player's
choices, interleave at random, so messages cross as they do between real peers: commits and
coins cross, a resignation waits for its turn. Every preset and 002 variant plays to one record
that both peers co-sign and that verifies; a resignation (in setup, on the resigner's turn, or
asked for out of turn) loses the game for the resigner, on both sides alike; and the ways 6.7
stops a match (a false coin, a refused move, a message out of turn) stop it."""

from __future__ import annotations

import io
import random
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import peer_match
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from seabattle.bots.strategies import make_strategy
from seabattle.cli.human import ConsolePlayer
from seabattle.cli.tui import TerminalUI
from seabattle.client.peer import BotPlayer, Move
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import EndReason, Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.peer import TRAVELS, Peer, PeerCheated, RecordSigned
from seabattle.protocol.rules import PRESETS, RuleSet, rules_from_dict
from seabattle.protocol.seat import Out
from seabattle.protocol.seat_events import (
    GameEnded,
    GameStarted,
    LieDetected,
    MatchEnded,
    MatchEvent,
    YourTurn,
)
from seabattle.protocol.verify import verify_record

#: 002's variants on top of the presets.
VARIANTS: dict[str, dict[str, Any]] = {
    "salvo": {"preset": "classic", "shots": "salvo-afloat"},
    "salvo-totals": {"preset": "classic", "shots": "salvo-fixed", "salvo_report": "total"},
    "radar": {"preset": "classic", "radar": True},
    "silent-wasted": {"preset": "classic", "sunk": "silent", "repeat": "wasted"},
    "hit-again": {"preset": "classic-8x8", "hit_again": True},
    "best-of-3": {"preset": "russian", "match": {"kind": "best-of", "games": 3}},
    "points-lot": {
        "preset": "classic-8x8",
        "first_player": "lot",
        "match": {"kind": "victory-points", "games": 3},
    },
    "loser-fleet": {"preset": "russian", "match": {"kind": "fleet", "games": 2}},
    "team": {"preset": "classic", "team_size": 2},
}
RULES = {name: rules for name, rules in PRESETS.items()} | {
    name: rules_from_dict(d) for name, d in VARIANTS.items()
}

#: When a seat resigns: ``("setup", game)`` before placing, ``("turn", game, k)`` on its k-th
#: turn (from 1), ``("early", game, k)`` right after its k-th move, while the shot is answered,
#: ``("after", game)`` on its first turn after the other seat asked to resign out of turn.
Plan = tuple[Any, ...]


def _pub(k: Ed25519PrivateKey) -> bytes:
    return k.public_key().public_bytes_raw()


class PeerPair:
    """A host and a joiner, each a :class:`Peer`, and a random player for each: it places a
    random fleet and calls free cells (now and then the radar, or a cell already fired at, which
    its own game refuses), and may resign as its ``plans`` say."""

    def __init__(self, rules: RuleSet, *, seed: int = 0, plans: dict[int, Plan] | None = None):
        self.rng = random.Random(seed)
        self.rules = rules
        self.keys = [Ed25519PrivateKey.from_private_bytes(self.rng.randbytes(32)) for _ in (0, 1)]
        self.plans = plans or {}
        host = Peer.hosting(rules, self.keys[0], _pub(self.keys[1]), entropy=self.rng.randbytes)
        self.peers: list[Peer] = [host, host]  # the joiner's is made from the host's start
        self.wires: tuple[deque[m.Message], deque[m.Message]] = (deque(), deque())  # to seat s
        self.acts: tuple[deque[Callable[[], None]], deque[Callable[[], None]]] = (deque(), deque())
        self.events: dict[int, list[MatchEvent]] = {0: [], 1: []}
        self.turns = [0, 0]
        self.waiting = [False, False]  # a resignation asked for out of turn
        self.refused: list[ProtocolError] = []
        self.errors: list[m.Error] = []

    # -- wiring --------------------------------------------------------------------------------

    def start(self) -> None:
        out = self.peers[0].start()
        start = out.sends[0]
        assert isinstance(start, m.Start) and start.mode == "peer" and start.seat == 1
        joiner = Peer.joining(start, self.keys[1], _pub(self.keys[0]), entropy=self.rng.randbytes)
        self.peers[1] = joiner
        self.take(0, Out(out.sends[1:], out.events))
        self.take(1, joiner.start())

    def take(self, seat: int, out: Out) -> None:
        """What ``seat``'s peer gave: its sends go on the wire, its events to its player."""
        for msg in out.sends:
            assert isinstance(msg, TRAVELS), msg
            if isinstance(msg, m.Error):
                self.errors.append(msg)
            self.wires[1 - seat].append(msg)
        for ev in out.events:
            self.events[seat].append(ev)
            self.react(seat, ev)

    def react(self, seat: int, ev: MatchEvent) -> None:
        """The player's answer to ``ev`` is made later, at a random point (see :meth:`pump`)."""
        plan = self.plans.get(seat, ())
        if isinstance(ev, GameStarted):
            if plan[:2] == ("setup", ev.game):
                self.acts[seat].append(lambda: self.take(seat, self.peers[seat].resign()))
            else:
                self.acts[seat].append(lambda: self.place(seat))
        elif isinstance(ev, YourTurn):
            self.acts[seat].append(lambda: self.move(seat, ev))

    def place(self, seat: int) -> None:
        fleet = random_fleet(self.rules, self.rng)
        self.take(seat, self.peers[seat].place(fleet, self.rng.randbytes(32)))

    def move(self, seat: int, ev: YourTurn) -> None:
        peer = self.peers[seat]
        g = peer.game
        assert g is not None and g.number == ev.game and g.phase is Phase.FIRING, ev
        assert g.turn == seat
        self.turns[seat] += 1
        plan = self.plans.get(seat, ())
        now = plan[:2] == ("turn", ev.game) and plan[2] == self.turns[seat]
        if now or (plan == ("after", ev.game) and self.waiting[1 - seat]):
            self.take(seat, peer.resign())
            return
        board = g.boards[1 - seat]
        closed = set(board.fired) | set(board.crossed)
        free = [i for i in range(self.rules.cells) if i not in closed]
        cols = self.rules.cols
        while True:
            try:
                if ev.radar and self.rng.random() < 0.2:
                    out = peer.radar(Cell(*divmod(self.rng.randrange(self.rules.cells), cols)))
                elif board.fired and self.rng.random() < 0.05:
                    # A cell fired at already: the strict rules refuse it, "wasted" loses the turn.
                    again = [min(board.fired), *self.rng.sample(free, min(ev.count, len(free)) - 1)]
                    out = peer.fire([Cell(*divmod(i, cols)) for i in again])
                else:
                    cells = self.rng.sample(free, min(ev.count, len(free)))
                    out = peer.fire([Cell(*divmod(i, cols)) for i in cells])
            except ProtocolError as e:
                self.refused.append(e)
                continue
            break
        self.take(seat, out)
        if plan[:2] == ("early", ev.game) and plan[2] == self.turns[seat]:
            self.take(seat, peer.resign())  # waits for our next turn in this game
            self.waiting[seat] = True

    def pump(self, limit: int = 200_000) -> None:
        """Deliver and act, in a random interleaving, until nothing is left."""
        for _ in range(limit):
            ready: list[tuple[str, int]] = [("wire", s) for s in (0, 1) if self.wires[s]]
            ready += [("act", s) for s in (0, 1) if self.acts[s]]
            if not ready:
                return
            kind, s = self.rng.choice(ready)
            if kind == "act":
                self.acts[s].popleft()()
            else:
                self.take(s, self.peers[s].receive(self.wires[s].popleft()))
        raise AssertionError("the match did not end")

    def run(self) -> None:
        self.start()
        self.pump()

    # -- checks --------------------------------------------------------------------------------

    def check(self) -> dict[str, Any]:
        """Both peers co-signed one record, which verifies; no lie seen. The record."""
        host, joiner = self.peers
        assert host.done and joiner.done
        assert host.head == joiner.head
        assert host.signed == joiner.signed
        assert host.report is not None and host.report.ok, host.report.problems
        assert joiner.report is not None and joiner.report.ok
        signed = host.signed
        assert signed is not None and verify_record(signed).ok
        for seat, evs in self.events.items():
            assert not [e for e in evs if isinstance(e, LieDetected)], seat
            assert isinstance(evs[-1], RecordSigned)
            assert sum(isinstance(e, MatchEnded) for e in evs) == 1
            ends = [e for e in evs if isinstance(e, GameEnded)]
            assert len(ends) == len(signed["record"]["games"])
        assert not self.errors
        record: dict[str, Any] = signed["record"]
        assert record["referee"] is None
        assert [s["role"] for s in signed["sigs"]] == ["seat0", "seat1"]
        return record


@pytest.mark.parametrize("name", sorted(RULES))
def test_every_preset_plays_to_one_record_both_peers_cosign(name: str) -> None:
    pair = PeerPair(RULES[name], seed=len(name))
    pair.run()
    record = pair.check()
    host, joiner = pair.peers
    assert host.referee.match.to_dict() == joiner.referee.match.to_dict() == record["result"]
    assert record["result"]["over"]
    # Our own game refuses a cell fired at (under strict repeats) and a radar off the board.
    assert {e.code for e in pair.refused} <= {ErrorCode.ALREADY_FIRED, ErrorCode.OFF_BOARD}
    if RULES[name].repeat.value == "wasted":
        assert not any(e.code is ErrorCode.ALREADY_FIRED for e in pair.refused)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(RULES)))
def test_any_interleaving_gives_one_record(seed: int, name: str) -> None:
    pair = PeerPair(RULES[name], seed=seed)
    pair.run()
    pair.check()


def _resigned(record: dict[str, Any], game: int) -> dict[str, Any]:
    g = record["games"][game - 1]
    assert g["outcome"]["reason"] == EndReason.RESIGNED.value
    resigns = [e for e in g["transcript"] if e["in"] == "resign"]
    assert len(resigns) == 1 and g["transcript"][-1] == resigns[0]
    assert g["outcome"]["winner"] == 1 - resigns[0]["seat"]
    return g


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("seed", range(4))
def test_a_resignation_on_its_turn_loses_the_game_on_both_sides(seat: int, seed: int) -> None:
    pair = PeerPair(PRESETS["classic"], seed=seed, plans={seat: ("turn", 1, 3)})
    pair.run()
    record = pair.check()
    g = _resigned(record, 1)
    assert g["transcript"][-1] == {"in": "resign", "seat": seat}
    assert record["result"]["winner"] == 1 - seat
    for s, evs in pair.events.items():
        (end,) = [e for e in evs if isinstance(e, GameEnded)]
        assert end.won is (s != seat) and end.outcome["reason"] == "resigned"


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("seed", range(4))
def test_a_resignation_in_setup_goes_in_place_of_the_commit(seat: int, seed: int) -> None:
    rules = rules_from_dict({"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}})
    pair = PeerPair(rules, seed=seed, plans={seat: ("setup", 1)})
    pair.run()
    record = pair.check()
    g = _resigned(record, 1)
    # The setup messages in seat order: the other's commit is applied only if it comes first.
    ins = [e["in"] for e in g["transcript"]]
    assert ins == (["commit", "resign"] if seat == 1 else ["resign"])
    assert g["first"] is None  # no coin ran
    assert record["games"][1]["outcome"]["reason"] != "resigned"  # game 2 was played out


@pytest.mark.parametrize("seed", range(6))
def test_a_resignation_asked_for_out_of_turn_waits_for_the_next(seed: int) -> None:
    pair = PeerPair(PRESETS["classic-8x8"], seed=seed, plans={1: ("early", 1, 2)})
    pair.run()
    record = pair.check()
    g = _resigned(record, 1)
    assert g["transcript"][-1] == {"in": "resign", "seat": 1}
    # Seat 1 moved twice, then resigned on its third turn instead of a third move.
    moves = [e for e in g["transcript"] if e["in"] in ("fire", "radar") and e["seat"] == 1]
    assert len(moves) == 2
    assert not [e for e in pair.events[1] if isinstance(e, YourTurn)][2:]


def test_a_resignation_lapses_when_its_game_ends_first() -> None:
    """Seat 1 asks to resign while its shot is answered; seat 0 resigns on the turn between:
    game 1 is seat 0's resignation alone, and seat 1's lapsed with it (game 2 is played out)."""
    rules = rules_from_dict({"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}})
    pair = PeerPair(rules, seed=3, plans={1: ("early", 1, 1), 0: ("after", 1)})
    pair.run()
    record = pair.check()
    g = _resigned(record, 1)
    assert g["transcript"][-1] == {"in": "resign", "seat": 0}
    assert all(e["in"] != "resign" for g in record["games"][1:] for e in g["transcript"])
    assert pair.waiting[1]
    with pytest.raises(ProtocolError):
        pair.peers[0].resign()  # the match is over


# -- what stops a match ---------------------------------------------------------------------------


def _until(pair: PeerPair, done: Callable[[], bool]) -> None:
    for _ in range(100_000):
        if done():
            return
        ready = [("wire", s) for s in (0, 1) if pair.wires[s]]
        ready += [("act", s) for s in (0, 1) if pair.acts[s]]
        assert ready, "stuck"
        kind, s = pair.rng.choice(ready)
        if kind == "act":
            pair.acts[s].popleft()()
        else:
            pair.take(s, pair.peers[s].receive(pair.wires[s].popleft()))
    raise AssertionError("never")


def test_a_coin_nonce_that_does_not_open_its_hash_stops_the_match() -> None:
    pair = PeerPair(PRESETS["classic"], seed=3)

    def bad_nonce(msg: m.Message) -> m.Message:
        if isinstance(msg, m.Coin) and msg.nonce is not None:
            return m.Coin(msg.match, msg.game, None, bytes(32))
        return msg

    pair.start()
    pair.peers[0].bend = bad_nonce
    with pytest.raises(PeerCheated, match="nonce does not match"):
        pair.pump()
    joiner = pair.peers[1]
    assert joiner.stopped is not None
    with pytest.raises(PeerCheated):
        joiner.receive(m.Coin(joiner.match_id, 1, None, bytes(32)))


def test_a_coin_before_the_commit_stops_the_match() -> None:
    pair = PeerPair(PRESETS["classic"], seed=3)
    pair.start()
    joiner = pair.peers[1]
    with pytest.raises(PeerCheated, match="both commits come first"):
        joiner.receive(m.Coin(joiner.match_id, 1, bytes(32), None))


def test_a_false_proof_ends_the_game_and_both_still_cosign() -> None:
    pair = PeerPair(PRESETS["classic"], seed=5)

    def miss_everything(shot: Any, verdict: Any) -> Any:
        from seabattle.protocol.verdict import Verdict

        d = verdict.to_dict()
        for r in d["results"]:
            r["r"], r["open"]["occ"], r["sunk"] = "miss", False, None
        return Verdict.from_dict(d)

    pair.start()
    pair.peers[1].player.tamper = miss_everything
    pair.pump()
    host, joiner = pair.peers
    assert host.done and joiner.done and host.signed == joiner.signed
    assert host.report is not None and host.report.ok
    g = host.referee.match.games[0]
    assert g.outcome is not None and g.outcome.reason is EndReason.FALSE_PROOF
    assert g.outcome.winner == 0
    lies = [e for e in pair.events[0] if isinstance(e, LieDetected)]
    assert lies and lies[0].seat == 1


def test_a_move_the_other_refuses_is_answered_with_an_error_and_stops_the_mover() -> None:
    pair = PeerPair(PRESETS["classic"], seed=2)
    pair.start()
    _until(pair, lambda: all(p.game and p.game.phase is Phase.FIRING for p in pair.peers))
    mover = next(p for p in pair.peers if p.game and p.game.turn == p.seat)
    other = pair.peers[1 - mover.seat]

    def off_board(msg: m.Message) -> m.Message:
        # Bent after the mover's own game applied the honest shot: the two games now disagree.
        if isinstance(msg, m.Fire):
            return m.Fire(msg.match, msg.game, ("Z99",), msg.member, msg.seq)
        return msg

    mover.bend = off_board
    with pytest.raises(PeerCheated, match="refused our move 1: off_board"):
        pair.pump()
    assert [(e.code, e.ref) for e in pair.errors] == [(ErrorCode.OFF_BOARD, 1)]
    assert other.stopped is None and mover.stopped is not None
    g = other.game
    assert g is not None and g.phase is Phase.FIRING and g.turn == mover.seat  # nothing changed


def test_a_message_out_of_turn_stops_the_match() -> None:
    pair = PeerPair(PRESETS["classic"], seed=4)
    pair.start()
    _until(pair, lambda: all(p.game and p.game.phase is Phase.FIRING for p in pair.peers))
    peer = pair.peers[0]
    with pytest.raises(PeerCheated, match="answer with no shot"):
        peer.receive(m.Answer(peer.match_id, 1, {"n": 1}))
    with pytest.raises(PeerCheated):
        peer.receive(m.Resign(peer.match_id, 1))  # stopped: everything raises from here


def test_the_joiner_checks_the_start() -> None:
    keys = [Ed25519PrivateKey.from_private_bytes(bytes([i]) * 32) for i in (1, 2)]
    host = Peer.hosting(PRESETS["classic"], keys[0], _pub(keys[1]), entropy=random.randbytes)
    start = host.start().sends[0]
    assert isinstance(start, m.Start)
    Peer.joining(start, keys[1], _pub(keys[0]), entropy=random.randbytes)
    for bad in (
        m.Start(start.match, 0, start.rules, "peer", start.players),
        m.Start(start.match, 1, start.rules, "peer", start.players[::-1]),
    ):
        with pytest.raises(PeerCheated, match="other players or seats"):
            Peer.joining(bad, keys[1], _pub(keys[0]), entropy=random.randbytes)
    wrong_host = Ed25519PrivateKey.from_private_bytes(bytes([3]) * 32)
    with pytest.raises(PeerCheated):
        Peer.joining(start, keys[1], _pub(wrong_host), entropy=random.randbytes)


def _garbled_reveal(msg: m.Message) -> m.Message:
    if isinstance(msg, m.RevealMsg):
        return m.RevealMsg(msg.match, msg.game, {"fleet": "none of your business"})
    return msg


def test_a_reveal_that_does_not_parse_counts_as_none_on_both_sides() -> None:
    """The seat's own hook garbles its reveal: its game and the other's apply it alike."""
    pair = PeerPair(PRESETS["classic-8x8"], seed=8)
    pair.start()
    pair.peers[0].player.bend = _garbled_reveal
    pair.pump()
    host, joiner = pair.peers
    assert host.done and joiner.done and host.signed == joiner.signed
    assert host.report is not None and host.report.ok, host.report.problems
    g = host.referee.match.games[0]
    assert g.outcome is not None and g.outcome.reason is EndReason.NO_REVEAL
    assert g.outcome.winner == 1 and g.reveals[0] is None


def test_a_message_bent_on_the_way_leaves_the_match_disputed() -> None:
    """Bent after our own game applied the honest reveal: the transcripts differ, each peer
    co-signs its own head, and neither holds a valid record."""
    pair = PeerPair(PRESETS["classic-8x8"], seed=8)
    pair.start()
    pair.peers[0].bend = _garbled_reveal
    pair.pump()
    host, joiner = pair.peers
    assert host.done and joiner.done and host.head != joiner.head
    for peer in (host, joiner):
        assert peer.report is not None and not peer.report.ok
        assert peer.report.reason.startswith("disputed")


# -- over TCP -------------------------------------------------------------------------------------


class Resigner(BotPlayer):
    """A bot that resigns game ``game`` on its ``turn``-th turn there."""

    def __init__(self, game: int, turn: int, rng: random.Random) -> None:
        super().__init__(make_strategy("random"), rng)
        self.at, self.turns = (game, turn), 0

    async def move(self, game: Game, seat: int, view: Any) -> Move:
        self.turns += 1
        if (game.number, self.turns) == self.at:
            return "resign", []
        return await super().move(game, seat, view)


@pytest.mark.parametrize("resigner", [0, 1], ids=["host", "joiner"])
async def test_a_resignation_over_tcp_ends_in_one_record_saying_resigned(resigner: int) -> None:
    rules = rules_from_dict({"preset": "classic-8x8", "match": {"kind": "best-of", "games": 3}})
    players: list[BotPlayer] = [BotPlayer(make_strategy("hunt"), random.Random(1)) for _ in "ab"]
    players[resigner] = Resigner(1, 2, random.Random(2))
    with trio.fail_after(30):
        h, j = await peer_match(rules, players[0], players[1], name="joiner")
    assert h.report.ok and j.report.ok and h.signed == j.signed
    g = _resigned(h.signed["record"], 1)
    assert g["transcript"][-1] == {"in": "resign", "seat": resigner}
    assert h.match.games[0].outcome is not None
    assert h.match.games[0].outcome.winner == 1 - resigner
    assert len(h.signed["record"]["games"]) >= 2  # the match went on after it


@pytest.mark.parametrize("human_hosts", [True, False], ids=["host", "join"])
async def test_a_person_at_the_terminal_resigns_a_peer_game(human_hosts: bool) -> None:
    """``resign`` typed at the shot prompt gives the game up (it was refused as not a cell)."""
    typed = iter(["resign"])

    async def person(prompt: str) -> str | None:
        return "random" if prompt.startswith("place") else next(typed, "A1")

    out = io.StringIO()
    human = ConsolePlayer(ui=TerminalUI(Console(file=out, width=100), person))
    bot = BotPlayer(make_strategy("random"), random.Random(4))
    hosting, joining = (human, bot) if human_hosts else (bot, human)
    with trio.fail_after(15):
        h, j = await peer_match(PRESETS["classic-8x8"], hosting, joining, name="joiner")
    mine = h if human_hosts else j
    assert mine.report.ok and h.signed == j.signed
    g = _resigned(mine.signed["record"], 1)
    assert g["outcome"]["winner"] == 1 - mine.seat and mine.won is False
    text = out.getvalue()
    assert "or resign" in text and "not a cell" not in text
    assert "you resigned" in text
