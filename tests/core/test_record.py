"""Match records: real matches verify from the record alone; every kind of tampering is named.

Most tampering here is signed again by the referee's own key: a dishonest referee can always sign,
so it is the replay, not the signature, that has to catch what it changed.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from helpers import (
    BEST_OF_3,
    OTHER,
    PLAYERS,
    REFEREE,
    SEAT0,
    SEAT1,
    match_of,
    play_in_memory,
)
from seabattle.protocol.canonical import canonical_pack
from seabattle.protocol.commit import Committed
from seabattle.protocol.errors import ErrorCode
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.match import Match
from seabattle.protocol.record import (
    RecordError,
    build_record,
    cosign,
    dump_record,
    dump_signed,
    head_of_bytes,
    load_record,
    pack_built,
    pack_record,
    record_head,
    seal,
    sign_as,
    sign_record,
    verify_bytes,
    verify_record,
)
from seabattle.protocol.rules import (
    RuleSet,
    SalvoReport,
    ShotMode,
    SunkReport,
    preset,
)
from seabattle.protocol.verify import REASONS

Record = dict[str, Any]


@pytest.fixture(scope="module")
def refereed() -> Record:
    """The record of a best-of-3 match on 8x8, as the referee builds it."""
    return build_record(match_of(BEST_OF_3, 1), PLAYERS, REFEREE.public_key())


def by_referee(record: Record) -> Record:
    return seal(record, [("referee", REFEREE)])


def reason_of(signed: Record) -> str:
    report = verify_record(signed)
    assert not report.ok
    assert report.reason == report.problems[0]
    return report.reason


# -- honest records --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rules",
    [
        BEST_OF_3,
        preset("russian").replace(sunk=SunkReport.SHOWN),
        preset("classic").replace(shots=ShotMode.SALVO_FIXED, salvo_report=SalvoReport.TOTAL),
        preset("classic").replace(radar=True),
    ],
    ids=["best-of-3", "shown-sinkings", "salvo-totals", "radar"],
)
def test_a_built_record_is_canonical_and_shares_nothing_with_the_match(rules: RuleSet) -> None:
    # build_record skips the deep copy where the transcript's rebuilt maps are canonical
    # already: the record must still be canonical as it stands (its plain packing is its
    # canonical bytes), and a change to it must not reach the games it was built from.
    m = match_of(rules, 5)
    record = build_record(m, PLAYERS, REFEREE.public_key())
    assert msgpack.packb(record, use_bin_type=True) == canonical_pack(record)
    assert pack_record(record) == canonical_pack(record)
    assert pack_built(record) == canonical_pack(record)  # what the server signs
    before = copy.deepcopy(list(m.games[0].transcript))
    for entry in record["games"][0]["transcript"]:
        for v in entry.values():
            if isinstance(v, dict):
                v["mutated"] = True
        entry["in"] = "mutated"
    assert list(m.games[0].transcript) == before
    assert build_record(m, PLAYERS, REFEREE.public_key())["games"][0]["transcript"] == before


def test_a_refereed_record_verifies_from_itself_alone(refereed: Record) -> None:
    report = verify_record(by_referee(refereed))
    assert report.ok, report.reason
    assert report.reason == "" and report.problems == []
    assert [g.number for g in report.games] == [g["number"] for g in refereed["games"]]
    for summary, recorded in zip(report.games, refereed["games"], strict=True):
        assert summary.ok and summary.outcome == recorded["outcome"]
        assert summary.first == recorded["first"]
    assert report.signatures == [{"role": "referee", "key": refereed["referee"].hex(), "ok": True}]
    json.dumps(report.to_dict())  # the --json report is plain JSON


@pytest.mark.parametrize("name", ["classic", "russian", "sea-battle"])
def test_records_of_every_kind_of_game_verify(name: str) -> None:
    record = build_record(match_of(preset(name), 2), PLAYERS, REFEREE.public_key())
    assert verify_record(by_referee(record)).ok


def test_salvo_radar_and_team_records_verify() -> None:
    rules = preset("classic").replace(shots="salvo-afloat", salvo_report="total", radar=True)
    record = build_record(match_of(rules, 3), PLAYERS, REFEREE.public_key())
    assert entries(record, "radar")
    assert verify_record(by_referee(record)).ok
    teams = build_record(
        match_of(preset("classic").replace(team_size=2), 4), PLAYERS, REFEREE.public_key()
    )
    assert verify_record(by_referee(teams)).ok


def test_the_record_is_a_copy_later_play_does_not_change(refereed: Record) -> None:
    m = play_in_memory(Match(BEST_OF_3, bytes(16)), random.Random(5), games=1)
    record = build_record(m, PLAYERS, REFEREE.public_key())
    head = record_head(record)
    play_in_memory(m, random.Random(6))
    assert record_head(record) == head


def test_an_unfinished_match_verifies_as_far_as_it_went() -> None:
    m = play_in_memory(Match(BEST_OF_3, bytes(16)), random.Random(7), stop_at=20)
    record = build_record(m, PLAYERS, REFEREE.public_key())
    report = verify_record(by_referee(record))
    assert report.ok, report.reason
    assert report.games[-1].outcome is None and report.games[-1].shots == 20


def test_the_stored_bytes_are_canonical_and_load_back(refereed: Record) -> None:
    signed = by_referee(refereed)
    data = dump_record(signed)
    assert load_record(data) == signed
    assert dump_record(load_record(data)) == data
    assert verify_record(load_record(data)).ok


def test_the_head_does_not_depend_on_key_order(refereed: Record) -> None:
    shuffled = dict(reversed(list(refereed.items())))
    assert record_head(shuffled) == record_head(refereed)


def test_garbage_is_not_a_record() -> None:
    for data in (b"\xc1", b"\x92\x01\x02", msgpack.packb({"record": msgpack.ExtType(5, b"x")})):
        with pytest.raises(RecordError) as info:
            load_record(data)
        assert info.value.code is ErrorCode.RECORD_INVALID


def test_peer_records_need_both_seats(refereed: Record) -> None:
    peer = {**refereed, "referee": None}
    both = seal(peer, [("seat0", SEAT0), ("seat1", SEAT1)])
    assert verify_record(both).ok
    one = seal(peer, [("seat0", SEAT0)])
    assert reason_of(one).startswith("missing_signature: a peer record needs the seat1 signature")
    referee_sig = seal(peer, [("seat0", SEAT0), ("seat1", SEAT1), ("referee", REFEREE)])
    assert reason_of(referee_sig) == "wrong_key: a referee signature on a peer-play record"


def test_players_may_co_sign_the_referees_record(refereed: Record) -> None:
    signed = cosign(cosign(by_referee(refereed), SEAT1, "seat1"), SEAT0, "seat0")
    report = verify_record(signed)
    assert report.ok
    assert {s["role"] for s in report.signatures} == {"referee", "seat0", "seat1"}


def test_a_co_signature_catches_a_referee_that_changed_the_record(refereed: Record) -> None:
    # The player signed the true record; the referee publishes another one under both names.
    true_sig = sign_as(refereed, SEAT0, "seat0")
    forged = copy.deepcopy(refereed)
    forged["result"]["winner"] = 1 - forged["result"]["winner"]
    signed = {"record": forged, "sigs": [sign_as(forged, REFEREE, "referee"), true_sig]}
    problems = verify_record(signed).problems
    assert "bad_signature: the seat0 signature does not verify" in problems


# -- tampering -------------------------------------------------------------------------------------


def entries(record: Record, kind: str, game: int = 0) -> list[dict[str, Any]]:
    return [e for e in record["games"][game]["transcript"] if e["in"] == kind]


def first_result(record: Record, result: str) -> dict[str, Any]:
    for e in entries(record, "answer"):
        for r in e["verdict"]["results"]:
            if r["r"] == result:
                return dict(r)  # a view into the record's own map
    raise AssertionError(f"no {result} in the record")


def hit_to_miss(r: Record) -> None:
    for e in entries(r, "answer"):
        res = e["verdict"]["results"][0]
        if res["r"] == "hit":
            res["r"] = "miss"
            return


def sunk_to_hit(r: Record) -> None:
    for e in entries(r, "answer"):
        res = e["verdict"]["results"][0]
        if res["r"] == "sunk":
            res["r"], res["sunk"] = "hit", None
            return


def swap_shots(r: Record) -> None:
    fires = entries(r, "fire")
    fires[2]["cells"], fires[5]["cells"] = fires[5]["cells"], fires[2]["cells"]


def drop_reveal(r: Record) -> None:
    transcript = r["games"][0]["transcript"]
    transcript.remove(entries(r, "reveal")[-1])


def flip_outcome(r: Record) -> None:
    outcome = r["games"][0]["outcome"]
    outcome["winner"] = 1 - outcome["winner"]


def flip_result(r: Record) -> None:
    r["result"]["winner"] = 1 - r["result"]["winner"]


def flip_first(r: Record) -> None:
    r["games"][0]["first"] = 1 - r["games"][0]["first"]


def other_rules(r: Record) -> None:
    r["rules"]["name"] = "tampered"  # the rules digest binds every commitment


def lower_case_call(r: Record) -> None:
    fire = entries(r, "fire")[0]
    fire["cells"] = [c.lower() for c in fire["cells"]]


def extra_game(r: Record) -> None:
    r["games"].append({**copy.deepcopy(r["games"][-1]), "number": len(r["games"]) + 1})


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (hit_to_miss, "transcript_invalid: game 1 entry "),
        (sunk_to_hit, "outcome_mismatch: game 1 recorded winner "),
        (swap_shots, "transcript_invalid: game 1 entry "),
        # Game 1 stops unfinished, and game 2 follows it: that ranks before the mismatch (11.3).
        (drop_reveal, "transcript_invalid: game 2 follows a game that did not end"),
        (flip_outcome, "outcome_mismatch: game 1 recorded winner "),
        (flip_result, "result_mismatch: recorded "),
        (flip_first, "first_mismatch: game 1 recorded first seat "),
        # Other rules are another context: the first opening no longer opens its commitment (the
        # seat signatures fail too, but transcript_invalid ranks first).
        (other_rules, "transcript_invalid: game 1 entry "),
        (lower_case_call, "transcript_invalid: game 1 entry "),
        (extra_game, "transcript_invalid: game "),
    ],
)
def test_tampering_is_caught_by_the_replay_even_when_signed_again(
    refereed: Record, tamper: Callable[[Record], None], reason: str
) -> None:
    record = copy.deepcopy(refereed)
    tamper(record)
    assert reason_of(by_referee(record)).startswith(reason)
    # Unsigned again, the same change breaks the referee's signature first.
    signed = by_referee(refereed)
    stale = {"record": record, "sigs": signed["sigs"]}
    assert reason_of(stale) == "bad_signature: the referee signature does not verify"


def test_the_reason_says_what_the_replay_found(refereed: Record) -> None:
    record = copy.deepcopy(refereed)
    hit_to_miss(record)
    assert "said miss, opening says otherwise" in reason_of(by_referee(record))
    record = copy.deepcopy(refereed)
    sunk_to_hit(record)
    assert "false_verdict" in reason_of(by_referee(record))
    assert "answered hit, truth sunk" in reason_of(by_referee(record))
    record = copy.deepcopy(refereed)
    swap_shots(record)
    assert "the opening is for cell" in reason_of(by_referee(record))
    record = copy.deepcopy(refereed)
    drop_reveal(record)
    reason_of(by_referee(record))
    assert (
        verify_record(by_referee(record))
        .problems[1]
        .endswith("replay says no outcome (the game stopped in phase reveal)")
    )
    record = copy.deepcopy(refereed)
    extra_game(record)
    assert reason_of(by_referee(record)).endswith(": the match is over")


def test_a_forged_signature_is_named(refereed: Record) -> None:
    signed = by_referee(refereed)
    sig = bytearray(signed["sigs"][0]["sig"])
    sig[0] ^= 1
    signed["sigs"][0]["sig"] = bytes(sig)
    assert reason_of(signed) == "bad_signature: the referee signature does not verify"


def test_a_signature_by_another_key_is_named(refereed: Record) -> None:
    signed = seal(refereed, [("referee", OTHER)])
    assert reason_of(signed).startswith("wrong_key: the referee signature is by key ")
    # A valid signature under the named key, but the key was swapped in the record: the
    # players' co-signatures no longer match the keys named beside them.
    swapped = {**refereed, "players": refereed["players"][::-1]}
    signed = seal(swapped, [("referee", REFEREE), ("seat0", SEAT0)])
    assert reason_of(signed).startswith("wrong_key: the seat0 signature is by key ")


def test_a_record_without_the_referees_signature_is_refused(refereed: Record) -> None:
    signed = seal(refereed, [("seat0", SEAT0), ("seat1", SEAT1)])
    assert reason_of(signed) == "missing_signature: a refereed record needs the referee signature"


@pytest.mark.parametrize(
    "signed",
    [
        None,
        {"record": {}, "sigs": []},
        {"record": {"v": 2}, "sigs": []},
        {"sigs": []},
    ],
)
def test_what_is_not_a_record_is_malformed(signed: Any) -> None:
    assert reason_of(signed).startswith("malformed: ")


def test_a_record_with_a_float_is_malformed(refereed: Record) -> None:
    record = copy.deepcopy(refereed)
    record["result"]["scores"][0] = 2.0
    signed = {"record": record, "sigs": [{"key": bytes(32), "sig": bytes(64), "role": "referee"}]}
    assert reason_of(signed).startswith("malformed: ")


def test_duplicate_roles_are_malformed(refereed: Record) -> None:
    signed = seal(refereed, [("referee", REFEREE), ("referee", REFEREE)])
    assert reason_of(signed) == "malformed: two signatures for role referee"


def test_signing_is_over_the_head(refereed: Record) -> None:
    REFEREE.public_key().verify(sign_record(refereed, REFEREE), record_head(refereed))


# -- packing once ----------------------------------------------------------------------------------


def test_a_record_packed_once_gives_the_same_head_signatures_and_bytes(refereed: Record) -> None:
    packed = pack_record(refereed)
    head = head_of_bytes(packed)
    assert head == record_head(refereed)
    sig = sign_as(refereed, REFEREE, "referee", head=head)
    assert sig == sign_as(refereed, REFEREE, "referee")
    signed = {"record": refereed, "sigs": [sig]}
    assert dump_signed(packed, signed["sigs"]) == dump_record(signed)
    assert seal(refereed, [("referee", REFEREE)], head=head) == by_referee(refereed)
    assert cosign(signed, SEAT0, "seat0", head=head) == cosign(signed, SEAT0, "seat0")
    assert verify_record(load_record(dump_signed(packed, signed["sigs"]))).ok


def test_a_signed_record_is_canonical_as_built(refereed: Record) -> None:
    signed = cosign(by_referee(refereed), SEAT1, "seat1")
    assert dump_record(signed) == canonical_pack(signed)
    assert list(signed["sigs"][0]) == sorted(signed["sigs"][0])  # packs without a rebuild


# -- revision 3: the head holds what every implementation computes, and the referee can be pinned


def _resigned() -> Record:
    """A one-game match that seat 1 resigned: its outcome has prose (``seat 1 resigned``)."""
    rng = random.Random(9)
    rules = preset("classic-8x8")
    m = Match(rules, rng.randbytes(16))
    g = m.new_game(None)
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), m.match_id, 1, seat)
        g.commit(seat, c.commitment, c.seat_sig((SEAT0, SEAT1)[seat]))
    g.resign(1)
    m.game_over()
    assert g.outcome is not None and g.outcome.detail  # the live outcome says it in words
    return build_record(m, PLAYERS, REFEREE.public_key())


def test_a_records_outcome_holds_the_reason_and_not_the_prose() -> None:
    record = _resigned()
    assert record["v"] == 2
    assert record["games"][0]["outcome"] == {"winner": 0, "reason": "resigned", "detail": ""}
    report = verify_record(by_referee(record))
    assert report.ok, report.reason
    assert report.games[0].outcome is not None and report.games[0].outcome["detail"]


def test_prose_in_a_version_2_head_is_an_outcome_mismatch() -> None:
    record = _resigned()
    record["games"][0]["outcome"]["detail"] = "seat 1 resigned"
    assert reason_of(by_referee(record)).startswith("outcome_mismatch: game 1 ")


def _version_1(record: Record) -> Record:
    """``record`` in the form of version 1: its outcomes' prose in the head, no seat signatures."""
    old = copy.deepcopy(record)
    old["v"] = 1
    for game in old["games"]:
        for entry in game["transcript"]:
            if entry["in"] == "commit":
                del entry["sig"]
    return old


