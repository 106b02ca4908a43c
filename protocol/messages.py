"""Every message of the protocol as a frozen, validated type.

A message on the wire is a msgpack map whose ``"t"`` key is the message's tag; its other keys are
exactly the fields of the class registered for that tag (``spec/protocol.md`` section "Messages"
holds the same table; a test checks that the two agree). :func:`decode` turns a decoded map into a
message, refusing an unknown tag (``UNKNOWN_TAG``), a missing or extra key, or a value of the wrong
type (``BAD_MESSAGE``): an invalid message cannot exist. A rule that ties two fields together
(:data:`EXACTLY_ONE`) is checked after every field's own, by the message where
:data:`ONE_OF_CHECKED` says so, else by its receiver. :func:`encode` is its inverse.

Field types are checked exactly: a boolean is not an integer, a list is not a map. Byte strings and
text have length limits. Cells are strings in seed notation (``"E5"``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from .codec import MAX_FRAME, encode_frame, encode_frame_walking
from .errors import ErrorCode, RemoteProtocolError

__all__ = [
    "DEFAULT_INT_RANGE",
    "EXACTLY_ONE",
    "INT_RANGES",
    "MAX_SAFE_INT",
    "MAX_UINT32",
    "MESSAGES",
    "ONE_OF_CHECKED",
    "Dir",
    "Message",
    "decode",
    "encode",
    "frame",
    "int_range",
]

MAX_TEXT = 4096
"""Longest ``str`` in a message, in Unicode code points (not UTF-16 code units, not bytes)."""
MAX_BYTES = 65536
"""Longest ``bin`` in a message a client sends, in bytes."""
MAX_LIST = 4096
"""Most elements of an array in a message."""

MAX_SAFE_INT = 2**53 - 1
"""The largest integer a double-precision float (a JavaScript ``number``) represents exactly; the
vectors write a larger one as text (spec 15)."""

MAX_UINT32 = 2**32 - 1
"""The largest integer any message field holds (spec 2.4): the largest a ``uint32`` carries, so
that a general-purpose msgpack library never needs a 64-bit integer, which the npm ones write as a
float (refused, D4), nor a decoder a big integer for a valid value."""

#: Field name (or ``"tag.field"``, which wins) -> the inclusive range of its integers
#: (spec 2.4). An integer outside it is refused with BAD_MESSAGE. A field named nowhere here
#: takes :data:`DEFAULT_INT_RANGE`; array items take the range of their field.
INT_RANGES: dict[str, tuple[int, int]] = {
    "id": (0, MAX_UINT32),
    "seq": (0, MAX_UINT32),
    "ref": (0, MAX_UINT32),
    "n": (0, MAX_UINT32),
    "seat": (0, 1),
    "first": (0, 1),
    "next": (0, 1),
    "winner": (0, 1),
    "member": (0, 7),  # rules.team_size is at most 8
    "game": (1, 2**31 - 1),
    "version": (1, 2**31 - 1),
    "versions": (1, 2**31 - 1),
    "code": (1000, 9999),  # the registry's codes have four digits (spec 12)
    "seconds": (0, 2**31 - 1),
    "grace": (0, 2**31 - 1),
}
DEFAULT_INT_RANGE = (0, MAX_UINT32)


#: Tag -> two of its fields of which exactly one holds a value and the other nil (spec 2.4): the
#: rules that tie fields together, which no field's own check can see.
EXACTLY_ONE: dict[str, tuple[str, str]] = {
    "join": ("match", "invite"),
    "coin": ("hash", "nonce"),
}

ONE_OF_CHECKED = frozenset({"coin"})
"""The tags whose :data:`EXACTLY_ONE` rule the message itself checks, built or decoded
(``BAD_MESSAGE``; refused on receipt with ``ref: nil``). ``join``'s is the server's, as a
request's (spec 5.3), so that its refusal names the request (``ref: id``): a ``join`` breaking it
is a message all the same, and so a test can send one."""


def int_range(tag: str, name: str) -> tuple[int, int]:
    """The inclusive range of the integers of field ``name`` of message ``tag``."""
    return INT_RANGES.get(f"{tag}.{name}") or INT_RANGES.get(name) or DEFAULT_INT_RANGE


class Dir(StrEnum):
    """Who sends a message: client to server, server to client, or either (also peer to peer)."""

    C2S = "client->server"
    S2C = "server->client"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every message; subclasses are registered with :func:`message`."""

    TAG: ClassVar[str] = ""
    DIR: ClassVar[Dir] = Dir.BOTH

    def __post_init__(self) -> None:
        """Check every field, in order (see "validation" below); raises ``BAD_MESSAGE``."""
        name = ""
        try:
            for name, check in _CHECKS.get(type(self)) or _checks(type(self)):
                v = getattr(self, name)
                nv = check(v)
                if nv is not v:  # a list (or a subclass of tuple) held as a tuple
                    _set(self, name, nv)
        except _Wrong as e:
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, f"{self.TAG}.{name}{e.at}: {e.what}"
            ) from None


