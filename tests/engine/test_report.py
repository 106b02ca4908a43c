"""The arena's summary and its HTML report: the figures add up to the games played, and the page
is one self-contained file (no request leaves it) that shows the table, the cross-table, the
faults and one picture of shots to win per engine, in headless Chromium."""

from __future__ import annotations

import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium import Browser
from seabattle.engine.arena import Arena, Contender, Fault, GameResult, paired
from seabattle.engine.builtin import BuiltinEngine
from seabattle.engine.report import render_html, summarize
from seabattle.protocol.rules import preset
from test_arena import Faulty

NAMES = ["random", "hunt", "bad<&>"]


@pytest.fixture(scope="module")
def results() -> list[GameResult]:
    import trio

    contenders = [
        Contender("random", lambda: BuiltinEngine("random")),
        Contender("hunt", lambda: BuiltinEngine("hunt")),
        Contender("bad<&>", lambda: Faulty("timeout", after=5)),
    ]
    arena = Arena(contenders, preset("russian"), seed=8)
    return trio.run(arena.play, paired(3, range(3)))


def test_the_summary_adds_up(results: list[GameResult]) -> None:
    s = summarize(results, NAMES, rules="russian", seed=8)
    assert s.games == 18 and [ln.name for ln in s.lines][-1] == "bad<&>"
    for ln in s.lines:
        mine = [r for r in results if ln.name in r.engines]
        assert ln.games == len(mine) == 12
        assert ln.wins + ln.draws + ln.losses == ln.games
        won = [r for r in mine if r.winner is not None and r.engines[r.winner] == ln.name]
        assert ln.wins == len(won)
        assert ln.to_win == tuple(r.shots[r.winner] for r in won if r.reason == "fleet_sunk")
        if ln.to_win:
            assert ln.median_to_win == statistics.median(ln.to_win)
        assert ln.elo.n == 6  # three boards against each of two opponents: six pairs
    bad = next(ln for ln in s.lines if ln.name == "bad<&>")
    assert bad.faults == {"timeout": 12} and bad.losses == 12 and bad.elo.score == 0
    assert bad.fault_details["timeout"] == "as the test asked"
    # The cross-table is each side's points: the two add up to the games between them.
    for a in NAMES:
        for b in NAMES:
            if a != b:
                (pa, ga), (pb, gb) = s.cross[(a, b)], s.cross[(b, a)]
                assert ga == gb == 6 and pa + pb == 6


def test_an_incomplete_pair_counts_in_wdl_not_in_elo() -> None:
    r = GameResult(0, 0, ("a", "b"), 0, "fleet_sunk", (20, 19), (20,))
    s = summarize([r], ["a", "b"])
    a = next(ln for ln in s.lines if ln.name == "a")
    assert a.wins == 1 and a.elo.n == 1 and a.elo.score == 1.0  # from W/D/L: no pair yet
    pair = [r, GameResult(1, 0, ("b", "a"), 0, "resigned", (3, 2), (), Fault("a", "crashed"))]
    a = next(ln for ln in summarize(pair, ["a", "b"]).lines if ln.name == "a")
    assert (a.wins, a.losses, a.elo.n, a.elo.score) == (1, 1, 1, 0.5)
    assert a.faults == {"crashed": 1}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_page_asks_for_nothing_and_escapes_names(results: list[GameResult]) -> None:
    page = render_html(summarize(results, NAMES, rules="russian", seed=8, sprt="SPRT: H1"))
    p = _Tags()
    p.feed(page)
    tags = [t for t, _ in p.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags
    assert not [a for _, a in p.tags if "src" in a or "href" in a]
    assert "url(" not in page and "@import" not in page
    assert tags.count("svg") == 3 and "bad<&>" in "".join(p.text)
    assert "bad<&>" not in page  # escaped wherever it is written
    assert "SPRT: H1" in "".join(p.text)


def test_the_page_in_chromium(results: list[GameResult], tmp_path: Path, browser: Browser) -> None:
    s = summarize(results, NAMES, rules="russian", seed=8)
    path = tmp_path / "report.html"
    path.write_text(render_html(s))
    browser.open(path.as_uri())
    browser.wait("document.readyState === 'complete'")
    assert browser.eval("performance.getEntriesByType('resource').length") == 0
    rows = browser.eval(
        "[...document.querySelectorAll('#table tbody tr')].map(r => r.cells[1].textContent)"
    )
    assert rows == [ln.name for ln in s.lines]
    assert browser.eval("document.querySelectorAll('#cross tbody tr').length") == 3
    assert browser.eval("document.querySelector('#faults td:nth-child(2)').textContent") == (
        "timeout"
    )
    # One picture per engine, its bars as many games as the engine won by sinking the fleet.
    figures = browser.eval(
        "[...document.querySelectorAll('figure')].map(f => ({"
        "  bars: [...f.querySelectorAll('rect.bar title')].map(t => +t.textContent"
        "    .match(/: (\\d+) games/)[1]).reduce((a, b) => a + b, 0),"
        "  width: f.querySelector('svg').getBoundingClientRect().width}))"
    )
    assert [f["bars"] for f in figures] == [len(ln.to_win) for ln in s.lines]
    assert all(f["width"] > 100 for f in figures)