def test_a_version_1_record_verifies_only_when_asked_with_its_seats_unbound() -> None:
    record = _version_1(_resigned())
    record["games"][0]["outcome"]["detail"] = "seat 1 resigned"
    assert reason_of(by_referee(record)).startswith("old_version: ")
    report = verify_record(by_referee(record), accept_v1=True)
    assert report.ok and not report.seats_bound
    assert verify_record(by_referee(_resigned())).seats_bound
    record["v"] = 3
    assert reason_of(by_referee(record)).startswith("malformed: record version 3")


def test_a_pinned_referee_key_refuses_a_record_signed_by_another(refereed: Record) -> None:
    mine = REFEREE.public_key().public_bytes_raw()
    assert verify_record(by_referee(refereed), referee_key=mine).ok
    other = OTHER.public_key().public_bytes_raw()
    # A record built and signed by another referee verifies alone, but not against the pin.
    forged = copy.deepcopy(refereed)
    forged["referee"] = other
    signed = seal(forged, [("referee", OTHER)])
    assert verify_record(signed).ok
    report = verify_record(signed, referee_key=mine)
    assert not report.ok and report.reason.startswith("untrusted_referee: ")


def test_signatures_are_kept_in_role_order_whoever_signs_first(refereed: Record) -> None:
    signed = seal(refereed, [("seat1", SEAT1), ("referee", REFEREE)])
    signed = cosign(signed, SEAT0, "seat0")
    assert [s["role"] for s in signed["sigs"]] == ["referee", "seat0", "seat1"]
    assert verify_record(signed).ok


