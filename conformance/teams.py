"""Cases of team play (``spec/protocol.md`` 6.8): teams formed from ``create``'s invitations, the
``team`` and ``turn`` messages, and the refusals only team play has.

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.session import TEAMS

from .probe import Probe, _short
from .results import CaseFailed, Trace
from .suite import Suite, case

#: Two teams of two, refereed in custody (so that only the captains' placements are needed).
TEAM_RULES = {"preset": "classic", "team_size": 2, "name": "conformance-teams"}


async def _member(s: Suite, t: Trace, name: str) -> Probe:
    """A connection that offers the capability ``teams`` and is authenticated."""
    p = await s.connect(t, name)
    w = await p.hello(caps=(TEAMS,))
    if TEAMS not in w.caps:
        raise CaseFailed(f"{name}: welcome.caps {list(w.caps)} does not agree 'teams'")
    await p.send(p.auth_message())
    a = await p.expect(m.Authed)
    assert isinstance(a, m.Authed)
    p.player, p.token = a.player, a.resume
    return p


@case(
    "6.8-teams",
    "6.8 Team play",
    "Two teams of two: team, turn and who may call",
    "`create` of team rules [...] its `ok` holds [...] `teams: [code0, code1]` [...] Every member "
    "receives `start` [...] then `team{match, seat: 0, members}` and `team{match, seat: 1, "
    "members}` [...] the referee sends every player and spectator `turn{match, game, seat, "
    "member}` [...] A `fire` or `radar` whose `member` is not the sender's own number, or in the "
    "mover's turn is not the member `turn` named, is refused `NOT_CALLER`.",
    "ok{teams} to create; every join answered when the match is full; start, team x2 to every "
    "member; turn names member 0; the other member's fire NOT_CALLER, its resign NOT_CAPTAIN",
)
async def _teams(s: Suite, t: Trace) -> None:
    a, b, c, d = [await _member(s, t, n) for n in "ABCD"]
    created = await a.ok(lambda i: m.Create(i, TEAM_RULES, "custody", False))
    mid, codes = created.get("match"), created.get("teams")
    if not isinstance(mid, bytes) or not (
        isinstance(codes, list) and len(codes) == 2 and all(isinstance(x, str) for x in codes)
    ):
        raise CaseFailed(f"create of team rules answered {_short(created)}: no teams codes")
    ids = {}
    for p, code in ((b, codes[0]), (c, codes[1]), (d, codes[1])):
        ids[p.name] = p.next_id()
        await p.send(m.Join(ids[p.name], None, code))
    for p in (a, b, c, d):
        p.sit(mid)  # each member plays its seat with a seat machine of its own
    for p in (b, c, d):
        ans = await p.expect(m.Ok, m.Error)
        if not isinstance(ans, m.Ok) or ans.ref != ids[p.name] or ans.data.get("match") != mid:
            raise CaseFailed(f"{p.name}: join answered {_short(ans)}")
    # Seat 1's captain is whichever of C and D the server seated first.
    first = await a.expect(m.Start)
    assert isinstance(first, m.Start)
    c, d = (c, d) if first.players[1] == c.player else (d, c)
    want = [[a.player, b.player], [c.player, d.player]]
    for s_, p in ((0, a), (0, b), (1, c), (1, d)):
        st = first if p is a else await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.seat != s_ or list(st.players) != [a.player, c.player]:
            raise CaseFailed(f"{p.name}: start seat {st.seat}, players {list(st.players)}")
        for seat in (0, 1):
            tm = await p.expect(m.Team)
            assert isinstance(tm, m.Team)
            if tm.seat != seat or list(tm.members) != want[seat]:
                raise CaseFailed(f"{p.name}: team{{seat: {tm.seat}, members: {list(tm.members)}}}")
        await p.expect(m.GameStart)
    for p in (a, c):
        await p.place(s.rng)  # the captains place (custody)
    firing: m.Firing | None = None
    for p in (a, b, c, d):
        while True:
            msg = await p.expect(m.Committed, m.Firing, m.Turn)
            if isinstance(msg, m.Firing):
                firing = msg
            if isinstance(msg, m.Turn):
                break
        assert firing is not None
        if (msg.seat, msg.member) != (firing.first, 0):
            raise CaseFailed(f"{p.name}: the first turn names {msg.seat}/{msg.member}, not 0")
    assert firing is not None
    team = [(a, b), (c, d)][firing.first]
    other = team[1]
    seq = other.next_id()
    await other.send(m.Fire(mid, 1, ("A1",), 1, seq))
    await other.expect_error(ErrorCode.NOT_CALLER, seq)
    seq = other.next_id()
    await other.send(m.Fire(mid, 1, ("A1",), 0, seq))
    await other.expect_error(ErrorCode.NOT_CALLER, seq)
    await other.send(m.Resign(mid, 1))
    await other.expect_error(ErrorCode.NOT_CAPTAIN)
    seq = team[0].next_id()
    await team[0].send(m.Fire(mid, 1, ("A1",), 0, seq))
    shot = await team[0].expect(m.ShotCalled)
    assert isinstance(shot, m.ShotCalled)
    if (shot.seat, shot.member) != (firing.first, 0):
        raise CaseFailed(f"the captain's shot is announced as {shot.seat}/{shot.member}")
    t.notes.append("team rules: create, three joins, team x2, turn, NOT_CALLER, NOT_CAPTAIN")
