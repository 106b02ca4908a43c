"""What a referee keeps compact still reads back as it was given.

A referee holds thousands of games, so :class:`Commitment` keeps its leaves as one byte string and
:class:`Game` stores its transcript compactly and rebuilds ``shots`` from it. Callers rely on
reading back exactly what went in: the commitment's wire form and root, every transcript entry
(equal and with the same value types, since records are signed over their bytes), and the shots.
"""

from __future__ import annotations

import copy
import pickle
import random
from typing import Any

import pytest
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import FrameDecoder, encode_frame
from seabattle.protocol.commit import Commitment, Committed, root_of
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.grid import Cell
from seabattle.protocol.inputs import ShotCalled, VerdictGiven
from seabattle.protocol.rules import PRESETS, RepeatShot, RuleSet, SalvoReport, ShotMode, preset
from seabattle.protocol.verdict import Defender, Shot, Verdict

MID = bytes(range(16))
CLASSIC = preset("classic")
RULES: dict[str, RuleSet] = {
    **PRESETS,
    "salvo-total": CLASSIC.replace(shots=ShotMode.SALVO_AFLOAT, salvo_report=SalvoReport.TOTAL),
    "salvo-total-shown": preset("russian").replace(
        hit_again=False, shots=ShotMode.SALVO_FIXED, salvo_size=3, salvo_report=SalvoReport.TOTAL
    ),
    "salvo-fixed": CLASSIC.replace(shots=ShotMode.SALVO_FIXED, salvo_size=5),
    "radar": CLASSIC.replace(radar=True),
    "teams": CLASSIC.replace(team_size=2),
    "strict-repeat": CLASSIC.replace(repeat=RepeatShot.WASTED),
}


def over_the_wire(msg: m.Message) -> Any:
    """``msg`` encoded as a client sends it and decoded as the server reads it."""
    decoder = FrameDecoder()
    decoder.feed(encode_frame(m.encode(msg)))
    frame = decoder.next_frame()
    assert frame is not None
    return m.decode(frame)


def test_a_commitment_from_its_wire_form_gives_back_the_same_wire_form_and_root() -> None:
    c = Committed(CLASSIC, random_fleet(CLASSIC, random.Random(1)), bytes(32), MID, 1, 0)
    msg = over_the_wire(m.Commit(MID, 1, c.commitment.to_dict(), bytes(64)))
    got = Commitment.from_dict(msg.commitment)
    assert got.to_dict() == msg.commitment == c.commitment.to_dict()
    assert got.root(c.ctx) == c.root == root_of(c.ctx, got.cells, got.ships)
    assert got == c.commitment and hash(got) == hash(c.commitment)
    assert got == Commitment(tuple(msg.commitment["cells"]), tuple(msg.commitment["ships"]))
    assert got.cells[7] == msg.commitment["cells"][7] and len(got.cells) == CLASSIC.cells
    assert got.cell_leaf(7) == got.cells[7] and got.ship_leaf(2) == got.ships[2]
    assert pickle.loads(pickle.dumps(got)) == got == copy.deepcopy(got)
    with pytest.raises(AttributeError):
        got.cells = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    "cells",
    [
        [b"x" * 31] + [b"y" * 32] * 99,  # a short leaf
        ["not bytes"] + [b"y" * 32] * 99,
        [b"y" * 32] * 99,  # one leaf missing
    ],
)
def test_a_malformed_commitment_is_still_refused(cells: list[Any]) -> None:
    c = Commitment.from_dict({"cells": cells, "ships": [b"z" * 32] * len(CLASSIC.fleet)})
    assert c.to_dict()["cells"] == cells
    with pytest.raises(RemoteProtocolError) as info:
        Game(CLASSIC, MID).commit(0, c)
    assert info.value.code is ErrorCode.BAD_COMMITMENT


def play(rules: RuleSet, seed: int, wire: bool) -> None:
    """An honest game whose every transcript entry and shot is checked against what went in."""
    rng = random.Random(seed)
    g = Game(rules, MID, 1)
    logged: list[tuple[dict[str, Any], bytes]] = []
    shots: list[tuple[Shot, Verdict]] = []

    def log() -> None:
        entry = g.transcript[-1]
        logged.append((copy.deepcopy(entry), canonical_pack(entry)))

    ds = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), MID, 1, seat)
        ds.append(Defender(c))
        commitment = c.commitment
        if wire:
            sent = over_the_wire(m.Commit(MID, 1, c.commitment.to_dict(), bytes(64)))
            commitment = Commitment.from_dict(sent.commitment)
        g.commit(seat, commitment)
        log()
    g.set_first(rng.randrange(2))
    log()
    while g.phase is Phase.FIRING:
        s = g.turn
        assert s is not None
        b, cols = g.boards[1 - s], rules.cols
        if rules.radar and not b.radar_used and rng.random() < 0.2:
            events = g.radar(s, Cell(rng.randrange(rules.rows - 1), 0), g.caller(s))
        else:
            open_ = [i for i in range(rules.cells) if i not in b.fired and i not in b.crossed]
            cells = [Cell(i // cols, i % cols) for i in rng.sample(open_, g.shot_count(s))]
            if rules.repeat is RepeatShot.WASTED and b.fired and rng.random() < 0.1:
                cells = [Cell(*divmod(next(iter(b.fired)), cols))]  # loses the turn
            events = g.fire(s, cells, g.caller(s))
        log()
        if not isinstance(events[0], ShotCalled):
            continue
        shot = events[0].shot
        verdict = ds[1 - s].answer(shot)
        if wire:
            sent = over_the_wire(m.Answer(MID, 1, verdict.to_dict())).verdict
            events = g.answer(1 - s, Verdict.from_dict(sent), wire=sent)
        else:
            events = g.answer(1 - s, verdict)
        log()
        shots += [(e.shot, e.verdict) for e in events if isinstance(e, VerdictGiven)]
    for seat in (0, 1):
        g.reveal(seat, ds[seat].committed.reveal())
        log()
    assert g.outcome is not None and g.outcome.reason.value == "fleet_sunk"
    assert len(g.transcript) == len(logged)
    for j, (entry, (want, packed)) in enumerate(zip(g.transcript, logged, strict=True)):
        assert entry == want == g.transcript[j], j
        assert canonical_pack(entry) == packed, j
    assert (
        list(g.transcript) == [e for e, _ in logged]
        and g.transcript[-3:] == list(g.transcript)[-3:]
    )
    assert g.shots == shots and g.view()["shots"] == len(shots)


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("wire", [True, False], ids=["blind", "custody"])
def test_a_game_reads_back_every_entry_and_shot_as_it_was_logged(name: str, wire: bool) -> None:
    for seed in range(3):
        play(RULES[name], seed, wire)