def test_a_record_whose_seat_keys_were_swapped_fails_without_co_signatures(
    refereed: Record,
) -> None:
    # The referee puts each player's key on the other's seat (or a stranger's on the winner's)
    # and signs again, dropping any co-signature: every commitment still replays, but its seat
    # signature names the seat's true player.
    swapped = copy.deepcopy(refereed)
    swapped["players"] = list(reversed(swapped["players"]))
    assert reason_of(by_referee(swapped)).startswith("seat_unbound: game 1 seat 0")
    stranger = copy.deepcopy(refereed)
    stranger["players"][0] = OTHER.public_key().public_bytes_raw()
    assert reason_of(by_referee(stranger)).startswith("seat_unbound: game 1 seat 0")
    # Without the seat signatures it is no version-2 record at all (next section).
    unsigned = copy.deepcopy(refereed)
    for entry in unsigned["games"][0]["transcript"]:
        entry.pop("sig", None)
    assert reason_of(by_referee(unsigned)).startswith("malformed: game 1 entry ")


# -- revision 5: version 1 only when asked, the commit entry's form follows v, reasons by rank -----


def _downgraded(record: Record) -> Record:
    """What a referee holding a version-2 record can sign alone: the seats swapped, rewritten as
    version 1 (no seat signatures to betray the swap)."""
    old = _version_1(record)
    old["players"] = old["players"][::-1]
    return old


