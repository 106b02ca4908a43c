"""Every message of protocol v1 as a frozen, validated type.

A message on the wire is a msgpack map whose ``"t"`` key is the message's tag; its other keys are
exactly the fields of the class registered for that tag (``spec/protocol.md`` section "Messages"
holds the same table; a test checks that the two agree). :func:`decode` turns a decoded map into a
message, refusing an unknown tag (``UNKNOWN_TAG``), a missing or extra key, or a value of the wrong
type (``BAD_MESSAGE``): an invalid message cannot exist. :func:`encode` is its inverse.

Field types are checked exactly: a boolean is not an integer, a list is not a map. Byte strings and
text have length limits. Cells are strings in seed notation (``"E5"``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from .codec import MAX_FRAME, encode_frame, encode_frame_walking
from .errors import ErrorCode, RemoteProtocolError

__all__ = ["MESSAGES", "Dir", "Message", "decode", "encode", "frame"]

MAX_TEXT = 4096
MAX_BYTES = 65536
MAX_LIST = 4096


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
        # Registered classes get a compiled __post_init__ of their own (see _compile_validator);
        # this is the reference path, for anything else.
        _validate(self)


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
        _compiled(cls)  # validation is compiled once, here, not on every message
        _decoder(tag)
        _compile_class(cls)
        return cls

    return deco


def _hints(cls: type[Message]) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        h = {f.name: h[f.name] for f in dataclasses.fields(cls)}
        _HINTS[cls] = h
    return h


def _check(value: Any, tp: Any, where: str, max_bytes: int | None = MAX_BYTES) -> Any:
    """Check ``value`` against the annotation ``tp``; return it normalised (lists -> tuples).

    ``max_bytes`` bounds a ``bin`` field (``None``: only the frame bounds it). This is the
    reference check: the compiled checkers below only ever accept what it accepts, and hand
    everything else to it for the verdict and the precise error.
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _check(value, a, where, max_bytes)
            except RemoteProtocolError:
                continue
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: wrong type")
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        if not isinstance(value, list | tuple) or len(value) > MAX_LIST:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a list")
        return tuple(_check(v, item, f"{where}[{i}]", max_bytes) for i, v in enumerate(value))
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a boolean")
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected an integer")
    elif tp is str:
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected text")
    elif tp is bytes:
        if not isinstance(value, bytes) or (max_bytes is not None and len(value) > max_bytes):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected bytes")
    elif tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, f"{where}: expected a map")
    else:  # pragma: no cover - a programming error in the table
        raise TypeError(f"unsupported field type {tp!r}")
    return value


# -- compiled checkers -----------------------------------------------------------------------------
#
# Every message built or decoded is validated, so the check runs on every frame in and out. Walking
# the annotations with typing.get_origin/get_args each time cost most of a decode; instead each
# class gets, once, a list of (field, fast check) built from its annotations. A fast check tests
# exact types only (what msgpack decodes and what the shells build) and returns the value,
# normalised (a list becomes a tuple), or _FAIL for anything else: _check then gives the verdict
# (it also accepts subclasses, e.g. an IntEnum for an int) and the precise error. So the fast path
# accepts a subset of what _check accepts, and returns the same value for it.

_FAIL: Any = object()
_Fast = Callable[[Any], Any]
#: (field name, fast check, annotation) for each field, and the bin bound for _check.
_Compiled = tuple[tuple[tuple[str, _Fast, Any], ...], int | None]
_COMPILED: dict[type[Message], _Compiled] = {}


def _any(v: Any) -> Any:
    return v


def _bool(v: Any) -> Any:
    return v if v is True or v is False else _FAIL


def _int(v: Any) -> Any:
    return v if type(v) is int else _FAIL


def _str(v: Any) -> Any:
    return v if type(v) is str and len(v) <= MAX_TEXT else _FAIL


def _map(v: Any) -> Any:
    return v if type(v) is dict else _FAIL


def _bin(max_bytes: int | None) -> _Fast:
    if max_bytes is None:
        return lambda v: v if type(v) is bytes else _FAIL
    return lambda v: v if type(v) is bytes and len(v) <= max_bytes else _FAIL


