"""Limits a client implementer relies on (spec 2.4, 2.5, 4.4, 7.4): every string, byte string and
array a message carries is bounded and an over-long one is refused with ``BAD_MESSAGE``; what a
server stores or echoes from a rule set is bounded too, so a ``list`` answer stays small; a rate
refusal always names what it dropped, and nothing without an ``id`` or a ``seq`` is ever dropped.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from helpers import SMALL, TC, Closed, connect, fields, pair, start_server, wire_of
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.rules import MAX_RULES_NAME, preset, rules_from_dict
from seabattle.server.config import Limits

# -- every field of every message ------------------------------------------------------------------

#: Map fields, which hold no text or array of their own at the message level: who bounds what
#: they carry. A new map field must be added here, with what bounds it.
_MAPS = {
    # Parsed into a rule set, whose every string and array has its bound (7.1, 7.4; below).
    ("create", "rules"): "rules",
    ("quick", "rules"): "rules",
    ("challenge", "rules"): "rules",
    # Parsed by the core into commitments, openings and reveals of bounded size (10.5-10.8).
    ("commit", "commitment"): "core",
    ("answer", "verdict"): "core",
    ("reveal", "reveal"): "core",
    # Built by the server from bounded values (rule sets, ids, counts, the lists below).
    ("ok", "data"): "server",
    ("start", "rules"): "server",
    ("challenged", "rules"): "server",
    ("verdict", "verdict"): "server",
    ("revealed", "reveal"): "server",
    ("game_over", "outcome"): "server",
    ("match_over", "result"): "server",
    ("match_over", "ratings"): "server",
    ("snapshot", "view"): "server",
}


def _kinds(tp: Any) -> set[Any]:
    """The wire kinds a field of annotation ``tp`` holds (``tuple[str, ...]``: ``(tuple, str)``)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(tp)))
    if origin is tuple:
        return {(tuple, typing.get_args(tp)[0])}
    return {tp}


def _overlong(kind: Any, sample: Any) -> list[tuple[Any, Any]]:
    """For a field kind: (a value at its bound, the same one past it), or ``[]`` if unbounded
    at the message level."""
    if kind is str:
        return [("x" * m.MAX_TEXT, "x" * (m.MAX_TEXT + 1))]
    if kind is bytes:
        return [(bytes(m.MAX_BYTES), bytes(m.MAX_BYTES + 1))]
    if isinstance(kind, tuple):
        item = sample[0] if isinstance(sample, list) and sample else 1
        cases = [([item] * m.MAX_LIST, [item] * (m.MAX_LIST + 1))]
        if kind[1] is str:  # and every text item has the text bound
            cases.append((["x" * m.MAX_TEXT], ["x" * (m.MAX_TEXT + 1)]))
        return cases
    return []


def _field_cases() -> list[tuple[str, str, Any, Any, Any]]:
    cases = []
    for tag, cls in m.MESSAGES.items():
        base = wire_of(cls)
        for name, tp in fields(cls).items():
            for kind in _kinds(tp):
                if kind is bytes and cls.DIR is m.Dir.S2C:
                    continue  # a server's bin may fill its (larger) frame: 2.4
                for fit, over in _overlong(kind, base[name]):
                    cases.append((tag, name, base, fit, over))
    return cases


