"""An engine for the tests of faults: it plays simply (the first open cell of the grid, a random
fleet) except in the game ``--game`` (default 1), where it does what ``MODE`` says:

- ``crash``: exits with status 3 at its first move, saying why on stderr;
- ``hang``: never answers its first move;
- ``garbage``: answers its first move with a line that is not JSON;
- ``repeat``: calls a cell it fired at already (its second move);
- ``off``: calls a cell off the grid;
- ``count``: calls two cells where one is asked;
- ``decline``: declines the rules when asked for its fleet;
- ``classic-fleet``: places the classic fleet whatever the rules (it lies that it plays them);
- ``flood``: writes a megabyte on stderr before each answer (and plays on);
- ``fine``: plays every game.

``--rules NAME`` (repeatable): the rule sets its hello says it plays. ``--slow S``: sleeps S
seconds before its hello.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def send(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    p.add_argument("--game", type=int, default=1)
    p.add_argument("--rules", action="append", default=[])
    p.add_argument("--slow", type=float, default=0.0)
    a = p.parse_args()
    game, moves, last = 0, 0, ""
    for line in sys.stdin:
        req = json.loads(line)
        kind = req["type"]
        bad = a.mode if req.get("game", game) == a.game else "fine"
        if a.mode == "flood" and kind in ("engine", "place", "move"):
            sys.stderr.write("x" * 1_000_000 + "\n")
            sys.stderr.flush()
        if kind == "engine":
            time.sleep(a.slow)
            send({"type": "hello", "name": f"faulty-{a.mode}", "rules": a.rules})
        elif kind == "new_game":
            game, moves = req["game"], 0
        elif kind == "place":
            if bad == "decline":
                send({"type": "decline", "reason": "I only play on Tuesdays"})
            elif bad == "classic-fleet":
                ships = [[0, 0, False], [2, 0, False], [4, 0, False], [6, 0, False], [8, 0, False]]
                send({"type": "fleet", "ships": ships})
            else:
                send({"type": "fleet", "ships": "random"})
        elif kind == "move":
            moves += 1
            if bad == "crash":
                sys.stderr.write("faulty engine: out of cheese\n")
                sys.exit(3)
            if bad == "hang":
                time.sleep(3600)
            if bad == "garbage":
                sys.stdout.write("fire at will!\n")
                sys.stdout.flush()
                continue
            if bad == "off":
                send({"type": "fire", "cells": ["Z99"]})
                continue
            grid = req["grid"]
            open_ = [
                f"{chr(65 + c)}{r + 1}"
                for r, row in enumerate(grid)
                for c, mark in enumerate(row)
                if mark == "."
            ]
            cells = open_[: req["count"]]
            if bad == "count":
                cells = open_[:2]
            if bad == "repeat" and moves == 2:
                cells = [last]
            last = cells[0]
            send({"type": "fire", "cells": cells})
        elif kind == "quit":
            return


if __name__ == "__main__":
    main()
