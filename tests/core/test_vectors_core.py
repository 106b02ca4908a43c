"""The core's test vectors (spec/vectors/commitments.json, records.json) hold for this code.

Other implementations check themselves against the same files, so a failure here means either the
code or the published vectors changed: both are protocol changes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from helpers import from_json
from seabattle.protocol.commit import (
    CellOpening,
    Commitment,
    Committed,
    Reveal,
    ShipOpening,
    coin_commit,
    coin_result,
    context,
)
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.record import dump_record, record_head, verify_bytes, verify_record
from seabattle.protocol.rules import rules_from_dict
from seabattle.protocol.verify import REASONS

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = from_json(json.loads((VECTORS / name).read_text()))
    return data


C = load("commitments.json")
R = load("records.json")
RULES = rules_from_dict(C["rules"])


def test_the_rules_digest_and_contexts() -> None:
    assert RULES.digest() == C["rules_digest"]
    for v in C["contexts"]:
        assert context(v["match"], v["game"], v["seat"], RULES) == v["context"]
    assert len({v["context"] for v in C["contexts"]}) == len(C["contexts"])


def test_salts_leaves_and_root_of_the_fleet() -> None:
    c = Committed(RULES, Fleet.from_list(C["fleet"]), C["secret"], C["match"], C["game"], C["seat"])
    assert c.ctx == C["context"]
    assert [c.open_cell(i).salt for i in range(RULES.cells)] == C["cell_salts"]
    assert [c.open_ship(k).salt for k in range(len(RULES.fleet))] == C["ship_salts"]
    assert list(c.commitment.cells) == C["cell_leaves"]
    assert list(c.commitment.ships) == C["ship_leaves"]
    assert c.root == C["root"]
    assert Commitment(tuple(C["cell_leaves"]), tuple(C["ship_leaves"])).root(c.ctx) == C["root"]


COMMITMENT = Commitment(tuple(C["cell_leaves"]), tuple(C["ship_leaves"]))


def check(vector: dict[str, Any], run: Any) -> None:
    if vector["valid"]:
        run()
        return
    with pytest.raises(ProtocolError) as info:
        run()
    assert info.value.code is ErrorCode[vector["error"].upper()]


@pytest.mark.parametrize("v", C["cell_openings"], ids=lambda v: v["name"])
def test_cell_openings(v: dict[str, Any]) -> None:
    check(v, lambda: COMMITMENT.check_cell(C["context"], CellOpening.from_dict(v["opening"])))


@pytest.mark.parametrize("v", C["ship_openings"], ids=lambda v: v["name"])
def test_ship_openings(v: dict[str, Any]) -> None:
    check(v, lambda: COMMITMENT.check_ship(C["context"], ShipOpening.from_dict(v["opening"])))


@pytest.mark.parametrize("v", C["reveals"], ids=lambda v: v["name"])
def test_reveals(v: dict[str, Any]) -> None:
    def run() -> None:
        occupancy = Reveal.from_dict(v["reveal"]).check(RULES, C["context"], COMMITMENT)
        assert occupancy == v["occupancy"]

    check(v, run)


def _dropped() -> Committed:
    """The vectors' fleet committed by its owner, who then stops holding the leaf list."""
    c = Committed(RULES, Fleet.from_list(C["fleet"]), C["secret"], C["match"], C["game"], C["seat"])
    c.drop_leaves()
    return c


def test_a_commitment_that_dropped_its_leaves_reads_back_the_same_leaves() -> None:
    com = _dropped().commitment
    assert list(com.cells) == C["cell_leaves"] and list(com.ships) == C["ship_leaves"]
    assert com.to_dict() == COMMITMENT.to_dict() and com == COMMITMENT
    assert com.root(C["context"]) == C["root"]
    assert [com.cell_leaf(i) for i in range(RULES.cells)] == C["cell_leaves"]
    assert [com.ship_leaf(k) for k in range(len(RULES.fleet))] == C["ship_leaves"]
    for bad in (-1, RULES.cells):
        with pytest.raises(IndexError):
            com.cell_leaf(bad)
    com.check_shape(RULES)


@pytest.mark.parametrize("v", C["cell_openings"], ids=lambda v: v["name"])
def test_cell_openings_against_a_commitment_that_dropped_its_leaves(v: dict[str, Any]) -> None:
    com = _dropped().commitment
    check(v, lambda: com.check_cell(C["context"], CellOpening.from_dict(v["opening"])))


@pytest.mark.parametrize("v", C["ship_openings"], ids=lambda v: v["name"])
def test_ship_openings_against_a_commitment_that_dropped_its_leaves(v: dict[str, Any]) -> None:
    com = _dropped().commitment
    check(v, lambda: com.check_ship(C["context"], ShipOpening.from_dict(v["opening"])))


@pytest.mark.parametrize("v", C["reveals"], ids=lambda v: v["name"])
def test_reveals_against_a_commitment_that_dropped_its_leaves(v: dict[str, Any]) -> None:
    com = _dropped().commitment

    def run() -> None:
        occupancy = Reveal.from_dict(v["reveal"]).check(RULES, C["context"], com)
        assert occupancy == v["occupancy"]

    check(v, run)
    assert com.to_dict() == COMMITMENT.to_dict()  # whether the reveal kept them or not


