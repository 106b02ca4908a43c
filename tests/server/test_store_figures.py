"""A player's figures in the store (spec 6.9's ``player``), on both backends (the ``db``
fixture): shots and hits written once a match, summed over its matches; the rating history from
either side; players by name and by id."""

from __future__ import annotations

from seabattle.server.ladder import Rating, update
from seabattle.server.store import Store

ALICE, BOB, CAROL = "a" * 64, "b" * 64, "c" * 64
RULES = b"\x81\xa4grid\x0a"
NOW = 1_700_000_000


async def _match(store: Store, n: int, a: str, b: str) -> str:
    match_id = f"{n:032x}"
    await store.create_match(match_id, RULES, "classic", a, b, NOW + n, status="playing")
    return match_id


async def test_figures_sum_shots_and_hits_once_a_match(db: str) -> None:
    async with Store.open(db) as store:
        for p, name in ((ALICE, "alice"), (BOB, "bob"), (CAROL, "carol")):
            await store.upsert_player(p, name, NOW)
        m1 = await _match(store, 1, ALICE, BOB)
        m2 = await _match(store, 2, CAROL, ALICE)
        await store.put_figures(m1, [(ALICE, 30, 17), (BOB, 29, 12)])
        # Concluded again (a replay, a retry): counted once.
        await store.put_figures(m1, [(ALICE, 30, 17), (BOB, 29, 12)])
        await store.put_figures(m2, [(CAROL, 10, 2), (ALICE, 11, 5)])
        await store.apply_result(m1, ALICE, BOB, 1.0, NOW + 10)
        await store.apply_result(m2, CAROL, ALICE, 1.0, NOW + 20)
        f = await store.figures(ALICE)
        assert f is not None
        assert (f.player.name, f.shots, f.hits) == ("alice", 41, 22)
        assert (f.player.games, f.player.wins, f.player.losses) == (2, 1, 1)
        # Newest first; each told from alice's side, the second from seat b.
        second, first = f.history
        assert (first.match_id, first.opponent, first.score) == (m1, BOB, 1.0)
        assert (second.match_id, second.opponent, second.score) == (m2, CAROL, 0.0)
        won = update(Rating(), Rating(), 1.0)[0]
        assert (first.old, first.new, first.created) == (1500.0, won.rating, NOW + 10)
        assert second.old == won.rating and second.new == f.player.rating
        bob = await store.figures(BOB)
        assert bob is not None and (bob.shots, bob.hits, len(bob.history)) == (29, 12, 1)
        assert await store.figures("d" * 64) is None


async def test_players_by_name_and_by_id(db: str) -> None:
    async with Store.open(db) as store:
        await store.upsert_player(ALICE, "twin", NOW)
        await store.upsert_player(BOB, "twin", NOW)
        await store.upsert_player(CAROL, "carol", NOW)
        assert await store.players_named("twin") == [(ALICE, 0), (BOB, 0)]
        assert await store.players_named("carol") == [(CAROL, 0)]
        await store.apply_result(await _match(store, 1, BOB, CAROL), BOB, CAROL, 0.5, NOW)
        assert await store.players_named("twin") == [(BOB, 1), (ALICE, 0)]
        assert await store.players_named("Carol") == []
        got = await store.players([CAROL, ALICE, "d" * 64])
        assert {k: v.name for k, v in got.items()} == {ALICE: "twin", CAROL: "carol"}
        assert await store.players([]) == {}
