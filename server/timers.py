"""One task for the timers of every connection and match of a server (:class:`Heartbeat`).

A timer costs an entry in a heap, not a task or a cancel scope: a server holds thousands of
connections, each with its ping and timeouts (:meth:`.session.Client.tick`), and thousands of
matches, each asleep until its next clock (``Referee._play``).
"""

from __future__ import annotations

import heapq
import itertools
import math

import trio

from .config import Timed

__all__ = ["Heartbeat"]

#: Timers the heartbeat handles before it lets other tasks run: when thousands of connections
#: came up together their timers come due together, and matches must not wait for all of them.
HEARTBEAT_BATCH = 256


class Heartbeat:
    """The timers of every connection and match of a server, in one task (:meth:`run`); it is
    the server's :class:`~.config.Timers`.

    Each connection has one entry in a heap, due at its next possible ping or timeout; traffic
    does not touch the heap, so a busy connection costs nothing here and an idle one an entry
    visit per ``ping_interval``. A referee puts an alarm in it each time its match sleeps. See
    :mod:`.session`.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timed]] = []
        self._count = itertools.count()
        self._wake = trio.Event()
        self._next = math.inf

    def add(self, obj: Timed, due: float) -> None:
        """Look at ``obj`` at trio time ``due`` (and from then on as it asks)."""
        heapq.heappush(self._heap, (due, next(self._count), obj))
        if due < self._next:
            self._wake.set()

    async def run(self) -> None:
        """Serve the timers until cancelled."""
        heap = self._heap
        while True:
            now = trio.current_time()
            done = 0
            while heap and heap[0][0] <= now:
                _, n, obj = heapq.heappop(heap)
                due = obj.tick(now)
                if due is not None:
                    heapq.heappush(heap, (due, n, obj))
                done += 1
                if done >= HEARTBEAT_BATCH:
                    await trio.lowlevel.checkpoint()
                    now, done = trio.current_time(), 0
            self._next = heap[0][0] if heap else math.inf
            self._wake = trio.Event()
            with trio.move_on_at(self._next):
                await self._wake.wait()
