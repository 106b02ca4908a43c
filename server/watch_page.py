"""The two pages of the spectator's HTTP routes (:mod:`.watch`), each one self-contained HTML
document with its style and script inline (they load nothing from the network):

* :data:`PAGE`, the live page of one match (``/watch/MATCH``): ``@MATCH@`` is its id in hex and
  ``@DATA@`` the JSON of its first paint, which the route fills in;
* :data:`INDEX`, the running matches (``/watch/``): ``@DATA@`` is the JSON of the first list.
"""

from __future__ import annotations

from seabattle.common.web import BOARD_CSS, BOARD_JS, CSP

__all__ = ["INDEX", "PAGE"]

_LIVE_CSS = """
body { margin: 0; padding: 12px 24px; box-sizing: border-box; min-height: 100vh; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .4em 1.2em; }
header h1 { margin: 0; }
header code { font-size: .8em; color: #456; }
header nav { margin-left: auto; }
.pill { display: inline-block; padding: .05em .6em; border-radius: 1em; font-size: .8em;
  vertical-align: middle; font-weight: normal; }
.pill.live { background: #d3f5dc; color: #135f28; }
.pill.over { background: #dde3ea; color: #123; }
.pill.lost { background: #fdf0c4; color: #6b5200; }
#status { width: 100%; margin: .2em 0 .6em; color: #345; }
main { display: grid; grid-template-columns: auto auto minmax(16em, 1fr); gap: 28px;
  align-items: start; }
.seat { padding: 8px 10px 10px; border-radius: 8px; border: 2px solid transparent; }
.seat.turn { border-color: #f39c12; background: #fffaf0; }
.seat .who { display: flex; align-items: baseline; gap: .8em; font-size: 1.15em;
  margin-bottom: .3em; }
.seat .name { font-weight: bold; }
.seat .tag { font-size: .75em; color: #9a6700; }
.seat .score { color: #456; font-size: .85em; }
.seat .clock { margin-left: auto; font-variant-numeric: tabular-nums; color: #456; }
.seat .clock.running { color: #123; font-weight: bold; }
.seat .clock.urgent { color: #c0392b; }
.live .board th, .live .board td { width: var(--cell, 28px); height: var(--cell, 28px);
  padding: 0; font-size: calc(var(--cell, 28px) * .42); }
.live .board caption { display: none; }
.fleet { margin-top: .5em; font-size: .9em; }
.fleet .ship { display: inline-block; margin: .15em .5em .15em 0; padding: 0 .4em;
  border-radius: 4px; background: #e3f0fb; }
.fleet .ship.sunk { background: #f1d6d2; color: #8a1408; text-decoration: line-through; }
#side { display: flex; flex-direction: column; min-width: 0; }
#side h2 { font-size: 1em; margin: 0 0 .3em; }
#log { flex: 1; overflow-y: auto; margin: 0; padding: .3em .6em .3em 2.6em; background: #fff;
  border: 1px solid #c9d6e2; border-radius: 6px; min-height: 6em; }
#log li { padding: .05em 0; }
#log li.game { list-style: none; margin-left: -2em; font-weight: bold; color: #456; }
#log li.hit, #log li.sunk { color: #a00; }
#log li.pending { color: #678; font-style: italic; }
#log li.lost { color: #9a6700; }
#end { margin-top: .8em; }
#end p { margin: .3em 0; }
#end .result { font-size: 1.15em; font-weight: bold; }
#end { overflow-wrap: anywhere; }
#end code { font-size: .85em; }
"""