M = TypeVar("M", bound=type[Message])

#: tag -> message class; the message table of the protocol.
MESSAGES: dict[str, type[Message]] = {}
_HINTS: dict[type[Message], dict[str, Any]] = {}


def message(tag: str, direction: Dir) -> Callable[[M], M]:
    """Register a message class under ``tag``."""

    def deco(cls: M) -> M:
        if tag in MESSAGES:
            raise ValueError(f"tag {tag!r} registered twice")
        cls.TAG = tag
        cls.DIR = direction
        MESSAGES[tag] = cls
        _register(cls)  # checks and tables made once, here, not on every message
        return cls

    return deco


def _hints(cls: type[Message]) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        h = {f.name: h[f.name] for f in dataclasses.fields(cls)}
        _HINTS[cls] = h
    return h


# -- validation ------------------------------------------------------------------------------------
#
# One path: every message built, decoded or not, runs its class's field checks from __post_init__,
# in field order, and the first refusal is its BAD_MESSAGE error. A field's check is made once
# from its annotation (when the class is registered, or when an unregistered subclass is first
# built). It returns the value, normalised (a list, or a subclass of tuple, becomes a tuple), or
# raises _Wrong. Each check tests the exact type first (what msgpack decodes and what the shells
# build) and only then the subclasses it also accepts (an IntEnum for an int): a valid frame costs
# one call and a type test per field.

_Check = Callable[[Any], Any]
_LISTS = (list, tuple)


class _Wrong(Exception):
    """A value a check refuses: what was expected, and where below the field (``"[1]"``)."""

    def __init__(self, what: str, at: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.at = at


class _OutOfRange(_Wrong):
    """A value of the right type outside its field's range."""


def _any(v: Any) -> Any:
    return v


def _bool(v: Any) -> Any:
    if v is True or v is False:
        return v
    raise _Wrong("expected a boolean")


@functools.cache
def _int(lo: int, hi: int) -> _Check:
    """The check of an ``int`` field whose integers lie in ``lo..hi``."""

    def check(v: Any) -> Any:
        if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)):
            if lo <= v <= hi:
                return v
            raise _OutOfRange(f"integer outside {lo}..{hi}")
        raise _Wrong("expected an integer")

    return check


def _str(v: Any) -> Any:
    if isinstance(v, str) and len(v) <= MAX_TEXT:
        return v
    raise _Wrong("expected text")


def _bin(v: Any) -> Any:
    if isinstance(v, bytes) and len(v) <= MAX_BYTES:
        return v
    raise _Wrong("expected bytes")


def _any_bin(v: Any) -> Any:
    # What a server sends: its (larger) frame limit alone bounds a byte string.
    if isinstance(v, bytes):
        return v
    raise _Wrong("expected bytes")


def _map(v: Any) -> Any:
    if isinstance(v, dict):
        return v
    raise _Wrong("expected a map")