def _tuple_of(item: Any, max_bytes: int | None) -> _Fast:
    if item is Any:

        def any_items(v: Any) -> Any:
            t = type(v)
            if (t is list or t is tuple) and len(v) <= MAX_LIST:
                return v if t is tuple else tuple(v)
            return _FAIL

        return any_items
    if item is str:

        def texts(v: Any) -> Any:
            t = type(v)
            if (t is list or t is tuple) and len(v) <= MAX_LIST:
                for x in v:
                    if type(x) is not str or len(x) > MAX_TEXT:
                        return _FAIL
                return v if t is tuple else tuple(v)
            return _FAIL

        return texts
    each = _fast(item, max_bytes)

    def items(v: Any) -> Any:
        t = type(v)
        if (t is list or t is tuple) and len(v) <= MAX_LIST:
            out = []
            for x in v:
                nx = each(x)
                if nx is _FAIL:
                    return _FAIL
                out.append(nx)
            return tuple(out)
        return _FAIL

    return items


def _optional(inner: _Fast) -> _Fast:
    return lambda v: v if v is None else inner(v)


def _fast(tp: Any, max_bytes: int | None) -> _Fast:
    """The fast check for annotation ``tp`` (see above); ``_FAIL`` always for what it lacks."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _optional(_fast(args[0], max_bytes))
        return lambda v: _FAIL  # pragma: no cover - no such field today; _check decides
    if origin is tuple:
        return _tuple_of(typing.get_args(tp)[0], max_bytes)
    if tp is Any:
        return _any
    if tp is bool:
        return _bool
    if tp is int:
        return _int
    if tp is str:
        return _str
    if tp is bytes:
        return _bin(max_bytes)
    if tp is dict or origin is dict:
        return _map
    raise TypeError(f"unsupported field type {tp!r}")  # pragma: no cover - a table error


def _compiled(cls: type[Message]) -> _Compiled:
    c = _COMPILED.get(cls)
    if c is None:
        # MAX_BYTES protects whoever decodes a client's message; what a server sends is bounded
        # by its (larger) frame limit alone, so a bin there may be as large as the frame.
        max_bytes = None if cls.DIR is Dir.S2C else MAX_BYTES
        c = (
            tuple((name, _fast(tp, max_bytes), tp) for name, tp in _hints(cls).items()),
            max_bytes,
        )
        _COMPILED[cls] = c
    return c


def _validate(msg: Message) -> None:
    checks, _ = _COMPILED.get(type(msg)) or _compiled(type(msg))
    for i in range(len(checks)):
        _fix(msg, i)


def _fix(msg: Message, i: int) -> None:
    """:func:`_validate` for field ``i`` of ``msg`` alone (what a compiled validator calls)."""
    checks, max_bytes = _COMPILED[type(msg)]
    name, fast, tp = checks[i]
    v = getattr(msg, name)
    nv = fast(v)
    if nv is not v:
        if nv is _FAIL:
            nv = _check(v, tp, f"{msg.TAG}.{name}", max_bytes)
            if nv is v:
                return
        object.__setattr__(msg, name, nv)


def _accepts(tp: Any, max_bytes: int | None, fast: str) -> str | None:
    """Python source of a condition on ``x`` that implies ``fast(x) is x`` for annotation ``tp``
    (``fast`` names the field's fast check); ``None`` when every value passes (``Any``)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            return "False"  # pragma: no cover - no such field today
        inner = _accepts(args[0], max_bytes, fast)
        return None if inner is None else f"x is None or ({inner})"
    if origin is tuple:
        item = typing.get_args(tp)[0]
        if item is Any:
            return "type(x) is tuple and len(x) <= MAX_LIST"
        if item is str:
            # For x not None the field's fast check is the tuple check itself (see _optional).
            return f"type(x) is tuple and {fast}(x) is x"
        return "False"  # items() always builds a new tuple: let _fix store it
    if tp is Any:
        return None
    if tp is bool:
        return "x is True or x is False"
    if tp is int:
        return "type(x) is int"
    if tp is str:
        return "type(x) is str and len(x) <= MAX_TEXT"
    if tp is bytes:
        return "type(x) is bytes" + ("" if max_bytes is None else f" and len(x) <= {max_bytes}")
    if tp is dict or origin is dict:
        return "type(x) is dict"
    raise TypeError(f"unsupported field type {tp!r}")  # pragma: no cover - a table error


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


#: class -> its wire map builder and the fields whose values the frame encoder must walk.
_FRAMING: dict[type[Message], tuple[Callable[[Message], dict[str, Any]], tuple[str, ...]]] = {}


def _compile_class(cls: type[Message]) -> None:
    """Give registered ``cls`` a compiled ``__post_init__`` and wire map builder.

    The validator tests each field with an inline condition that implies its fast check would
    return the value unchanged, and hands any other field to :func:`_fix` (the per-field body of
    :func:`_validate`): the same fields are accepted, normalised and refused, in field order.
    """
    checks, max_bytes = _compiled(cls)
    ns: dict[str, Any] = {"_fix": _fix, "MAX_LIST": MAX_LIST, "MAX_TEXT": MAX_TEXT}
    body = []
    for i, (name, fast, tp) in enumerate(checks):
        cond = _accepts(tp, max_bytes, f"_f{i}")
        if cond is None:
            continue
        ns[f"_f{i}"] = fast
        body += [f"    x = msg.{name}", f"    if not ({cond}):", f"        _fix(msg, {i})"]
    src = "def __post_init__(msg):\n" + "\n".join([*body, "    return None"]) + "\n"
    names = [name for name, _, _ in checks]
    items = "".join(f", {name!r}: msg.{name}" for name in names)
    src += f"def build(msg):\n    return {{'t': {cls.TAG!r}{items}}}\n"
    exec(src, ns)  # the dataclass way: straight-line code beats a loop over the fields
    cls.__post_init__ = ns["__post_init__"]  # type: ignore[method-assign]
    hints = _hints(cls)
    _FRAMING[cls] = (ns["build"], tuple(n for n in names if not _fixed(hints[n])))


#: tag -> (class, its field names, every key its wire map has).
_DECODE: dict[str, tuple[type[Message], tuple[str, ...], frozenset[str]]] = {}


def _decoder(tag: str) -> tuple[type[Message], tuple[str, ...], frozenset[str]] | None:
    entry = _DECODE.get(tag)
    if entry is None:
        cls = MESSAGES.get(tag)
        if cls is None:
            return None
        names = tuple(_hints(cls))
        entry = (cls, names, frozenset(names) | {"t"})
        _DECODE[tag] = entry
    return entry


def decode(d: dict[str, Any]) -> Message:
    """Turn a decoded frame into a message, or raise ``UNKNOWN_TAG`` / ``BAD_MESSAGE``."""
    tag = d.get("t")
    if not isinstance(tag, str):
        raise RemoteProtocolError(ErrorCode.BAD_MESSAGE, "a message needs a string 't' tag")
    entry = _DECODE.get(tag) or _decoder(tag)
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
    if framing is not None:
        return framing[0](msg)
    out: dict[str, Any] = {"t": msg.TAG}
    for name in _hints(type(msg)):
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
    build, free = framing
    out = build(msg)
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
    """Blind mode: the fleet commitment (the leaf list, see spec "Commitments")."""

    match: bytes
    game: int
    commitment: dict[str, Any]


@message("place", Dir.C2S)
@dataclass(frozen=True, slots=True)
class Place(Message):
    """Custody mode: hand the fleet and its secret to the referee."""

    match: bytes
    game: int
    fleet: tuple[Any, ...]
    secret: bytes


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
    """Shot ``n`` by ``seat``: the defender owes its verdict (spectators see it too)."""

    match: bytes
    game: int
    n: int
    seat: int
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
    """The checked verdict on shot ``n``; ``next`` moves next (``None``: firing is over)."""

    match: bytes
    game: int
    n: int
    seat: int
    cells: tuple[str, ...]
    radar: bool
    verdict: dict[str, Any]
    next: int | None


@message("shot_lost", Dir.S2C)
@dataclass(frozen=True, slots=True)
class ShotLost(Message):
    """``seat`` lost its shot (``why``: ``clock`` or ``repeat``); ``next`` moves next."""

    match: bytes
    game: int
    seat: int
    why: str
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
    """The match ended: scores, winner, rating changes, and the record head to co-sign."""

    match: bytes
    result: dict[str, Any]
    ratings: dict[str, Any] | None
    head: bytes


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


# Peer play: the commit-reveal coin for the first shot.


@message("coin", Dir.BOTH)
@dataclass(frozen=True, slots=True)
class Coin(Message):
    """Lot: first ``hash`` (commitment to a nonce), then ``nonce`` once both hashes are in."""

    match: bytes
    game: int
    hash: bytes | None
    nonce: bytes | None
