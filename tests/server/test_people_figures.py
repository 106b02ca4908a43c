"""Names, the running matches and a player's figures (spec 6.9, capability ``people``), over
real TCP: ``seated`` after ``start`` to the sessions that agreed ``people`` only, the view's and
``list``'s names, ``running`` and ``player``."""

from __future__ import annotations

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import SMALL, TC, Bot, play_both, raw
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.record import load_record
from seabattle.protocol.session import PEOPLE, auth_payload


async def people(
    addr: tuple[str, int], nursery: trio.Nursery, name: str, caps: tuple[str, ...] = (PEOPLE,)
) -> TC:
    """A connection that offers ``caps`` (``people`` by default) and authenticates as ``name``."""
    c = await raw(addr, nursery, Ed25519PrivateKey.generate())
    await c.send(m.Hello((2,), "test", caps))
    w = await c.expect(m.Welcome)
    assert (PEOPLE in w.caps) == (PEOPLE in caps)
    sig = c.key.sign(auth_payload(w.challenge, w.server, c.pub))
    await c.send(m.Auth(c.pub, sig, name, None))
    c.player = (await c.expect(m.Authed)).player
    return c


async def test_seated_follows_start_only_where_people_was_agreed(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a = await people(server, nursery, "alice")
    b = await people(server, nursery, "bob", caps=())
    ok = await a.request(m.Create(1, SMALL, "custody", True))
    listed = await b.request(m.ListMatches(2))
    (row,) = listed.data["matches"]
    assert (row["host"], row["name"]) == (a.player, "alice")
    assert isinstance(await b.request(m.Join(3, ok.data["match"], None)), m.Ok)
    start = await a.expect(m.Start)
    seated = await a.recv()
    assert isinstance(seated, m.Seated), seated
    assert seated.match == start.match and seated.names == ("alice", "bob")
    assert seated.ratings == (1500, 1500)  # neither has played: Glicko-2's default
    # bob's session did not agree people: its start is followed by the game, as before.
    await b.expect(m.Start)
    assert isinstance(await b.expect(m.GameStart), m.GameStart)
    # A spectator reads the names from the view (6.6).
    c = await people(server, nursery, "carol", caps=())
    assert isinstance(await c.request(m.Watch(4, ok.data["match"])), m.Ok)
    snap = await c.expect(m.Snapshot)
    assert snap.view["names"] == ["alice", "bob"] and snap.view["players"] == [a.player, b.player]


async def test_running_lists_public_matches_with_names_game_and_spectators(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b = await people(server, nursery, "alice"), await people(server, nursery, "bob")
    ok = await a.request(m.Create(1, {"preset": "russian"}, "blind", True))
    await b.request(m.Join(2, None, ok.data["invite"]))
    hidden = await a.request(m.Create(3, SMALL, "blind", False))  # private: never listed
    d = await people(server, nursery, "dave")
    await d.request(m.Join(4, None, hidden.data["invite"]))
    c = await people(server, nursery, "carol")
    assert isinstance(await c.request(m.Watch(5, ok.data["match"])), m.Ok)
    got = await c.request(m.Running(6))
    assert isinstance(got, m.Ok), got
    (row,) = got.data["matches"]
    assert row == {
        "match": ok.data["match"],
        "rules": "russian",
        "mode": "blind",
        "players": [a.player, b.player],
        "names": ["alice", "bob"],
        "game": 1,
        "spectators": 1,
    }


async def test_player_figures_after_a_match_by_name_and_by_id(
    server: tuple[str, int], nursery: trio.Nursery
) -> None:
    a, b = await people(server, nursery, "alice"), await people(server, nursery, "bob")
    ok = await a.request(m.Create(1, SMALL, "custody", True))
    await b.request(m.Join(2, None, ok.data["invite"]))
    ba, bb = Bot(a, "custody", 1), Bot(b, "custody", 2)
    with trio.fail_after(30):
        await play_both(ba, bb)
    assert ba.result is not None
    winner = ba.result.result["winner"]
    fa = (await a.request(m.PlayerFigures(3, "alice"))).data
    fb = (await a.request(m.PlayerFigures(4, b.player.upper()))).data
    assert (fa["player"], fa["name"], fb["player"], fb["name"]) == (
        a.player,
        "alice",
        b.player,
        "bob",
    )
    for f, seat in ((fa, 0), (fb, 1)):
        assert f["games"] == 1
        assert (f["wins"], f["losses"], f["draws"]) == ((1, 0, 0) if winner == seat else (0, 1, 0))
        assert f["shots"] >= f["hits"]
        (h,) = f["history"]
        assert h["match"] == ok.data["match"]
        assert h["opponent"] == (b.player if seat == 0 else a.player)
        assert h["result"] == ("win" if winner == seat else "loss")
        assert h["new"] == f["rating"] and h["old"] == 1500
    # SMALL's fleet is three cells, all hit by the winner; each seat's shots are its fire
    # entries in the record (one cell each: single shots).
    assert (fa, fb)[winner]["hits"] == 3
    signed = load_record((await a.request(m.GetRecord(5, ok.data["match"]))).data["record"])
    (game,) = signed["record"]["games"]
    fires = [e["seat"] for e in game["transcript"] if e["in"] == "fire"]
    assert (fa["shots"], fb["shots"]) == (fires.count(0), fires.count(1))


@pytest.mark.parametrize("who", ["nobody", "0" * 64, "twin"])
async def test_player_that_is_not_one_player_is_refused(
    server: tuple[str, int], nursery: trio.Nursery, who: str
) -> None:
    a = await people(server, nursery, "twin")
    await people(server, nursery, "twin")  # two players now carry that name
    got = await a.request(m.PlayerFigures(1, who))
    assert isinstance(got, m.Error) and got.code == ErrorCode.NO_SUCH_PLAYER and got.ref == 1
