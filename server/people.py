"""People on a server: who is online, named challenges, and the chat of a match (spec 6.9).

Theory of operation. Everything here is about the sessions that agreed the capability
``people`` (spec 4.2): only they are online, only they may challenge or be challenged, and only
they are sent ``challenged``, ``challenge_gone`` and ``said`` (a session that did not agree it
is sent none of them, and its requests but ``online`` are refused ``NOT_ALLOWED``). The session
itself is the player's event stream (lichess's ``/api/stream/event``): a challenge to a player
goes to each of its people sessions as ``challenged``, whatever it is doing, and again to a
session that comes later while the challenge is pending, right after its ``authed``.

A challenge is bound to the session that made it: that session gets its ``challenge_gone`` and,
once accepted, the match's ``start``; when it ends, its challenges end (``offline``). A
challenge ends too when the last people session of its target ends (``offline``), when it is
declined, cancelled, accepted, or after ``challenge_timeout`` seconds (``expired``). Each
session has at most ``challenges_per_peer`` of its own pending, and each player at most
``challenges_per_target`` pending to it, so a flood of challenges costs the server a bounded
amount and its target a bounded list.

Chat (``say``): a player of a running match (any member of a team) says a line of at most
:data:`~seabattle.protocol.messages.CHAT_MAX` code points, no control characters; every player
session of the match that agreed ``people``, the sender's included, gets it as ``said``, in the
order the server took the lines. Spectators get nothing (as on lichess, where the players' chat
is theirs), and the record holds none of it. Each session's lines are rate limited (a token
bucket of ``chat_burst`` lines, refilled at ``chat_rate`` a second).

A node of a cluster knows its own sessions only: a player connected to another node is not
online here, and cannot be challenged here.
"""

from __future__ import annotations

import logging
import secrets
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from seabattle.protocol import messages as m
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.errors import ErrorCode, Refused, RemoteProtocolError
from seabattle.protocol.rules import RuleSet

from .config import Peer, TokenBucket, peer_context
from .lobby_state import _now
from .store_rows import as_player_id

if TYPE_CHECKING:
    from .lobby import Lobby

__all__ = ["ONLINE_MAX", "People"]

_log = logging.getLogger("seabattle.server.people")

ONLINE_MAX = 100
"""Most players one ``online`` answer names (spec 6.9.1)."""

#: The reasons a challenge ends (``challenge_gone.reason``, spec 6.9.2).
GONE_REASONS = ("accepted", "declined", "cancelled", "expired", "offline")


@dataclass(slots=True, eq=False)
class _Challenge:
    """One pending challenge: who made it (its session), to whom, with what; the sessions of the
    target told of it; when it expires (trio time)."""

    home: People
    cid: bytes
    by: Peer
    target: str
    rules: RuleSet
    mode: str
    due: float
    told: list[Peer] = field(default_factory=list)
    over: bool = False

    def tick(self, now: float) -> float | None:
        """The server's timers (:class:`~.config.Timers`) look at it when it is due: a
        challenge still pending then expires (one heap entry, no task, per challenge)."""
        if self.over:
            return None
        if now < self.due:
            return self.due
        self.home._end(self, "expired")
        return None


