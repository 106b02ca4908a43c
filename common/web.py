"""The board drawing both web pages share: the record replay (``seabattle show --html``) and the
server's live spectator page (``/watch/MATCH``).

Both pages are self-contained: this CSS and JavaScript is inlined into each, never fetched. A board
is drawn from the public board view of ``spec/protocol.md`` 6.6 (``fired``, ``sunk``, ``crossed``),
so the replay, which builds its boards with the game's own :meth:`~seabattle.protocol.game.Board.
to_dict`, and the live page, which gets them from the referee's view, draw the same thing the same
way. A fleet (the occupancy of a revealed board) is drawn only where the caller passes one.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BOARD_CSS", "BOARD_JS", "CSP", "embed_json"]

#: No network at all: every style and script is inline, and nothing else may load.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

BOARD_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #123; background: #f6f8fa; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
.boards { display: flex; flex-wrap: wrap; gap: 2em; margin: 1em 0; }
.board { border-collapse: collapse; }
.board caption { font-weight: bold; text-align: left; padding-bottom: .3em; }
.board th { font-weight: normal; color: #678; width: 1.7em; height: 1.7em; font-size: .8em; }
.board td { width: 1.7em; height: 1.7em; border: 1px solid #c9d6e2; text-align: center;
  background: #e3f0fb; position: relative; font-weight: bold; }
.board td.ship { background: #9fb4c8; }
.board td.miss { color: #36c; }
.board td.hit { background: #f4b3a8; color: #a00; }
.board td.sunk { background: #c0392b; color: #fff; }
.board td.unknown { background: #fde9a9; }
.board td.crossed { background: #eef2f5; color: #aab; }
.board td.last { outline: 3px solid #f39c12; outline-offset: -3px; }
.board td.proved::after { content: "\\2713"; position: absolute; right: 1px; bottom: -2px;
  font-size: .65em; color: #1a7f37; }
.board td.sunk.proved::after { color: #b6f5c6; }
.badge { display: inline-block; padding: 0 .5em; border-radius: .7em; font-size: .85em; }
.badge.verified { background: #d3f5dc; color: #135f28; }
.badge.deferred { background: #fdf0c4; color: #6b5200; }
.badge.false { background: #f9d0cc; color: #8a1408; }
.muted { color: #678; }
"""

BOARD_JS = """
function sbLabel(rules, i) {
  var c = i % rules.cols, r = Math.floor(i / rules.cols), s = "";
  for (c += 1; c > 0; c = Math.floor((c - 1) / 26)) s = String.fromCharCode(65 + (c - 1) % 26) + s;
  return s + (r + 1);
}
// One board as a table: `board` is the public view {fired, sunk, crossed}, `occ` the occupancy
// (ship index + 1 or 0 per cell) of a fleet known to the page, or null; `marks` adds classes.
function sbBoard(rules, title, board, occ, marks) {
  var t = document.createElement("table"), cap = t.createCaption(), fired = {}, sunk = {};
  t.className = "board";
  cap.textContent = title;
  (board.fired || []).forEach(function (f) { fired[f[0]] = f[1]; });
  (board.sunk || []).forEach(function (s) {
    if (s[1]) s[1].forEach(function (i) { sunk[i] = true; });
    else if (occ) occ.forEach(function (o, i) { if (o === s[0] + 1) sunk[i] = true; });
  });
  var crossed = {};
  (board.crossed || []).forEach(function (i) { crossed[i] = true; });
  var head = t.insertRow();
  head.appendChild(document.createElement("th"));
  for (var c = 0; c < rules.cols; c++) {
    var th = document.createElement("th");
    th.textContent = sbLabel(rules, c).replace(/[0-9]+$/, "");
    head.appendChild(th);
  }
  for (var r = 0; r < rules.rows; r++) {
    var row = t.insertRow(), rh = document.createElement("th");
    rh.textContent = r + 1;
    row.appendChild(rh);
    for (c = 0; c < rules.cols; c++) {
      var i = r * rules.cols + c, td = row.insertCell(), cls = [];
      td.dataset.cell = sbLabel(rules, i);
      if (occ && occ[i]) cls.push("ship");
      if (i in fired) {
        var res = fired[i];
        if (sunk[i]) { cls.push("sunk"); td.textContent = "#"; }
        else if (res === "hit" || res === "sunk") { cls.push("hit"); td.textContent = "X"; }
        else if (res === "miss") { cls.push("miss"); td.textContent = "\\u00b7"; }
        else { cls.push("unknown"); td.textContent = "?"; }
      } else if (crossed[i]) { cls.push("crossed"); td.textContent = "-"; }
      if (marks && marks[i]) cls.push(marks[i]);
      td.className = cls.join(" ");
    }
  }
  return t;
}
"""


def embed_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element (no ``</script>`` in it)."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
