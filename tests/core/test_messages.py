"""Message validation: every type round-trips, and the field checks refuse what they must."""

from __future__ import annotations

import typing
from enum import IntEnum
from typing import Any

import pytest
from helpers import fields, sample, wire_of
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, RemoteProtocolError

MID = bytes(16)


@pytest.mark.parametrize("tag", sorted(m.MESSAGES))
def test_every_message_round_trips(tag: str) -> None:
    cls = m.MESSAGES[tag]
    wire = wire_of(cls)
    msg = m.decode(wire)
    assert type(msg) is cls
    back = m.encode(msg)
    # Arrays come back as tuples; the packed bytes are the same.
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in back.items()} == wire
    assert m.decode(back) == msg


@pytest.mark.parametrize("tag", sorted(m.MESSAGES))
def test_every_optional_field_takes_nil(tag: str) -> None:
    cls = m.MESSAGES[tag]
    pair = m.EXACTLY_ONE.get(tag, ())
    for name, tp in fields(cls).items():
        if type(None) in typing.get_args(tp):
            wire = {**wire_of(cls), name: None}
            if name in pair:  # the other one of the two then holds a value
                other = pair[1] if name == pair[0] else pair[0]
                wire[other] = sample(fields(cls)[other])
            assert getattr(m.decode(wire), name) is None


def test_a_coin_holds_exactly_one_of_hash_and_nonce() -> None:
    # Spec 2.4: a rule tying two fields is shape, refused by the message itself.
    h = bytes(32)
    assert m.Coin(MID, 1, h, None).hash == h and m.Coin(MID, 1, None, h).nonce == h
    for hash_, nonce in ((h, h), (None, None)):
        refused({**wire_of(m.Coin), "hash": hash_, "nonce": nonce}, "exactly one of hash and nonce")
        with pytest.raises(RemoteProtocolError):
            m.Coin(MID, 1, hash_, nonce)
    # A field of the wrong type is reported as such, not as the pair.
    refused({**wire_of(m.Coin), "hash": "x", "nonce": None}, "coin.hash: wrong type")


def test_a_join_naming_both_or_neither_is_still_a_message() -> None:
    # Spec 5.3: the server refuses it as a request, so that the error names it (ref: id).
    assert m.decode({**wire_of(m.Join), "match": None, "invite": None}).id == 7  # type: ignore[attr-defined]
    both = m.decode({**wire_of(m.Join), "match": MID, "invite": "ABC"})
    assert both.match == MID and both.invite == "ABC"  # type: ignore[attr-defined]


def refused(d: dict[str, Any], where: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        m.decode(d)
    assert info.value.code is ErrorCode.BAD_MESSAGE
    assert where in info.value.detail


def test_a_bool_is_not_an_int_and_an_int_is_not_a_bool() -> None:
    fire = wire_of(m.Fire)
    refused({**fire, "seq": True}, "fire.seq: expected an integer")
    refused({**wire_of(m.ShotCalled), "radar": 1}, "shot.radar: expected a boolean")
    refused({**wire_of(m.Hello), "versions": [1, False]}, "hello.versions[1]: expected an integer")


def test_optional_fields_are_checked_when_present() -> None:
    refused({**wire_of(m.Error), "ref": True}, "error.ref: wrong type")
    refused({**wire_of(m.Join), "match": "not bytes"}, "join.match: wrong type")
    refused({**wire_of(m.Coin), "nonce": 5}, "coin.nonce: wrong type")
    refused({**wire_of(m.VerdictMsg), "next": "1"}, "verdict.next: wrong type")


def test_lists_texts_maps_and_bytes_are_checked() -> None:
    refused({**wire_of(m.Fire), "cells": "E5"}, "fire.cells: expected a list")
    refused({**wire_of(m.Fire), "cells": ["E5", 5]}, "fire.cells[1]: expected text")
    refused({**wire_of(m.Fire), "cells": ["x"] * (m.MAX_LIST + 1)}, "fire.cells: expected a list")
    refused({**wire_of(m.Bye), "reason": "x" * (m.MAX_TEXT + 1)}, "bye.reason: expected text")
    refused({**wire_of(m.Create), "rules": [1]}, "create.rules: expected a map")
    refused({**wire_of(m.Leave), "match": bytes(m.MAX_BYTES + 1)}, "leave.match: expected bytes")


def test_a_server_message_carries_bytes_beyond_the_client_bound() -> None:
    big = bytes(m.MAX_BYTES + 1)
    assert m.decode({**wire_of(m.Committed), "root": big}).root == big  # type: ignore[attr-defined]


def test_lists_become_tuples_and_subclasses_still_pass() -> None:
    class Seat(IntEnum):
        ONE = 1

    msg = m.Fire(MID, 1, ["E5", "F6"], Seat.ONE, 3)  # type: ignore[arg-type]
    assert msg.cells == ("E5", "F6") and msg.member == 1
    assert m.Hello([1, 2], "a", []).versions == (1, 2)  # type: ignore[arg-type]


def test_missing_and_extra_keys_are_named() -> None:
    fire = wire_of(m.Fire)
    del fire["seq"]
    refused(fire, "fire: missing ['seq'] extra -")
    refused({**wire_of(m.Ping), "x": 1}, "ping: missing - extra ['x']")
    with pytest.raises(RemoteProtocolError) as info:
        m.decode({"t": "frobnicate"})
    assert info.value.code is ErrorCode.UNKNOWN_TAG


def test_integers_outside_their_fields_range_are_refused() -> None:
    # Spec 2.4: no field exceeds 2**32-1, so every msgpack library carries every valid value
    # as an integer (the npm ones write 2**32 and more as a float).
    top = m.MAX_UINT32
    assert top == 2**32 - 1
    assert m.decode({**wire_of(m.Fire), "seq": top}).seq == top  # type: ignore[attr-defined]
    refused({**wire_of(m.Fire), "seq": top + 1}, "fire.seq: integer outside 0..4294967295")
    refused({**wire_of(m.Create), "id": 2**53 - 1}, "create.id: integer outside 0..4294967295")
    refused({**wire_of(m.Ping), "n": 2**64 - 1}, "ping.n: integer outside 0..")
    refused({**wire_of(m.Create), "id": -1}, "create.id: integer outside 0..")
    refused({**wire_of(m.Committed), "seat": 2}, "committed.seat: integer outside 0..1")
    refused({**wire_of(m.Resign), "game": 0}, "resign.game: integer outside 1..")
    refused({**wire_of(m.Hello), "versions": [1, 0]}, "hello.versions[1]: integer outside 1..")
    # An optional field says what is wrong with its value, not only "wrong type".
    refused({**wire_of(m.Error), "ref": top + 1}, "error.ref: integer outside 0..")
