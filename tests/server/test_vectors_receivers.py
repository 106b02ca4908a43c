"""The vectors of spec/vectors/messages.json that a receiver's own rule refuses, against the
reference server: a message the session lets through (tests/core/test_vectors_messages.py checks
that much) whose fields break a rule of section 4.3 or 5.3-5.4 (a ``join`` naming both or neither
of ``match`` and ``invite``; an id, key or signature of another size). The server must refuse each
with the vector's code, and a request or shot with its ``ref``, as a refusal of section 4.4.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers import FakePeer, from_json, player_id
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.session import check_auth
from seabattle.server.config import Limits
from seabattle.server.lobby import Lobby
from seabattle.server.store import Store

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "spec" / "vectors" / "messages.json").read_text(
        encoding="utf-8"
    )
)
RECEIVER_RULES = [
    v
    for v in VECTORS["invalid"]
    if v["case"] in ("cross", "size") and v["tag"] not in m.ONE_OF_CHECKED
]


def _message(vector: dict[str, Any]) -> m.Message:
    fields = from_json(vector["message"])
    return m.decode(fields)


async def _lobby_refusal(msg: m.Message) -> tuple[ErrorCode, int | None]:
    """The code and ``ref`` a fresh lobby refuses ``msg`` with, from an authenticated peer."""
    async with trio.open_nursery() as nursery, Store.open(":memory:") as store:
        lobby = Lobby(store, Ed25519PrivateKey.generate(), nursery, Limits())
        peer = FakePeer(player_id("vectors"))
        await store.upsert_player(peer.player, peer.name, 0)
        try:
            if lobby.is_request(msg):
                await lobby.request(peer, msg)
            else:
                await lobby.game_message(peer, msg)
        except ProtocolError as e:
            return e.code, lobby.errors_ref(msg)
        finally:
            nursery.cancel_scope.cancel()
    errors = [x for x in peer.got if isinstance(x, m.Error)]
    assert len(errors) == 1, peer.got
    return ErrorCode(errors[0].code), errors[0].ref


def test_there_are_receiver_rule_vectors() -> None:
    cases = {(v["case"], v["tag"]) for v in RECEIVER_RULES}
    assert {("cross", "join"), ("size", "auth"), ("size", "leave"), ("size", "fire")} <= cases


@pytest.mark.parametrize("vector", RECEIVER_RULES, ids=lambda v: v["name"])
async def test_the_server_refuses_with_the_vectors_code(vector: dict[str, Any]) -> None:
    msg = _message(vector)
    code = ErrorCode(vector["code"])
    if isinstance(msg, m.Auth):
        # 4.3: a server in state auth checks the key and signature against its challenge.
        with pytest.raises(ProtocolError) as info:
            check_auth(msg, bytes(32), bytes(32))
        assert info.value.code is code
        return
    got, ref = await _lobby_refusal(msg)
    assert got is code
    # A request's refusal names it (4.4): the reason join's rule is the server's, not 2.4's.
    assert ref == getattr(msg, "id", getattr(msg, "seq", None))
