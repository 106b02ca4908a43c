"""``seabattle bench`` runs end to end on a tiny load and reports every figure (no timing checks).

Each run starts real child processes (the server, the bare relay or echo) on port 0, as the real
benchmark does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner
from seabattle.common.netio import direct
from seabattle.protocol.rules import preset

from bench import BARS, FIGURES, bench, judge, local_record, time_verify
from bench.figures import GENERATOR_LIMIT_PCT, core_skew
from bench.players import (
    Scenario,
    _BarePlayer,
    _make_run,
    _Pace,
    _Pacer,
    _Shooter,
)


def _run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(bench, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _check_figures(figures: dict[str, Any]) -> None:
    for key, *_ in FIGURES:
        assert figures[key] is not None, key
    assert figures["shots"] > 0
    assert figures["errors"] == {}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["blind", "custody"])
def test_tiny_bench_reports_every_figure_and_ratio(mode: str) -> None:
    report = _run("--matches", "2", "--duration", "0.6", "--mode", mode)
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    # Every core the bench may use is timed, so that a report shows cores that ran apart.
    for when in ("core_speeds_before", "core_speeds"):
        speeds = report["machine"][when]
        assert set(speeds) == {str(c) for c in os.sched_getaffinity(0)}
        assert all(ns > 0 for ns in speeds.values())
    (sc,) = report["scenarios"]
    assert sc["mode"] == mode and sc["matches"] == 2
    _check_figures(sc["target"])
    _check_figures(sc["baseline"])
    for key, *_ in FIGURES:
        # The bare baseline's few connections may fit in memory its allocator already holds (the
        # heap's layout shifts with what was imported): no growth, so no ratio to it.
        if key == "server_kb_per_conn" and sc["baseline"][key] == 0:
            continue
        assert sc["ratios"][key] is not None, key
    assert sc["target"]["connections"] == 4
    assert set(report["bars"]) == set(BARS)
    verify = report["verify"]
    assert verify["records"] > 0 and verify["failed"] == 0 and verify["ms_per_game"] > 0


@pytest.mark.slow
def test_human_pace_with_a_shot_limit_and_no_baseline() -> None:
    report = _run(
        "--matches", "2", "--pace", "0.05", "--shots", "4", "--duration", "5", "--mode", "blind",
        "--no-baseline",
    )  # fmt: skip
    (sc,) = report["scenarios"]
    assert sc["baseline"] is None and sc["pace"] == 0.05
    _check_figures(sc["target"])
    assert sc["target"]["shots"] <= 8
    # No match finishes in 4 shots: the records verified are built locally.
    assert report["verify"]["source"] == "local" and report["verify"]["failed"] == 0
    assert report["bars"]["blind_p99_ms"]["value"] is not None
    assert report["bars"]["custody_p99_ms"]["value"] is None  # no custody run


def test_local_records_verify() -> None:
    rules = preset("classic")
    v = time_verify([local_record(rules, 1), local_record(rules, 2)])
    assert v["records"] == 2 and v["games"] >= 2 and v["failed"] == 0


def test_bad_options_are_usage_errors() -> None:
    r = CliRunner().invoke(bench, ["--matches", "0"])
    assert r.exit_code == 2
    r = CliRunner().invoke(bench, ["--server", "nowhere"])
    assert r.exit_code == 2


async def test_a_match_behind_its_pace_skips_the_slots_it_missed_keeping_its_phase(
    autojump_clock: Any,
) -> None:
    # After a stall, firing every missed shot back to back would deepen the queue being measured.
    run = _make_run(Scenario("blind", 1, pace=2.0), preset("classic"), 1)
    shooter = _BarePlayer(run, _Pace(phase=0.5), 0, bytes(16))
    run.paces.append(shooter.pace)
    run.start_firing()  # the first shot is due at 0.5
    run.measuring = True
    shooter._next_slot()  # it goes on time: the next is due one pace later
    assert shooter.pace.next_at == pytest.approx(2.5) and run.skipped == 0
    await trio.sleep(7.0)  # a stall: the shot due at 2.5 goes late, at 7
    shooter._next_slot()
    # Not the two that were due at 4.5 and 6.5 right behind it: the next is the 8.5 one.
    assert shooter.pace.next_at == pytest.approx(8.5)
    assert run.skipped == 2


async def test_the_pacer_fires_each_seat_at_its_time_and_goes_on_past_a_lost_one(
    autojump_clock: Any,
) -> None:
    # Human-paced shots leave on their slots from one task; a seat whose connection is gone
    # (its own task counts that) must not stop the others' shots.
    fired: list[tuple[str, float]] = []

    class Seat(_Shooter):
        def __init__(self, name: str, lost: bool = False) -> None:
            self.name, self.lost = name, lost

        async def _wake(self) -> None:
            fired.append((self.name, trio.current_time() - t0))
            if self.lost:
                raise trio.BrokenResourceError("gone")

    pacer = _Pacer()
    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pacer.run)
        pacer.add(Seat("b"), t0 + 2.0)
        pacer.add(Seat("a", lost=True), t0 + 1.0)
        await trio.sleep(1.5)
        pacer.add(Seat("c"), t0 + 1.7)  # sooner than the pacer's sleep: it wakes for it
        pacer.add(Seat("late"), t0)  # already due: at once
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    assert [name for name, _ in fired] == ["a", "late", "c", "b"]
    assert [at for _, at in fired] == pytest.approx([1.0, 1.5, 1.7, 2.0])


async def test_a_seat_s_frames_leave_whole_and_in_order_when_its_socket_is_full() -> None:
    # The pacer fires while the seat's own task may still be writing an answer the socket did
    # not take at once: the frames must not interleave.
    a, b = trio.socket.socketpair()
    stream = trio.SocketStream(a)
    run = _make_run(Scenario("blind", 1, pace=2.0), preset("classic"), 1)
    seat = _BarePlayer(run, _Pace(), 0, bytes(16))
    seat.stream, seat.sock = stream, direct(stream)
    big, small = bytes(range(256)) * 8192, b"next frame"  # 2 MiB: more than the socket holds
    got = bytearray()
    async with trio.open_nursery() as nursery:
        run.nursery = nursery
        seat._write(big)
        seat._write(small)  # behind the rest of big, not in the middle of it
        assert seat._backlog  # the socket did not take it all: a task is writing the rest
        while len(got) < len(big) + len(small):
            got += await b.recv(65536)
    assert bytes(got) == big + small and seat._backlog is None
    await stream.aclose()
    b.close()


def _result(pace: float, *, kb: float, generator: float = 50.0) -> dict[str, Any]:
    figures = {
        "rtt_p50_ms": 1.0,
        "rtt_p99_ms": 2.0,
        "shots_per_s": 100.0,
        "server_kb_per_conn": kb,
        "connections": 20,
        "client_cpu_pct": generator,
        "generator_bound": int(generator > GENERATOR_LIMIT_PCT),
    }
    return {
        "label": f"blind, 10 matches, pace {pace}",
        "mode": "blind",
        "matches": 10,
        "pace": pace,
        "target": figures,
        "baseline": None,
        "ratios": {"rtt_p50_ms": 1.5, "shots_per_s": 0.6},
    }


def test_the_memory_bar_is_judged_on_human_pace_only() -> None:
    verify = {"ms_per_game": 4.0, "source": "local"}
    # At bot speed the kept finished matches grow memory with time: no per-connection figure.
    bars = judge([_result(0.0, kb=2242.0)], verify)
    assert bars["server_kb_per_conn"]["ok"] is None
    assert bars["server_kb_per_conn"]["value"] is None
    bars = judge([_result(0.0, kb=2242.0), _result(2.0, kb=19.0)], verify)
    assert bars["server_kb_per_conn"]["ok"] is True
    assert bars["server_kb_per_conn"]["value"] == 19.0


def test_a_bar_measured_with_a_saturated_generator_says_so() -> None:
    verify = {"ms_per_game": 4.0, "source": "local"}
    bars = judge([_result(2.0, kb=1.0, generator=97.0)], verify)
    assert "generator over 85 %" in bars["blind_rtt_ratio"]["measured_on"]
    bars = judge([_result(2.0, kb=1.0, generator=60.0)], verify)
    assert "generator" not in bars["blind_rtt_ratio"]["measured_on"]


def test_the_throughput_bar_is_judged_per_core_when_a_generator_held_a_side_back() -> None:
    verify = {"ms_per_game": 4.0, "source": "local"}
    # Both sides at their limit: shots a second against shots a second (0.6: _result's).
    bars = judge([_result(0.0, kb=1.0)], verify)
    assert bars["bot_throughput_ratio"]["value"] == 0.6
    # A bound generator fed its side below that side's limit: the rates would flatter the
    # ratio; CPU a shot says what a whole core would serve (the server 2.5 times the relay's).
    held = _result(0.0, kb=1.0, generator=97.0)
    held["ratios"]["server_cpu_us_per_shot"] = 2.5
    bar = judge([held], verify)["bot_throughput_ratio"]
    assert bar["value"] == 0.4 and bar["ok"] is False
    assert "per core of CPU, as a generator was bound" in bar["measured_on"]


def test_a_report_says_when_one_core_ran_slower_than_the_other() -> None:
    # The server is pinned to one core and the generator to the other: a ratio leans by their
    # difference. JSON turns the cores into strings; a report read back still says it.
    assert core_skew({"core_speeds": {0: 40.0, 1: 64.0}}) == (1, 1.6)
    assert core_skew({"core_speeds": {"0": 64.0, "1": 40.0}}) == (0, 1.6)
    assert core_skew({"core_speeds": {0: 40.0, 1: 44.0}}) is None
    assert core_skew({"core_speeds": {0: 40.0}}) is None
    assert core_skew({"core_speeds": None}) is None
    # Timed before the runs and after: the further apart of the two is what a report says.
    both = {"core_speeds_before": {0: 40.0, 1: 80.0}, "core_speeds": {0: 40.0, 1: 50.0}}
    assert core_skew(both) == (1, 2.0)


@pytest.mark.slow
def test_a_sweep_is_drawn_with_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep.png"
    report = _run(
        "--matches", "1,2", "--duration", "0.3", "--mode", "custody", "--no-baseline",
        "--plot", str(out),
    )  # fmt: skip
    assert [sc["matches"] for sc in report["scenarios"]] == [1, 2]
    # Every run says whether the generator was its bottleneck.
    assert all("generator_bound" in sc["target"] for sc in report["scenarios"])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_the_started_server_may_run_several_workers() -> None:
    report = _run(
        "--workers", "2", "--matches", "2", "--duration", "0.5", "--mode", "custody",
        "--no-baseline",
    )  # fmt: skip
    assert report["target"].endswith("2 workers")
    (sc,) = report["scenarios"]
    _check_figures(sc["target"])
    # The workers are not confined to the generator's core (a child inherits the affinity of
    # the process that starts it): with two cores or more they may run on one it does not use.
    server, generator = sc["target"]["server_cpus"], sc["target"]["generator_cpus"]
    if len(os.sched_getaffinity(0)) >= 2:
        assert generator == [1] and set(server) - set(generator)


@pytest.mark.slow
def test_the_baselines_may_write_as_often_as_the_server() -> None:
    # --copies: the custody echo also sends each verdict to a defending connection, as the
    # server tells both players (2 writes a shot); the blind relay of lean players already
    # writes what the server does (2).
    report = _run("--matches", "2", "--duration", "0.5", "--mode", "both", "--copies")
    by_mode = {sc["mode"]: sc for sc in report["scenarios"]}
    assert by_mode["custody"]["baseline_kind"] == "echo-copies"
    assert by_mode["blind"]["baseline_kind"] == "relay"
    for sc in by_mode.values():
        _check_figures(sc["baseline"])
        assert sc["baseline"]["connections"] == sc["target"]["connections"]
    assert by_mode["custody"]["baseline"]["server_writes_per_shot"] >= 1.9


@pytest.mark.slow
def test_the_durable_baselines_store_every_frame_before_sending_it_on() -> None:
    # --durable: the relay and the echo also store each frame in the server's journal file, a
    # write on top of as many frames as the server writes (blind 2 a shot: the players are
    # lean; custody 2: the echo and the defender's copy).
    report = _run("--matches", "2", "--duration", "0.5", "--mode", "both", "--durable")
    assert report["baseline_journal"] and report["baseline_copies"]
    by_mode = {sc["mode"]: sc["baseline"] for sc in report["scenarios"]}
    for base in by_mode.values():
        _check_figures(base)
    assert by_mode["blind"]["server_writes_per_shot"] > 2.5
    assert by_mode["custody"]["server_writes_per_shot"] > 2.5


@pytest.mark.slow
def test_with_echo_the_server_copies_moves_back_and_the_durable_relay_does_too() -> None:
    # --echo: the players do not agree lean, so the server sends 4 frames a blind shot; the
    # durable relay then copies each frame back as well, to write as often as the server.
    report = _run("--matches", "2", "--duration", "0.5", "--mode", "blind", "--durable", "--echo")
    (sc,) = report["scenarios"]
    assert sc["label"].endswith(", echo") and sc["baseline_kind"] == "relay-copies+journal"
    assert sc["target"]["server_writes_per_shot"] > 3.5
    assert sc["baseline"]["server_writes_per_shot"] > 4.5


def test_the_journal_write_bench_times_each_way_against_a_bare_write() -> None:
    from bench.journal_write import measure

    report = measure(5, [0.0])
    ways = {r["way"]: r for r in report["runs"]}
    assert set(ways) == {"os.write (baseline)", "journal file", "SQLite commit", "SQLite, fenced"}
    assert all(r["median_us"] > 0 and r["p90_us"] >= r["median_us"] for r in ways.values())
    assert report["machine"]["cores"] >= 1


@pytest.mark.parametrize(("mode", "inputs"), [("blind", 2), ("custody", 1)])
def test_the_core_bench_times_whole_games_of_accepted_shots(mode: str, inputs: int) -> None:
    from bench.core import measure

    # 400 shots in one match outlast a game (100 cells a board), so a new match takes its slot:
    # every shot timed was accepted by the referee, or measure() would have raised.
    report = measure(mode, 1, 400, 0.0)
    assert report["games"] >= 2
    assert report["inputs_per_shot"] == inputs
    assert report["messages_sent_per_shot"] >= 2  # the shot to the defender, the verdict back
    for figure in ("core_us", "bare_us"):
        assert 0 < report[figure]["median"] <= report[figure]["p90"]
    # The games that ended were taken to the match's end (blind: both reveals accepted) and
    # a signed record, and that end is timed apart from the shots.
    end = report["end"]
    assert end is not None and end["matches"] >= 1
    assert end["us_per_match"] > end["us_per_shot"] > 0
