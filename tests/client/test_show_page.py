"""``seabattle show RECORD --html``: the page's move counter and move list, in headless Chromium.

What a reader relies on: the counter numbers the move shown as the list and the line above the
boards do (0 before the first move, the last move's number at the end), and the move shown is
always in view in the list, however long the game.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chromium import Browser
from test_show import SIGNED, _page

#: Where the move shown is: its place in the list, and whether the list shows it.
_CURRENT = """(function () {
  var ol = document.getElementById('moves'), items = ol.querySelectorAll('li');
  var li = ol.querySelector('li.current');
  if (!li) return {index: -1, scrolled: ol.scrollTop};
  var a = ol.getBoundingClientRect(), b = li.getBoundingClientRect();
  return {index: [].indexOf.call(items, li), inside: b.top >= a.top - 1 && b.bottom <= a.bottom + 1,
          overflows: ol.scrollHeight > ol.clientHeight, scrolled: ol.scrollTop};
})()"""


def _at(browser: Browser, frame: int) -> tuple[str, str, dict[str, Any]]:
    browser.wait(f"document.body.dataset.frame === '{frame}'")
    pos = browser.eval("document.getElementById('pos').textContent")
    now = browser.eval("document.getElementById('now').textContent")
    current: dict[str, Any] = browser.eval(_CURRENT)
    return pos, now, current


def test_the_counter_numbers_the_move_shown(tmp_path: Path, browser: Browser) -> None:
    browser.open(_page(tmp_path, SIGNED).as_uri())
    steps = browser.wait("document.body.dataset.ready && +document.body.dataset.frames") - 1
    pos, now, current = _at(browser, 0)
    assert pos == f"move 0 / {steps}" and current["index"] == -1  # the fleets: no move yet
    for _ in range(3):
        browser.key("ArrowRight")
    pos, now, current = _at(browser, 3)
    # The third move: "3." above the boards, the list's third line, and the counter's 3.
    assert pos == f"move 3 / {steps}" and now.startswith("3. ") and current["index"] == 2
    browser.key("End")
    pos, now, current = _at(browser, steps)
    assert pos == f"move {steps} / {steps}" and now.startswith(f"{steps}. ")


def test_the_move_list_scrolls_to_the_move_shown(tmp_path: Path, browser: Browser) -> None:
    browser.open(_page(tmp_path, SIGNED).as_uri())
    steps = browser.wait("document.body.dataset.ready && +document.body.dataset.frames") - 1
    browser.key("End")
    _, _, current = _at(browser, steps)
    # The game's moves are more than the list shows at once: the last one is scrolled to.
    assert current["overflows"] and current["index"] == steps - 1 and current["inside"]
    # Back one at a time, then to a move in the middle, then to the start: always in view.
    for k in range(1, 4):
        browser.key("ArrowLeft")
        _, _, current = _at(browser, steps - k)
        assert current["index"] == steps - k - 1 and current["inside"]
    middle = steps // 2
    browser.eval(f"window.sbReplay.go({middle})")
    _, _, current = _at(browser, middle)
    assert current["index"] == middle - 1 and current["inside"]
    browser.key("Home")
    _, _, current = _at(browser, 0)
    assert current == {"index": -1, "scrolled": 0}
