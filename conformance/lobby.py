"""Cases of the lobby: matches and their answers (``spec/protocol.md`` 6.1, 6.2), the receiver
rules of lobby requests (5.3) and rule sets on the wire (7.4).

Each case is registered by :func:`~.suite.case` when this module is imported; the package
imports the case modules in a fixed order, which is the order the cases run and are listed in.
"""

from __future__ import annotations

import os
import secrets

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.rules import rules_from_dict
from seabattle.protocol.session import PEOPLE
from seabattle.protocol.ticket import Ticket, issue_ticket

from .probe import NOISE, RULES, Probe, _err, _short, describe
from .results import CaseFailed, NotImplementedCase, Trace
from .suite import Suite, case, expect_game_over


@case(
    "6.2-create-list",
    "6.2 Answers to lobby requests",
    "create and list",
    "`create` | `{match: bin16, invite: str}` [...] `list` | `{matches: [{match: bin16, rules: "
    "map, mode: str, host: str, name: str}]}`",
    "ok{match, invite}; list shows the public match with full rules and the host's id",
)
async def _create_list(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    data = await p.ok(lambda i: m.Create(i, RULES, "blind", True))
    mid, invite = data.get("match"), data.get("invite")
    if not isinstance(mid, bytes) or len(mid) != 16 or not isinstance(invite, str):
        raise CaseFailed(f"create answered {_short(data)}")
    listed = await p.ok(lambda i: m.ListMatches(i))
    rows = [r for r in listed.get("matches", []) if isinstance(r, dict) and r.get("match") == mid]
    if len(rows) != 1:
        raise CaseFailed("list does not show the public match just created")
    row = rows[0]
    # Revision 6 (6.9) adds the host's display name; a server before it leaves it out.
    if (
        not {"match", "rules", "mode", "host"}
        <= set(row)
        <= {"match", "rules", "mode", "host", "name"}
    ):
        raise CaseFailed(f"list row keys are {sorted(row)}")
    if "name" in row and not isinstance(row["name"], str):
        raise CaseFailed(f"list row name is {_short(row['name'])}")
    if row["mode"] != "blind" or row["host"] != p.player:
        raise CaseFailed(f"list row mode={row['mode']!r} host={row['host']!r}")
    if rules_from_dict(row["rules"]).to_dict() != row["rules"]:
        raise CaseFailed("list row rules are not in full form")
    left = await p.ok(lambda i: m.Leave(i, mid))
    t.notes.append(f"leave answered {_short(left)}")
    listed = await p.ok(lambda i: m.ListMatches(i))
    if any(isinstance(r, dict) and r.get("match") == mid for r in listed.get("matches", [])):
        raise CaseFailed("a cancelled match is still listed")


@case(
    "6.1-private",
    "6.1 Matches",
    "Private matches are not listed",
    "A match is **public** (`create.public: true`: listed by `list`, open to `watch` by anyone) or "
    "private (not listed; watched only by its players).",
    "a private match is absent from list",
)
async def _private(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    data = await p.ok(lambda i: m.Create(i, RULES, "blind", False))
    listed = await p.ok(lambda i: m.ListMatches(i))
    if any(
        isinstance(r, dict) and r.get("match") == data.get("match")
        for r in listed.get("matches", [])
    ):
        raise CaseFailed("list shows a private match")


@case(
    "5.3-join",
    "5.3 Receiver rules: lobby requests",
    "join by invitation, and join's refusals",
    "Unknown match: `NO_SUCH_MATCH`; unknown, used or expired invitation: `BAD_INVITE`; a match "
    "that has started (both seats taken) or is over: `MATCH_FULL`; the sender is the match's host "
    "(a player cannot play itself): `NOT_ALLOWED`. [...] On success answer `ok`, then send `start` "
    "to both players (the `ok` comes first).",
    "NO_SUCH_MATCH, BAD_INVITE, NOT_ALLOWED; then ok{match} and start{seat} for both",
)
async def _join(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A")
    b = await s.player(t, "B")
    data = await a.ok(lambda i: m.Create(i, RULES, "blind", False))
    mid, invite = data["match"], data["invite"]
    for who, make, code in (
        (b, lambda i: m.Join(i, os.urandom(16), None), ErrorCode.NO_SUCH_MATCH),
        (b, lambda i: m.Join(i, None, "NO-SUCH-CODE"), ErrorCode.BAD_INVITE),
        (a, lambda i: m.Join(i, mid, None), ErrorCode.NOT_ALLOWED),
        (b, lambda i: m.Join(i, None, None), ErrorCode.BAD_MESSAGE),
    ):
        ans = await who.request(make)
        if not isinstance(ans, m.Error) or ans.code != int(code):
            raise CaseFailed(f"expected {_err(code)}, got {describe(ans)}")
    joined = await b.ok(lambda i: m.Join(i, None, invite))
    if joined.get("match") != mid:
        raise CaseFailed(f"join by invitation answered {_short(joined)}")
    seats = set()
    for p in (a, b):
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        seats.add(st.seat)
        if st.match != mid or st.mode != "blind" or len(st.players) != 2:
            raise CaseFailed(f"{p.name}: start {describe(st)}")
    if seats != {0, 1}:
        raise CaseFailed(f"seats {seats}")
    c = await s.player(t, "C")
    ans = await c.request(lambda i: m.Join(i, mid, None))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.MATCH_FULL):
        raise CaseFailed(f"joining a full match: expected MATCH_FULL, got {describe(ans)}")
    await a.send(m.Resign(mid, 1))


@case(
    "5.3-quick",
    "5.3 Receiver rules: lobby requests",
    "Quick match",
    "Pair the sender with the longest-waiting player of another key whose rule set has the same "
    "digest (section 7.4) and the same `mode`; if there is none, the sender waits and the `ok` "
    "comes only once paired (then `ok` to both, then `start` to both).",
    "both quick requests answered ok{match} with the same id; start for both",
)
async def _quick(s: Suite, t: Trace) -> None:
    # A rule set nobody else asks for, so that the two probes pair with each other.
    rules = dict(RULES, clocks={"grace": 1 + secrets.randbelow(1000)})
    a = await s.player(t, "A")
    b = await s.player(t, "B")
    ida = a.next_id()
    await a.send(m.Quick(ida, rules, "blind"))
    idb = b.next_id()
    await b.send(m.Quick(idb, rules, "blind"))
    mids = []
    for p, rid in ((a, ida), (b, idb)):
        ok = await p.expect(m.Ok)
        assert isinstance(ok, m.Ok)
        if ok.ref != rid:
            raise CaseFailed(f"{p.name}: ok.ref {ok.ref}, request id {rid}")
        mids.append(ok.data.get("match"))
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.match != ok.data.get("match"):
            raise CaseFailed(f"{p.name}: start names another match")
    if mids[0] != mids[1] or not isinstance(mids[0], bytes):
        raise CaseFailed(f"the two quick requests got matches {mids}")
    await a.send(m.Resign(mids[0], 1))


@case(
    "5.3-rematch",
    "5.3 Receiver rules: lobby requests",
    "Rematch",
    "the match MUST be over and known to the server (`NO_SUCH_MATCH` otherwise, including while it "
    "runs; [...] The request waits until the other player asks too [...] then the server creates a "
    "new match with the same rules, mode and visibility, answers both requests with its id, and "
    "sends `start` to both.",
    "NO_SUCH_MATCH while the match runs; after match_over both rematch requests get ok{match: the "
    "same new id}, then start with the same rules",
)
async def _rematch(s: Suite, t: Trace) -> None:
    tb = await s.table(t)
    a, b = tb.seats
    ans = await a.request(lambda i: m.Rematch(i, tb.match))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.NO_SUCH_MATCH):
        raise CaseFailed(f"rematch of a running match: expected NO_SUCH_MATCH, got {describe(ans)}")
    await a.send(m.Resign(tb.match, 1))
    await expect_game_over(tb.seats, 1, "resigned")
    for p in tb.seats:
        await p.expect(m.MatchOver)
    ids = {}
    for p in (a, b):
        rid = p.next_id()
        ids[p.name] = rid
        await p.send(m.Rematch(rid, tb.match))
    new = set()
    for p in (a, b):
        ok = await p.expect(m.Ok)
        assert isinstance(ok, m.Ok)
        if ok.ref != ids[p.name]:
            raise CaseFailed(f"{p.name}: ok.ref {ok.ref}, request id {ids[p.name]}")
        new.add(ok.data.get("match"))
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.match != ok.data.get("match") or st.rules != tb.starts[0].rules:
            raise CaseFailed(f"{p.name}: start is not the rematch under the same rules")
    rematch = new.pop() if len(new) == 1 else None
    if not isinstance(rematch, bytes) or rematch == tb.match:
        raise CaseFailed(f"the rematch requests got matches {new | {rematch}}")
    await a.send(m.Resign(rematch, 1))


@case(
    "7.4-bad-rules",
    "7.4 The wire form",
    "Rule sets that cannot be built",
    "A referee MUST refuse with `BAD_RULES`: an unknown preset; an unknown key at any level [...]; "
    "a value of the wrong type (a `bool` is not an `int`)",
    "error{BAD_RULES} for each",
)
async def _bad_rules(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    for rules in (
        {"preset": "no-such-preset"},
        {"preset": "classic", "colour": "blue"},
        {"preset": "classic", "rows": True},
        {"preset": "classic", "clocks": {"shot": -1}},
        {"preset": "classic", "crossed_out": True, "touching": True},
    ):
        ans = await p.request(lambda i, r=rules: m.Create(i, r, "blind", True))  # type: ignore[misc]
        if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.BAD_RULES):
            raise CaseFailed(f"rules {rules}: expected BAD_RULES, got {describe(ans)}")


@case(
    "5.3-get-record-unknown",
    "5.3 Receiver rules: lobby requests",
    "No record",
    "**`get_record`**: no signed record for that match (unknown, or not finished): "
    "`NO_SUCH_RECORD`.",
    "error{NO_SUCH_RECORD}",
)
async def _no_record(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    ans = await p.request(lambda i: m.GetRecord(i, os.urandom(16)))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.NO_SUCH_RECORD):
        raise CaseFailed(f"expected NO_SUCH_RECORD, got {describe(ans)}")


@case(
    "5.3-redeem-forged",
    "5.3 Receiver rules: lobby requests",
    "A forged ticket",
    "**`redeem`** (a node of a cluster, 4.10): check `sig` with the cluster key and decode "
    "`ticket`; a signature that does not verify [...]: `BAD_TICKET`. A server that is no "
    "cluster node: `BAD_TICKET`.",
    "error{BAD_TICKET}, whether or not the server is a node of a cluster",
)
async def _redeem_forged(s: Suite, t: Trace) -> None:
    p = await s.player(t, "A")
    # A well-formed ticket for this player, signed by a key that is not the server's.
    body, sig = issue_ticket(
        Ed25519PrivateKey.generate(),
        Ticket(p.player, os.urandom(16), "elsewhere", "127.0.0.1:1", 2**40),
    )
    ans = await p.request(lambda i: m.Redeem(i, body, sig))
    if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.BAD_TICKET):
        raise CaseFailed(f"expected BAD_TICKET, got {describe(ans)}")


