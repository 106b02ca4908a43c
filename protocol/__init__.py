"""seabattle.protocol: the sans-IO core of the seabattle protocol.

No sockets, no trio, no clock, no randomness it did not receive. The shells (``seabattle.server``,
``seabattle.client``) feed it bytes and time and carry out what it returns. Normative text:
``spec/protocol.md``.
"""

from .commit import PROTOCOL_VERSION, Commitment, Committed, Reveal, coin_commit, coin_result
from .errors import ErrorCode, LocalProtocolError, ProtocolError, Refused, RemoteProtocolError
from .fleet import Fleet, IllegalFleet, Placement, random_fleet
from .game import Deadline, EndReason, Game, Outcome, Phase
from .grid import Cell, parse_cell
from .match import Match
from .record import (
    build_record,
    dump_record,
    load_record,
    record_head,
    verify_bytes,
    verify_record,
)
from .rules import PRESETS, BadRules, RuleSet, preset, rules_from_dict
from .session import Connection, Role
from .verdict import Defender, Result, Shot, Verdict

__all__ = [
    "PRESETS",
    "PROTOCOL_VERSION",
    "BadRules",
    "Cell",
    "Commitment",
    "Committed",
    "Connection",
    "Deadline",
    "Defender",
    "EndReason",
    "ErrorCode",
    "Fleet",
    "Game",
    "IllegalFleet",
    "LocalProtocolError",
    "Match",
    "Outcome",
    "Phase",
    "Placement",
    "ProtocolError",
    "Refused",
    "RemoteProtocolError",
    "Result",
    "Reveal",
    "Role",
    "RuleSet",
    "Shot",
    "Verdict",
    "build_record",
    "coin_commit",
    "coin_result",
    "dump_record",
    "load_record",
    "parse_cell",
    "preset",
    "random_fleet",
    "record_head",
    "rules_from_dict",
    "verify_bytes",
    "verify_record",
]