def _tuple(v: Any) -> Any:
    """The check of ``tuple[Any, ...]``: a list or a tuple of at most ``MAX_LIST`` items."""
    t = type(v)
    if not (t is tuple or t is list or isinstance(v, _LISTS)) or len(v) > MAX_LIST:
        raise _Wrong("expected a list")
    return v if t is tuple else tuple(v)


def _tuple_of(item: _Check) -> _Check:
    """The check of ``tuple[X, ...]``, ``item`` checking an ``X`` (and returning it unchanged)."""

    def check(v: Any) -> Any:
        v = _tuple(v)
        try:
            for x in v:
                item(x)
        except _Wrong as e:
            # The first item refused is x itself (a check depends on the value alone).
            i = next(i for i, y in enumerate(v) if y is x)
            raise _Wrong(e.what, f"[{i}]") from None
        return v

    return check


def _union(options: tuple[_Check, ...], nullable: bool) -> _Check:
    """The check of ``X | Y ...``: the first of ``options`` that accepts the value (or ``None``)."""

    def check(v: Any) -> Any:
        if v is None and nullable:
            return v
        for option in options:
            try:
                return option(v)
            except _OutOfRange:
                raise  # the right type: its value is what is wrong
            except _Wrong:
                pass
        raise _Wrong("wrong type")

    return check


_SCALARS: dict[Any, _Check] = {bool: _bool, str: _str, dict: _map}


def _check_of(tp: Any, max_bytes: int | None, ints: tuple[int, int] = DEFAULT_INT_RANGE) -> _Check:
    """The check of a field annotated ``tp``; ``max_bytes`` bounds its byte strings, if any,
    and ``ints`` is the range of its integers."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        options = tuple(_check_of(a, max_bytes, ints) for a in args if a is not type(None))
        return _union(options, type(None) in args)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if item is not Any and item not in (bool, int, str, bytes):
            raise TypeError(f"unsupported field type {tp!r}")  # a tuple holds scalars
        return _tuple if item is Any else _tuple_of(_check_of(item, max_bytes, ints))
    if tp is Any:
        return _any
    if tp is bytes:
        return _any_bin if max_bytes is None else _bin
    if tp is int:
        return _int(*ints)
    check = _SCALARS.get(origin or tp)
    if check is None:
        raise TypeError(f"unsupported field type {tp!r}")
    return check


_set = object.__setattr__

#: class -> (name, check) for each of its fields that a check constrains, in field order.
_CHECKS: dict[type[Message], tuple[tuple[str, _Check], ...]] = {}


def _checks(cls: type[Message]) -> tuple[tuple[str, _Check], ...]:
    checks = _CHECKS.get(cls)
    if checks is None:
        # MAX_BYTES protects whoever decodes a client's message; what a server sends is bounded
        # by its (larger) frame limit alone, so a bin there may be as large as the frame.
        max_bytes = None if cls.DIR is Dir.S2C else MAX_BYTES
        made = (
            (name, _check_of(tp, max_bytes, int_range(cls.TAG, name)))
            for name, tp in _hints(cls).items()
        )
        checks = _CHECKS[cls] = tuple((name, c) for name, c in made if c is not _any)
    return checks


def _fixed(tp: Any) -> bool:
    """Whether every value a validated field of annotation ``tp`` can hold is one the frame
    encoder's walk accepts without looking: nil, a bool/int/str/bytes (or a subclass), or a
    tuple of such (a validated tuple field holds an exact tuple, of checked items)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return all(_fixed(a) for a in typing.get_args(tp))
    if origin is tuple:
        return typing.get_args(tp)[0] in (bool, int, str, bytes)
    return tp in (bool, int, str, bytes, type(None))


#: registered class -> its field names, and those whose values the frame encoder must walk.
_FRAMING: dict[type[Message], tuple[tuple[str, ...], tuple[str, ...]]] = {}

#: tag -> (class, its field names, every key its wire map has).
_DECODE: dict[str, tuple[type[Message], tuple[str, ...], frozenset[str]]] = {}