def test_a_downgrade_that_swaps_the_seats_is_refused_even_by_the_pinned_referee(
    refereed: Record,
) -> None:
    signed = by_referee(_downgraded(refereed))
    mine = REFEREE.public_key().public_bytes_raw()
    report = verify_record(signed, referee_key=mine)
    assert not report.ok and report.reason.startswith("old_version: ")
    assert report.problems == [report.reason]  # nothing else is wrong with it
    # Accepted on request it verifies: what a version-1 record says of its seats proves nothing.
    report = verify_record(signed, referee_key=mine, accept_v1=True)
    assert report.ok and not report.seats_bound


def test_a_refused_version_1_record_still_lists_its_other_problems(refereed: Record) -> None:
    record = _downgraded(refereed)
    flip_result(record)
    report = verify_record(by_referee(record))
    assert [p.split(":")[0] for p in report.problems] == ["old_version", "result_mismatch"]
    report = verify_record(by_referee(record), accept_v1=True)
    assert report.reason.startswith("result_mismatch: ") and not report.seats_bound


def test_the_form_of_a_commit_entry_follows_the_version(refereed: Record) -> None:
    # A version-1 record whose commit entries kept their seat signatures is no version-1 record.
    mixed = copy.deepcopy(refereed)
    mixed["v"] = 1
    assert reason_of(by_referee(mixed)) == (
        "malformed: game 1 entry 2: a version-1 commit entry has no sig"
    )
    report = verify_record(by_referee(mixed), accept_v1=True)
    assert report.reason.startswith("malformed: ")
    # A version-2 commit entry without its signature, or with one of another size, is malformed:
    # seat_unbound is left to mean a signature that does not verify.
    bare = copy.deepcopy(refereed)
    del entries(bare, "commit", 1)[0]["sig"]
    short = copy.deepcopy(refereed)
    entries(short, "commit", 1)[1]["sig"] = bytes(63)
    forged = copy.deepcopy(refereed)
    entries(forged, "commit", 1)[1]["sig"] = bytes(64)
    assert reason_of(by_referee(bare)).startswith("malformed: game 2 entry ")
    assert reason_of(by_referee(short)).startswith("malformed: game 2 entry ")
    assert reason_of(by_referee(forged)).startswith("seat_unbound: game 2 seat ")