PAGE = (
    """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@; connect-src 'self'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seabattle: watching @MATCH@</title>
<style>@CSS@
</style>
</head>
<body>
<header>
<h1>Match <span id="state" class="pill live">live</span></h1>
<code id="match">@MATCH@</code>
<nav><a href="/watch/">all running matches</a></nav>
<div id="status"></div>
</header>
<main class="live" id="main">
<section class="seat" id="seat0"></section>
<section class="seat" id="seat1"></section>
<aside id="side"><h2>Moves</h2><ol id="log"></ol><div id="end"></div></aside>
</main>
<script id="snapshot" type="application/json">@DATA@</script>
<script>@JS@
(function () {
  var DOT = " \\u00b7 ", HEX = "@MATCH@";
  var REASONS = {
    fleet_sunk: "fleet sunk", setup_timeout: "did not place in time",
    nobody_placed: "neither side placed in time", shot_timeouts: "shot clocks ran out",
    no_answer: "a verdict not given in time", resigned: "resignation",
    abandoned: "a player left", false_proof: "a false proof",
    false_verdict: "a false verdict, shown by the reveal", illegal_fleet: "an illegal fleet",
    bad_reveal: "a reveal that is not the committed fleet", no_reveal: "no reveal",
    both_at_fault: "both sides at fault"
  };
  var first = JSON.parse(document.getElementById("snapshot").textContent);
  var v = null, rules = null, revealed = [null, null], log = [], ended = null, lost = false;
  var clock = null;
  window.sbViews = [];
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function name(s) {
    if (v.names && v.names[s]) return v.names[s];
    return v.players ? v.players[s].slice(0, 12) : "seat " + s;
  }
  function shipName(k) { return rules.fleet[k] ? rules.fleet[k][0] : "ship " + k; }
  function outcomeText(o) {
    var why = REASONS[o.reason] || o.reason;
    return (o.winner === null ? "a draw" : name(o.winner) + " wins") + " (" + why + ")";
  }
  function occupancy(fleet) {
    if (!fleet) return null;
    var occ = new Array(rules.rows * rules.cols).fill(0);
    fleet.forEach(function (p, k) {
      for (var j = 0; j < rules.fleet[k][1]; j++) {
        var r = p[0] + (p[2] ? j : 0), c = p[1] + (p[2] ? 0 : j);
        if (r < rules.rows && c < rules.cols) occ[r * rules.cols + c] = k + 1;
      }
    });
    return occ;
  }
  // Whose clock runs: the view says which clock and how long, the phase says for whom.
  function clockSeats() {
    if (!v.clock) return [];
    var k = v.clock.kind, t = v.turn;
    if (k === "shot") return t === null || t === undefined ? [] : [t];
    if (k === "answer") return t === null || t === undefined ? [] : [1 - t];
    if (k === "setup") return [0, 1].filter(function (s) { return !(v.committed || [])[s]; });
    if (k === "reveal") return [0, 1].filter(function (s) { return !revealed[s]; });
    return [0, 1];
  }
  function clockText(seat) {
    var limit = rules.clocks ? rules.clocks.shot : null;
    if (clock && clock.seats.indexOf(seat) >= 0) {
      var left = Math.max(0, Math.ceil(clock.left - (Date.now() - clock.at) / 1000));
      var mm = Math.floor(left / 60), ss = left % 60;
      return [clock.kind + " clock " + mm + ":" + (ss < 10 ? "0" : "") + ss, left];
    }
    if (v.over || !v.game) return ["", null];
    return [limit ? limit + " s a shot" : "no shot clock", null];
  }
  function tick() {
    [0, 1].forEach(function (seat) {
      var c = document.querySelector("#seat" + seat + " .clock");
      if (!c) return;
      var t = clockText(seat);
      c.textContent = t[0];
      c.className = "clock" + (t[1] !== null ? " running" : "") +
        (t[1] !== null && t[1] <= 10 ? " urgent" : "");
    });
  }
  setInterval(tick, 250);
  // The fleet's ships, sunk or afloat, as far as the rules tell sinkings (7.4 sunk).
  function fleetBox(seat) {
    var box = el("div", "fleet"), b = v.boards ? v.boards[seat] : null, sunk = {};
    (b ? b.sunk : []).forEach(function (x) { sunk[x[0]] = true; });
    var occ = occupancy(revealed[seat]), told = rules.sunk !== "silent";
    if (!told && occ && b) {
      // Silent sinkings: nobody is told, but a revealed fleet shows which ships were all hit.
      var hit = {};
      b.fired.forEach(function (f) { if (f[1] === "hit" || f[1] === "sunk") hit[f[0]] = true; });
      rules.fleet.forEach(function (f, k) {
        var all = true;
        occ.forEach(function (o, i) { if (o === k + 1 && !hit[i]) all = false; });
        if (all) sunk[k] = true;
      });
    }
    var n = rules.fleet.length, gone = Object.keys(sunk).length;
    if (!told && !occ) {
      box.appendChild(el("div", "afloat",
        "ships afloat: not told (silent sinkings)" + DOT + (b ? b.hits : 0) + " of " +
        rules.fleet.reduce(function (a, f) { return a + f[1]; }, 0) + " ship cells hit"));
      return box;
    }
    box.appendChild(el("div", "afloat", (n - gone) + " of " + n + " ships afloat"));
    rules.fleet.forEach(function (f, k) {
      var s = el("span", "ship" + (sunk[k] ? " sunk" : ""), f[0] + " " + f[1]);
      s.title = sunk[k] ? "sunk" : "afloat";
      box.appendChild(s);
    });
    return box;
  }
  function seatPanel(seat) {
    var p = $("seat" + seat), who = el("div", "who");
    p.textContent = "";
    who.appendChild(el("span", "name", name(seat)));
    // Marked: the seat that owes the next move (in answer, the defender owes its verdict).
    var firing = v.phase === "firing" && v.turn === seat;
    var answering = v.phase === "answer" && v.turn === 1 - seat, moving = firing || answering;
    if (firing) who.appendChild(el("span", "tag", "to move"));
    if (answering) who.appendChild(el("span", "tag", "answers the shot"));
    if (v.over && v.winner === seat) who.appendChild(el("span", "tag", "winner"));
    if (v.phase === "setup") who.appendChild(el("span", "tag",
      (v.committed || [])[seat] ? "fleet placed" : "placing"));
    var games = rules.match ? rules.match.games : 1;
    if (games > 1) who.appendChild(el("span", "score", "score " + v.scores[seat]));
    who.appendChild(el("span", "clock"));
    p.appendChild(who);
    p.className = "seat" + (moving ? " turn" : "");
    if (v.boards) {
      var t = sbBoard(rules, name(seat), v.boards[seat], occupancy(revealed[seat]), null);
      t.id = "board" + seat;
      t.title = name(seat) + "'s fleet, as the other side's shots found it";
      p.appendChild(t);
      p.appendChild(fleetBox(seat));
    } else p.appendChild(el("p", "muted", v.over
      ? "a finished match keeps its boards in its record: seabattle show FILE --html"
      : "the game has not begun"));
  }
  function moveText(e) {
    var who = name(e.seat);
    if (e.lost) return who + " lost a shot (" + (e.lost === "clock" ? "clock ran out"
        : "repeated a cell") + ")" + (e.cells.length ? ": " + e.cells.join(" ") : "");
    if (e.radar) return who + " radar at " + e.cells[0] + ": " + (e.found ? "found" : "nothing");
    var res = e.total !== null && e.total !== undefined
      ? e.total + (e.total === 1 ? " hit" : " hits") : e.results.join(", ");
    var s = who + " \\u2192 " + e.cells.join(" ") + ": " + res;
    if (e.sunk.length) s += "; sank " + e.sunk.map(shipName).join(", ");
    return s;
  }
  // Redraw with the log kept at its newest line if it was there (the end's lines below it
  // shorten it).
  function atBottom(ol) { return ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 8; }
  function drawLog() {
    var ol = $("log");
    ol.textContent = "";
    var game = null, many = (v.game || 1) > 1;
    log.forEach(function (e) {
      if (e.game !== game && (many || game !== null)) ol.appendChild(el("li", "game",
        "game " + e.game));
      game = e.game;
      var hit = e.total || (e.results || []).some(function (r) { return r !== "miss"; });
      var kind = e.lost ? "lost" : e.sunk && e.sunk.length ? "sunk" : hit ? "hit" : "miss";
      var li = el("li", kind, moveText(e));
      if (e.n) li.value = e.n;
      ol.appendChild(li);
    });
    if (!log.length && !v.pending) ol.appendChild(el("li", "game", "no shot yet"));
    if (v.pending && !v.over) ol.appendChild(el("li", "pending", name(v.pending.seat) +
      " \\u2192 " + v.pending.cells.join(" ") + ": \\u2026"));
  }
  function drawEnd() {
    var box = $("end"), state = $("state");
    box.textContent = "";
    if (v.outcome) box.appendChild(el("p", v.over ? "" : "result",
      "game " + v.game + ": " + outcomeText(v.outcome)));
    var over = v.over || ended;
    if (v.over) {
      var s = v.scores, games = rules.match ? rules.match.games : 1;
      box.appendChild(el("p", "result", "match over: " + (v.winner === null ? "a draw"
        : name(v.winner) + " wins") + (games > 1 ? " " + s[0] + "\\u2013" + s[1] : "")));
    }
    if (ended && ended.head) {
      var p = el("p"), a = el("a", "", "download the signed record");
      a.href = "/records/" + HEX;
      a.id = "record";
      a.setAttribute("download", HEX + ".sbr");
      p.appendChild(a);
      p.appendChild(document.createTextNode(" (check it offline: "));
      p.appendChild(el("code", "", "seabattle verify " + HEX + ".sbr"));
      p.appendChild(document.createTextNode(")"));
      box.appendChild(p);
      var q = el("p", "", "record head "), code = el("code", "", ended.head);
      code.id = "head";
      var copy = el("button", "", "copy");
      copy.onclick = function () {
        var done = function () { copy.textContent = "copied"; };
        if (navigator.clipboard) navigator.clipboard.writeText(ended.head).then(done);
        else {
          var r = document.createRange();
          r.selectNodeContents(code);
          getSelection().removeAllRanges();
          getSelection().addRange(r);
          if (document.execCommand("copy")) done();
        }
      };
      q.appendChild(code);
      q.appendChild(document.createTextNode(" "));
      q.appendChild(copy);
      box.appendChild(q);
    } else if (ended) box.appendChild(el("p", "", "the match ended without a record" +
      " (aborted, or moved to another server)"));
    else if (lost) {
      var gone = el("p", "", "the match no longer runs here; if it finished, ");
      var link = el("a", "", "its signed record");
      link.href = "/records/" + HEX;
      gone.appendChild(link);
      gone.appendChild(document.createTextNode(" is there"));
      box.appendChild(gone);
    }
    state.textContent = v.over ? "match over" : ended ? "ended" : lost ? "gone" : "live";
    state.className = "pill " + (over ? "over" : lost ? "lost" : "live");
  }
  function status() {
    var t = rules.name + DOT + v.mode, games = rules.match ? rules.match.games : 1;
    if (v.game) {
      t += DOT + "game " + v.game + (games > 1 ? " of " + games : "");
      if (v.over) t += DOT + "match over";
      else t += DOT + v.phase;
      t += DOT + v.shots + (v.shots === 1 ? " shot" : " shots");
    } else t += DOT + (v.over ? "match over" : "starting");
    $("status").textContent = t;
    document.title = name(0) + " vs " + name(1) + DOT + "seabattle";
  }
  // The largest cells that fit both boards and the log across, and a board down, the window.
  function fit() {
    if (!rules) return;
    var main = $("main"), side = $("side"), top = main.getBoundingClientRect().top;
    var across = (main.clientWidth - 2 * 28 - Math.max(side.offsetWidth, 256) - 24) / 2;
    var down = window.innerHeight - top - 130;
    var cell = Math.floor(Math.min(across / (rules.cols + 1), down / (rules.rows + 1)));
    main.style.setProperty("--cell", Math.max(14, Math.min(cell, 72)) + "px");
    side.style.maxHeight = Math.max(200, window.innerHeight - top - 16) + "px";
    side.style.height = side.style.maxHeight;
  }
  window.addEventListener("resize", fit);
  function show(d, source) {
    v = d.view;
    rules = v.rules;
    revealed = d.revealed;
    window.sbViews.push(d);
    if (d.reset) log = log.filter(function (e) { return e.game !== v.game; });
    d.moves.forEach(function (e) {
      // A shot told twice (the snapshot and a verdict after it) is logged once.
      if (e.n && log.some(function (x) { return x.game === e.game && x.n === e.n; })) return;
      log.push(e);
    });
    var seats = clockSeats();
    clock = v.clock ? {kind: v.clock.kind, left: v.clock.left, at: Date.now(), seats: seats}
      : null;
    status();
    seatPanel(0);
    seatPanel(1);
    tick();
    var stick = atBottom($("log"));
    drawLog();
    drawEnd();
    fit();
    if (stick) $("log").scrollTop = $("log").scrollHeight;
    var b = document.body.dataset;
    b.phase = v.phase || "";
    b.shots = v.shots || 0;
    b.over = v.over ? "1" : "";
    b.source = source;
  }
  show(first, "page");
  ended = first.end || null;
  if (ended) { drawEnd(); document.body.dataset.ended = "1"; return; }
  var src = new EventSource("/watch/" + HEX + "/events");
  src.addEventListener("view", function (e) {
    lost = false;
    show(JSON.parse(e.data), "stream");
  });
  src.addEventListener("end", function (e) {
    src.close();
    ended = JSON.parse(e.data);
    var stick = atBottom($("log"));
    drawEnd();
    if (stick) $("log").scrollTop = $("log").scrollHeight;
    document.body.dataset.ended = "1";
  });
  src.onerror = function () {
    if (ended) return;
    // Closed for good: the match left this server (404); otherwise the browser retries.
    lost = src.readyState === EventSource.CLOSED;
    if (lost) drawEnd();
    else { $("state").textContent = "reconnecting\\u2026"; $("state").className = "pill lost"; }
  };
})();
</script>
</body>
</html>
""".replace("@CSP@", CSP)
    .replace("@CSS@", BOARD_CSS + _LIVE_CSS)
    .replace("@JS@", BOARD_JS)
)


