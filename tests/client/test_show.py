"""``seabattle show``: a real signed record replayed move by move, in the terminal and as one
self-contained HTML page that headless Chromium loads and steps through.

The record is the spec's vector (spec/vectors/records.json): a whole game of classic-8x8, signed
by the referee and co-signed by both seats; its first tampered variant answers a hit with a
"miss" whose opening says otherwise, re-signed by the referee.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from chromium import Browser
from click.testing import CliRunner
from helpers import from_json
from seabattle.cli.main import main
from seabattle.cli.render import ship_letter
from seabattle.cli.show import replay_record
from seabattle.protocol.record import dump_record

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


VECTOR = from_json(json.loads((VECTORS / "records.json").read_text()))
SIGNED: dict[str, Any] = VECTOR["signed"]
SHOTS = VECTOR["expected"]["games"][0]["shots"]


def _lying() -> dict[str, Any]:
    """The vector whose seat 1 answers a hit with a false "miss" (the first tampered one)."""
    v = VECTOR["tampered"][0]
    record = copy.deepcopy(SIGNED["record"])
    for op in v["patch"]:
        assert op["op"] == "replace"
        *path, last = op["path"]
        at = record
        for p in path:
            at = at[p]
        at[last] = op["value"]
    return {"record": record, "sigs": v["sigs"]}


def _file(tmp_path: Path, signed: dict[str, Any], name: str = "match.sbr") -> Path:
    path = tmp_path / name
    path.write_bytes(dump_record(signed))
    return path


def _show(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["show", *args], terminal_width=160)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_show_replays_every_shot_with_its_proof_and_both_fleets(tmp_path: Path) -> None:
    code, out = _show(str(_file(tmp_path, SIGNED)))
    assert code == 0
    assert "the record verifies" in out
    assert "signatures: referee ok, seat0 ok, seat1 ok" in out
    shots = [line for line in out.splitlines() if re.match(r"\s*\d+\. seat \d fires ", line)]
    assert len(shots) == SHOTS
    assert all(line.rstrip().endswith("proof verified") for line in shots)
    assert "reveals its fleet" in out and "game over: seat 0 wins (fleet_sunk)" in out
    # Both fleets drawn before the first shot: every ship cell of both seats, as revealed.
    fleets = out.split("the fleets as revealed", 1)[1].split(" 1. ", 1)[0]
    ships = SIGNED["record"]["rules"]["fleet"]
    # Each ship its own letter, as on the game's grids: ships that touch read as two.
    rows = [line for line in fleets.splitlines() if re.match(r"\s*\d+ ", line)]
    for k, (_, length) in enumerate(ships):
        letter = ship_letter(k)
        assert sum(re.findall(r"(?<= )[A-Z](?= |$)", r).count(letter) for r in rows) == 2 * length


def test_show_names_the_false_proof_and_exits_1(tmp_path: Path) -> None:
    code, out = _show(str(_file(tmp_path, _lying())))
    assert code == 1
    assert "does not verify: transcript_invalid" in out
    lie = next(line for line in out.splitlines() if "answers shot 2" in line)
    assert "FALSE" in lie and "false_proof" in lie
    assert "the replay stopped at entry 8" in out


def test_show_refuses_what_is_not_a_record_in_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sbr"
    junk.write_bytes(b"\xc1 not msgpack")
    for path, says in ((junk, "damaged"), (tmp_path / "missing.sbr", "No such file")):
        code, out = _show(str(path))
        assert code == 1
        assert out.count("\n") == 1 and says in out and "Traceback" not in out


def test_the_json_replay_has_the_boards_after_every_step(tmp_path: Path) -> None:
    code, out = _show(str(_file(tmp_path, SIGNED)), "--json")
    assert code == 0
    game = json.loads(out)["games"][0]
    final = game["steps"][-1]["boards"]
    # The last boards are the game's own: every ship cell of the loser's fleet hit.
    loser = 1
    hit = {i for i, r in final[loser]["fired"] if r != "miss"}
    assert hit == {i for i, o in enumerate(game["fleets"][loser]) if o}


# -- the HTML page in headless Chromium ------------------------------------------------------------


def _page(tmp_path: Path, signed: dict[str, Any]) -> Path:
    out = tmp_path / "match.html"
    code, said = _show(str(_file(tmp_path, signed)), "--html", str(out))
    assert said.startswith("wrote ") and code == (0 if signed is SIGNED else 1)
    return out


def test_the_page_is_one_self_contained_file(tmp_path: Path) -> None:
    page = _page(tmp_path, SIGNED).read_text()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_the_page_steps_through_the_record_in_chromium(tmp_path: Path, browser: Browser) -> None:
    replay = replay_record(SIGNED).games[0]
    browser.open(_page(tmp_path, SIGNED).as_uri())
    frames = browser.wait("document.body.dataset.ready && +document.body.dataset.frames")
    assert frames == len(replay.steps) + 1  # the fleets, then every step
    # Nothing was fetched: the page is all there is.
    assert browser.eval("performance.getEntriesByType('resource').length") == 0

    def board(seat: int, sel: str) -> int:
        n: int = browser.eval(f"document.querySelectorAll('#board{seat} td{sel}').length")
        return n

    fleet_cells = sum(n for _, n in SIGNED["record"]["rules"]["fleet"])
    assert board(0, ".ship") == board(1, ".ship") == fleet_cells
    assert board(0, ".miss") + board(0, ".hit") + board(1, ".sunk") == 0
    # The first shot: seat 0 fires at seat 1's grid; the cell is outlined and its proof ticked.
    browser.key("ArrowRight")
    browser.key("ArrowRight")
    browser.key("ArrowRight")
    assert browser.wait("document.body.dataset.frame === '3'")
    first = replay.steps[2]
    assert first.text.startswith("seat 0 fires") and first.proof == "verified"
    assert board(1, ".last.proved") == 1 and board(0, ".last") == 0
    assert "proof verified" in browser.eval("document.getElementById('now').textContent")
    # The button goes on, the slider's end is the game's end.
    browser.eval("document.getElementById('next').click()")
    assert browser.wait("document.body.dataset.frame === '4'")
    browser.key("End")
    browser.wait(f"document.body.dataset.frame === '{frames - 1}'")
    final = replay.steps[-1].boards
    for seat in (0, 1):
        fired = final[seat]["fired"]
        shown = board(seat, ".miss") + board(seat, ".hit") + board(seat, ".sunk")
        assert shown == len(fired)
        # Every verdict of this record was proved by its opening: every fired cell is ticked.
        assert board(seat, ".proved") == len(fired)
    assert "seat 0 wins (fleet_sunk)" in browser.eval("document.getElementById('end').textContent")


def test_the_page_marks_a_false_proof(tmp_path: Path, browser: Browser) -> None:
    browser.open(_page(tmp_path, _lying()).as_uri())
    browser.wait("document.body.dataset.ready")
    assert "does not verify" in browser.eval("document.getElementById('verdict').textContent")
    browser.key("End")
    assert browser.eval("document.querySelectorAll('#moves li').length") > 0
    false = browser.eval(
        "[].filter.call(document.querySelectorAll('#moves li'),"
        " function (li) { return /\\[false\\]/.test(li.textContent); }).length"
    )
    assert false == 1
    assert "stopped at entry 8" in browser.eval("document.getElementById('end').textContent")


@pytest.mark.parametrize("bad", ["", "--html"])
def test_show_needs_a_record(bad: str) -> None:
    result = CliRunner().invoke(main, ["show", *([bad] if bad else [])])
    assert result.exit_code == 2
