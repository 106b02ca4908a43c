"""Rule sets: the presets are the seed texts; rules that cannot work are refused with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.rules import (
    PRESETS,
    BadRules,
    FirstPlayer,
    MatchKind,
    RepeatShot,
    RuleSet,
    SalvoReport,
    ShotMode,
    SunkReport,
    preset,
    rules_from_dict,
)


def lengths(r: RuleSet) -> list[int]:
    return [s.length for s in r.fleet]


# -- the presets reproduce the seeds ---------------------------------------------------------------


def test_classic_is_the_002_standard_game() -> None:
    r = preset("classic")
    assert (r.rows, r.cols) == (10, 10)
    assert [(s.name, s.length) for s in r.fleet] == [
        ("Carrier", 5),
        ("Battleship", 4),
        ("Cruiser", 3),
        ("Submarine", 3),
        ("Destroyer", 2),
    ]
    assert r.fleet_cells == 17
    assert r.touching  # "Ships may touch side to side or end to end in the standard game"
    assert not r.hit_again  # "A hit does not grant another shot under the standard turn sequence"
    assert r.sunk is SunkReport.NAMED  # "identifies it by name"
    assert r.repeat is RepeatShot.REFUSED  # friendly play: choose a new coordinate
    assert r.shots is ShotMode.SINGLE
    assert r.first_player is FirstPlayer.ALTERNATE  # "alternate the starting player"
    assert not r.crossed_out and not r.radar


def test_russian_is_000() -> None:
    r = preset("russian")
    assert (r.rows, r.cols) == (10, 10)
    assert sorted(lengths(r), reverse=True) == [4, 3, 3, 2, 2, 2, 1, 1, 1, 1]
    assert r.fleet_cells == 20
    assert not r.touching  # "not along a side, not at a corner"
    assert r.hit_again  # "A hit or a sinking shoots again"
    assert r.crossed_out
    assert r.sunk is SunkReport.SHOWN  # "A sunk ship is shown, all of it"
    assert r.repeat is RepeatShot.REFUSED  # "refused, and you still have your shot"
    assert r.first_player is FirstPlayer.LOSER  # "whoever lost the last game fires first"


def test_six_ship_is_003_with_the_ship_table_not_the_slip() -> None:
    r = preset("six-ship")
    assert lengths(r) == [5, 4, 3, 3, 2, 1]
    assert r.fleet[-1].name == "Patrol Boat"
    assert r.fleet_cells == 18  # the text says 17; its own table adds up to 18
    assert not r.touching  # "must not touch each other, not even diagonally"
    assert not r.hit_again  # the shoot-again house rule is off until switched on
    assert r.sunk is SunkReport.NAMED  # "name the ship type"


def test_sea_battle_is_004() -> None:
    r = preset("sea-battle")
    assert lengths(r) == [5, 4, 3, 3, 2]
    assert r.ordered_placement  # "The ships go down in one order — 5, 4, 3, 3, then 2"
    assert r.touching  # "Ships may touch"
    assert not r.hit_again  # "the turn passes after every shot, whatever it found"
    assert r.sunk is SunkReport.SHOWN  # "only then is it shown to you whole"
    assert (r.clocks.setup, r.clocks.shot) == (120, 30)  # two minutes, thirty seconds


def test_classic_8x8_is_the_002_beginner_game() -> None:
    r = preset("classic-8x8")
    assert (r.rows, r.cols) == (8, 8)
    assert lengths(r) == [4, 3, 3, 2]


def test_003_house_rule_shoots_again_and_is_shown() -> None:
    r = preset("six-ship").replace(hit_again=True, hit_again_shown=True)
    assert r.hit_again and r.hit_again_shown
    assert r.name == "six-ship+custom"
    with pytest.raises(BadRules, match="hit_again_shown"):
        preset("six-ship").replace(hit_again_shown=True)


def test_003_house_rule_is_one_switch_with_its_badge() -> None:
    """7.3 decision 18: switching the house rule on in six-ship shows the badge (003: "a badge
    next to the turn indicator shows that the house rule applies"), and off removes it."""
    on = rules_from_dict({"preset": "six-ship", "hit_again": True})
    assert on.hit_again and on.hit_again_shown and on.name == "six-ship+custom"
    assert preset("six-ship").replace(hit_again=True) == on
    off = rules_from_dict({"hit_again": False}, base=on)
    assert not off.hit_again and not off.hit_again_shown  # not refused: the badge went with it
    # Given on its own, the badge is kept as given; the full form always gives both.
    quiet = rules_from_dict({"preset": "six-ship", "hit_again": True, "hit_again_shown": False})
    assert quiet.hit_again and not quiet.hit_again_shown
    assert rules_from_dict(quiet.to_dict()) == quiet
    # No other preset couples them: 000's shooting again is its rule, 002's variant has no badge.
    assert not rules_from_dict({"preset": "classic", "hit_again": True}).hit_again_shown
    assert not rules_from_dict({"preset": "russian", "hit_again": True}).hit_again_shown
    # A wrong type is refused as it stands, not coupled into another error.
    with pytest.raises(BadRules, match="hit_again has the wrong type"):
        rules_from_dict({"preset": "six-ship", "hit_again": 1})


def test_a_rule_set_descends_from_the_preset_its_name_begins_with() -> None:
    assert preset("sea-battle").lineage == "sea-battle"
    assert rules_from_dict({"preset": "sea-battle", "rows": 8}).lineage == "sea-battle"
    assert rules_from_dict({"preset": "classic-8x8", "radar": True}).lineage == "classic-8x8"
    assert rules_from_dict({"preset": "classic", "name": "sea battle"}).lineage is None
    assert RuleSet(fleet=preset("classic").fleet).lineage is None  # "custom"
    # 7.3 decision 19: only 004's keeps a custody reveal from the other player.
    assert [n for n, r in PRESETS.items() if not r.reveals_cross] == ["sea-battle"]


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(BadRules, match="classic, russian"):
        preset("salvo")


# -- refusals with precise reasons -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"rows": 3, "cols": 3}, "Carrier of length 5 cannot fit a 3x3 grid"),
        ({"rows": 5, "cols": 5, "touching": False}, "cannot be placed on a 5x5 grid without"),
        ({"crossed_out": True}, "crossed-out cells need a no-touching fleet"),
        ({"match": {"kind": "best-of", "games": 4}}, "best of 4: best-of needs an odd number"),
        ({"shots_per_turn": 2}, "unknown rule option 'shots_per_turn'"),
        ({"shots": "volley"}, "shots='volley': expected one of single, salvo-afloat"),
        ({"hit_again": 1}, "hit_again has the wrong type"),
        ({"rows": True}, "rows must be an integer, not a boolean"),
        ({"shots": "salvo-fixed", "hit_again": True}, "hit_again applies to single shots"),
        ({"salvo_report": "total"}, "salvo_report=total needs a salvo shot mode"),
        ({"shots": "salvo-afloat", "sunk": "silent"}, "needs sinkings announced"),
        ({"shots": "salvo-fixed", "salvo_size": 101}, "salvo of 101 on a grid of 100 cells"),
        ({"radar": True, "radar_size": 11}, "radar area 11x11 does not fit"),
        ({"team_size": 0}, "team_size must be 1..8"),
        ({"match": {"kind": "best-of", "sunk_bonus": 2}}, "sunk_bonus applies to fleet scoring"),
        ({"match": {"kind": "ladder"}}, "match.kind='ladder' is unknown"),
        ({"clocks": {"shot": 0}}, "shot clock of 0 s"),
        ({"clocks": {"move": 5}}, "clocks is a map of"),
        ({"fleet": []}, "the fleet is empty"),
        ({"fleet": [["Boat", 1], ["Boat", 1]]}, "ship name 'Boat' is used twice"),
        ({"fleet": [["Boat", "1"]]}, "every ship is [name, length]"),
        ({"rows": 27}, "rows and columns must be 2..26"),
    ],
)
def test_rules_that_cannot_work_are_refused_with_their_reason(
    changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(BadRules) as info:
        rules_from_dict({"preset": "classic", **changes})
    assert info.value.code is ErrorCode.BAD_RULES
    assert reason in info.value.detail


def test_rules_must_be_a_map() -> None:
    with pytest.raises(BadRules, match="rules must be a map"):
        rules_from_dict(["classic"])


# -- the wire form ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_survives_its_wire_form(name: str) -> None:
    r = PRESETS[name]
    back = rules_from_dict(r.to_dict())
    assert back == r
    assert back.digest() == r.digest()
    assert rules_from_dict({"preset": name}) == r
    canonical_pack(r.to_dict())  # the map has a canonical form: it can be hashed and signed


def test_an_override_changes_that_option_only_and_the_digest() -> None:
    base = preset("classic")
    r = rules_from_dict({"preset": "classic", "hit_again": True, "clocks": {"shot": 20}})
    assert r.hit_again and r.clocks.shot == 20
    assert r.name == "classic+custom"
    changed = {k for k in base.to_dict() if base.to_dict()[k] != r.to_dict()[k]}
    assert changed == {"name", "hit_again", "clocks"}
    assert r.clocks.setup == base.clocks.setup
    assert r.digest() != base.digest()
    # Options left out come from the named base, not from classic.
    assert rules_from_dict({"preset": "russian", "radar": True}).crossed_out


def test_a_changed_preset_is_named_custom_once() -> None:
    r = preset("classic").replace(hit_again=True).replace(radar=True)
    assert r.name == "classic+custom"


def test_a_rename_alone_changes_the_digest() -> None:
    # The digest binds commitments to the rules played, name included: no silent substitution.
    assert preset("classic").replace(name="other").digest() != preset("classic").digest()


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "rows": st.sampled_from([2, 5, 8, 10, 12]),
    "cols": st.sampled_from([2, 5, 8, 10, 12]),
    "touching": st.booleans(),
    "shots": st.sampled_from([m.value for m in ShotMode]),
    "salvo_size": st.integers(0, 6),
    "salvo_report": st.sampled_from([m.value for m in SalvoReport]),
    "hit_again": st.booleans(),
    "hit_again_shown": st.booleans(),
    "sunk": st.sampled_from([m.value for m in SunkReport]),
    "repeat": st.sampled_from([m.value for m in RepeatShot]),
    "crossed_out": st.booleans(),
    "radar": st.booleans(),
    "radar_size": st.integers(0, 4),
    "team_size": st.integers(0, 3),
    "first_player": st.sampled_from([m.value for m in FirstPlayer]),
    "match": st.fixed_dictionaries(
        {},
        optional={
            "kind": st.sampled_from([m.value for m in MatchKind]),
            "games": st.integers(0, 6),
            "sunk_bonus": st.integers(0, 2),
        },
    ),
}


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(PRESETS)), overrides=st.fixed_dictionaries({}, optional=VALUES))
def test_any_option_mix_is_refused_with_bad_rules_or_plays_exactly_as_asked(
    name: str, overrides: dict[str, Any]
) -> None:
    try:
        r = rules_from_dict({"preset": name, **overrides})
    except BadRules as e:
        assert e.detail  # a refusal always says why
        return
    wire = r.to_dict()
    for key, value in overrides.items():
        if key == "match":
            assert value.items() <= wire["match"].items()
        else:
            assert wire[key] == value
    assert rules_from_dict(wire) == r
    assert r.crossed_out <= (not r.touching)
