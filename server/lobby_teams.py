"""Team matches on a node of a cluster (spec 6.8, 4.10; ``serve --workers`` too).

Theory of operation. A team match is refereed by the node its host created it on; its members
may join on any node, since a member's session lands wherever the port or the address it was
given sends it. The store counts the teams (``store_teams``): every join, this node's own
included, is one transaction on the match's row, and the join that fills both teams starts the
match in the store and writes the handoffs. Then:

* the members waiting on the node that filled it are answered ``ok`` and sent to the host's node
  with ``redirect`` (a member joining on a node other than the host's must follow redirects);
* members waiting on a third node are sent there the same way when that node takes its handoff;
* the host's node starts the match when it fills it, or when it takes its handoff: its own
  players (the host and its members) are seated at once, and the match waits for the others to
  arrive (``arrive_timeout``, as a quick match paired across nodes), so that all see it start.

Once started, the match is one like any other of the cluster: its start (with every member) is
journaled, a failover takes it up from the journal (or, when its node went before the start was
journaled, from the members in the store), and a member who comes back on any node is found in
``team_members`` and redirected to the node that referees it (``ClusterStore.elsewhere``).
A member who leaves, or whose session ends, before the match fills gives its place back.
"""

from __future__ import annotations

import logging

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, Refused
from seabattle.protocol.rules import RuleSet

from .config import Peer
from .lobby_state import LobbyState, _add, _Arrival, _discard, _now, _seat, _values, _Waiting
from .referee import Seat
from .store import Conflict
from .store_cluster import Handoff
from .store_teams import TeamMember

__all__ = ["TeamLobby"]

_log = logging.getLogger("seabattle.server.lobby")


