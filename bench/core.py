"""``python -m bench.core``: what the pure referee costs a shot, with no I/O.

Theory of operation. A server in this design does, for every frame it reads, at least what
this times: decode the frame body (the strict decoder and the message table), hand the message
to the pure referee (``protocol/referee.py``: the rules, the verdict's proof, the clocks), and
encode every message the referee sends. That is the floor under a shot's CPU that no shell
(trio, sockets, journal) can go below, so it tells how far the server's own figures are from
the limit of the protocol's checks in this interpreter (BENCHMARKS.md, session 13).

A blind shot is two inputs (the shooter's ``fire``, the defender's ``answer`` with its proof);
a custody shot is one (the referee answers from the fleet it holds). The players' own work (the
defender's verdict and proof, building the frames) is done outside the timed part. ``--matches``
interleave round robin, as the server's do, so that their states compete for the caches;
``--gap`` sleeps between shots (human pace: code and data go cold, and an idle CPU may halt).
The baseline, timed in the same run and interleaved shot by shot: ``msgpack`` alone unpacking
the same input bodies and packing the same output maps, with no checks and no rules.

A match's end is timed apart, since it comes once a match and not once a shot: in blind mode
both reveals through the referee (the fleet checked against its commitment, every verdict against
the fleet), and in both modes the signed record as the server makes it (``server/records.py``:
build, pack once, head, the referee's signature); the store's write is not in it. Reported per
match and spread over the match's shots, so that the floor under a shot can include turnover.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

import click
import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from seabattle.protocol import messages as m
from seabattle.protocol.codec import strict_unpack
from seabattle.protocol.commit import Committed
from seabattle.protocol.fleet import random_fleet
from seabattle.protocol.grid import Cell
from seabattle.protocol.record import build_record, head_of_bytes, pack_built, sign_as
from seabattle.protocol.referee import Referee
from seabattle.protocol.rules import RuleSet, preset
from seabattle.protocol.session import MAX_S2C_FRAME
from seabattle.protocol.state import Phase
from seabattle.protocol.verdict import Defender

from .figures import gap_option, machine, machine_line, percentile

__all__ = ["measure"]


@dataclass(slots=True)
class _Match:
    """One match's referee and what its honest players need to move."""

    ref: Referee
    defenders: list[Defender]
    rng: random.Random
    seq: int = 0
    shots: int = 0  #: shots timed in this match


def _keys(rng: random.Random) -> list[Ed25519PrivateKey]:
    return [Ed25519PrivateKey.from_private_bytes(rng.randbytes(32)) for _ in range(2)]


def _new_match(rules: RuleSet, mode: str, rng: random.Random) -> _Match:
    """A match with both fleets committed (or placed), ready for its first shot."""
    keys = _keys(rng)
    seat0, seat1 = (k.public_key().public_bytes_raw().hex() for k in keys)
    mid = rng.randbytes(16)
    ref = Referee(
        match_id=mid, rules=rules, mode=mode, players=(seat0, seat1), lot=rng.randbytes(32)
    )
    ref.start(0.0)
    g = ref.game
    assert g is not None
    defenders = []
    for seat in (0, 1):
        c = Committed(rules, random_fleet(rules, rng), rng.randbytes(32), mid, g.number, seat)
        defenders.append(Defender(c))
        sig = c.seat_sig(keys[seat])
        msg: m.Message
        if mode == "custody":
            msg = m.Place(mid, g.number, tuple(c.fleet.to_list()), c.secret, sig)
        else:
            msg = m.Commit(mid, g.number, c.commitment.to_dict(), sig)
        ref.receive(seat, msg, 0.0)
    return _Match(ref, defenders, rng)


def _fire(match: _Match) -> tuple[int, bytes] | None:
    """The frame body of the next shot (a fresh cell), or None when the game is over."""
    ref = match.ref
    g = ref.game
    if g is None or g.phase is not Phase.FIRING or g.turn is None:
        return None
    seat = g.turn
    target = g.boards[1 - seat]
    cols = g.rules.cols
    fresh = [i for i in range(g.rules.cells) if i not in target.fired and i not in target.crossed]
    cell = Cell(*divmod(match.rng.choice(fresh), cols)).label()
    match.seq += 1
    msg = m.Fire(ref.match_id, g.number, (cell,), g.caller(seat), match.seq)
    return seat, m.frame(msg)[4:]


def _answer(match: _Match) -> tuple[int, bytes] | None:
    """The defender's answer (verdict and proof) to the pending shot, if one waits for it."""
    g = match.ref.game
    if g is None or g.phase is not Phase.ANSWER or g.pending is None:
        return None
    seat = 1 - g.pending.seat
    verdict = match.defenders[seat].answer(g.pending).to_dict()
    return seat, m.frame(m.Answer(match.ref.match_id, g.number, verdict))[4:]


def _serve(ref: Referee, seat: int, body: bytes) -> list[Any]:
    """What a server does with one frame body, but the I/O: returns the messages it sent."""
    msg = m.decode(strict_unpack(body))
    sent = []
    for send in ref.receive(seat, msg, 0.0):
        m.frame(send.msg, max_frame=MAX_S2C_FRAME)
        sent.append(send.msg)
    return sent


def _reveals(match: _Match) -> list[tuple[int, bytes]]:
    """Both seats' reveal bodies (blind mode, once the game waits for them), else none."""
    ref = match.ref
    g = ref.game
    if ref.mode != "blind" or g is None or g.phase is not Phase.REVEAL:
        return []
    return [
        (s, m.frame(m.RevealMsg(ref.match_id, g.number, d.committed.reveal().to_dict()))[4:])
        for s, d in enumerate(match.defenders)
    ]


