"""From the command line alone (issue 36): a public match opened with ``play --open``, found
with ``matches`` under its host's name and taken with ``play --join``; ``matches --running``
while it is played; ``player`` afterwards. Each command a real process against a server on port
0, in real time: every wait is bounded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from helpers import SMALL, start_server
from seabattle.client import api
from seabattle.protocol.session import PEOPLE

sys.path.insert(0, str(Path(__file__).parent))
from test_cli_commands import one_error, seabattle, spawn

pytest.importorskip("seabattle.server.app")


async def test_open_find_take_watch_list_and_figures(tmp_path: Path) -> None:
    rules = json.dumps(SMALL)
    cells = "".join(f"{c}{r}\n" for r in range(1, 6) for c in "ABCDE")
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        server = f"{addr[0]}:{addr[1]}"
        host = await spawn(
            "play", "--server", server, "--rules", rules, "--open", "--name", "alice", "--line"
        )
        mid = (await host.expect(r"open match ([0-9a-f]{32}): listed by seabattle matches"))[1]
        listed = await seabattle("matches", "--server", server, "--json")
        (row,) = json.loads(listed.stdout)
        assert (row["match"], row["name"]) == (mid, "alice")
        table = (await seabattle("matches", "--server", server)).stdout.decode()
        assert mid in table and "alice" in table and "play --join MATCH" in table
        guest = await spawn("play", "--server", server, "--join", mid, "--name", "bob", "--line")
        await host.expect(r"against bob")
        await guest.expect(r"against alice")
        # Nobody has placed yet: the match is running, and listed as such.
        running = await seabattle("matches", "--running", "--server", server, "--json")
        (row,) = json.loads(running.stdout)
        assert (row["match"], row["names"], row["game"]) == (mid, ["alice", "bob"], 1)
        table = (await seabattle("matches", "--running", "--server", server)).stdout.decode()
        assert mid in table and "alice" in table and "bob" in table
        assert f"seabattle watch MATCH --server {server}" in table
        for player in (host, guest):
            assert player.proc.stdin is not None
            await player.proc.stdin.send_all(("random\n" + cells).encode())
        assert await host.finish() == 0, host.text
        assert await guest.finish() == 0, guest.text
        figures = await seabattle("player", "alice", "--server", server, "--json")
        assert figures.returncode == 0, figures.stderr.decode()
        f = json.loads(figures.stdout)
        assert f["name"] == "alice" and f["games"] == 1 and f["wins"] + f["losses"] == 1
        assert f["shots"] > 0 and f["accuracy"] == f["hits"] / f["shots"]
        assert [h["match"] for h in f["history"]] == [mid]
        shown = (await seabattle("player", f["player"], "--server", server)).stdout.decode()
        assert "alice" in shown and "accuracy" in shown and f"of {f['shots']} shots" in shown
        one_error(await seabattle("player", "nobody", "--server", server), "no_such_player")
        nursery.cancel_scope.cancel()


async def test_open_takes_neither_invite_nor_join() -> None:
    r = await seabattle("play", "--server", "127.0.0.1:1", "--open", "--invite")
    one_error(r, "--open opens a public match")


async def test_the_library_gives_names_ratings_running_and_figures(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        addr, _ = await start_server(nursery, tmp_path)
        async with api.connect(*addr, name="alice") as a, api.connect(*addr, name="bob") as b:
            assert PEOPLE in a.wire.caps
            ha, _ = await a.create(SMALL, "custody", public=True)
            hb = await b.join(ha.id)
            with trio.fail_after(10):
                await ha.wait_started()
                await hb.wait_started()
            assert ha.names == hb.names == ("alice", "bob")
            assert ha.ratings == hb.ratings == (1500, 1500)
            (row,) = await b.running()
            assert row["match"] == ha.id and row["names"] == ["alice", "bob"]
            f = await b.figures("alice")
            assert (f["player"], f["games"], f["history"]) == (a.player, 0, [])
        nursery.cancel_scope.cancel()