class TeamLobby(LobbyState):
    """The lobby's part for team matches on a cluster; see the module docstring."""

    async def _join_team_stored(
        self, peer: Peer, rid: int, mid: bytes, rules: RuleSet, team: int | None
    ) -> None:
        """``peer`` joins team ``team`` (``None``: the smaller) of the cluster's team match
        ``mid``; its ``ok`` comes once both teams are full."""
        cluster = self.cluster
        assert cluster is not None
        if mid not in self.open and not peer.follows:
            raise Refused(
                ErrorCode.NOT_ALLOWED,
                "this team match is refereed on another node: joining it from here needs the"
                " capability 'redirect' (spec 4.10)",
            )
        try:
            got = await self.store.team_join(
                mid.hex(), peer.player, team, self.node, rules.team_size, _now()
            )
        except Conflict as e:
            raise Refused(ErrorCode.MATCH_FULL, str(e)) from None
        except ValueError as e:
            raise Refused(ErrorCode.NOT_ALLOWED, str(e)) from None
        self._team_waits[mid, peer.player] = _Waiting(peer, rid)
        _add(self._joining, peer, mid)
        cluster.waits(+1)
        if not peer.connected:
            # Its session ended while the store counted it: the place goes back.
            self._left_team_stored(peer, mid)
        if got.members is None:
            return
        if got.host_node == self.node:
            await self._start_team(mid, list(got.members))
            return
        for t in got.members:
            if (mid, t.player) in self._team_waits:
                self._send_to_host(mid, t.player, got.host_node, got.host_addr)

    def _send_to_host(self, mid: bytes, player: str, node: str, addr: str | None) -> None:
        """The team match ``mid`` started on ``node``: answer ``player``'s join waiting here and
        send it there."""
        w = self._team_waits.pop((mid, player), None)
        if w is None:
            return
        self._unwait_team(w, mid)
        if not w.peer.connected:
            return  # it finds its match when it comes back (elsewhere)
        if addr is None:
            w.peer.send(m.Error(int(ErrorCode.NO_SUCH_MATCH), "the match's node is gone", w.id))
            return
        w.peer.send(m.Ok(w.id, {"match": mid}))
        self._redirect(w.peer, mid, node, addr)

    def _unwait_team(self, w: _Waiting, mid: bytes) -> None:
        _discard(self._joining, w.peer, mid)
        if self.cluster is not None:
            self.cluster.waits(-1)

    def _left_team_stored(self, peer: Peer, mid: bytes) -> bool:
        """``peer`` gives up its place in the cluster's open team match ``mid``; whether it
        had one here."""
        w = self._team_waits.get((mid, peer.player))
        if w is None or w.peer is not peer:
            return False
        del self._team_waits[mid, peer.player]
        self._unwait_team(w, mid)
        self.nursery.start_soon(self._team_leave, mid, peer.player)
        return True

    async def _team_leave(self, mid: bytes, player: str) -> None:
        try:
            await self.store.team_leave(mid.hex(), player)
        except Exception:
            _log.exception("%s's place in match %s could not be given back", player[:12], mid.hex())

    async def _start_team(self, mid: bytes, members: list[TeamMember]) -> None:
        """Start the team match ``mid`` that this node hosts and the store found full: its
        players here now, the others once they arrive."""
        om = self.open.get(mid)
        if om is None:
            return  # cancelled meanwhile: its host's leave told the store
        self._take_open(mid)
        known = await self.store.players(t.player for t in members)
        teams: list[list[Seat]] = [[], []]
        away: set[str] = set()
        for t in members:
            w = self._team_waits.pop((mid, t.player), None)
            if w is not None:
                self._unwait_team(w, mid)
            if t.player == om.host.player:
                teams[t.team].append(_seat(om.host))
            elif w is not None and w.peer.connected:
                w.peer.send(m.Ok(w.id, {"match": mid}))
                teams[t.team].append(_seat(w.peer))
            elif here := [p for p in _values(self._online, t.player) if p.connected]:
                # Sent here by the node that filled the match, it came before this node took
                # its handoff.
                teams[t.team].append(_seat(here[-1]))
            else:
                row = known.get(t.player)
                teams[t.team].append(Seat(t.player, row.name if row else t.player[:12]))
                away.add(t.player)
        captains = [teams[0][0], teams[1][0]]
        if away:
            self._await_arrivals(
                _Arrival(mid, om.rules, om.mode, om.public, captains, away, trio.Event(), teams)
            )
        else:
            ratings = await self._ratings(*captains)
            self._start(mid, om.rules, om.mode, om.public, list(captains), teams, ratings)

    def _cancel_open(self, mid: bytes) -> None:
        om = self.open.get(mid)
        super()._cancel_open(mid)
        if om is None or om.team_invites is None or self.cluster is None:
            return
        self._withdraw_team_here(mid, "the host cancelled the match")
        self.nursery.start_soon(self._withdraw_team, mid)

    def _withdraw_team_here(self, mid: bytes, why: str = "the match was withdrawn") -> None:
        """The team match ``mid`` will not start: answer the joins waiting here for it."""
        for key in [k for k in self._team_waits if k[0] == mid]:
            w = self._team_waits.pop(key)
            self._unwait_team(w, mid)
            w.peer.send(m.Error(int(ErrorCode.NO_SUCH_MATCH), why, w.id))

    async def _withdraw_team(self, mid: bytes) -> None:
        """The host cancelled the cluster's team match ``mid``: its members waiting on other
        nodes are told there (a handoff each)."""
        try:
            await self.store.team_withdrawn(mid.hex(), self.node, _now())
        except Exception:
            _log.exception("the members of match %s could not be told it was withdrawn", mid.hex())

    async def _team_handed_off(self, h: Handoff) -> None:
        """A handoff for a team match: this node hosts it (start it), or a member waits here
        for it (send it there, or tell it the match is gone)."""
        mid = bytes.fromhex(h.match_id)
        if (mid, h.player) in self._team_waits:
            found = await self.store.match_node(h.match_id)
            if found is not None and found[1] == "playing":
                self._send_to_host(mid, h.player, h.node, h.addr)
            else:
                w = self._team_waits.pop((mid, h.player))
                self._unwait_team(w, mid)
                w.peer.send(m.Error(int(ErrorCode.NO_SUCH_MATCH), "the match was withdrawn", w.id))
        elif mid in self.open:
            await self._start_team(mid, await self.store.team_members(h.match_id))

