"""``seabattle bench``: a load generator for the server, measured against a bare trio baseline.

Theory of operation. A *scenario* is M concurrent matches in one trust mode, at bot speed (each
shot fired as soon as the turn comes) or at a human pace (one shot every T seconds per match). A
scenario runs twice, each time against a fresh process of its own (``python -m bench CHILD``),
pinned to one core while the load generator runs on another:

* the *target*: the seabattle server (:func:`seabattle.server.app.serve`, SQLite store in a
  temporary folder, per-peer rate limit lifted: bot-speed traffic exceeds it by design), or an
  external server given with ``--server HOST:PORT``;
* the *baseline*: a bare trio server with the same sockets and no game. For blind mode it is a
  relay (attacker -> relay -> defender -> relay -> attacker, the two hops a blind shot takes); for
  custody mode an echo (attacker -> echo -> attacker, the one hop a custody shot takes). The
  baseline clients send and decode real protocol messages of the same kind and size (``shot``
  out, ``verdict`` back; the defender computes a real :class:`Defender` answer), so the client's
  share of each round trip is the same on both sides and the ratio isolates the server.

The players are cheap on purpose: one trio task per connection driving the sans-IO
:class:`~seabattle.protocol.session.Connection` directly (no client API), a pool of fleets drawn
once, and the trivial strategy "next cell not fired at". Each match is two connections (guest
keys, ``create`` + ``join`` by invitation, ``commit``/``place``, then the fire/answer loop); a
finished match is followed by a ``rematch`` on the same connections.

Figures, each measured over a window that opens after every match is set up and a warm-up has
passed: shots per second; shot round trip (``fire`` sent to its ``verdict`` received) p50 and p99;
server CPU (``/proc/PID/stat`` utime + stime, all threads) as a share of one core and per shot;
server memory per connection (``VmRSS`` at the end of the window minus ``VmRSS`` before the first
connection, over the number of connections); the load generator's own CPU (it must not be the
bottleneck). Each figure is also given as a ratio to the baseline's. Finally signed records of
finished matches are fetched with ``get_record`` (or, when no match finished, built locally) and
verified with :func:`~seabattle.protocol.record.verify_record` in a fresh process (as
``seabattle verify`` runs), timed per game.

The package, by what each part is: :mod:`.figures` (what a report holds, and the ``/proc``
readings), :mod:`.children` (the server under test and the bare baselines, each a child process
started through :mod:`.__main__`), :mod:`.players` (the load generator), :mod:`.records` (the
verify figure), :mod:`.measure` (one run, and the whole benchmark), :mod:`.report` (the bars and
the tables) and :mod:`.command` (``seabattle bench``).

The folder is no part of the installed package: it runs from a checkout of the source
(:mod:`.checkout`), as ``python -m bench.X`` from the root or as ``seabattle bench``. Beside the
load generator are the measuring scripts (``crash``, ``failover``, ``faults``, ``diskfull``,
``capacity``, ``soak``, ``memory``, ``core``, ``journal_write``) and the exact solver of small
boards (:mod:`.exact`, ``seabattle bot --exact``).
"""

from __future__ import annotations

from .children import bare_server
from .command import QUICK, bench
from .figures import BARS, FIGURES, HUMAN_BAR_MATCHES, MODES, machine
from .measure import drive, run_bench
from .players import Scenario
from .records import local_record, time_verify, time_verify_fresh
from .report import judge, print_report

__all__ = [
    "BARS",
    "FIGURES",
    "HUMAN_BAR_MATCHES",
    "MODES",
    "QUICK",
    "Scenario",
    "bare_server",
    "bench",
    "drive",
    "judge",
    "local_record",
    "machine",
    "print_report",
    "run_bench",
    "time_verify",
    "time_verify_fresh",
]
