#!/usr/bin/awk -f
# A seabattle engine in POSIX awk (spec/engine.md): hunt on a checkerboard, target around hits.
#   seabattle bot --server HOST:PORT --engine 'awk -f examples/engine.awk'
# The shell writes compact JSON with "type" first, so a pattern finds what this engine needs:
# the type, the number of cells to call, and the grid as the side knows it ('.' not fired at,
# 'x' a hit not known sunk). It lets the shell place its fleet at random.
BEGIN { srand() }

function field(name,    s) {
    if (!match($0, "\"" name "\":[0-9]+")) return 0
    s = substr($0, RSTART, RLENGTH); sub(/.*:/, "", s); return s + 0
}

function at(r, c) { return (r < 0 || r >= rows || c < 0 || c >= cols) ? "o" : substr(g[r], c + 1, 1) }

function add(r, c,    k) {
    k = r SUBSEP c
    if (at(r, c) != "." || (k in chosen) || n >= want) return
    chosen[k] = 1; n++
    out = out (out == "" ? "" : ",") "\"" sprintf("%c", 65 + c) (r + 1) "\""
}

function move(    s, r, c, i, tries, pass) {
    want = field("count")
    match($0, /"grid":\[[^]]*\]/)
    s = substr($0, RSTART + 8, RLENGTH - 9); gsub(/"/, "", s)
    rows = split(s, g, ","); for (r = 1; r <= rows; r++) g[r - 1] = g[r]
    cols = length(g[0]); n = 0; out = ""; split("", chosen)
    # target: the open neighbours of every hit
    for (r = 0; r < rows; r++) for (c = 0; c < cols; c++) if (at(r, c) == "x") {
        add(r - 1, c); add(r + 1, c); add(r, c - 1); add(r, c + 1)
    }
    # hunt: random cells of one colour of the checkerboard, then any open cell
    for (pass = 0; pass < 2 && n < want; pass++)
        for (tries = 0; tries < 4 * rows * cols && n < want; tries++) {
            r = int(rand() * rows); c = int(rand() * cols)
            if (pass == 1 || (r + c) % 2 == 0) add(r, c)
        }
    for (i = 0; i < rows * cols && n < want; i++) add(int(i / cols), i % cols)
    printf "{\"type\":\"fire\",\"cells\":[%s]}\n", out
}

/^\{"type":"engine"/ { print "{\"type\":\"hello\",\"name\":\"hunt.awk\",\"author\":\"seabattle examples\"}" }
/^\{"type":"place"/  { print "{\"type\":\"fleet\",\"ships\":\"random\"}" }
/^\{"type":"move"/   { move() }
/^\{"type":"quit"/   { exit }
{ fflush() }