def _register(cls: type[Message]) -> None:
    """Make the tables of registered ``cls``: its checks, its decoder and its framing."""
    _checks(cls)
    hints = _hints(cls)
    names = tuple(hints)
    _DECODE[cls.TAG] = (cls, names, frozenset(names) | {"t"})
    _FRAMING[cls] = (names, tuple(n for n in names if not _fixed(hints[n])))


def decode(d: dict[str, Any]) -> Message:
    """Turn a decoded frame into a message, or raise ``UNKNOWN_TAG`` / ``BAD_MESSAGE``."""
    tag = d.get("t")
    if not isinstance(tag, str):
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "a message needs a string 't' tag")
    entry = _DECODE.get(tag)
    if entry is None:
        raise RemoteProtocolError(ErrorCode.UNKNOWN_TAG, f"unknown message tag {tag!r}")
    cls, names, keys = entry
    if d.keys() != keys:
        fields = set(names)
        got = set(d) - {"t"}
        missing = sorted(fields - got)
        extra = sorted(got - fields)
        raise RemoteProtocolError(
            ErrorCode.BAD_MESSAGE, f"{tag}: missing {missing} extra {extra}".replace(" []", " -")
        )
    return cls(*map(d.__getitem__, names))


def encode(msg: Message) -> dict[str, Any]:
    """The wire map of ``msg`` (tuples become lists when packed)."""
    framing = _FRAMING.get(type(msg))
    names = framing[0] if framing is not None else tuple(_hints(type(msg)))
    out: dict[str, Any] = {"t": msg.TAG}
    for name in names:
        out[name] = getattr(msg, name)
    return out


def frame(msg: Message, *, max_frame: int = MAX_FRAME) -> bytes:
    """``encode_frame(encode(msg), max_frame=max_frame)``: the same bytes, the same errors.

    A message was validated when it was built, and its class is frozen: a field whose type
    admits only scalars (or a tuple of them) cannot hold anything the frame encoder refuses, so
    only the free-form fields (maps, ``Any``) are walked. Raises :class:`LocalProtocolError`.
    """
    framing = _FRAMING.get(type(msg))
    if framing is None:  # not a registered class (a subclass, say): the whole walk
        return encode_frame(encode(msg), max_frame=max_frame)
    names, free = framing
    out: dict[str, Any] = {"t": msg.TAG}
    for name in names:
        out[name] = getattr(msg, name)
    return encode_frame_walking(out, [out[k] for k in free], max_frame=max_frame)


# ================================================================================================
# Session
# ================================================================================================