def test_the_reason_is_the_first_problem_in_the_registrys_order(refereed: Record) -> None:
    # The seats swapped, every original signature kept: the referee's signature, checked first,
    # no longer verifies, but each co-signature is now by another key than its seat names, which
    # 11.3 orders before a signature that does not verify.
    signed = seal(refereed, [("referee", REFEREE), ("seat0", SEAT0), ("seat1", SEAT1)])
    swapped = {**signed, "record": {**refereed, "players": refereed["players"][::-1]}}
    report = verify_record(swapped)
    assert report.reason.startswith("wrong_key: the seat0 signature is by key ")
    slugs = [p.split(":")[0] for p in report.problems]
    assert "bad_signature" in slugs and "seat_unbound" in slugs
    assert slugs == sorted(slugs, key=list(REASONS).index)
    # Within a rank, the order found: seat 0 before seat 1, game by game.
    assert [p for p in report.problems if p.startswith("wrong_key")][1].startswith(
        "wrong_key: the seat1 signature"
    )


def test_bytes_verify_as_the_record_they_encode_when_canonical(refereed: Record) -> None:
    signed = cosign(by_referee(refereed), SEAT0, "seat0")
    mine = REFEREE.public_key().public_bytes_raw()
    data = dump_record(signed)
    assert verify_bytes(data).to_dict() == verify_record(signed).to_dict()
    other = OTHER.public_key().public_bytes_raw()
    assert verify_bytes(data, referee_key=mine).ok
    assert verify_bytes(data, referee_key=other).reason.startswith("untrusted_referee: ")
    old = dump_record(by_referee(_version_1(refereed)))
    assert verify_bytes(old).reason.startswith("old_version: ")
    assert verify_bytes(old, accept_v1=True).ok


