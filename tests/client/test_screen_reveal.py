"""The game screen at the end of a game: the opponent's fleet, revealed after the game ended (a
resignation, say), drawn on their board; in-process, on the stand-in app of test_screen_keys."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from seabattle.client.events import GameEnded, Info
from seabattle.protocol import messages as m
from seabattle.protocol.commit import Reveal
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import rules_from_dict
from test_screen_keys import FakeApp

screen = pytest.importorskip("seabattle.cli.screen")
human = pytest.importorskip("seabattle.cli.human")
view = pytest.importorskip("seabattle.cli.screen_view")

RULES = rules_from_dict(
    {"preset": "classic", "rows": 5, "cols": 5, "fleet": [["Boat", 2], ["Raft", 1]]}
)


def test_a_fleet_revealed_after_the_end_is_drawn_on_their_board() -> None:
    app = FakeApp()
    ui = screen.ScreenUI(app)
    match = SimpleNamespace(
        seat=0,
        rules=RULES,
        mirror=None,
        game_no=1,
        players=("a" * 64, "b" * 64),
        names=("alice", "bob"),
        ratings=(1510, 1490),
        id=bytes(16),
        mode="blind",
        clock=None,
    )
    refereed = human._Refereed(ui, match)
    assert refereed.name_seats() == ("alice (1510)", "bob (1490)")
    ui.show_rules(RULES)
    refereed.on_event(GameEnded(1, {"winner": 1, "reason": "resigned", "detail": ""}, False))
    before = view.draw(ui)
    assert "target" in before.right.plain and "B A" not in before.right.plain
    fleet = Fleet.of(("D1", "down"), ("C1", "across"))  # their Boat D1-D2, their Raft C1
    reveal = Reveal(fleet, bytes(32)).to_dict()
    refereed.on_event(Info(m.Revealed(bytes(16), 1, 1, reveal, None)))
    after = view.draw(ui)
    assert "their fleet" in after.right.plain
    row1 = next(x for x in after.right.plain.splitlines() if x.strip().startswith("1 "))
    assert row1.split()[1:] == ["~", "~", "B", "A", "~"]
    assert "bob (1490)" in after.right_info.plain and "alice (1510)" in after.left_info.plain
    assert any("their fleet is revealed" in str(x) for x in app.log)
    # One the referee found at fault is not the fleet played against: not drawn.
    ui2 = screen.ScreenUI(FakeApp())
    other = human._Refereed(ui2, match)
    ui2.show_rules(RULES)
    other.on_event(GameEnded(1, {"winner": 1, "reason": "resigned", "detail": ""}, False))
    other.on_event(Info(m.Revealed(bytes(16), 1, 1, reveal, "bad reveal")))
    assert ui2.their_fleet is None