def _end(match: _Match, key: Ed25519PrivateKey, reveals: list[tuple[int, bytes]]) -> bool:
    """Take the reveals, then sign the record as the server does; whether the match is over."""
    ref = match.ref
    for seat, body in reveals:
        _serve(ref, seat, body)
    if not ref.over:
        return False
    players = [bytes.fromhex(p) for p in ref.players]
    record = build_record(ref.match, players, key.public_key().public_bytes_raw())
    packed = pack_built(record)
    sign_as(record, key, "referee", head=head_of_bytes(packed))
    return True


def _bare(bodies: list[bytes], maps: list[dict[str, Any]]) -> None:
    """The baseline: the same bytes through msgpack with no checks."""
    for body in bodies:
        msgpack.unpackb(body)
    for d in maps:
        msgpack.packb(d)


def measure(
    mode: str, matches: int, shots: int, gap: float, rules: str = "classic", seed: int = 13
) -> dict[str, Any]:
    """Microseconds of CPU-bound work a shot (median, p90), the referee's and the baseline's;
    and what the end of each match that ended in the run cost (``end``)."""
    rs = preset(rules)
    rng = random.Random(seed)
    key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
    live = [_new_match(rs, mode, random.Random(rng.random())) for _ in range(matches)]
    core: list[float] = []
    bare: list[float] = []
    ends: list[float] = []
    spread: list[float] = []  # each ended match's end over its shots
    inputs = 0
    outputs = 0
    done = 0
    games = matches
    i = 0
    while done < shots:
        k = i % matches
        i += 1
        match = live[k]
        fire = _fire(match)
        if fire is None:  # the game is over (or reveals): a new match takes the slot
            reveals = _reveals(match)  # the players' own work: not timed
            t = time.perf_counter_ns()
            if _end(match, key, reveals):
                ends.append((time.perf_counter_ns() - t) / 1000)
                spread.append(ends[-1] / max(match.shots, 1))
            live[k] = _new_match(rs, mode, random.Random(rng.random()))
            games += 1
            continue
        if gap:
            time.sleep(gap)
        ref = match.ref
        t = time.perf_counter_ns()
        sent = _serve(ref, *fire)
        took = time.perf_counter_ns() - t
        answer = _answer(match)  # the defender's own work: not the server's, not timed
        if answer is not None:
            t = time.perf_counter_ns()
            sent += _serve(ref, *answer)
            took += time.perf_counter_ns() - t
        bodies = [fire[1]] + ([answer[1]] if answer is not None else [])
        maps = [m.encode(x) for x in sent]
        t = time.perf_counter_ns()
        _bare(bodies, maps)
        bare.append((time.perf_counter_ns() - t) / 1000)
        core.append(took / 1000)
        match.shots += 1
        inputs += len(bodies)
        outputs += len(maps)
        done += 1
    return {
        "mode": mode,
        "rules": rules,
        "matches": matches,
        "shots": shots,
        "gap_s": gap,
        "games": games,
        "inputs_per_shot": inputs / shots,
        "messages_sent_per_shot": outputs / shots,
        "core_us": {"median": statistics.median(core), "p90": percentile(core, 0.9)},
        "bare_us": {"median": statistics.median(bare), "p90": percentile(bare, 0.9)},
        "end": None
        if not ends
        else {
            "matches": len(ends),
            "us_per_match": statistics.median(ends),
            # What turnover adds to a shot: each ended match's end over its shots, the median.
            "us_per_shot": statistics.median(spread),
        },
    }


@click.command()
@click.option("--mode", type=click.Choice(["blind", "custody", "both"]), default="both")
@click.option("--matches", default="1,200", show_default=True, help="Interleaved matches: N,N...")
@click.option("--shots", default=3000, show_default=True, help="Shots timed per run.")
@gap_option((0.0,), "shot")
@click.option("--rules", default="classic", show_default=True, help="A single-shot preset.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def main(
    mode: str, matches: str, shots: int, gaps: tuple[float, ...], rules: str, as_json: bool
) -> None:
    """Time the pure referee a shot (decode, referee, encode), against bare msgpack."""
    modes = ["blind", "custody"] if mode == "both" else [mode]
    runs = [
        measure(md, int(n), shots, gap, rules)
        for gap in gaps
        for n in matches.split(",")
        for md in modes
    ]
    report: dict[str, Any] = {"machine": machine(), "runs": runs}
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(machine_line(report["machine"]))
    for r in runs:
        click.echo(
            f"{r['mode']:<8} {r['matches']:>5} matches  gap {r['gap_s'] * 1000:4.1f} ms  "
            f"referee {r['core_us']['median']:6.1f} µs (p90 {r['core_us']['p90']:6.1f})  "
            f"msgpack alone {r['bare_us']['median']:5.1f} µs  "
            f"({r['inputs_per_shot']:.2f} in, {r['messages_sent_per_shot']:.2f} out a shot)"
        )
        end = r["end"]
        if end is not None:
            click.echo(
                f"{'':<8} {'':>5}          end of a match (reveals, signed record) "
                f"{end['us_per_match'] / 1000:5.2f} ms, {end['us_per_shot']:5.1f} µs a shot "
                f"({end['matches']} matches)"
            )


if __name__ == "__main__":
    main()
