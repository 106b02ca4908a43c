"""The lobby: open matches, invitations, the quick-match queue, rematches, spectators, records and
the ladder (``spec/protocol.md`` 5.6, step 2), and the routing of game messages to their
referee.

Every request is answered ``ok{ref: id, data}`` or ``error{code, msg, ref: id}``; a handler that
returns ``None`` answers later (``quick`` and ``rematch`` wait for the other player). The lobby
owns the referees: it starts each in the server's match nursery and keeps finished ones for a
while, for co-signatures, rematches and records (a match no longer in memory is co-signed through
the store, which checks the signature itself).

Hostile lobbies. Requests that name rules (``create``, ``quick``) are rate limited per connection
(``create_rate``); a connection hosts at most ``open_per_peer`` open matches and holds one place in
the quick queue. A rule set that changes the grid or the fleet makes the core search for a legal
placement, which a crafted fleet can stretch to minutes: that check runs in a worker thread, one
at a time, and is stopped at ``rules_timeout`` (:func:`parse_rules_within`), so the event loop
and every match go on meanwhile.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.errors import ErrorCode, Refused, RemoteProtocolError
from seabattle.protocol.grid import BLANKS
from seabattle.protocol.rules import RuleSet, rules_from_dict
from seabattle.protocol.ticket import open_ticket

from .config import Limits, Peer, Timers, TokenBucket, peer_context
from .journal import Journal
from .lobby_rules import _SHAPE_KEYS, parse_rules_within
from .lobby_state import (
    OpenMatch,
    _add,
    _discard,
    _match_log,
    _now,
    _values,
    _Waiting,
)
from .lobby_teams import TeamLobby
from .metrics import Metrics
from .people import People
from .records import add_cosign, add_cosign_stored
from .referee import GAME_MESSAGES, MODES, Referee, Seat
from .store import Conflict, Store
from .store_cluster import Handoff, Paired
from .store_rows import as_player_id

__all__ = ["Lobby", "OpenMatch", "parse_rules_within"]

_log = logging.getLogger("seabattle.server.lobby")

_INVITE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud without doubt


class Lobby(TeamLobby):
    """Matches between authenticated peers; see the module docstring."""

    def __init__(
        self,
        store: Store,
        key: Ed25519PrivateKey,
        nursery: trio.Nursery,
        limits: Limits,
        metrics: Metrics | None = None,
        *,
        timers: Timers | None = None,
        journal: Journal | None = None,
        node: str = "main",
    ) -> None:
        super().__init__(
            store, key, nursery, limits, metrics, timers=timers, journal=journal, node=node
        )
        # One rule check at a time in a thread: a flood of crafted fleets costs one core at most.
        self._rules_limiter = trio.CapacityLimiter(1)
        self._rule_buckets: dict[Peer, TokenBucket] = {}
        self._handlers: dict[
            type[m.Message], Callable[[Peer, Any], Awaitable[dict[str, Any] | None]]
        ]
        self._handlers = {
            m.Create: self._create,
            m.ListMatches: self._list,
            m.Join: self._join,
            m.Quick: self._quick,
            m.Leave: self._leave,
            m.Watch: self._watch,
            m.Rematch: self._rematch,
            m.GetRecord: self._get_record,
            m.Ladder: self._ladder,
            m.Redeem: self._redeem,
            m.Running: self._running,
            m.PlayerFigures: self._player,
        }
        #: who is online, challenges and chat (spec 6.9): their requests are its
        self.people = People(self)
        self._handlers.update(self.people.handlers())

    # -- entry points for connections -----------------------------------------------------------

    def is_request(self, msg: m.Message) -> bool:
        """Whether ``msg`` is a lobby request (it carries an ``id``)."""
        return type(msg) in self._handlers

    async def request(self, peer: Peer, msg: m.Message) -> None:
        """Answer one lobby request (errors propagate to the caller, which sends them)."""
        reads = m.GetRecord | m.Ladder | m.ListMatches | m.Running | m.PlayerFigures
        if self.closing and not isinstance(msg, reads):
            raise Refused(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        data = await self._handlers[type(msg)](peer, msg)
        ref = self.errors_ref(msg)
        if data is not None and ref is not None:
            peer.send(m.Ok(ref, data))

    async def game_message(self, peer: Peer, msg: m.Message) -> None:
        """Route a game message (or a co-signature) to the referee of its match."""
        mid = getattr(msg, "match", None)
        if not isinstance(mid, bytes):
            raise RemoteProtocolError(ErrorCode.UNEXPECTED_MESSAGE, f"{msg.TAG!r} names no match")
        ref = self.running.get(mid) or self.finished.get(mid)
        if ref is None and isinstance(msg, m.CoSign) and len(mid) == 16:
            await add_cosign_stored(self.store, peer.player, msg)
            return
        if ref is None:
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no such running match")
        found = ref.member_of(peer)
        if found is None:
            raise Refused(ErrorCode.NOT_ALLOWED, "you do not play in this match")
        seat, member = found
        if isinstance(msg, m.CoSign):
            if member:
                raise Refused(ErrorCode.NOT_CAPTAIN, "the team's captain co-signs its record")
            await add_cosign(ref, self.store, seat, msg)
        elif isinstance(msg, GAME_MESSAGES):
            ref.handle(seat, msg, None if ref.teams is None else member)
        else:
            raise RemoteProtocolError(ErrorCode.UNEXPECTED_MESSAGE, f"{msg.TAG!r} is not routed")

    def authenticated(self, peer: Peer, resume: bool) -> None:
        """``peer`` authenticated: give it back the seats its player holds in running matches.

        With a valid resume token every seat is taken over; without one, only seats nobody holds
        (a player who lost its token still gets back into a match it dropped out of).
        """
        for ref in _values(self._seated, peer.player):
            found = ref.member_of_player(peer.player)
            if found is None:  # pragma: no cover - the index holds only the player's matches
                continue
            seat, member = found
            old = ref.slot(seat, member).peer
            if resume or old is None:
                ref.attach(seat, peer, member)
                _add(self._present, peer, ref)
                if old is not None and not self._is_present(ref, old):
                    _discard(self._present, old, ref)
        self.people.authenticated(peer)
        if self.cluster is not None:
            _add(self._online, peer.player, peer)
            for mid, a in list(self.arriving.items()):
                if peer.player in a.away:
                    self.arrived(peer, mid)
            self.nursery.start_soon(self._look_elsewhere, peer)

    async def _look_elsewhere(self, peer: Peer) -> None:
        """Send ``peer`` to its matches that other nodes referee; take over those whose node's
        lease ended (they then seat it here)."""
        cluster = self.cluster
        assert cluster is not None
        try:
            rows = await self.store.elsewhere(peer.player, self.node, int(cluster.wall() * 1000))
            for mid, node, addr in rows:
                if addr is not None and peer.connected:
                    self._redirect(peer, bytes.fromhex(mid), node, addr)
            if any(addr is None for _, _, addr in rows):
                await self.sweep()
        except Exception:
            _log.exception("looking for %s's matches on other nodes failed", peer.player[:12])

    async def lease_lost(self) -> None:
        """This node's lease was taken (it stalled past it, or the store was away that long, and
        another node took its running matches over). What it held in the store's shared places
        is gone: its open matches are withdrawn with a word to whoever waits (its quick-queue
        entries are put back once it has registered again, :meth:`rejoined`); each running
        match it no longer referees is let go of (:meth:`_let_go`)."""
        for mid in list(self.open):
            om = self._take_open(mid)
            for w in om.joined[0] + om.joined[1]:
                w.peer.send(m.Error(int(ErrorCode.NO_SUCH_MATCH), "the match was withdrawn", w.id))
            if om.team_invites is not None:
                self._withdraw_team_here(mid)
                self.nursery.start_soon(self._withdraw_team, mid)
            if om.host.connected:
                om.host.close("moved")
        refs = [r for r in self.running.values() if r.fence is not None and not r.fenced]
        kept = await self.store.owned(self.node, {r.hex: r.fence.epoch for r in refs if r.fence})
        for ref in refs:
            if ref.hex not in kept:
                ref.let_go()

    async def rejoined(self) -> None:
        """This node registered again after its lease was taken, which dropped its entries in
        the shared quick queue: its players still waiting there are queued again (they keep
        waiting; nobody is told to ask again)."""
        for old, w in list(self._entries.items()):
            key = self._queued.get(w.peer)
            if key is None or not w.peer.connected:
                continue
            try:
                entry = await self.store.queue_put(self.node, w.peer.player, *key, _now())
            except Exception:
                _log.exception("queueing %s again failed", w.peer.player[:12])
                continue
            if self._entries.pop(old, None) is w:
                w.entry = entry
                self._entries[entry] = w

    def handed_off(self, handoffs: list[Handoff]) -> None:
        """Players waiting here were paired into matches other nodes referee: send them there."""
        for h in handoffs:
            mid = bytes.fromhex(h.match_id)
            om = self.open.get(mid)
            if h.entry is None and (
                (mid, h.player) in self._team_waits or (om and om.team_invites is not None)
            ):
                self.nursery.start_soon(self._team_handed_off, h)
            elif h.entry is not None:
                w = self._entries.get(h.entry)
                if w is None:
                    continue  # it left meanwhile: it finds its match when it comes back
                self._unqueue(w)
                if w.peer.connected:
                    w.peer.send(m.Ok(w.id, {"match": mid}))
                    self._redirect(w.peer, mid, h.node, h.addr)
            elif mid in self.open:
                om = self._take_open(mid)
                if om.host.connected:
                    self._redirect(om.host, mid, h.node, h.addr)

    def _unqueue(self, w: _Waiting) -> None:
        """Take ``w`` out of the quick queue (its entry in the shared queue is gone already)."""
        key = self._queued.get(w.peer)
        if key is not None and self.quick_queue.get(key) is w:
            del self.quick_queue[key]
            del self._queued[w.peer]
        self._forget_entry(w)

    def _forget_entry(self, w: _Waiting) -> bool:
        """``w`` waits in the shared queue no more (here); whether it did until now."""
        if w.entry is None or self.cluster is None or self._entries.pop(w.entry, None) is None:
            return False
        self.cluster.waits(-1)
        return True

    def disconnected(self, peer: Peer) -> None:
        """``peer``'s connection ended: free its seats, queue places, offers and open matches."""
        self._rule_buckets.pop(peer, None)
        self.people.disconnected(peer)
        key = self._queued.pop(peer, None)
        if key is not None and (w := self.quick_queue.get(key)) is not None and w.peer is peer:
            del self.quick_queue[key]
            self._drop_entry(w)
        if self.cluster is not None:
            _discard(self._online, peer.player, peer)
        for mid in _values(self._offered, peer, pop=True):
            offers = self.rematch_offers.get(mid, {})
            for seat, w in list(offers.items()):
                if w.peer is peer:
                    del offers[seat]
        for mid in _values(self._hosted, peer):
            self._cancel_open(mid)
        for mid in _values(self._joining, peer):
            self._left_team(peer, mid)
        for ref in _values(self._present, peer, pop=True):
            ref.detach(peer)

    @staticmethod
    def _is_present(ref: Referee, peer: Peer) -> bool:
        """Whether ``peer`` holds a seat in ``ref`` or watches it (what ``_present`` records)."""
        return ref.seat_of(peer) is not None or peer in ref.spectators

    # -- requests ---------------------------------------------------------------------------------

    def _rate(self, peer: Peer) -> None:
        """Refuse a peer that asks for matches faster than ``create_rate``."""
        bucket = self._rule_buckets.get(peer)
        if bucket is None:
            bucket = TokenBucket(self.limits.create_rate, self.limits.create_burst)
            self._rule_buckets[peer] = bucket
        if not bucket.take():
            limits = self.limits
            raise Refused(
                ErrorCode.RATE_LIMITED,
                f"match-request limit ({limits.create_burst} at once, {limits.create_rate:g}"
                " a second): this request was dropped; send it again later",
            )

    async def _parse(self, rules: dict[str, Any], mode: str) -> RuleSet:
        """The rule set a peer asks for, its check bounded in time (``rules_timeout``)."""
        if mode not in MODES:
            raise RemoteProtocolError(ErrorCode.BAD_RULES, f"mode {mode!r}: one of {MODES}")
        if not _SHAPE_KEYS & rules.keys():
            return rules_from_dict(rules)  # BadRules carries BAD_RULES
        timeout = self.limits.rules_timeout
        # Waiting for the thread counts too: a queue of slow checks must not hold this peer long.
        with trio.move_on_after(2 * timeout + 1):
            return await trio.to_thread.run_sync(
                parse_rules_within, rules, timeout, limiter=self._rules_limiter
            )
        raise Refused(ErrorCode.BAD_RULES, "the server is busy checking other rule sets")

    def _new_id(self) -> bytes:
        return secrets.token_bytes(16)

    async def _create(self, peer: Peer, msg: m.Create) -> dict[str, Any]:
        self._rate(peer)
        hosted = len(_values(self._hosted, peer))
        if hosted >= self.limits.open_per_peer:
            raise Refused(ErrorCode.NOT_ALLOWED, f"at most {hosted} open matches at a time")
        rules = await self._parse(msg.rules, msg.mode)
        team = self._team_rules(peer, rules)
        mid = self._new_id()
        invite = _invite_code()
        team_invites = (_invite_code(), _invite_code()) if team else None
        # A team match stays on its host's node: its members come to it (lobby_teams).
        movable = self.cluster is not None and peer.follows and not team
        await self.store.create_match(
            mid.hex(),
            canonical_pack(rules.to_dict()),
            msg.mode,
            peer.player,
            None,
            _now(),
            node=self.node,
            public=msg.public,
            invite=invite,
            movable=movable,
            team_invites=team_invites if self.cluster is not None else None,
        )
        om = OpenMatch(mid, rules, msg.mode, msg.public, peer, invite, movable)
        self.open[mid] = om
        self.invites[invite] = mid
        answer: dict[str, Any] = {"match": mid, "invite": invite}
        if team_invites is not None:
            om.team_invites = team_invites
            for code in team_invites:
                self.invites[code] = mid
            answer["teams"] = list(team_invites)
        _add(self._hosted, peer, mid)
        if (movable or team) and self.cluster is not None:
            # Someone may join from another node: the handoffs for this node are polled.
            self.cluster.waits(+1)
        _match_log(mid).info(
            "created by %s (%s)",
            peer.player[:12],
            msg.mode,
            extra=peer_context(peer),
        )
        return answer

    def _team_rules(self, peer: Peer, rules: RuleSet) -> bool:
        """Whether ``rules`` are for teams (spec 6.8); refuses a session that cannot play them."""
        if rules.team_size == 1:
            return False
        if not peer.teams:
            raise Refused(
                ErrorCode.NOT_ALLOWED, "team play needs the capability 'teams' (spec 6.8)"
            )
        return True

    async def _list(self, peer: Peer, msg: m.ListMatches) -> dict[str, Any]:
        if self.cluster is not None:
            # Every node's open matches: a player here may join one hosted elsewhere.
            found = await self.store.open_matches(self.limits.list_max)
            hosts = await self.store.players(r.host for r in found)
            return {
                "matches": [
                    {
                        "match": bytes.fromhex(r.id),
                        "rules": msgpack.unpackb(r.rules, raw=False),
                        "mode": r.mode,
                        "host": r.host,
                        "name": hosts[r.host].name if r.host in hosts else r.host[:12],
                    }
                    for r in found
                ]
            }
        # Bounded (spec 2.4): the oldest first, those that have waited longest for a player.
        listed = itertools.islice(
            (om for om in self.open.values() if om.public), self.limits.list_max
        )
        rows = [
            {
                "match": om.match_id,
                "rules": om.rules.to_dict(),
                "mode": om.mode,
                "host": om.host.player,
                "name": om.host.name,
            }
            for om in listed
        ]
        return {"matches": rows}

    async def _join(self, peer: Peer, msg: m.Join) -> dict[str, Any] | None:
        # Exactly one of match and invite (5.3): neither, or both, is BAD_MESSAGE.
        if (msg.match is None) == (msg.invite is None):
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, "join names exactly one of a match and an invitation"
            )
        team: int | None = None  # the team a team invitation joins
        code: str | None = None
        if msg.invite is not None:
            # Blanks and case as spec 2.4 defines them: space and tab, ASCII letters only.
            code = msg.invite.strip(BLANKS)
            code = code.upper() if code.isascii() else code
            mid = self.invites.get(code)
            if mid is None and self.cluster is not None:
                found = await self.store.invited_match(code)
                if found is None and (team_found := await self.store.team_invite(code)):
                    found, team = team_found
                mid = None if found is None else bytes.fromhex(found)
            if mid is None:
                raise Refused(ErrorCode.BAD_INVITE, "no open match has that invitation")
        else:
            assert msg.match is not None
            mid = msg.match
        om = self.open.get(mid)
        if om is None:
            if mid in self.running or mid in self.finished:
                raise Refused(ErrorCode.MATCH_FULL, "that match has both players")
            if self.cluster is not None and len(mid) == 16:
                row = await self.store.get_match(mid.hex())
                rules = None if row is None else rules_from_dict(msgpack.unpackb(row.rules))
                if row is not None and rules is not None and rules.team_size > 1:
                    if row.status != "open":
                        raise Refused(ErrorCode.MATCH_FULL, "that match has both teams")
                    self._team_rules(peer, rules)
                    await self._join_team_stored(peer, msg.id, mid, rules, team)
                    return None
                await self._join_elsewhere(peer, msg.id, mid)
                return None
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no open match with that id")
        if om.host.player == peer.player:
            raise Refused(ErrorCode.NOT_ALLOWED, "you cannot play yourself")
        if om.team_invites is not None:
            if self.cluster is not None:
                self._team_rules(peer, om.rules)
                if code in om.team_invites:
                    team = om.team_invites.index(code)
                await self._join_team_stored(peer, msg.id, mid, om.rules, team)
                return None
            return await self._join_team(peer, msg, om, code)
        self._take_open(mid)
        try:
            await self.store.start_match(mid.hex(), peer.player, node=self.node)
        except Conflict:
            # Joined from another node at the same moment: the store's word is final.
            raise Refused(ErrorCode.MATCH_FULL, "that match has both players") from None
        # Read before the ok: whoever acts on it finds the match running.
        ratings = await self._ratings(om.host, peer)
        peer.send(m.Ok(msg.id, {"match": mid}))
        self._start(mid, om.rules, om.mode, om.public, [om.host, peer], ratings=ratings)
        return None  # answered above: the ok goes out before the match's start

    async def _join_team(
        self, peer: Peer, msg: m.Join, om: OpenMatch, code: str | None
    ) -> dict[str, Any] | None:
        """Join a team of an open team match (spec 6.8): its ``ok`` waits until both are full."""
        self._team_rules(peer, om.rules)
        assert om.team_invites is not None
        k = om.rules.team_size
        joined = om.joined
        if any(w.peer.player == peer.player for w in joined[0] + joined[1]):
            raise Refused(ErrorCode.NOT_ALLOWED, "you are in this match already")
        sizes = (1 + len(joined[0]), len(joined[1]))
        if code in om.team_invites:
            seat = om.team_invites.index(code)
            if sizes[seat] == k:
                raise Refused(ErrorCode.MATCH_FULL, f"team {seat} is full")
        else:
            seat = 0 if sizes[0] < sizes[1] else 1
        joined[seat].append(_Waiting(peer, msg.id))
        _add(self._joining, peer, om.match_id)
        if len(joined[0]) + 1 < k or len(joined[1]) < k:
            return None
        mid = om.match_id
        self._take_open(mid)
        captain1 = joined[1][0].peer
        try:
            await self.store.start_match(mid.hex(), captain1.player, node=self.node)
        except Conflict:  # pragma: no cover - a team match is in no other node's lists
            raise Refused(ErrorCode.MATCH_FULL, "that match has both teams") from None
        for w in joined[0] + joined[1]:
            w.peer.send(m.Ok(w.id, {"match": mid}))
        teams = [[om.host] + [w.peer for w in joined[0]], [w.peer for w in joined[1]]]
        self._start(mid, om.rules, om.mode, om.public, [om.host, captain1], teams=teams)
        return None

    def _left_team(self, peer: Peer, mid: bytes) -> bool:
        """``peer`` gives up its place in the open team match ``mid``; whether it had one."""
        if self._left_team_stored(peer, mid):
            return True
        om = self.open.get(mid)
        if om is None:
            return False
        for team in om.joined:
            for w in team:
                if w.peer is peer:
                    team.remove(w)
                    _discard(self._joining, peer, mid)
                    return True
        return False

    async def _join_elsewhere(self, peer: Peer, rid: int, mid: bytes) -> None:
        """Join an open match another node hosts: it runs here, and its host comes over."""
        known = await self.store.match_node(mid.hex())
        if known is None or known[1] != "open":
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no open match with that id")
        try:
            row, public = await self.store.join_open(mid.hex(), peer.player, self.node, _now())
        except Conflict as e:
            raise Refused(ErrorCode.MATCH_FULL, str(e)) from None
        except ValueError:
            raise Refused(ErrorCode.NOT_ALLOWED, "you cannot play yourself") from None
        rules = rules_from_dict(msgpack.unpackb(row.rules, raw=False))
        host = await self.store.get_player(row.seat0)
        seat0 = Seat(row.seat0, host.name if host else row.seat0[:12])
        peer.send(m.Ok(rid, {"match": mid}))
        self._start_on_arrival(mid, rules, row.mode, public, seat0, peer)

    async def _quick(self, peer: Peer, msg: m.Quick) -> dict[str, Any] | None:
        self._rate(peer)
        rules = await self._parse(msg.rules, msg.mode)
        if rules.team_size > 1:
            raise Refused(ErrorCode.NOT_ALLOWED, "team matches are made with create and join")
        key = (rules.digest(), msg.mode)
        # One place in the queue per connection: asking again (other rules) gives up the old one,
        # so a peer cannot fill the queue with rule sets nobody else will ever ask for.
        mine = self._queued.pop(peer, None)
        if mine is not None and (w := self.quick_queue.get(mine)) is not None and w.peer is peer:
            del self.quick_queue[mine]
            self._drop_entry(w)
            peer.send(m.Error(int(ErrorCode.NOT_ALLOWED), "replaced by a newer quick", w.id))
        rules_blob = canonical_pack(rules.to_dict())
        waiting = await self._partner(key, peer)
        entry: int | None = None
        if waiting is None and self.cluster is not None:
            mid = self._new_id()
            args = (self.node, peer.player, key[0], msg.mode, mid.hex(), rules_blob)
            now = int(self.cluster.wall())
            # Look for a partner and queue in one transaction (a player who can be handed off
            # only): two players asking on two nodes at once must not both queue and wait.
            got = await self.store.queue_pair(*args, now, or_queue=peer.follows)
            if isinstance(got, Paired):
                # A player waiting on another node: the match runs here, and it comes over.
                known = await self.store.get_player(got.player)
                seat0 = Seat(got.player, known.name if known else got.player[:12])
                peer.send(m.Ok(msg.id, {"match": mid}))
                self._start_on_arrival(mid, rules, msg.mode, True, seat0, peer)
                return None
            entry = got
            waiting = await self._partner(key, peer)  # one may have come while we looked
            if waiting is not None and entry is not None and not await self.store.queue_drop(entry):
                # Another node took our entry meanwhile: its handoff is on the way here, so the
                # one who came stays queued here, and we wait for ours.
                self.quick_queue[key] = waiting
                self._queued[waiting.peer] = key
                waiting = None
        if waiting is None:
            w = _Waiting(peer, msg.id, entry)
            if entry is not None and self.cluster is not None:
                self._entries[entry] = w
                self.cluster.waits(+1)
            if not peer.connected:
                self._drop_entry(w)
                return None
            self.quick_queue[key] = w
            self._queued[peer] = key
            return None
        mid = self._new_id()
        await self.store.create_match(
            mid.hex(),
            rules_blob,
            msg.mode,
            waiting.peer.player,
            peer.player,
            _now(),
            status="playing",
            node=self.node,
        )
        ratings = await self._ratings(waiting.peer, peer)
        waiting.peer.send(m.Ok(waiting.id, {"match": mid}))
        peer.send(m.Ok(msg.id, {"match": mid}))
        self._start(mid, rules, msg.mode, True, [waiting.peer, peer], ratings=ratings)
        return None

    async def _partner(self, key: tuple[bytes, str], peer: Peer) -> _Waiting | None:
        """Take the request waiting here for ``key`` that ``peer`` may be paired with, if any.

        In a cluster the waiting request's shared entry is taken out first; if another node
        took it already, its player is on its way there (a handoff) and is no partner.
        """
        while (waiting := self.quick_queue.get(key)) is not None:
            del self.quick_queue[key]
            self._queued.pop(waiting.peer, None)
            if waiting.peer.player == peer.player or not waiting.peer.connected:
                self._drop_entry(waiting)
                return None
            if waiting.entry is None:
                return waiting
            assert self.cluster is not None
            if await self.store.queue_drop(waiting.entry):
                self._forget_entry(waiting)
                return waiting
        return None

    def _drop_entry(self, w: _Waiting) -> None:
        """``w`` waits no more: take its entry out of the shared queue, if it has one."""
        if self._forget_entry(w):
            assert w.entry is not None
            self.nursery.start_soon(self._drop_stored_entry, w.entry)

    async def _drop_stored_entry(self, entry: int) -> None:
        try:
            await self.store.queue_drop(entry)
        except Exception:
            _log.exception("could not take quick entry %d out of the shared queue", entry)

    async def _leave(self, peer: Peer, msg: m.Leave) -> dict[str, Any]:
        if self._left_team_stored(peer, msg.match):
            return {"match": msg.match}  # a cluster's team match, waiting to fill
        om = self.open.get(msg.match)
        if om is not None:
            if self._left_team(peer, msg.match):
                return {"match": msg.match}
            if om.host is not peer:
                raise Refused(ErrorCode.NOT_ALLOWED, "only the host cancels an open match")
            self._cancel_open(msg.match)
            return {"match": msg.match}
        ref = self.running.get(msg.match)
        if ref is None:
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no open or running match with that id")
        if ref.unwatch(peer):
            if ref.seat_of(peer) is None:
                _discard(self._present, peer, ref)
            return {"match": msg.match}
        found = ref.member_of(peer)
        if found is None:
            raise Refused(ErrorCode.NOT_ALLOWED, "you do not play in this match")
        if found[1]:
            # A member who is not the captain leaves its team, as if its session had ended:
            # the team plays on without it (spec 6.8).
            ref.detach(peer)
            _discard(self._present, peer, ref)
        else:
            ref.leave(found[0])
        return {"match": msg.match}

    async def _watch(self, peer: Peer, msg: m.Watch) -> dict[str, Any] | None:
        ref = self.running.get(msg.match)
        if ref is None:
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no running match with that id")
        if not ref.public and ref.seat_of_player(peer.player) is None:
            raise Refused(ErrorCode.NOT_ALLOWED, "that match is private")
        # The ok comes before the snapshot (FLOW step 2).
        peer.send(m.Ok(msg.id, {"match": msg.match}))
        ref.watch(peer)
        _add(self._present, peer, ref)
        return None

    async def _rematch(self, peer: Peer, msg: m.Rematch) -> dict[str, Any] | None:
        ref = self.finished.get(msg.match)
        if ref is None:
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no finished match with that id")
        seat = ref.seat_of_player(peer.player)
        if seat is None:
            raise Refused(ErrorCode.NOT_ALLOWED, "you did not play in that match")
        if ref.teams is not None:
            raise Refused(ErrorCode.NOT_ALLOWED, "a team match is played again with create")
        offers = self.rematch_offers.setdefault(msg.match, {})
        earlier = offers.get(seat)
        if earlier is not None and earlier.peer.connected:
            # The spec gives no rule for a repeat: the first offer stays pending and answers the
            # match; the repeat is refused, citing it.
            raise Refused(
                ErrorCode.NOT_ALLOWED, f"a rematch is already pending (request {earlier.id})"
            )
        if earlier is not None:
            _discard(self._offered, earlier.peer, msg.match)
        offers[seat] = _Waiting(peer, msg.id)
        _add(self._offered, peer, msg.match)
        if len(offers) < 2:
            return None
        del self.rematch_offers[msg.match]
        for w in offers.values():
            _discard(self._offered, w.peer, msg.match)
        mid = self._new_id()
        # Seats swap, so the rematch's seat 0 is the previous seat 1.
        p0, p1 = offers[1], offers[0]
        await self.store.create_match(
            mid.hex(),
            canonical_pack(ref.rules.to_dict()),
            ref.mode,
            p0.peer.player,
            p1.peer.player,
            _now(),
            status="playing",
            node=self.node,
        )
        ratings = await self._ratings(p0.peer, p1.peer)
        for w in (p0, p1):
            w.peer.send(m.Ok(w.id, {"match": mid}))
        self._start(mid, ref.rules, ref.mode, ref.public, [p0.peer, p1.peer], ratings=ratings)
        return None

    async def _redeem(self, peer: Peer, msg: m.Redeem) -> dict[str, Any]:
        cluster = self.cluster
        if cluster is None:
            raise Refused(ErrorCode.BAD_TICKET, "this server is not a node of a cluster")
        ticket = open_ticket(
            cluster.key.public_key().public_bytes_raw(), msg.ticket, msg.sig, cluster.wall()
        )
        if ticket.player != peer.player:
            raise Refused(ErrorCode.BAD_TICKET, "the ticket is another player's")
        if ticket.node != self.node:
            raise Refused(ErrorCode.BAD_TICKET, f"the ticket is for node {ticket.node!r}")
        if self.arrived(peer, ticket.match) or ticket.match in self.open:
            # Its start follows: a team match filled on another node starts here once this
            # node has taken its handoff, and seats its players already here (lobby_teams).
            return {"match": ticket.match}
        ref = self.running.get(ticket.match)
        if ref is None:
            if ticket.match in self.finished:
                raise Refused(ErrorCode.NO_SUCH_MATCH, "that match is over (get_record)")
            raise Refused(ErrorCode.NO_SUCH_MATCH, "that match does not run on this node")
        found = ref.member_of_player(peer.player)
        if found is None:  # pragma: no cover - a ticket names a seated player
            raise Refused(ErrorCode.NOT_ALLOWED, "you do not play in this match")
        seat, member = found
        if ref.slot(seat, member).peer is not peer:
            # The ticket is as good as a resume token: the cluster sent this player here (in
            # team play, to its own place in its team: not the captain's).
            ref.attach(seat, peer, member)
            _add(self._present, peer, ref)
        return {"match": ticket.match}

    async def _get_record(self, peer: Peer, msg: m.GetRecord) -> dict[str, Any]:
        row = await self.store.get_record(msg.match.hex(), 0)
        if row is None:
            raise Refused(ErrorCode.NO_SUCH_RECORD, "no record for that match")
        # A record nests deeper than a message may (MAX_DEPTH), so it travels as its canonical
        # bytes (protocol.record.load_record reads them back), with every signature.
        return {"record": row.record}

    async def _ladder(self, peer: Peer, msg: m.Ladder) -> dict[str, Any]:
        rows = await self.store.ladder()
        return {
            "rows": [
                {
                    "player": r.id,
                    "name": r.name,
                    "rating": round(r.rating),
                    "rd": round(r.rd),
                    "games": r.games,
                    "wins": r.wins,
                    "losses": r.losses,
                    "draws": r.draws,
                }
                for r in rows
            ]
        }

    async def _running(self, peer: Peer, msg: m.Running) -> dict[str, Any]:
        """The running public matches of this node (spec 6.9), the most watched first, then
        the latest started; at most ``list_max`` (2.4)."""
        public = [r for r in self.running.values() if r.public]
        order = sorted(range(len(public)), key=lambda i: (-len(public[i].spectators), -i))
        del order[self.limits.list_max :]
        rows = []
        for i in order:
            ref = public[i]
            game = ref.game
            rows.append(
                {
                    "match": ref.match_id,
                    "rules": ref.rules.name,
                    "mode": ref.mode,
                    "players": ref.players,
                    "names": [s.name for s in ref.seats],
                    "game": 0 if game is None else game.number,
                    "spectators": len(ref.spectators),
                }
            )
        return {"matches": rows}

    async def _player(self, peer: Peer, msg: m.PlayerFigures) -> dict[str, Any]:
        """A player's figures (spec 6.9), by id or by a display name that one player has."""
        asked = msg.player
        pid = as_player_id(asked)
        if pid is None:
            # Names are not unique (a guest key a connection): the name's player is the one
            # that played most under it, unless two played as much.
            named = await self.store.players_named(asked)
            if not named or (len(named) == 2 and named[0][1] == named[1][1]):
                many = "more than one player has" if named else "no player has"
                raise Refused(ErrorCode.NO_SUCH_PLAYER, f"{many} that name: ask by player id")
            pid = named[0][0]
        got = await self.store.figures(pid)
        if got is None:
            raise Refused(ErrorCode.NO_SUCH_PLAYER, "no player with that id")
        p = got.player
        return {
            "player": p.id,
            "name": p.name,
            "rating": max(0, round(p.rating)),
            "rd": round(p.rd),
            "games": p.games,
            "wins": p.wins,
            "losses": p.losses,
            "draws": p.draws,
            "shots": got.shots,
            "hits": got.hits,
            "history": [
                {
                    "match": bytes.fromhex(h.match_id),
                    "opponent": h.opponent,
                    "result": "win" if h.score == 1.0 else "loss" if h.score == 0.0 else "draw",
                    "old": max(0, round(h.old)),
                    "new": max(0, round(h.new)),
                    "at": h.created,
                }
                for h in got.history
            ],
        }

    def errors_ref(self, msg: m.Message) -> int | None:
        """The ``ref`` an error about ``msg`` cites: its request id, or its shot's ``seq``."""
        for name in ("id", "seq"):
            v = getattr(msg, name, None)
            if isinstance(v, int):
                return v
        return None


def _invite_code() -> str:
    return "".join(secrets.choice(_INVITE_ALPHABET) for _ in range(8))