def test_leaf_lists_with_a_malformed_leaf_read_back_as_given_and_are_refused_counts_first() -> None:
    cells, ships = [*C["cell_leaves"][:-1], "not bytes"], C["ship_leaves"]
    com = Commitment.from_dict({"cells": cells, "ships": ships})
    assert com.to_dict() == {"cells": cells, "ships": ships} and com.cells == tuple(cells)
    assert com != COMMITMENT and pickle.loads(pickle.dumps(com)) == com
    counts = f"expected {RULES.cells} cell leaves and {len(RULES.fleet)} ship leaves, got"
    for given, detail in [
        (com, "every leaf is 32 bytes"),
        (Commitment(cells[1:], ships), f"{counts} {RULES.cells - 1} and {len(ships)}"),
        (Commitment(C["cell_leaves"][1:], ships), f"{counts} {RULES.cells - 1} and {len(ships)}"),
    ]:
        with pytest.raises(ProtocolError) as info:
            given.check_shape(RULES)
        assert (info.value.code, info.value.detail) == (ErrorCode.BAD_COMMITMENT, detail)


def test_a_commitment_to_an_illegal_fleet_opens_but_is_refused() -> None:
    bad = C["illegal"]
    ctx = context(C["match"], C["game"], bad["seat"], RULES)
    commitment = Commitment(tuple(bad["cell_leaves"]), tuple(bad["ship_leaves"]))
    assert commitment.root(ctx) == bad["root"]
    check(
        {"valid": False, "error": bad["error"]},
        lambda: Reveal.from_dict(bad["reveal"]).check(RULES, ctx, commitment),
    )


def test_the_lot() -> None:
    lot = C["lot"]
    assert coin_commit(lot["match"], lot["game"], 0, lot["nonce0"]) == lot["commit0"]
    assert coin_commit(lot["match"], lot["game"], 1, lot["nonce1"]) == lot["commit1"]
    assert coin_result(lot["nonce0"], lot["nonce1"]) == lot["first"]


def test_the_signed_record_verifies_with_its_head_and_bytes() -> None:
    signed = R["signed"]
    for role, key in R["keys"].items():
        if role != "other":
            assert {"key": key["public"], "role": role} in [
                {"key": s["key"], "role": s["role"]} for s in signed["sigs"]
            ]
    assert record_head(signed["record"]) == R["head"]
    assert hashlib.sha256(dump_record(signed)).digest() == R["bytes_sha256"]
    report = verify_record(signed)
    assert report.ok, report.reason
    assert [g.to_dict() for g in report.games] == R["expected"]["games"]
    assert report.seats_bound
    from_bytes = verify_bytes(dump_record(signed))
    assert from_bytes.ok and from_bytes.to_dict() == report.to_dict()


def patched(vector: dict[str, Any]) -> dict[str, Any]:
    record = copy.deepcopy(R["signed"]["record"])
    for op in vector["patch"]:
        parent = record
        for step in op["path"][:-1]:
            parent = parent[step]
        if op["op"] == "replace":
            parent[op["path"][-1]] = op["value"]
        else:
            assert op["op"] == "remove"
            del parent[op["path"][-1]]
    return {"record": record, "sigs": vector.get("sigs", R["signed"]["sigs"])}


def encoded(vector: dict[str, Any]) -> bytes:
    """The signed record of a variant as bytes: given whole (``bytes``), or the patched record in
    its canonical encoding."""
    if "bytes" in vector:
        assert "patch" not in vector and "sigs" not in vector
        data: bytes = vector["bytes"]
        return data
    return dump_record(patched(vector))


@pytest.mark.parametrize("v", R["tampered"], ids=lambda v: v["name"])
def test_tampered_records_fail_with_the_named_reason(v: dict[str, Any]) -> None:
    # Every variant, from its bytes; a patched one also as a decoded map, which must fail alike.
    reports = [verify_bytes(encoded(v))]
    if "patch" in v:
        reports.append(verify_record(patched(v)))
    for report in reports:
        assert not report.ok
        assert report.reason.split(":")[0] == v["reason"]  # the slug is normative, the text not
        # ... and the file shows this implementation's wording as it is
        assert report.reason == v["reason_text"]
        # The reason is the first problem in the order of the registry (spec 11.3).
        assert report.problems[0] == report.reason
        ranks = [list(REASONS).index(p.split(":")[0]) for p in report.problems]
        assert ranks == sorted(ranks)


def test_every_tampered_vector_names_a_reason_of_the_registry() -> None:
    assert {v["reason"] for v in R["tampered"]} <= set(REASONS)
    for v in R["tampered"]:
        assert ("patch" in v) != ("bytes" in v), v["name"]  # one form or the other


def test_the_downgrade_verifies_only_once_version_1_is_accepted_seats_unbound() -> None:
    # What makes the downgrade dangerous: accepted, it passes, with the seats swapped, pinned to
    # the real referee; the report must then say the seats are unbound.
    (v,) = [v for v in R["tampered"] if v["reason"] == "old_version"]
    referee = R["keys"]["referee"]["public"]
    report = verify_record(patched(v), referee_key=referee, accept_v1=True)
    assert report.ok, report.problems
    assert not report.seats_bound and report.to_dict()["seats_bound"] is False
    assert (
        report.to_dict() == verify_bytes(encoded(v), referee_key=referee, accept_v1=True).to_dict()
    )