# -- people (6.9): the requests and the event of names, running matches and figures ---------------


def _agreed_people(*probes: Probe) -> None:
    """Skip a case of 6.9 on a server that did not agree the capability people (optional)."""
    for p in probes:
        assert p.welcome is not None
        if PEOPLE not in p.welcome.caps:
            raise NotImplementedCase("the server does not agree the capability people (optional)")


@case(
    "6.9-seated",
    "6.9 People",
    "seated after start, names in the view",
    "a session that agreed `people` is sent `seated{match, names, ratings}` right after every "
    "`start` it is sent [...] `names` the two seats' display names by seat [...] Nothing else "
    "changes: a session without `people` is sent what it was sent before.",
    "A (people) gets start then seated with both auth names; B (no people) gets start then no "
    "seated; the view of a spectator's snapshot, if it has names, has the same",
)
async def _seated(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A", (PEOPLE,))
    _agreed_people(a)
    b = await s.player(t, "B")
    data = await a.ok(lambda i: m.Create(i, RULES, "blind", True))
    mid = data["match"]
    await b.ok(lambda i: m.Join(i, mid, None))
    st = await a.expect(m.Start)
    assert isinstance(st, m.Start)
    nxt = await a.expect(m.Seated)  # the next message but noise: anything else fails
    assert isinstance(nxt, m.Seated)
    names = ["A", "B"] if st.seat == 0 else ["B", "A"]
    if nxt.match != mid or list(nxt.names) != names:
        raise CaseFailed(f"seated {describe(nxt)}: expected names {names}")
    if len(nxt.ratings) not in (0, 2):
        raise CaseFailed(f"seated ratings {list(nxt.ratings)}: two, or none")
    await b.expect(m.Start)
    await b.expect(m.GameStart)  # B did not agree people: no seated comes before it
    c = await s.player(t, "C")
    await c.ok(lambda i: m.Watch(i, mid))
    snap = await c.expect(m.Snapshot)
    assert isinstance(snap, m.Snapshot)
    if "names" in snap.view and snap.view["names"] != names:
        raise CaseFailed(f"the view's names are {_short(snap.view['names'])}, expected {names}")
    await a.send(m.Resign(mid, 1))


@case(
    "6.9-running",
    "6.9 People",
    "running lists the public matches being played",
    "`running{id}` asks for the public matches being played (private matches are never listed) "
    "[...] each row `{match, rules, mode, players, names, game, spectators}`",
    "ok{matches}: the running public match with its rule set's name, both ids and names, game 1, "
    "one spectator; the running private match absent",
)
async def _running(s: Suite, t: Trace) -> None:
    c = await s.player(t, "C", (PEOPLE,))
    _agreed_people(c)
    pub = await s.table(t, public=True)
    hidden = await s.table(t, public=False)
    await c.ok(lambda i: m.Watch(i, pub.match))
    await c.expect(m.Snapshot)
    got = await c.ok(lambda i: m.Running(i))
    rows = [r for r in got.get("matches", []) if isinstance(r, dict)]
    if any(r.get("match") == hidden.match for r in rows):
        raise CaseFailed("running lists a private match")
    mine = [r for r in rows if r.get("match") == pub.match]
    if len(mine) != 1:
        raise CaseFailed("running does not list the public match being played")
    row = mine[0]
    want = {
        "match": pub.match,
        "rules": rules_from_dict(pub.starts[0].rules).name,
        "mode": "blind",
        "players": list(pub.starts[0].players),
        "game": 1,
        "spectators": 1,
    }
    wrong = {k: row.get(k) for k, v in want.items() if row.get(k) != v}
    names = row.get("names")
    if wrong or not (isinstance(names, list) and len(names) == 2):
        raise CaseFailed(f"running row {_short(row)}: wrong {sorted(wrong)}")
    for tb in (pub, hidden):
        await tb.seats[0].send(m.Resign(tb.match, 1))


@case(
    "5.3-player",
    "5.3 Receiver rules: lobby requests",
    "A player's figures, and no such player",
    "No player with that id, no player with that name, or a name whose players with the most "
    "rated games are more than one: `NO_SUCH_PLAYER` (the detail says which; a client then asks "
    "by id). Otherwise answer the player's figures.",
    "NO_SUCH_PLAYER for an unknown id and for a name two new players have; by its own id, a "
    "player's "
    "figures name it, with its name and every figure an integer",
)
async def _player(s: Suite, t: Trace) -> None:
    twin = "twin-" + secrets.token_hex(4)
    a = await s.player(t, twin, (PEOPLE,))
    _agreed_people(a)
    await s.player(t, twin, (PEOPLE,))
    for who in (secrets.token_hex(32), twin):
        ans = await a.request(lambda i, w=who: m.PlayerFigures(i, w))  # type: ignore[misc]
        if not isinstance(ans, m.Error) or ans.code != int(ErrorCode.NO_SUCH_PLAYER):
            raise CaseFailed(f"player {who!r}: expected NO_SUCH_PLAYER, got {describe(ans)}")
    f = await a.ok(lambda i: m.PlayerFigures(i, a.player.upper()))
    if f.get("player") != a.player or f.get("name") != twin:
        raise CaseFailed(f"figures name {_short(f.get('player'))} {_short(f.get('name'))}")
    counts = ("rating", "rd", "games", "wins", "losses", "draws", "shots", "hits")
    bad = [k for k in counts if type(f.get(k)) is not int]
    if bad or not isinstance(f.get("history"), list):
        raise CaseFailed(f"figures {_short(f)}: not integers {bad}, or no history list")
    if (f["games"], f["shots"], f["history"]) != (0, 0, []):
        raise CaseFailed(f"a player who never played has figures {_short(f)}")


# -- people (6.9.2, 6.9.4): challenges and the players' chat ---------------------------------------


async def _challenged(a: Probe, b: Probe) -> bytes:
    """``a`` challenges ``b`` by id; ``b`` is sent ``challenged`` naming ``a``: its id."""
    data = await a.ok(lambda i: m.Challenge(i, b.player, RULES, "blind"))
    cid = data.get("challenge")
    if not isinstance(cid, bytes):
        raise CaseFailed(f"challenge answered {_short(data)}")
    got = await b.expect(m.Challenged)
    assert isinstance(got, m.Challenged)
    if (got.challenge, got.player, got.mode) != (cid, a.player, "blind"):
        raise CaseFailed(f"B was sent {describe(got)}")
    return cid


async def _accepted(a: Probe, b: Probe, cid: bytes) -> bytes:
    """``b`` accepts ``cid``: both are told it ended ``accepted`` and sent the match's start."""
    rid = b.next_id()
    await b.send(m.Accept(rid, cid))
    gone_b = await b.expect(m.ChallengeGone)
    ok = await b.expect(m.Ok, m.Error)
    if not isinstance(ok, m.Ok) or ok.ref != rid or not isinstance(ok.data.get("match"), bytes):
        raise CaseFailed(f"accept answered {describe(ok)}")
    mid: bytes = ok.data["match"]
    gone_a = await a.expect(m.ChallengeGone)
    for who, gone in (("A", gone_a), ("B", gone_b)):
        assert isinstance(gone, m.ChallengeGone)
        if (gone.challenge, gone.reason, gone.match) != (cid, "accepted", mid):
            raise CaseFailed(f"{who} was sent {describe(gone)}")
    for p in (a, b):
        st = await p.expect(m.Start)
        assert isinstance(st, m.Start)
        if st.match != mid:
            raise CaseFailed(f"{p.name}'s start names another match")
    return mid


@case(
    "6.9.2-challenge",
    "6.9.2 Challenges",
    "A challenge declined, then one accepted",
    "When a challenge ends, the server sends `challenge_gone{challenge, reason, detail, match}` to "
    "the challenger's session and to every session of the target that was sent its `challenged` "
    "(for `accepted`, before the `ok` of the `accept` and before either `start`); `match` names "
    "the new match for `accepted` and is `nil` otherwise, `detail` is the decliner's reason or "
    "`nil`. After it, `accept`, `decline` and `cancel` of that challenge are refused "
    "`NO_SUCH_CHALLENGE`",
    "B declines with a reason: both get challenge_gone declined with it, B's accept of it is "
    "NO_SUCH_CHALLENGE; a second challenge accepted: challenge_gone accepted to both, ok{match}, "
    "start to both",
)
async def _challenge(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A", (PEOPLE,))
    b = await s.player(t, "B", (PEOPLE,))
    _agreed_people(a, b)
    cid = await _challenged(a, b)
    rid = b.next_id()
    await b.send(m.Decline(rid, cid, "not now"))
    gone_b = await b.expect(m.ChallengeGone)  # B was sent its challenged: told too
    ok = await b.expect(m.Ok, m.Error)
    if not isinstance(ok, m.Ok) or ok.ref != rid or ok.data != {"challenge": cid}:
        raise CaseFailed(f"decline answered {describe(ok)}")
    gone_a = await a.expect(m.ChallengeGone)
    for who, gone in (("A", gone_a), ("B", gone_b)):
        assert isinstance(gone, m.ChallengeGone)
        said = (gone.challenge, gone.reason, gone.detail, gone.match)
        if said != (cid, "declined", "not now", None):
            raise CaseFailed(f"{who} was sent {describe(gone)}")
    late = await b.request(lambda i: m.Accept(i, cid))
    if not isinstance(late, m.Error) or late.code != int(ErrorCode.NO_SUCH_CHALLENGE):
        raise CaseFailed(f"accept of a declined challenge: {describe(late)}")
    mid = await _accepted(a, b, await _challenged(a, b))
    await a.send(m.Resign(mid, 1))


@case(
    "6.9.4-chat",
    "6.9.4 Chat",
    "The players' chat, kept from spectators",
    "The server sends `said{match, seat, member, line}` to every session of the match's players "
    "that agreed `people`, the sender's included [...] A spectator's `say` is refused "
    "`NOT_ALLOWED`, and `said` is never sent to a spectator",
    "A says a line: A gets said before its ok, B gets it; spectator C gets nothing and its say "
    "is NOT_ALLOWED",
)
async def _chat(s: Suite, t: Trace) -> None:
    a = await s.player(t, "A", (PEOPLE,))
    b = await s.player(t, "B", (PEOPLE,))
    c = await s.player(t, "C", (PEOPLE,))
    _agreed_people(a, b, c)
    mid = await _accepted(a, b, await _challenged(a, b))
    await c.ok(lambda i: m.Watch(i, mid))
    await c.expect(m.Snapshot)
    rid = a.next_id()
    await a.send(m.Say(rid, mid, "good luck"))
    # What the match sends its players meanwhile (no fleet is placed) is no part of the case.
    skip = (*NOISE, m.Seated, m.GameStart, m.Committed)
    mine = await a.expect(m.Said, noise=skip)
    theirs = await b.expect(m.Said, noise=skip)
    for who, said in (("A", mine), ("B", theirs)):
        assert isinstance(said, m.Said)
        if (said.match, said.member, said.line) != (mid, 0, "good luck"):
            raise CaseFailed(f"{who} was sent {describe(said)}")
    ok = await a.expect(m.Ok, m.Error, noise=skip)
    if not isinstance(ok, m.Ok) or ok.ref != rid:
        raise CaseFailed(f"say answered {describe(ok)}")
    refused = await c.request(lambda i: m.Say(i, mid, "hello"))
    if not isinstance(refused, m.Error) or refused.code != int(ErrorCode.NOT_ALLOWED):
        raise CaseFailed(f"a spectator's say: {describe(refused)}")
    await c.quiet()  # a said sent to the spectator would come before the pong
    await a.send(m.Resign(mid, 1))


@case(
    "6.9-people-refused",
    "6.9 People",
    "Challenges and chat need the capability",
    "refuses the rest (challenges and chat, whose outcome travels as events) with `NOT_ALLOWED` "
    "from a session that did not agree `people`",
    "challenge from a session without people: NOT_ALLOWED with ref id",
)
async def _people_refused(s: Suite, t: Trace) -> None:
    b = await s.player(t, "B", (PEOPLE,))
    _agreed_people(b)
    plain = await s.player(t, "P")
    rid = plain.next_id()
    await plain.send(m.Challenge(rid, b.player, RULES, "blind"))
    await plain.expect_error(ErrorCode.NOT_ALLOWED, rid)