@message("hello", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Hello(Message):
    """First message of every connection: the versions and capabilities the sender speaks."""

    versions: tuple[int, ...]
    agent: str
    caps: tuple[str, ...]


@message("welcome", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Welcome(Message):
    """The server's answer to hello: the agreed version, its identity key and a challenge."""

    version: int
    caps: tuple[str, ...]
    server: bytes
    challenge: bytes
    guests: bool


@message("auth", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Auth(Message):
    """Proof of identity: Ed25519 ``sig`` by ``key`` over the auth transcript (spec "Identity")."""

    key: bytes
    sig: bytes
    name: str
    resume: bytes | None


@message("authed", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Authed(Message):
    """Identity accepted: the player id and a resume token for reconnecting."""

    player: str
    resume: bytes


@message("error", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Error(Message):
    """A refusal: registry ``code``, human ``msg``, and the request ``ref`` it answers, if any."""

    code: int
    msg: str
    ref: int | None


@message("ok", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Ok(Message):
    """A request succeeded; ``data`` carries its answer."""

    ref: int
    data: dict[str, Any]


@message("ping", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Ping(Message):
    """Heartbeat; answered by pong with the same ``n``."""

    n: int


@message("pong", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Pong(Message):
    """Heartbeat answer."""

    n: int


@message("bye", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Bye(Message):
    """The sender closes the connection (shutdown, kick, or done)."""

    reason: str


# ================================================================================================
# Lobby (requests carry an ``id``; the answer is ``ok``/``error`` with ``ref`` = that id)
# ================================================================================================


@message("create", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Create(Message):
    """Open a match with a rule set (``{"preset": NAME, ...options}``) and a trust mode."""

    id: int
    rules: dict[str, Any]
    mode: str
    public: bool


@message("list", Dir.C2S)
@dataclass(frozen=True, slots=True)
class ListMatches(Message):
    """List open public matches."""

    id: int


@message("join", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Join(Message):
    """Take the free seat of a match, by id or by private invitation code."""

    id: int
    match: bytes | None
    invite: str | None


@message("quick", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Quick(Message):
    """Quick match: pair with the next player asking for the same rules and mode."""

    id: int
    rules: dict[str, Any]
    mode: str


@message("leave", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Leave(Message):
    """Cancel an open match, or resign and leave a running one."""

    id: int
    match: bytes


@message("watch", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Watch(Message):
    """Spectate a public match: the answer is a snapshot of the public view, then its events."""

    id: int
    match: bytes


@message("rematch", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Rematch(Message):
    """Offer (or accept) a new match with the same opponent and rules."""

    id: int
    match: bytes


@message("get_record", Dir.C2S)
@dataclass(frozen=True, slots=True)
class GetRecord(Message):
    """Fetch the signed record of a finished match."""

    id: int
    match: bytes


@message("ladder", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Ladder(Message):
    """Fetch the rating ladder."""

    id: int


@message("redirect", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Redirect(Message):
    """Your match `match` runs on another node: take the signed `ticket` there (capability
    `redirect`)."""

    match: bytes
    ticket: bytes
    sig: bytes


@message("redeem", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Redeem(Message):
    """Present a redirect's `ticket` and `sig` to the node it sends you to."""

    id: int
    ticket: bytes
    sig: bytes


# ================================================================================================
# Match and game
# ================================================================================================


@message("start", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Start(Message):
    """A match begins: your seat, the rules, the trust mode and both players' ids."""

    match: bytes
    seat: int
    rules: dict[str, Any]
    mode: str
    players: tuple[str, ...]


@message("game", Dir.S2C)
@dataclass(frozen=True, slots=True)
class GameStart(Message):
    """Game ``game`` of the match begins: place and commit (``first`` is known, or ``None``)."""

    match: bytes
    game: int
    first: int | None


@message("commit", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Commit(Message):
    """Blind mode: the fleet commitment (the leaf list, see spec "Commitments"), and `sig`, the
    player's seat signature over its context and root (spec 10.10)."""

    match: bytes
    game: int
    commitment: dict[str, Any]
    sig: bytes


@message("place", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Place(Message):
    """Custody mode: hand the fleet and its secret to the referee, with the seat signature over
    the root they commit to (spec 10.10)."""

    match: bytes
    game: int
    fleet: tuple[Any, ...]
    secret: bytes
    sig: bytes


@message("committed", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Committed(Message):
    """``seat`` has committed; ``root`` names its commitment."""

    match: bytes
    game: int
    seat: int
    root: bytes


@message("firing", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Firing(Message):
    """Both fleets are committed: ``first`` fires first. Carries the opponent's commitment."""

    match: bytes
    game: int
    first: int
    commitments: tuple[Any, ...]


@message("fire", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Fire(Message):
    """Call a shot: one cell, or a whole salvo. ``seq`` makes a resent shot apply once."""

    match: bytes
    game: int
    cells: tuple[str, ...]
    member: int
    seq: int


@message("radar", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Radar(Message):
    """Scan the radar area whose top-left cell is ``at``, instead of firing."""

    match: bytes
    game: int
    at: str
    member: int
    seq: int


@message("shot", Dir.S2C)
@dataclass(frozen=True, slots=True)
class ShotCalled(Message):
    """Shot ``n`` by ``seat`` (called by team member ``member``): the defender owes its verdict
    (spectators see it too)."""

    match: bytes
    game: int
    n: int
    seat: int
    member: int
    cells: tuple[str, ...]
    radar: bool


@message("answer", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Answer(Message):
    """Blind mode: the defender's verdict on the pending shot, with its openings."""

    match: bytes
    game: int
    verdict: dict[str, Any]


@message("verdict", Dir.S2C)
@dataclass(frozen=True, slots=True)
class VerdictMsg(Message):
    """The checked verdict on shot ``n`` (called by ``seat``'s team member ``member``); ``next``
    moves next (``None``: firing is over)."""

    match: bytes
    game: int
    n: int
    seat: int
    member: int
    cells: tuple[str, ...]
    radar: bool
    verdict: dict[str, Any]
    next: int | None


@message("shot_lost", Dir.S2C)
@dataclass(frozen=True, slots=True)
class ShotLost(Message):
    """``seat`` lost its shot (``why``: ``clock`` or ``repeat``); ``next`` moves next. ``cells``
    are the labels a wasted repeat called (its transcript entry), empty for a clock loss."""

    match: bytes
    game: int
    seat: int
    why: str
    cells: tuple[str, ...]
    next: int


@message("clock", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Clock(Message):
    """A clock started: ``kind`` (setup, shot, answer, reveal) runs ``seconds`` for ``seat``."""

    match: bytes
    game: int
    kind: str
    seconds: int
    seat: int | None


@message("reveal_now", Dir.S2C)
@dataclass(frozen=True, slots=True)
class RevealNow(Message):
    """The fleet was sunk (``winner`` provisionally): reveal fleet and secret."""

    match: bytes
    game: int
    winner: int


@message("reveal", Dir.C2S)
@dataclass(frozen=True, slots=True)
class RevealMsg(Message):
    """Blind mode: the end-of-game reveal (fleet and secret)."""

    match: bytes
    game: int
    reveal: dict[str, Any]


@message("revealed", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Revealed(Message):
    """``seat`` revealed; ``fault`` names what the reveal showed it did wrong, if anything."""

    match: bytes
    game: int
    seat: int
    reveal: dict[str, Any]
    fault: str | None


@message("game_over", Dir.S2C)
@dataclass(frozen=True, slots=True)
class GameOver(Message):
    """Game ``game`` ended: ``outcome`` is ``{winner, reason, detail}``."""

    match: bytes
    game: int
    outcome: dict[str, Any]


@message("match_over", Dir.S2C)
@dataclass(frozen=True, slots=True)
class MatchOver(Message):
    """The match ended: scores, winner, rating changes, the record head to co-sign, and
    ``record``, the canonical bytes of the record it heads (spec 11.1), for the players to check
    before they co-sign (spec 5.5)."""

    match: bytes
    result: dict[str, Any]
    ratings: dict[str, Any] | None
    head: bytes
    record: bytes


@message("cosign", Dir.C2S)
@dataclass(frozen=True, slots=True)
class CoSign(Message):
    """A player's signature over the record head, stored beside the referee's."""

    match: bytes
    head: bytes
    sig: bytes


@message("resign", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Resign(Message):
    """Give up the current game."""

    match: bytes
    game: int


@message("snapshot", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Snapshot(Message):
    """The full view of a match for one seat (``None``: a spectator); first after (re)joining."""

    match: bytes
    seat: int | None
    view: dict[str, Any]


@message("opponent", Dir.S2C)
@dataclass(frozen=True, slots=True)
class OpponentStatus(Message):
    """The opponent disconnected (``grace`` seconds to come back) or reconnected."""

    match: bytes
    seat: int
    present: bool
    grace: int


# Team play (capability ``teams``, spec 6.8): who sits on each team, and who calls each turn.


@message("team", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Team(Message):
    """The members of ``seat``'s team, by member number (``members[0]`` is its captain, the
    seat's player in ``start``), as player ids."""

    match: bytes
    seat: int
    members: tuple[str, ...]


@message("turn", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Turn(Message):
    """Team play: member ``member`` of ``seat``'s team calls the next shot of game ``game``."""

    match: bytes
    game: int
    seat: int
    member: int


# Peer play: the commit-reveal coin for the first shot.


@message("coin", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Coin(Message):
    """Lot: first ``hash`` (commitment to a nonce), then ``nonce`` once both hashes are in."""

    match: bytes
    game: int
    hash: bytes | None
    nonce: bytes | None

    def __post_init__(self) -> None:
        """The fields' checks, then exactly one of ``hash`` and ``nonce`` (spec 2.4)."""
        Message.__post_init__(self)  # not super(): slots=True makes a new class (bpo-46404)
        if (self.hash is None) == (self.nonce is None):
            raise RemoteProtocolError(
                ErrorCode.BAD_MESSAGE, "coin: exactly one of hash and nonce is not nil"
            )


# People (capability ``people``, spec 6.9): who is online, named challenges, a match's chat.

CHAT_MAX = 200
"""Longest ``say.line``, in Unicode code points (spec 6.9.4; the server refuses a longer line
``BAD_MESSAGE``, as the rule of a request, so that the refusal names it)."""


@message("online", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Online(Message):
    """Who is online: the players whose sessions agreed ``people`` (at most 100)."""

    id: int


@message("challenge", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Challenge(Message):
    """Challenge ``player`` (a player id, or a display name only one player online has) to a
    match with ``rules`` and ``mode``; the answer names the challenge."""

    id: int
    player: str
    rules: dict[str, Any]
    mode: str


@message("challenged", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Challenged(Message):
    """``player`` (display ``name``) challenges you to a match with ``rules`` (in full) and
    ``mode``: answer ``challenge`` with ``accept`` or ``decline``."""

    challenge: bytes
    player: str
    name: str
    rules: dict[str, Any]
    mode: str


@message("accept", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Accept(Message):
    """Accept a challenge made to you: the answer names the match, whose ``start`` follows."""

    id: int
    challenge: bytes


@message("decline", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Decline(Message):
    """Decline a challenge made to you, saying why or not (``reason``)."""

    id: int
    challenge: bytes
    reason: str | None


@message("cancel", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Cancel(Message):
    """Withdraw a challenge you made."""

    id: int
    challenge: bytes


@message("challenge_gone", Dir.S2C)
@dataclass(frozen=True, slots=True)
class ChallengeGone(Message):
    """``challenge`` is over: ``reason`` says how (``accepted``: ``match`` names the match;
    ``declined``, with the decliner's words in ``detail``; ``cancelled``, ``expired``,
    ``offline``)."""

    challenge: bytes
    reason: str
    detail: str | None
    match: bytes | None


@message("say", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Say(Message):
    """A line of chat to the players of running match ``match`` (not its spectators)."""

    # ``line``, not ``text``: a CDDL tool (cddl-rs, pycddl) reads a bare key ``text`` in the
    # schema as the prelude's type ``text``, any string, and then refuses every valid ``say``.

    id: int
    match: bytes
    line: str


@message("said", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Said(Message):
    """A line of the chat of ``match`` by ``seat``'s team member ``member`` (0 without team
    play), to its players, the sender included."""

    match: bytes
    seat: int
    member: int
    line: str


# People (capability ``people``, spec 6.9): the seats' names, the running matches, a player's
# figures.


@message("seated", Dir.S2C)
@dataclass(frozen=True, slots=True)
class Seated(Message):
    """Who sits where, sent right after ``start`` to a session that agreed ``people``: the two
    seats' display names, and their ratings when the match began (empty: not rated)."""

    match: bytes
    names: tuple[str, ...]
    ratings: tuple[int, ...]


@message("running", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Running(Message):
    """List the running public matches, to watch one."""

    id: int


@message("player", Dir.C2S)
@dataclass(frozen=True, slots=True)
class PlayerFigures(Message):
    """A player's figures (games, wins, shots and hits, rating and its history), by player id
    or display name."""

    id: int
    player: str
