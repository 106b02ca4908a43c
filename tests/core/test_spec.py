"""spec/protocol.md and the code agree: generated sections, coverage, and the byte formulas.

The generated sections are compared with what ``spec/generate.py`` renders from the code now, so a
change to a message, an error code, a phase, the handshake or a preset fails here until
``python spec/generate.py`` is run. The formula tests recompute hashes from the spec's own text
(section 10), independently of ``commit.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import re
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from seabattle.protocol import session, state
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.codec import MAX_DEPTH, MAX_FRAME, FrameDecoder
from seabattle.protocol.commit import Committed, coin_commit, coin_result
from seabattle.protocol.errors import FAILS_SESSION, LAYERS, MEANINGS, ErrorCode
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import TRANSITIONS, EndReason, Phase
from seabattle.protocol.messages import MESSAGES
from seabattle.protocol.referee import GAME_INPUTS
from seabattle.protocol.rules import PRESETS
from seabattle.protocol.session import auth_payload

SPEC_PATH = Path(__file__).resolve().parents[2] / "spec" / "protocol.md"
SPEC = SPEC_PATH.read_text(encoding="utf-8")


def _load_generator() -> ModuleType:
    """``spec/generate.py``, a script next to the spec rather than a module of the package."""
    path = SPEC_PATH.with_name("generate.py")
    spec = importlib.util.spec_from_file_location("seabattle_spec_generate", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()


def _prose() -> str:
    """The spec without its generated sections: what people wrote."""
    return re.sub(r"<!-- BEGIN GENERATED: .*?<!-- END GENERATED: [a-z-]+ -->", "", SPEC, flags=re.S)


# -- generated sections ---------------------------------------------------------------------------


def test_generated_sections_match_the_code() -> None:
    stale = generate.check(SPEC)
    assert not stale, f"spec/protocol.md is out of date in {stale}; run: python spec/generate.py"


def test_every_section_has_markers_once() -> None:
    for name in generate.SECTIONS:
        assert SPEC.count(f"<!-- BEGIN GENERATED: {name} -->") == 1, name
        assert SPEC.count(f"<!-- END GENERATED: {name} -->") == 1, name


def test_check_names_a_drifted_section_and_write_repairs_it() -> None:
    broken = SPEC.replace("| 4001 | `NOT_YOUR_TURN` |", "| 4001 | `NOT_MY_TURN` |")
    assert broken != SPEC
    assert generate.check(broken) == ["errors"]
    assert generate.rewrite(broken) == SPEC


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "protocol.md"
    f.write_text(SPEC, encoding="utf-8")
    assert generate.main(["--check", str(f)]) == 0
    f.write_text(
        SPEC.replace("`FRAME_TOO_LARGE` | decoding", "`FRAME_TOO_BIG` | decoding"), encoding="utf-8"
    )
    assert generate.main(["--check", str(f)]) == 1
    assert "errors" in capsys.readouterr().err
    assert generate.main(["--write", str(f)]) == 0
    assert f.read_text(encoding="utf-8") == SPEC


def test_the_script_checks_this_spec_by_default() -> None:
    assert generate.SPEC == SPEC_PATH
    script = SPEC_PATH.with_name("generate.py")
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_missing_markers_are_an_error() -> None:
    without = SPEC.replace("<!-- BEGIN GENERATED: presets -->", "")
    assert "presets" in generate.check(without)
    with pytest.raises(KeyError, match="presets"):
        generate.rewrite(without)


def test_state_diagram_is_drawn_from_the_enforced_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # The diagram has no table of its own: an edge added to the one the game enforces shows up.
    changed = dict(TRANSITIONS)
    changed[(Phase.REVEAL, "resign")] = ((Phase.OVER, "a resignation during the reveal"),)
    monkeypatch.setattr(state, "TRANSITIONS", changed)
    monkeypatch.setattr(generate, "TRANSITIONS", changed)
    drawn = generate.game_states()
    assert "| `reveal` | `resign` | `over` | a resignation during the reveal |" in drawn
    assert "reveal --> over: expire, resign, reveal" in drawn


def test_every_error_code_has_a_meaning() -> None:
    assert set(MEANINGS) == set(ErrorCode)
    assert {code // 1000 for code in ErrorCode} <= set(LAYERS)


def test_error_meanings_quote_the_codec_limits() -> None:
    # errors.py sits below the codec, so it writes the limits out; they must be the codec's.
    assert f"({MAX_FRAME} bytes by default)" in MEANINGS[ErrorCode.FRAME_TOO_LARGE]
    assert f"more than {MAX_DEPTH} deep" in MEANINGS[ErrorCode.TOO_DEEP]


def test_the_codes_that_fail_the_session_are_the_ones_it_fails_on() -> None:
    assert FAILS_SESSION == session._FATAL


def test_game_inputs_are_messages_that_feed_known_inputs() -> None:
    assert set(GAME_INPUTS) <= set(MESSAGES)
    assert set(GAME_INPUTS.values()) <= {inp for _, inp in TRANSITIONS}


# -- coverage -------------------------------------------------------------------------------------


def test_every_error_code_appears() -> None:
    for code in ErrorCode:
        assert re.search(rf"\| {int(code)} \| `{code.name}` \|", SPEC), code.name


def test_every_message_tag_appears() -> None:
    for tag in MESSAGES:
        assert f"| `{tag}` |" in SPEC, tag


def test_every_message_has_receiver_rules_in_prose() -> None:
    # Section 5.2-5.5 give each message a bullet saying what its receiver MUST do.
    prose = _prose()
    rules = prose[prose.index("### 5.2 ") : prose.index("## 6 Lobby")]
    for tag in MESSAGES:
        assert f"- **`{tag}`**" in rules, f"no receiver rules for {tag!r} in section 5"


def test_every_capability_the_code_speaks_is_defined_in_4_2() -> None:
    # The capabilities the reference server agrees and the client offers (peer is session.py's).
    section = _prose().split("### 4.2 Version and capabilities", 1)[1].split("### 4.3", 1)[0]
    for cap in ("peer", session.REDIRECT, session.TEAMS, session.LEAN):
        assert f"`{cap}`" in section, cap
    assert "### 5.7 Lean sessions" in SPEC


def test_every_end_reason_and_phase_appears_in_prose() -> None:
    prose = _prose()
    for reason in EndReason:
        assert f"| `{reason.value}` |" in prose, reason.value
    for phase in Phase:
        assert f"`{phase.value}`" in prose, phase.value


def test_every_rule_option_and_preset_is_described() -> None:
    prose = _prose()
    options = PRESETS["classic"].to_dict()
    for key, value in options.items():
        if isinstance(value, dict):
            for sub in value:
                assert f"`{key}.{sub}`" in prose, f"{key}.{sub}"
        else:
            assert f"`{key}`" in prose, key
    for name in PRESETS:
        assert f"`{name}`" in prose, name


# -- the byte formulas of the prose ---------------------------------------------------------------


def test_ping_frame_example_decodes_to_ping() -> None:
    m = re.search(r"```\n(00 00 00 0b [0-9a-f ]+)\n```", SPEC)
    assert m is not None
    decoder = FrameDecoder()
    decoder.feed(bytes.fromhex(m.group(1).replace(" ", "")))
    assert decoder.next_frame() == {"t": "ping", "n": 7}


def test_auth_payload_layout() -> None:
    challenge, server, client = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32
    payload = auth_payload(challenge, server, client)
    assert len(payload) == 114  # section 4.3
    assert payload[:18] == b"seabattle/v1/auth\x00"
    assert payload[18:50] == challenge and payload[50:82] == server and payload[82:] == client


def test_commitment_follows_section_10_formulas() -> None:
    rules = PRESETS["russian"]
    fleet = Fleet.of(
        ("A1", "down"),
        ("C1", "across"),
        ("G1", "across"),
        ("C3", "across"),
        ("F3", "across"),
        ("I3", "down"),
        ("A6", "across"),
        ("C6", "across"),
        ("E6", "across"),
        ("G6", "across"),
    )
    secret = bytes(range(32))
    match_id = bytes(range(100, 116))
    game, seat = 2, 1
    c = Committed(rules, fleet, secret, match_id, game, seat)

    # Section 7.4 and 10.2, written out from the text.
    digest = hashlib.sha256(b"seabattle/v1/rules\x00" + canonical_pack(rules.to_dict())).digest()
    body = canonical_pack({"game": game, "match": match_id, "rules": digest, "seat": seat, "v": 1})
    assert body[:1] == b"\x85" and body[1:6] == b"\xa4game"  # keys in byte order
    ctx = hashlib.sha256(b"seabattle/v1/ctx\x00" + body).digest()
    assert ctx == c.ctx

    def salt(label: bytes, i: int) -> bytes:
        return hmac.new(secret, label + struct.pack(">H", i), hashlib.sha256).digest()[:16]

    occupied = set()
    for spec, p in zip(rules.fleet, fleet.placements, strict=True):
        for j in range(spec.length):
            r, col = (p.row + j, p.col) if p.vertical else (p.row, p.col + j)
            occupied.add(r * rules.cols + col)
    cells = [
        hashlib.sha256(
            b"\x00" + ctx + struct.pack(">H", i) + bytes([i in occupied]) + salt(b"cell", i)
        ).digest()
        for i in range(rules.cells)
    ]
    ships = [
        hashlib.sha256(
            b"\x01" + ctx + bytes([k, p.row, p.col, p.vertical]) + salt(b"ship", k)
        ).digest()
        for k, p in enumerate(fleet.placements)
    ]
    assert list(c.commitment.cells) == cells
    assert list(c.commitment.ships) == ships
    root = hashlib.sha256(b"\x02" + ctx + b"".join(cells) + b"".join(ships)).digest()
    assert root == c.root
    # Section 10.6: an opening is the occupied bit and that cell's salt.
    o = c.open_cell(0)
    assert (o.index, o.occupied, o.salt) == (0, True, salt(b"cell", 0))


def test_coin_follows_section_10_9() -> None:
    match_id, n0, n1 = bytes(16), b"\x07" * 32, b"\x09" * 32
    want = hashlib.sha256(
        b"seabattle/v1/coin\x00" + match_id + struct.pack(">H", 3) + b"\x01" + n1
    ).digest()
    assert coin_commit(match_id, 3, 1, n1) == want
    lot = hashlib.sha256(b"seabattle/v1/lot\x00" + n0 + n1).digest()
    assert coin_result(n0, n1) == lot[-1] & 1


def test_commitment_sizes_in_the_rationale() -> None:
    classic = PRESETS["classic"]
    assert 32 * (classic.cells + len(classic.fleet)) == 3360
    assert "3360 bytes for `classic`" in SPEC
