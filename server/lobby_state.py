"""What the lobby holds - open matches, the quick queue, running and finished referees, rematch
offers and the indexes over them - and each match's life, from its start to its eviction
(:class:`LobbyState`; the requests that change it are :class:`~.lobby.Lobby`'s, and the theory
of operation is in ``lobby``).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import msgpack
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.rules import RuleSet, rules_from_dict

from .config import ContextLog, Limits, Peer, Timers
from .journal import Clock, Journal, ReplayError, started
from .metrics import Gauges, Metrics
from .records import conclude
from .referee import HOLD_FOR_PLAYERS, Referee, Seat
from .store import Fenced, Store, stored
from .store_journal import JournalGap
from .store_rows import Fence, MatchRow
from .timers import Heartbeat

if TYPE_CHECKING:
    from .cluster import Cluster

__all__ = ["LobbyState", "OpenMatch"]

# The lobby's logger: what its matches' life logs comes from the lobby.
_log = logging.getLogger("seabattle.server.lobby")

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(slots=True)
class OpenMatch:
    """A match waiting for its second player."""

    match_id: bytes
    rules: RuleSet
    mode: str
    public: bool
    host: Peer
    invite: str
    #: its host follows redirects: a player of another node may join it (a cluster)
    movable: bool = False
    #: team play (spec 6.8): the invitation to each seat's team, and who joined each team so
    #: far (the host is member 0 of seat 0), their ``join`` answered when the match is full
    team_invites: tuple[str, str] | None = None
    joined: tuple[list[_Waiting], list[_Waiting]] = field(default_factory=lambda: ([], []))


@dataclass(slots=True)
class _Waiting:
    """A request answered later: the asking peer and its request id (and, for a quick request
    in a cluster's shared queue, its entry there)."""

    peer: Peer
    id: int
    entry: int | None = None


@dataclass(slots=True)
class _Arrival:
    """A match made across nodes, waiting for its players from other nodes (``away``, by id)
    to arrive, so that all see it start together. ``teams``: team play, each seat's members
    (``seats`` being their captains)."""

    mid: bytes
    rules: RuleSet
    mode: str
    public: bool
    seats: list[Seat]
    away: set[str]
    came: trio.Event
    teams: list[list[Seat]] | None = None


class LobbyState:
    """The lobby's matches, queues and indexes, and the life of each match; see the module
    docstring."""

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
        self.store = store
        #: this server's name among the nodes that share its store: it takes up its own matches
        self.node = node
        #: where running matches store their moves (``None``: they live in memory only)
        self.journal = journal
        if journal is not None:
            journal.on_resume = self._resume_all
        self.clock = Clock() if journal is not None else None
        if timers is None:
            # A lobby on its own (tests) runs its own timer task in its nursery.
            heartbeat = Heartbeat()
            nursery.start_soon(heartbeat.run)
            timers = heartbeat
        #: where referees set their alarms
        self.timers: Timers = timers
        self.metrics = metrics if metrics is not None else Metrics()
        self.key = key
        self.nursery = nursery
        self.limits = limits
        self.open: dict[bytes, OpenMatch] = {}
        self.invites: dict[str, bytes] = {}
        self.running: dict[bytes, Referee] = {}
        self.finished: OrderedDict[bytes, Referee] = OrderedDict()
        self.quick_queue: dict[tuple[bytes, str], _Waiting] = {}
        self.rematch_offers: dict[bytes, dict[int, _Waiting]] = {}
        self.closing = False
        #: this node's place among the nodes sharing the store (``None``: it serves alone)
        self.cluster: Cluster | None = None
        #: quick requests of this node waiting in the cluster's shared queue, by entry
        self._entries: dict[int, _Waiting] = {}
        #: Player id -> its authenticated connections (kept in a cluster only: a match taken
        #: over from another node seats its players who are already here)
        self._online: dict[str, _Many[Peer]] = {}
        self._sweeping = trio.Lock()
        #: matches paired across nodes whose player from another node has not arrived yet
        self.arriving: dict[bytes, _Arrival] = {}
        # Indexes, so that a connection coming and going costs what concerns it rather than a scan
        # of every match: a server runs thousands and keeps 1,024 finished ones. The values are
        # ordered sets (:data:`_Many`), so that peers are told things in a stable order.
        #: Player id -> the running referees in which it holds a seat.
        self._seated: dict[str, _Many[Referee]] = {}
        #: Peer -> the referees (running or kept finished) where it holds a seat or watches.
        self._present: dict[Peer, _Many[Referee]] = {}
        #: Peer -> the key of its place in ``quick_queue`` (it holds one at most).
        self._queued: dict[Peer, tuple[bytes, str]] = {}
        #: Peer -> the finished matches it has a pending rematch offer in.
        self._offered: dict[Peer, _Many[bytes]] = {}
        #: Peer -> the open matches it hosts.
        self._hosted: dict[Peer, _Many[bytes]] = {}
        #: Peer -> the open team matches it joined and waits in (spec 6.8).
        self._joining: dict[Peer, _Many[bytes]] = {}
        #: (match, player) -> the join waiting here for a cluster's team match to fill (the
        #: store counts its teams: ``lobby_teams``)
        self._team_waits: dict[tuple[bytes, str], _Waiting] = {}

    # -- match life -------------------------------------------------------------------------------

    def _take_open(self, mid: bytes) -> OpenMatch:
        """Remove the open match ``mid`` (joined or cancelled) from the lobby and its indexes."""
        om = self.open.pop(mid)
        self.invites.pop(om.invite, None)
        for code in om.team_invites or ():
            self.invites.pop(code, None)
        for w in om.joined[0] + om.joined[1]:
            _discard(self._joining, w.peer, mid)
        _discard(self._hosted, om.host, mid)
        if (om.movable or om.team_invites is not None) and self.cluster is not None:
            self.cluster.waits(-1)
        return om

    def _cancel_open(self, mid: bytes) -> None:
        om = self._take_open(mid)
        for w in om.joined[0] + om.joined[1]:
            # Their join waited for the match to fill: it never will.
            w.peer.send(m.Error(int(ErrorCode.NO_SUCH_MATCH), "the host cancelled the match", w.id))
        self.nursery.start_soon(self._abort_quietly, mid.hex(), True)

    async def _abort_quietly(
        self, match_hex: str, if_open: bool = False, fence: Fence | None = None
    ) -> None:
        try:
            await self.store.abort_match(match_hex, _now(), if_open=if_open, fence=fence)
        except Fenced:
            # Another node referees it now: it is not this node's to end.
            ContextLog(_log, {"match": match_hex}).info("not aborted: another node has it")
        except Exception:
            ContextLog(_log, {"match": match_hex}).exception("abort failed")

    def _start(
        self,
        mid: bytes,
        rules: RuleSet,
        mode: str,
        public: bool,
        peers: list[Peer | Seat],
        teams: Sequence[Sequence[Peer | Seat]] | None = None,
        ratings: Mapping[str, int] | None = None,
    ) -> None:
        """Start a match between ``peers``; a `Seat` with no peer is a player of another node,
        handed off to come here. ``teams``: team play, each seat's members (``peers`` being
        their captains). ``ratings``: the players' ratings (:meth:`_ratings`), for ``seated``
        (spec 6.9)."""
        seats = [_seat(p) for p in peers]
        for seat in seats:
            if ratings is not None and seat.player in ratings:
                seat.rating = ratings[seat.player]
        members = None
        if teams is not None:
            members = [[seats[i]] + [_seat(p) for p in t[1:]] for i, t in enumerate(teams)]
        for seat in seats if members is None else members[0] + members[1]:
            if seat.peer is not None and not seat.peer.connected:
                # The peer left while the match was being stored: it starts absent, so its grace
                # period runs instead of the match waiting on a connection that is gone.
                seat.peer = None
        self._run_referee(self._referee(mid, rules, mode, public, seats, teams=members))

    async def _ratings(self, *players: Peer | Seat) -> dict[str, int]:
        """The ratings of ``players``, rounded, for ``seated`` (spec 6.9), in one query; a store
        that fails leaves them unknown (``seated`` then names none), and the match starts all
        the same."""
        try:
            rows = await self.store.players(p.player for p in players)
        except Exception:
            _log.warning("the players' ratings could not be read: seated names none")
            return {}
        return {k: round(r.rating) for k, r in rows.items()}

    def _start_on_arrival(
        self, mid: bytes, rules: RuleSet, mode: str, public: bool, away: Seat, here: Peer
    ) -> None:
        """Start a match paired across nodes once ``away`` (seat 0) is here, or at the latest
        after ``arrive_timeout`` (its grace period then runs, as for any absent player)."""
        seats = [away, Seat(here.player, here.name, here)]
        self._await_arrivals(_Arrival(mid, rules, mode, public, seats, {away.player}, trio.Event()))

    def _await_arrivals(self, arrival: _Arrival) -> None:
        """Start ``arrival``'s match once its players from other nodes are here, or at the
        latest after ``arrive_timeout`` (the grace period of those missing then runs)."""
        self.arriving[arrival.mid] = arrival
        self.nursery.start_soon(self._arrive, arrival)

    def arrived(self, peer: Peer, mid: bytes) -> bool:
        """``peer`` came for the match ``mid`` that waits for it; whether it was waiting."""
        a = self.arriving.get(mid)
        if a is None or peer.player not in a.away:
            return False
        for seat in a.seats if a.teams is None else a.teams[0] + a.teams[1]:
            if seat.player == peer.player:
                seat.peer = peer
        a.away.discard(peer.player)
        if not a.away:
            a.came.set()
        return True

    async def _arrive(self, a: _Arrival) -> None:
        with trio.move_on_after(self.limits.arrive_timeout):
            await a.came.wait()
        del self.arriving[a.mid]
        if self.closing:
            return  # not started: nothing journaled, and a restart ends it
        ratings = await self._ratings(*a.seats)
        self._start(a.mid, a.rules, a.mode, a.public, list(a.seats), a.teams, ratings)

    def _referee(
        self,
        mid: bytes,
        rules: RuleSet,
        mode: str,
        public: bool,
        seats: list[Seat],
        lot: bytes | None = None,
        teams: list[list[Seat]] | None = None,
        fence: Fence | None = None,
    ) -> Referee:
        # A match this node made is its own under epoch 0 (only a takeover moves the epoch on).
        return Referee(
            fence=fence if fence is not None else Fence(self.node, 0),
            teams=teams,
            match_id=mid,
            rules=rules,
            mode=mode,
            seats=seats,
            public=public,
            finish=self._conclude,
            metrics=self.metrics,
            timers=self.timers,
            journal=self.journal,
            clock=self.clock,
            lot=lot,
        )

    def _run_referee(self, ref: Referee) -> None:
        mid, mode, seats = ref.match_id, ref.mode, ref.seats
        self.running[mid] = ref
        for seat in ref.everyone():
            _add(self._seated, seat.player, ref)
            if seat.peer is not None:
                _add(self._present, seat.peer, ref)
        self.metrics.matches_started[mode] = self.metrics.matches_started.get(mode, 0) + 1
        ref.log.info(
            "started (%s): %s v %s",
            mode,
            seats[0].player[:12],
            seats[1].player[:12],
        )
        self.nursery.start_soon(self._run, ref)

    async def _conclude(self, ref: Referee) -> None:
        await conclude(ref, self.store, self.key)

    async def _run(self, ref: Referee) -> None:
        try:
            await ref.run()
        finally:
            self.running.pop(ref.match_id, None)
            for seat in ref.everyone():
                _discard(self._seated, seat.player, ref)
            suspended = not ref.recorded and self.closing and self.journal is not None
            if ref.fenced:
                self._let_go(ref)
            elif suspended and not ref.failed:
                # A shutdown: the journal holds the match, which goes on when the server (or
                # another on the same store) starts again. Nothing to abort, nothing to keep.
                ref.log.info("suspended: it resumes from its journal")
            else:
                await self._ended(ref)

    async def _ended(self, ref: Referee) -> None:
        ended = self.metrics.matches_finished
        if ref.recorded:
            ref.shed()
        else:
            ended = self.metrics.matches_aborted
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await self._abort_quietly(ref.hex, fence=ref.fence)
        ended[ref.mode] = ended.get(ref.mode, 0) + 1
        self.finished[ref.match_id] = ref
        while len(self.finished) > self.limits.finished_kept:
            self._evict(*self.finished.popitem(last=False))

    async def recover(self) -> int:
        """Take up every match the store says this node is refereeing (a restart), under new
        ownership epochs (a process of this node that still runs somewhere is fenced off them);
        see :meth:`take_up`."""
        return await self.take_up(await self.store.claim_running(self.node))

    async def take_up(self, rows: list[MatchRow], hold: float = 0.0) -> int:
        """Referee the running matches ``rows`` from their journals (a restart, or a failover).

        A match whose journal cannot be replayed is ended as aborted, with the reason. ``hold``:
        seconds each stands still for players not yet here (:attr:`.Referee.hold`). Returns
        how many matches go on.
        """
        taken = 0
        for row in rows:
            log = ContextLog(_log, {"match": row.id})
            fence = row.fence if row.node is not None else None
            try:
                if self.journal is None:
                    raise ReplayError("this server keeps no journal")
                # The store may blink while a failover takes matches up: they are this node's
                # already, and are waited for rather than aborted or left behind.
                entries = await stored(partial(self.store.journal, row.id), f"match {row.id}")
                rules = rules_from_dict(msgpack.unpackb(row.rules, raw=False))
                lot: bytes | None = None
                team_ids: list[list[str]] | None = None
                if entries:
                    lot, public, team_ids = started(entries[0])
                elif rules.team_size > 1:
                    # Its node went before the start was journaled: the store knows the teams
                    # (a cluster's team match), and the match starts afresh, as below.
                    public = row.public
                    team_ids = await self._stored_teams(row.id, rules.team_size)
                    log.info("nothing was journaled: the team match starts afresh")
                else:
                    # Stored as playing, but its node went before the match's start was
                    # journaled: nobody was told more of it than its id (its start is sent only
                    # once stored), so it starts here afresh, with lots of its own.
                    public = row.public
                    log.info("nothing was journaled: the match starts afresh")
                if row.seat1 is None:
                    raise ReplayError("the match has one seat")
                members = [[row.seat0], [row.seat1]] if team_ids is None else team_ids
                teams: list[list[Seat]] = []
                for ids in members:
                    team = []
                    for player in ids:
                        known = await stored(partial(self.store.get_player, player), "a player")
                        seat = Seat(player, known.name if known else player[:12])
                        seat.rating = round(known.rating) if known else None
                        team.append(seat)
                    teams.append(team)
                seats = [teams[0][0], teams[1][0]]
                ref = self._referee(
                    bytes.fromhex(row.id),
                    rules,
                    row.mode,
                    public,
                    seats,
                    lot,
                    teams=None if team_ids is None else teams,
                    fence=fence,
                )
                if entries:
                    ref.replay(entries)
            except Exception as e:  # a corrupted journal must not stop the server
                said = isinstance(e, ReplayError | JournalGap)
                reason = str(e) if said else f"{type(e).__name__}: {e}"
                log.warning("cannot be resumed, aborted: %s", reason)
                try:
                    await stored(
                        partial(self.store.abort_match, row.id, _now(), reason, fence=fence),
                        f"match {row.id}",
                    )
                except Fenced:
                    log.info("not aborted: another node has it")
                continue
            if self.cluster is not None:
                ref.on_start = self._seat_online
            ref.hold = hold
            self._run_referee(ref)
            taken += 1
        if taken:
            _log.info("resumed %d running matches from their journals", taken)
        return taken

    async def _stored_teams(self, match_hex: str, size: int) -> list[list[str]]:
        """Who plays in each team of ``match_hex``, as the store has it (a cluster's team
        match); `ReplayError` when it does not know both teams whole."""
        stored_members = await stored(partial(self.store.team_members, match_hex), "its teams")
        teams: list[list[str]] = [[], []]
        for t in stored_members:
            teams[t.team].append(t.player)
        if [len(t) for t in teams] != [size, size]:
            raise ReplayError("nothing was journaled, not even who plays in the teams")
        return teams

    def _seat_online(self, ref: Referee) -> None:
        """Give a match just taken up its players already connected here (a failover)."""
        for s in ref.everyone():
            here = [p for p in _values(self._online, s.player) if p.connected]
            found = ref.member_of_player(s.player)
            if s.peer is None and here and found is not None:
                ref.attach(found[0], here[-1], found[1])
                _add(self._present, here[-1], ref)

    def _resume_all(self, stood: float) -> None:
        """The journal was stalled ``stood`` seconds: every running match stood still."""
        for ref in list(self.running.values()):
            ref.resumed(stood)

    def _redirect(self, peer: Peer, mid: bytes, node: str, addr: str) -> None:
        """Tell ``peer`` its match ``mid`` runs on ``node`` at ``addr``, with a signed ticket."""
        cluster = self.cluster
        assert cluster is not None
        if not peer.follows:
            _match_log(mid).info(
                "%s plays on node %s but does not follow redirects", peer.player[:12], node
            )
            return
        body, sig = cluster.ticket(peer.player, mid, node, addr)
        peer.send(m.Redirect(mid, body, sig))

    def _let_go(self, ref: Referee) -> None:
        """Another node referees ``ref``'s match now: forget it here without a word to the
        store, and send its players there (redirect-following sessions are told where; the
        others are closed, and reconnect through their addresses)."""
        self.metrics.matches_moved[ref.mode] = self.metrics.matches_moved.get(ref.mode, 0) + 1
        peers = [s.peer for s in ref.everyone() if s.peer is not None]
        for peer in peers:
            _discard(self._present, peer, ref)
        for peer in list(ref.spectators):
            _discard(self._present, peer, ref)
            peer.close("moved")
        if peers:
            self.nursery.start_soon(self._send_on, ref.match_id, peers)

    async def _send_on(self, mid: bytes, peers: list[Peer]) -> None:
        """Redirect ``peers`` to the node that referees ``mid`` now (closing those who do not
        follow redirects, or when that cannot be found out)."""
        cluster = self.cluster
        to = None
        if cluster is not None:
            with trio.move_on_after(5):
                try:
                    to = await self.store.match_home(mid.hex(), int(cluster.wall() * 1000))
                except Exception:
                    _log.exception("where match %s runs now could not be read", mid.hex())
        for peer in peers:
            if not peer.connected:
                continue
            if to is not None and peer.follows and cluster is not None:
                body, sig = cluster.ticket(peer.player, mid, to[0], to[1])
                peer.send(m.Redirect(mid, body, sig))
            else:
                peer.close("moved")

    async def sweep(self) -> None:
        """Take over the matches of every node whose lease ended (a failover)."""
        cluster = self.cluster
        if cluster is None or not cluster.may_sweep():
            return
        async with self._sweeping:
            taken = await self.store.take_over(self.node, int(cluster.wall() * 1000))
            for dead, rows in taken:
                _log.warning(
                    "node %s: its lease ended; taking over its %d running matches",
                    dead,
                    len(rows),
                )
                # Its players may not know yet: a node that froze rather than died holds their
                # connections open (spec 4.10).
                await self.take_up(rows, hold=HOLD_FOR_PLAYERS)

    def _evict(self, mid: bytes, ref: Referee) -> None:
        """Drop the indexes' last references to a finished match no longer kept in memory."""
        for peer in [s.peer for s in ref.seats if s.peer is not None] + list(ref.spectators):
            _discard(self._present, peer, ref)
        for w in self.rematch_offers.pop(mid, {}).values():
            _discard(self._offered, w.peer, mid)

    def gauges(self, connections: int) -> Gauges:
        """What the lobby holds right now, for the metrics endpoint (read at scrape time)."""
        running: dict[str, int] = {}
        spectators = 0
        for ref in self.running.values():
            running[ref.mode] = running.get(ref.mode, 0) + 1
            spectators += len(ref.spectators)
        return Gauges(connections, running, spectators, len(self.open), len(self.quick_queue))


#: An index's values for one key, as an ordered set: a tuple while they are few (nearly always
#: one: a player in one match), a dict beyond. A dict per connection cost ~250 bytes for one
#: entry, at thousands of connections; a tuple scanned stays cheap up to :data:`_FEW` values.
_Many: TypeAlias = tuple[_V, ...] | dict[_V, None]
_FEW = 8


def _add(index: dict[_K, _Many[_V]], key: _K, value: _V) -> None:
    had = index.get(key)
    if had is None:
        index[key] = (value,)
    elif isinstance(had, dict):
        had[value] = None
    elif value not in had:
        more = (*had, value)
        index[key] = more if len(more) <= _FEW else dict.fromkeys(more)


def _discard(index: dict[_K, _Many[_V]], key: _K, value: _V) -> None:
    had = index.get(key)
    if had is None:
        return
    if isinstance(had, dict):
        had.pop(value, None)
        rest = len(had)
    elif value in had:
        rest = len(had) - 1
        index[key] = tuple(v for v in had if v != value)
    else:
        return
    if not rest:  # an empty entry per peer or player ever seen would grow without bound
        del index[key]


def _values(index: dict[_K, _Many[_V]], key: _K, *, pop: bool = False) -> list[_V]:
    """The values of ``key`` in ``index``, in the order added (a copy); ``pop`` removes them."""
    had = index.pop(key, None) if pop else index.get(key)
    return [] if had is None else list(had)


def _match_log(mid: bytes) -> ContextLog:
    return ContextLog(_log, {"match": mid.hex()})


def _seat(p: Peer | Seat) -> Seat:
    """``p``'s seat: a `Seat` as it is, a connected peer seated with its connection."""
    return p if isinstance(p, Seat) else Seat(p.player, p.name, p)


def _now() -> int:
    return int(time.time())
