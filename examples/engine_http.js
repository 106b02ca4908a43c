#!/usr/bin/env node
// The engine of engine.js as a web service (spec/engine.md section 5): POST /hello,
// /placement and /move, each with the line protocol's JSON as its body and its answer.
//   node examples/engine_http.js [PORT]        (no PORT, or 0: a free one)
//   seabattle bot --server HOST:PORT --engine-url http://127.0.0.1:PORT
// It prints {"listening": URL} once it listens, on 127.0.0.1 only.
"use strict";
const http = require("http");
const { hello, place, move } = require("./engine.js");

const answers = {
  hello: () => hello,
  placement: (req) => place(req.rules),
  move: (req) => move(req),
};

const server = http.createServer((req, res) => {
  // The last part of the path names the request: a base URL may have a path of its own.
  const answer = answers[req.url.split("?")[0].split("/").pop()];
  if (req.method !== "POST" || !answer) {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let body;
    try {
      body = JSON.stringify(answer(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
    } catch (e) {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200, {
      "Content-Type": "application/json",
      "Content-Length": Buffer.byteLength(body),
    });
    res.end(body);
  });
});

server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(JSON.stringify({ listening: url }) + "\n");
});