@pytest.mark.parametrize(
    ("tag", "name", "base", "fit", "over"),
    _field_cases(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_text_bytes_and_array_field_is_bounded(
    tag: str, name: str, base: dict[str, Any], fit: Any, over: Any
) -> None:
    # Of two fields of which exactly one holds a value (2.4), the other is then nil.
    pair = m.EXACTLY_ONE.get(tag, ())
    base = {**base, **{f: None for f in pair if f != name}} if name in pair else base
    assert isinstance(m.decode({**base, name: fit}), m.MESSAGES[tag])
    with pytest.raises(ProtocolError) as e:
        m.decode({**base, name: over})
    assert e.value.code == ErrorCode.BAD_MESSAGE
    assert f"{tag}.{name}" in e.value.detail  # the refusal names the field


def test_every_field_has_a_bound() -> None:
    """No field escapes the walk above: it is a scalar, text, bytes or an array (bounded at the
    message level), or a map listed in ``_MAPS`` with what bounds it."""
    seen = set()
    for tag, cls in m.MESSAGES.items():
        for name, tp in fields(cls).items():
            for kind in _kinds(tp) - {bool, int, type(None)}:
                if kind in (str, bytes) or isinstance(kind, tuple):
                    continue
                assert (tag, name) in _MAPS, f"{tag}.{name}: a map no one bounds"
                seen.add((tag, name))
    assert seen == set(_MAPS)  # and no entry there names a field that is gone


# -- the rule set's free text --------------------------------------------------------------------


def test_rule_set_name_is_bounded() -> None:
    assert rules_from_dict({"name": "n" * MAX_RULES_NAME}).name == "n" * MAX_RULES_NAME
    for bad in ("", "n" * (MAX_RULES_NAME + 1), "n" * 5000):
        with pytest.raises(ProtocolError) as e:
            rules_from_dict({"name": bad})
        assert e.value.code == ErrorCode.BAD_RULES
    with pytest.raises(ProtocolError) as e:
        rules_from_dict({"fleet": [["s" * 33, 2]]})
    assert e.value.code == ErrorCode.BAD_RULES
    # A changed preset of a long name stays within the bound and keeps its mark.
    long = preset("classic").replace(name="n" * MAX_RULES_NAME).replace(rows=9)
    assert long.name == "n" * (MAX_RULES_NAME - len("+custom")) + "+custom"


async def test_over_long_rule_text_is_refused_by_the_server(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    addr, _ = await start_server(nursery, tmp_path)
    c = await connect(addr, nursery)
    bad = [
        {"preset": "classic", "name": "n" * 5000},
        {"preset": "p" * 4096},
        {**SMALL, "fleet": [["s" * 4000, 2]]},
    ]
    for i, rules in enumerate(bad):
        r = await c.request(m.Create(i, rules, "blind", True))
        assert isinstance(r, m.Error) and (r.code, r.ref) == (ErrorCode.BAD_RULES, i)
        assert len(r.msg) <= 500  # a refusal does not echo the whole of what it refused
    r = await c.request(m.Create(9, {"preset": "classic"}, "b" * 4096, True))
    assert isinstance(r, m.Error) and r.code == ErrorCode.BAD_RULES
    assert (await c.request(m.ListMatches(10))).data == {"matches": []}


async def test_a_list_answer_stays_small_however_many_matches_are_open(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    # The largest rule set a client may open: the longest name, 32 ships of 32-character names.
    fleet = [[f"{k:02d}" + "s" * 30, 1] for k in range(32)]
    rules = {"name": "n" * MAX_RULES_NAME, "rows": 26, "cols": 26, "fleet": fleet}
    many = 150
    limits = Limits(create_rate=1000.0, create_burst=many, open_per_peer=many)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    host = await connect(addr, nursery)
    for i in range(many):
        assert isinstance(await host.request(m.Create(i, rules, "blind", True)), m.Ok)
    looker = await connect(addr, nursery)
    ok = await looker.request(m.ListMatches(1))
    listed = ok.data["matches"]
    assert len(listed) == limits.list_max < many
    assert all(e["rules"]["name"] == "n" * MAX_RULES_NAME for e in listed)
    one = len(m.frame(m.Ok(1, {"matches": listed[:1]}), max_frame=1 << 24))
    size = len(m.frame(ok, max_frame=1 << 24))
    assert size <= limits.list_max * one < 256 * 1024, size


# -- rate ----------------------------------------------------------------------------------------


async def _answers(c: TC, n: int) -> list[m.Ok | m.Error]:
    """The next ``n`` answers (``ok`` or ``error``) ``c`` receives, skipping game traffic."""
    got: list[m.Ok | m.Error] = []
    while len(got) < n:
        msg = await c.recv()
        if isinstance(msg, m.Ok | m.Error):
            got.append(msg)
    return got


async def test_a_rate_refusal_names_what_it_dropped(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path, limits=Limits(rate=1.0, burst=5))
    c = await connect(addr, nursery)  # hello and auth took 2 of the 5
    await trio.sleep(3)  # the bucket is full again
    ids = list(range(100, 120))
    await c.send_raw(b"".join(m.frame(m.Ladder(i)) for i in ids))
    got = await _answers(c, len(ids))
    answered = {x.ref for x in got if isinstance(x, m.Ok)}
    dropped = {x.ref for x in got if isinstance(x, m.Error)}
    assert all(x.code == ErrorCode.RATE_LIMITED for x in got if isinstance(x, m.Error))
    assert len(answered) == 5 and answered | dropped == set(ids) and not answered & dropped
    # What was dropped changed nothing and is answered once sent again, with the same ids.
    await trio.sleep(len(dropped))
    for i in sorted(dropped):
        assert isinstance(await c.request(m.Ladder(i)), m.Ok)
        await trio.sleep(1)


async def test_game_inputs_without_id_or_seq_are_never_dropped_for_rate(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    limits = Limits(rate=1.0, burst=10, rate_credit=10)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    a, _b, mid = await pair(addr, nursery, SMALL, "custody")
    seat = (await a.expect(m.Start)).seat
    game = (await a.expect(m.GameStart)).game
    # Spend a's bucket: what carries an id is dropped, and says so.
    await a.send_raw(b"".join(m.frame(m.Ladder(i)) for i in range(50, 70)))
    got = await _answers(a, 20)
    assert [x.ref for x in got if isinstance(x, m.Error)][-1] == 69
    # A resignation now carries no ref: it is handled on credit, not dropped.
    await a.send(m.Resign(mid, game))
    over = await a.expect(m.GameOver)
    assert over.game == game and over.outcome["winner"] == 1 - seat
    # A repeat is refused by the rules (the game it names is over), never by the rate.
    await a.send(m.Resign(mid, game))
    refused = await a.expect(m.Error, skip=(m.Clock, m.GameStart, m.MatchOver, m.GameOver))
    assert refused.code != ErrorCode.RATE_LIMITED and refused.ref is None


async def test_past_its_credit_a_flood_fails_the_session_and_nothing_is_dropped_silently(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    limits = Limits(rate=1.0, burst=5, rate_credit=10)
    addr, _ = await start_server(nursery, tmp_path, limits=limits)
    c = await connect(addr, nursery)
    await trio.sleep(5)
    await c.send_raw(b"".join(m.frame(m.Ping(i)) for i in range(40)))
    got: list[Any] = []
    with pytest.raises(Closed):
        while True:
            got.append(await c.recv())
    pongs = [x.n for x in got if isinstance(x, m.Pong)]
    errors = [x for x in got if isinstance(x, m.Error)]
    # Every ping was answered until the credit ran out; then one error failed the session.
    assert pongs == list(range(len(pongs))) and 5 + 10 <= len(pongs) <= 5 + 10 + 1
    assert [(e.code, e.ref) for e in errors] == [(ErrorCode.RATE_LIMITED, None)]


async def test_the_floor_of_2_5_is_never_limited(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # 20 messages a second sustained, after a burst of 50: on the shipped limits, all answered.
    addr, _ = await start_server(nursery, tmp_path)
    c = await connect(addr, nursery)
    await c.send_raw(b"".join(m.frame(m.Ladder(i)) for i in range(50)))
    n = 50
    for _ in range(10):
        await c.send_raw(b"".join(m.frame(m.Ping(n + k)) for k in range(20)))
        n += 20
        await trio.sleep(1)
    got = [await c.recv() for _ in range(n)]
    assert not [x for x in got if isinstance(x, m.Error)]


async def test_the_match_request_limit_and_its_floor(
    tmp_path: Path, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    addr, _ = await start_server(nursery, tmp_path)  # the shipped limits
    c = await connect(addr, nursery)
    for i in range(5):  # bursts of 5 (2.5)
        assert isinstance(await c.request(m.Create(i, {"preset": "classic"}, "blind", False)), m.Ok)
    # The sixth is refused, naming its id; a quick counts against the same limit.
    r = await c.request(m.Quick(5, {"preset": "classic"}, "blind"))
    assert isinstance(r, m.Error) and (r.code, r.ref) == (ErrorCode.RATE_LIMITED, 5)
    # One every 2 seconds sustained.
    for i in range(6, 9):
        await trio.sleep(2)
        r = await c.request(m.Leave(100 + i, (await _open(c, i)).data["match"]))
        assert isinstance(r, m.Ok)


async def _open(c: TC, i: int) -> m.Ok:
    r = await c.request(m.Create(i, {"preset": "classic"}, "blind", False))
    assert isinstance(r, m.Ok), r
    return r