class People:
    """Who is online, the pending challenges and the chat's rate; see the module docstring."""

    def __init__(self, lobby: Lobby) -> None:
        self.lobby = lobby
        #: Player id -> its sessions that agreed ``people``, in the order they came.
        self.sessions: dict[str, dict[Peer, None]] = {}
        #: Pending challenges by id.
        self.challenges: dict[bytes, _Challenge] = {}
        #: Challenger session -> the ids of its pending challenges.
        self._made: dict[Peer, dict[bytes, None]] = {}
        #: Target player -> the ids of the challenges pending to it, oldest first.
        self._incoming: dict[str, dict[bytes, None]] = {}
        self._chat: dict[Peer, TokenBucket] = {}

    # -- sessions -------------------------------------------------------------------------------

    def authenticated(self, peer: Peer) -> None:
        """``peer`` authenticated: online if it agreed ``people``, and told of the challenges
        pending to its player (before the answer to any request it makes, spec 6.9.3)."""
        if not peer.people:
            return
        self.sessions.setdefault(peer.player, {})[peer] = None
        for cid in list(self._incoming.get(peer.player, ())):
            self._tell(self.challenges[cid], peer)

    def disconnected(self, peer: Peer) -> None:
        """``peer``'s session ended: its challenges end, and so do those to its player when it
        was the player's last people session (``offline``)."""
        self._chat.pop(peer, None)
        mine = self.sessions.get(peer.player)
        if mine is None or peer not in mine:
            return
        del mine[peer]
        for cid in list(self._made.get(peer, ())):
            ch = self.challenges[cid]
            if not ch.over:  # one being accepted starts all the same, this seat absent
                self._end(ch, "offline")
        for cid in list(self._incoming.get(peer.player, ())):
            ch = self.challenges[cid]
            if peer in ch.told:
                ch.told.remove(peer)
            if not mine and not ch.over:
                self._end(ch, "offline")
        if not mine:
            del self.sessions[peer.player]

    def handlers(
        self,
    ) -> dict[type[m.Message], Callable[[Peer, Any], Awaitable[dict[str, Any] | None]]]:
        """The lobby requests answered here, by message type."""
        return {
            m.Online: self.online,
            m.Challenge: self.challenge,
            m.Accept: self.accept,
            m.Decline: self.decline,
            m.Cancel: self.cancel,
            m.Say: self.say,
        }

    def _online(self, player: str) -> list[Peer]:
        return [p for p in self.sessions.get(player, ()) if p.connected]

    @staticmethod
    def _needs_people(peer: Peer, what: str) -> None:
        if not peer.people:
            raise Refused(ErrorCode.NOT_ALLOWED, f"{what} needs the capability 'people' (spec 6.9)")

    # -- who is online --------------------------------------------------------------------------

    async def online(self, peer: Peer, msg: m.Online) -> dict[str, Any]:
        """``online``: up to :data:`ONLINE_MAX` players online, each with its name, rating and
        whether it plays a running match now."""
        here: list[tuple[str, Peer]] = []
        for player, peers in self.sessions.items():
            live = [p for p in peers if p.connected]
            if live:
                here.append((player, live[-1]))
                if len(here) >= ONLINE_MAX:
                    break
        # One query for all their ratings, however many are listed.
        known = await self.lobby.store.players(player for player, _ in here)
        return {
            "players": [
                {
                    "player": player,
                    "name": peer.name,
                    "rating": round(known[player].rating) if player in known else None,
                    "playing": bool(self.lobby._seated.get(player)),
                }
                for player, peer in here
            ]
        }

    # -- challenges -----------------------------------------------------------------------------

    def _target(self, peer: Peer, who: str) -> str:
        """The player id ``who`` names: a player id online, or the display name of exactly one
        player online (``NO_SUCH_PLAYER`` otherwise)."""
        pid = as_player_id(who)
        if pid is not None and self._online(pid):
            return pid
        want = who.strip().casefold()
        found = {
            p.player
            for ps in self.sessions.values()
            for p in ps
            if p.connected
            if p.name.strip().casefold() == want
        }
        if len(found) == 1:
            return found.pop()
        if found:
            raise Refused(
                ErrorCode.NO_SUCH_PLAYER,
                f"{len(found)} players online are named {who!r}: name one by its id",
            )
        raise Refused(ErrorCode.NO_SUCH_PLAYER, f"no player online is {who!r}")

    async def challenge(self, peer: Peer, msg: m.Challenge) -> dict[str, Any] | None:
        """``challenge``: tell the target's people sessions; answer the challenge's id."""
        lobby = self.lobby
        self._needs_people(peer, "challenge")
        lobby._rate(peer)  # it names rules: the match-request limit (spec 2.5)
        target = self._target(peer, msg.player)
        if target == peer.player:
            raise Refused(ErrorCode.NOT_ALLOWED, "you cannot challenge yourself")
        limits = lobby.limits
        if len(self._made.get(peer, ())) >= limits.challenges_per_peer:
            raise Refused(
                ErrorCode.NOT_ALLOWED,
                f"at most {limits.challenges_per_peer} challenges of yours pending at a time",
            )
        if len(self._incoming.get(target, ())) >= limits.challenges_per_target:
            raise Refused(ErrorCode.NOT_ALLOWED, "that player has too many challenges pending")
        rules = await lobby._parse(msg.rules, msg.mode)
        if rules.team_size > 1:
            raise Refused(ErrorCode.NOT_ALLOWED, "team matches are made with create and join")
        if not peer.connected:
            raise Refused(ErrorCode.NOT_ALLOWED, "the session ended")
        sessions = self._online(target)
        if not sessions:  # it left while the rules were checked
            raise Refused(ErrorCode.NO_SUCH_PLAYER, f"no player online is {msg.player!r}")
        cid = secrets.token_bytes(8)
        due = trio.current_time() + limits.challenge_timeout
        ch = _Challenge(self, cid, peer, target, rules, msg.mode, due)
        self.challenges[cid] = ch
        self._made.setdefault(peer, {})[cid] = None
        self._incoming.setdefault(target, {})[cid] = None
        lobby.timers.add(ch, ch.due)
        # The ok first: the challenger knows the id before any challenge_gone can name it.
        peer.send(m.Ok(msg.id, {"challenge": cid}))
        for p in sessions:
            self._tell(ch, p)
        _log.info(
            "challenge %s: %s challenges %s",
            cid.hex(),
            peer.player[:12],
            target[:12],
            extra=peer_context(peer),
        )
        return None  # answered above

    def _tell(self, ch: _Challenge, to: Peer) -> None:
        to.send(m.Challenged(ch.cid, ch.by.player, ch.by.name, ch.rules.to_dict(), ch.mode))
        ch.told.append(to)

    def _end(
        self,
        ch: _Challenge,
        reason: str,
        detail: str | None = None,
        match: bytes | None = None,
    ) -> None:
        """End ``ch``: forget it, and tell the challenger's session and every session of the
        target that was told of it."""
        ch.over = True
        self.challenges.pop(ch.cid, None)
        made = self._made.get(ch.by)
        if made is not None:
            made.pop(ch.cid, None)
            if not made:
                del self._made[ch.by]
        incoming = self._incoming.get(ch.target)
        if incoming is not None:
            incoming.pop(ch.cid, None)
            if not incoming:
                del self._incoming[ch.target]
        gone = m.ChallengeGone(ch.cid, reason, detail, match)
        for p in [ch.by, *ch.told]:
            if p.connected:
                p.send(gone)

    def _pending_to(self, peer: Peer, cid: bytes) -> _Challenge:
        ch = self.challenges.get(cid)
        if ch is None or ch.over or ch.target != peer.player:
            raise Refused(
                ErrorCode.NO_SUCH_CHALLENGE, "no challenge with that id is pending to you"
            )
        return ch

    async def accept(self, peer: Peer, msg: m.Accept) -> dict[str, Any] | None:
        """``accept``: the match starts between the challenger's session and this one."""
        lobby = self.lobby
        self._needs_people(peer, "accept")
        ch = self._pending_to(peer, msg.challenge)
        if not ch.by.connected:
            self._end(ch, "offline")
            raise Refused(ErrorCode.NO_SUCH_CHALLENGE, "the challenger has gone")
        # Over before the store is awaited: a second accept, a cancel or the timer meanwhile
        # finds it answered.
        ch.over = True
        mid = lobby._new_id()
        try:
            await lobby.store.create_match(
                mid.hex(),
                canonical_pack(ch.rules.to_dict()),
                ch.mode,
                ch.by.player,
                peer.player,
                _now(),
                status="playing",
                node=lobby.node,
            )
        except BaseException:
            self._end(ch, "cancelled", "the server could not store the match")
            raise
        if peer not in ch.told:
            ch.told.append(peer)
        self._end(ch, "accepted", None, mid)
        peer.send(m.Ok(msg.id, {"match": mid}))
        # The challenger is seat 0, as the host of an open match is.
        lobby._start(mid, ch.rules, ch.mode, True, [ch.by, peer])
        return None  # answered above: the ok goes out before the match's start

    async def decline(self, peer: Peer, msg: m.Decline) -> dict[str, Any]:
        """``decline``: the challenger is told, with the reason given, if any."""
        self._needs_people(peer, "decline")
        ch = self._pending_to(peer, msg.challenge)
        reason = msg.reason
        if reason is not None:
            reason = _chat_text(reason, "decline.reason")
        self._end(ch, "declined", reason)
        return {"challenge": ch.cid}

    async def cancel(self, peer: Peer, msg: m.Cancel) -> dict[str, Any]:
        """``cancel``: the challenger withdraws its challenge; its target is told."""
        self._needs_people(peer, "cancel")
        ch = self.challenges.get(msg.challenge)
        if ch is None or ch.over or ch.by.player != peer.player:
            raise Refused(ErrorCode.NO_SUCH_CHALLENGE, "no challenge of yours has that id")
        self._end(ch, "cancelled")
        return {"challenge": ch.cid}

    # -- chat -----------------------------------------------------------------------------------

    async def say(self, peer: Peer, msg: m.Say) -> dict[str, Any]:
        """``say``: a line to the match's players (not its spectators), as ``said``."""
        self._needs_people(peer, "say")
        text = _chat_text(msg.line, "say.line")
        if not text:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "say.line: an empty line")
        ref = self.lobby.running.get(msg.match)
        if ref is None:
            raise Refused(ErrorCode.NO_SUCH_MATCH, "no running match with that id")
        found = ref.member_of(peer)
        if found is None:
            raise Refused(ErrorCode.NOT_ALLOWED, "only the match's players chat in it")
        bucket = self._chat.get(peer)
        if bucket is None:
            limits = self.lobby.limits
            bucket = self._chat[peer] = TokenBucket(limits.chat_rate, limits.chat_burst)
        if not bucket.take():
            raise Refused(ErrorCode.RATE_LIMITED, "chat: too many lines; say it again later")
        said = m.Said(msg.match, found[0], found[1], text)
        for seat in ref.everyone():
            p = seat.peer
            if p is not None and p.people and p.connected:
                p.send(said)
        return {}


def _chat_text(text: str, where: str) -> str:
    """``text`` as a line of chat: at most :data:`~.messages.CHAT_MAX` code points and no
    control characters (a line is shown on terminals: an escape sequence could redraw them),
    blanks at its ends dropped; ``BAD_MESSAGE`` otherwise."""
    if len(text) > m.CHAT_MAX:
        raise RemoteProtocolError(
            ErrorCode.BAD_MESSAGE, f"{where}: longer than {m.CHAT_MAX} code points"
        )
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: a control character")
    return text.strip()
