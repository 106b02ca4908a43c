"""``seabattle show RECORD --html FILE``: one self-contained page that steps through a record.

The page carries the replay (:meth:`~.show.Replay.to_dict`: every step with both boards after it)
as JSON inside itself, with its CSS and script inline and a content security policy that lets
nothing load from anywhere: it opens from a file, offline, and shows the same in any browser.
Arrow keys, the buttons or the slider move through the steps; a move's cells are outlined, and a
tick marks every cell whose verdict was proved (at once by its opening, or by the reveal that
checked a deferred claim).
"""

from __future__ import annotations

import html

from seabattle.common.web import BOARD_CSS, BOARD_JS, CSP, embed_json

from .show import Replay

__all__ = ["render_page"]

_CSS = """
.controls button { font-size: 1.1em; min-width: 2.4em; }
.controls input[type=range] { width: 24em; vertical-align: middle; }
#now { margin: .6em 0; min-height: 1.4em; }
#moves { max-height: 22em; overflow-y: auto; background: #fff; border: 1px solid #c9d6e2;
  padding: .4em 1em .4em 3em; margin: 0; position: relative; }
#moves li { cursor: pointer; }
#moves li.current { background: #fff3cd; }
"""

_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("replay").textContent);
  var rules = {rows: data.rules.rows, cols: data.rules.cols};
  var frames = [];
  data.games.forEach(function (g, gi) {
    var empty = {fired: [], sunk: [], crossed: []};
    frames.push({game: gi, step: -1, boards: [empty, empty]});
    g.steps.forEach(function (s, si) { frames.push({game: gi, step: si, boards: s.boards}); });
  });
  var at = 0, slider = document.getElementById("slider"), moves = document.getElementById("moves");
  slider.max = frames.length - 1;
  function marks(f, seat) {
    var g = data.games[f.game], out = {}, deferred = [];
    for (var i = 0; i <= f.step; i++) {
      var s = g.steps[i];
      if (s.target === seat && s.proof === "verified")
        s.cells.forEach(function (c) { out[c] = "proved"; });
      if (s.target === seat && s.proof === "deferred") deferred = deferred.concat(s.cells);
      if (s.target === null && s.seat === seat && s.proof === "verified" && /reveals/.test(s.text))
        deferred.forEach(function (c) { out[c] = "proved"; });
    }
    var now = g.steps[f.step];
    if (now && now.target === seat)
      now.cells.forEach(function (c) { out[c] = (out[c] ? out[c] + " " : "") + "last"; });
    return out;
  }
  var DOT = " \u00b7 ", listed = -1;
  // The move list of game gi, made once a game (a step only moves the highlight).
  function listMoves(gi) {
    moves.textContent = "";
    data.games[gi].steps.forEach(function (st, si) {
      var li = document.createElement("li");
      li.textContent = st.text + (st.proof ? " [" + st.proof + "]" : "");
      li.onclick = function () { go(frames.findIndex(function (x) {
        return x.game === gi && x.step === si; })); };
      moves.appendChild(li);
    });
    listed = gi;
  }
  // Scroll the list (and only the list, not the page) so that the move shown is in it.
  function inView(li) {
    var top = li.offsetTop, bottom = top + li.offsetHeight;
    if (top < moves.scrollTop) moves.scrollTop = top;
    else if (bottom > moves.scrollTop + moves.clientHeight)
      moves.scrollTop = bottom - moves.clientHeight;
  }
  function draw() {
    var f = frames[at], g = data.games[f.game], s = g.steps[f.step];
    var boards = document.getElementById("boards");
    boards.textContent = "";
    [0, 1].forEach(function (seat) {
      var t = sbBoard(rules, "seat " + seat + (g.fleets[seat] ? "" : " (fleet not revealed)"),
                      f.boards[seat], g.fleets[seat], marks(f, seat));
      t.id = "board" + seat;
      boards.appendChild(t);
    });
    var now = document.getElementById("now");
    now.textContent = s ? (f.step + 1) + ". " + s.text
                        : "game " + g.number + ": the fleets as revealed";
    if (s && s.proof) {
      var b = document.createElement("span");
      b.className = "badge " + s.proof;
      b.textContent = s.proof === "verified" ? "\\u2713 proof verified" : s.proof;
      b.title = s.proof_text;
      now.appendChild(document.createTextNode(" "));
      now.appendChild(b);
    }
    if (listed !== f.game) listMoves(f.game);
    var items = moves.children;
    for (var i = 0; i < items.length; i++) items[i].className = i === f.step ? "current" : "";
    if (f.step < 0) moves.scrollTop = 0;
    else inView(items[f.step]);
    var end = g.outcome ? "game " + g.number + ": " + (g.outcome.winner === null ? "a draw"
        : "seat " + g.outcome.winner + " wins") + " (" + g.outcome.reason + ")" : "";
    if (g.stopped) end += " the replay stopped at " + g.stopped;
    document.getElementById("end").textContent = at === frames.length - 1 ? end : "";
    slider.value = at;
    // Counted as the list numbers the moves: 0 before the first, the last one's number at the
    // end (the fleets' frame is no move).
    document.getElementById("pos").textContent = (data.games.length > 1
      ? "game " + g.number + DOT : "") + "move " + (f.step + 1) + " / " + g.steps.length;
    document.body.dataset.frame = at;
    document.body.dataset.frames = frames.length;
  }
  function go(i) { at = Math.max(0, Math.min(frames.length - 1, i)); draw(); }
  document.getElementById("first").onclick = function () { go(0); };
  document.getElementById("prev").onclick = function () { go(at - 1); };
  document.getElementById("next").onclick = function () { go(at + 1); };
  document.getElementById("last").onclick = function () { go(frames.length - 1); };
  slider.oninput = function () { go(+slider.value); };
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight") go(at + 1);
    else if (e.key === "ArrowLeft") go(at - 1);
    else if (e.key === "Home") go(0);
    else if (e.key === "End") go(frames.length - 1);
  });
  window.sbReplay = {go: go, frames: frames.length};
  draw();
  document.body.dataset.ready = "1";
})();
"""


def render_page(rp: Replay) -> str:
    """The whole page for replay ``rp``."""
    verdict = "verifies" if rp.ok else f"does not verify: {rp.reason}"
    signed = ", ".join(f"{s['role']} {'ok' if s['ok'] else 'BAD'}" for s in rp.signatures)
    e = html.escape
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>seabattle record {e(rp.match[:12])}</title>
<style>{BOARD_CSS}{_CSS}</style>
</head>
<body>
<h1>Match {e(rp.match)} <span class="muted">({e(rp.rules.name)})</span></h1>
<p id="verdict" class="badge {"verified" if rp.ok else "false"}">the record {e(verdict)}</p>
<p class="muted">seat 0 {e(rp.players[0][:16])}&hellip; &middot;
seat 1 {e(rp.players[1][:16])}&hellip; &middot; signatures: {e(signed or "none")}</p>
<div class="controls">
<button id="first" title="Home">&laquo;</button>
<button id="prev" title="Left arrow">&lsaquo;</button>
<button id="next" title="Right arrow">&rsaquo;</button>
<button id="last" title="End">&raquo;</button>
<input id="slider" type="range" min="0" value="0"> <span id="pos"></span>
</div>
<div id="now"></div>
<div id="boards" class="boards"></div>
<p id="end"></p>
<ol id="moves"></ol>
<script id="replay" type="application/json">{embed_json(rp.to_dict())}</script>
<script>{BOARD_JS}{_SCRIPT}</script>
</body>
</html>
"""
