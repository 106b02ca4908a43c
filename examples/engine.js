#!/usr/bin/env node
// A seabattle engine in one page of JavaScript (spec/engine.md): hunt and target.
//   seabattle bot --server HOST:PORT --engine 'node examples/engine.js'
// It reads one JSON request a line on stdin and writes one JSON answer a line on stdout. It keeps
// no state: every `move` request carries the whole grid as the side knows it.
"use strict";
const readline = require("readline");

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
const label = (r, c) => String.fromCharCode(65 + c) + (r + 1);

// A fleet of our own, placed at random (touching ships only where the rules allow it).
function place(rules) {
  for (let attempt = 0; attempt < 1000; attempt++) {
    const taken = new Set();
    const ships = [];
    let ok = true;
    for (const [, length] of rules.fleet) {
      let placed = false;
      for (let tries = 0; tries < 200 && !placed; tries++) {
        const vertical = Math.random() < 0.5;
        const r = Math.floor(Math.random() * (rules.rows - (vertical ? length - 1 : 0)));
        const c = Math.floor(Math.random() * (rules.cols - (vertical ? 0 : length - 1)));
        const cells = [];
        for (let k = 0; k < length; k++) cells.push(vertical ? [r + k, c] : [r, c + k]);
        const clash = cells.some(([y, x]) => {
          for (let dy = -1; dy <= 1; dy++)
            for (let dx = -1; dx <= 1; dx++) {
              if (rules.touching && (dy || dx)) continue; // touching: only overlaps clash
              if (taken.has((y + dy) * rules.cols + (x + dx))) return true;
            }
          return false;
        });
        if (clash) continue;
        for (const [y, x] of cells) taken.add(y * rules.cols + x);
        ships.push([r, c, vertical]);
        placed = true;
      }
      if (!placed) { ok = false; break; }
    }
    if (ok) return { type: "fleet", ships };
  }
  return { type: "fleet", ships: "random" }; // too crowded for us: the shell draws one
}

// Hunt on a checkerboard; once a ship is hit and not known sunk, target its neighbours, along
// the line of two hits first.
function move(req) {
  const grid = req.grid.map((row) => row.split(""));
  const rows = grid.length, cols = grid[0].length;
  const at = (r, c) => (r >= 0 && r < rows && c >= 0 && c < cols ? grid[r][c] : "o");
  const open = [], targets = [], lines = [];
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      if (grid[r][c] !== ".") continue;
      open.push([r, c]);
      for (const [dr, dc] of [[0, 1], [0, -1], [1, 0], [-1, 0]]) {
        if (at(r + dr, c + dc) !== "x") continue;
        targets.push([r, c]);
        if (at(r + 2 * dr, c + 2 * dc) === "x") lines.push([r, c]);
      }
    }
  const even = open.filter(([r, c]) => (r + c) % 2 === 0);
  const cells = [];
  const seen = new Set();
  for (const pool of [lines, targets, even, open]) {
    const rest = pool.filter(([r, c]) => !seen.has(r * cols + c));
    while (cells.length < req.count && rest.length) {
      const [r, c] = rest.splice(Math.floor(Math.random() * rest.length), 1)[0];
      seen.add(r * cols + c);
      cells.push(label(r, c));
    }
  }
  return { type: "fire", cells };
}

const hello = { type: "hello", name: "hunt.js", author: "seabattle examples", rules: [] };
module.exports = { hello, place, move }; // for engine_http.js, the same engine as a web service

if (require.main === module) {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on("line", (line) => {
    if (!line.trim()) return;
    const req = JSON.parse(line);
    switch (req.type) {
      case "engine":
        send(hello);
        break;
      case "place":
        send(place(req.rules));
        break;
      case "move":
        send(move(req));
        break;
      case "quit":
        process.exit(0);
    }
    // new_game, result and game_over need no answer.
  });
  rl.on("close", () => process.exit(0));
}