_INDEX_CSS = """
table.matches { border-collapse: collapse; background: #fff; min-width: 60%; }
.matches th, .matches td { text-align: left; padding: .35em .9em;
  border-bottom: 1px solid #dde3ea; }
.matches th { color: #456; font-weight: normal; background: #eef2f5; }
.matches td.id { font-family: ui-monospace, monospace; font-size: .85em; }
.matches td.num { text-align: right; font-variant-numeric: tabular-nums; }
#note, #more { color: #456; }
"""

INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@; connect-src 'self'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seabattle: running matches</title>
<style>@CSS@
</style>
</head>
<body>
<h1>Running matches</h1>
<p id="note"></p>
<table class="matches" id="matches">
<thead><tr><th>match</th><th>players</th><th>rules</th><th>mode</th><th>game</th>
<th>score</th><th>phase</th><th>watching</th></tr></thead>
<tbody></tbody>
</table>
<p id="empty"></p>
<p id="more"></p>
<script id="data" type="application/json">@DATA@</script>
<script>
(function () {
  var DOT = " \\u00b7 ", shown = "";
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function row(r) {
    var tr = el("tr"), a = el("a", "", r.match);
    a.href = "/watch/" + r.match;
    var id = el("td", "id");
    id.appendChild(a);
    tr.appendChild(id);
    tr.appendChild(el("td", "", r.names[0] + " vs " + r.names[1] + (r.teams ? " (teams)" : "")));
    tr.appendChild(el("td", "", r.rules));
    tr.appendChild(el("td", "", r.mode));
    tr.appendChild(el("td", "num", r.game + (r.games > 1 ? " of " + r.games : "")));
    tr.appendChild(el("td", "num", r.scores[0] + "\\u2013" + r.scores[1]));
    tr.appendChild(el("td", "", r.phase));
    tr.appendChild(el("td", "num", String(r.spectators)));
    tr.dataset.match = r.match;
    return tr;
  }
  // Redrawn only when something changed, in one swap of the rows: no flicker.
  function draw(d) {
    var key = JSON.stringify(d);
    if (key === shown) return;
    shown = key;
    var body = el("tbody");
    d.rows.forEach(function (r) { body.appendChild(row(r)); });
    var table = document.getElementById("matches");
    table.replaceChild(body, table.tBodies[0]);
    table.style.display = d.rows.length ? "" : "none";
    document.getElementById("empty").textContent = d.rows.length ? ""
      : "No public match is running on this server right now.";
    document.getElementById("more").textContent = d.total > d.rows.length
      ? "the " + d.rows.length + " newest of " + d.total + " running public matches" : "";
    document.getElementById("note").textContent = (d.cluster
      ? "The public matches node " + d.node + " of a cluster referees; other nodes list theirs."
      : "The public matches this server referees.") + " Private matches are not listed." + DOT +
      "refreshed every " + d.refresh + " s";
    document.body.dataset.rows = d.rows.length;
  }
  var data = JSON.parse(document.getElementById("data").textContent);
  draw(data);
  setInterval(function () {
    fetch("/watch/matches.json", {cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (d) draw(d);
        document.body.dataset.polls = +(document.body.dataset.polls || 0) + 1;
      })
      .catch(function () {});
  }, 1000 * data.refresh);
})();
</script>
</body>
</html>
""".replace("@CSP@", CSP).replace("@CSS@", BOARD_CSS + _INDEX_CSS)