def _map16(data: bytes) -> bytes:
    """``data`` (a canonical fixmap) with a 16-bit map header in its place."""
    assert 0x80 <= data[0] <= 0x8F
    return bytes([0xDE, 0, data[0] & 0x0F]) + data[1:]


def test_bytes_that_are_not_canonical_are_malformed(refereed: Record) -> None:
    signed = by_referee(refereed)
    data = dump_record(signed)
    not_canonical = {
        "a map16 header for the signed record": _map16(data),
        "a map16 header for the record inside": data[:8] + _map16(data[8:]),
        # "v" is the record's last key, just before the signed record's "sigs"
        "the version as a uint8": data.replace(b"\xa1v\x02\xa4sigs", b"\xa1v\xcc\x02\xa4sigs"),
        "a repeated key": data.replace(b"\x82\xa6record", b"\x83\xa4sigs\x90\xa6record", 1),
    }
    assert data[1:8] == b"\xa6record"
    for what, bad in not_canonical.items():
        assert bad != data and load_record(bad)["record"]["v"] == 2, what
        report = verify_bytes(bad)
        assert report.reason == (
            "malformed: the bytes are not the canonical encoding (spec 3) of the signed record "
            "they decode to"
        ), what
        assert report.problems == [report.reason], what  # the record they decode to verifies
    # What does not decode, or decodes to no canonical value, is malformed too.
    for bad in (data + b"\x00", data[:-1], msgpack.packb({"record": 1.5, "sigs": []})):
        assert verify_bytes(bad).reason.startswith("malformed: ")


def test_non_canonical_bytes_still_list_what_else_is_wrong(refereed: Record) -> None:
    record = copy.deepcopy(refereed)
    flip_first(record)
    report = verify_bytes(_map16(dump_record(by_referee(record))))
    assert [p.split(":")[0] for p in report.problems] == ["malformed", "first_mismatch"]
