"""The journal's tail as an append-only file beside a SQLite database: one ``write`` a batch.

Why a file. At human pace a one-row SQLite commit costs ~200 µs of CPU (the engine's code and
the WAL's locks run cold between inputs five milliseconds apart); appending the same row to a
file is one ``write`` into the page cache. Both survive the server's process being killed (the
data is in the kernel once the call returns) and neither survives a power cut whole, which is
what ``synchronous=NORMAL`` promised before: the crash guarantee is the same.

Theory of operation. :class:`FileLog` owns ``PATH`` (the database's path + ``.journal-log``)
for as long as the server runs, by an exclusive ``flock``: a second server on the same database
cannot take it (:class:`LogBusy`) and writes the database instead. Each batch of rows is one
``os.write`` of their frames (``O_APPEND``); a write that fails is cut off again, so the file
never holds half a batch the journal reported as failed. Every so often the journal seals the
file (:meth:`FileLog.seal`: renamed to the next segment, ``PATH.1``, ``PATH.2``, ..., and a fresh
``PATH`` opened).

Segments retire; they are not moved. A sealed segment is removed once every match with a row in
it has ended (the store says so as it commits the end: :meth:`FileLog.ended`); the rows of a
running match are never copied while it runs. Copying them into the database's ``journal``
table costs a page write per match in the segment (the table is ordered by match, the file by
time): at 5,000 human-paced matches, a third of a second of the store's thread every few
seconds, and the event loop slowed with it (the thread takes the interpreter's lock back after
every row). Only when the segments kept pass ``keep_bytes`` (a match that runs far longer than
the others pins everything since it began) is the oldest one moved: the store copies its rows of
running matches into ``journal`` in one transaction, made durable before the segment is removed
(``store_journal.JournalStore.import_journal_files``). A server that starts moves whatever an
earlier one left (every segment, oldest first, then ``PATH``) before it takes up its running
matches, and a clean stop moves everything, so that the database alone holds the journal of a
server that is not running.

A frame is ``<u32 length><u32 crc32>`` (little-endian) then the payload: the 16-byte match id,
the entry number (``<u32``), the packed entry. :func:`read_frames` stops at a torn tail (a
power cut's) and steps over a frame that fails its checksum to the next that passes, naming
both; a match that lost an entry so is ended as aborted when it is taken up (its entry numbers
have a gap), the others go on.
"""

from __future__ import annotations

import fcntl
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = ["SUFFIX", "FileLog", "FileMoved", "LogBusy", "frame", "read_frames"]

SUFFIX = ".journal-log"
"""What the log's path adds to the database's."""

_HEAD = struct.Struct("<II")
_N = struct.Struct("<I")
#: No entry is near this long (a custody ``place`` is a few hundred bytes): a longer length is
#: corruption, not a frame.
_MAX_PAYLOAD = 1 << 20

Row = tuple[str, int, bytes]
"""(match id as hex, entry number from 0, packed entry), as the journal queues it."""


class FileMoved(NamedTuple):
    """What the store made of sealed segments (``JournalStore.import_journal_files``)."""

    rows: int
    """Rows the segments held."""
    problems: list[str]
    """What was wrong with them (a torn tail, a frame that failed its checksum), by file."""
    running: frozenset[str]
    """The matches still open or playing: their rows are in the store now."""


class LogBusy(Exception):
    """Another process holds the journal file (a second server on one database)."""


def frame(row: Row) -> bytes:
    """One row as the file holds it."""
    match_id, n, packed = row
    payload = bytes.fromhex(match_id) + _N.pack(n) + packed
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def _valid(data: bytes, at: int) -> int:
    """The length of the frame at ``at`` if one is whole and passes its checksum there, else 0."""
    if at + _HEAD.size > len(data):
        return 0
    size: int
    crc: int
    size, crc = _HEAD.unpack_from(data, at)
    end = at + _HEAD.size + size
    if not 20 <= size <= _MAX_PAYLOAD or end > len(data):
        return 0
    if zlib.crc32(memoryview(data)[at + _HEAD.size : end]) != crc:
        return 0
    return end - at


def read_frames(data: bytes) -> tuple[list[Row], list[str]]:
    """The rows of a log file's bytes, and what was wrong with the rest (empty: nothing)."""
    rows: list[Row] = []
    problems: list[str] = []
    at = 0
    while at < len(data):
        length = _valid(data, at)
        if length:
            body = at + _HEAD.size
            (n,) = _N.unpack_from(data, body + 16)
            rows.append((data[body : body + 16].hex(), n, data[body + 20 : at + length]))
            at += length
            continue
        # Not a frame: the next offset where one is whole and checks out, if any.
        nxt = next((k for k in range(at + 1, len(data)) if _valid(data, k)), None)
        if nxt is None:
            problems.append(f"the last {len(data) - at} bytes (from offset {at}) are no frame")
            break
        problems.append(f"{nxt - at} bytes at offset {at} failed their checksum, skipped")
        at = nxt
    return rows, problems


def _open_locked(path: str) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogBusy(f"{path} is held by another server on this database") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


class FileLog:
    """The journal file of one server and its sealed segments (see the module docstring);
    :class:`LogBusy` if another process holds it."""

    def __init__(self, path: str) -> None:
        """Own the log at ``path`` (created readable by this user only), and the segments an
        earlier server sealed beside it."""
        self.path = path
        self._fd = _open_locked(path)
        self._size = os.fstat(self._fd).st_size
        #: sealed segments kept, oldest first: (number, path, bytes)
        self._segments: list[tuple[int, str, int]] = []
        folder, name = os.path.split(path)
        for entry in os.scandir(folder or "."):
            head, _, number = entry.name.rpartition(".")
            if head == name and number.isdigit() and entry.is_file():
                self._segments.append((int(number), entry.path, entry.stat().st_size))
        self._segments.sort()
        #: the number the live file gets when it is sealed
        self.number = self._segments[-1][0] + 1 if self._segments else 1
        #: each match not known to have ended -> the oldest segment holding a row of it
        self._first: dict[str, int] = {}
        self._pins: dict[int, int] = {}  #: segment number -> matches whose oldest row it holds

    def write(self, rows: Sequence[Row]) -> bool:
        """Append ``rows`` as one write; ``OSError`` (and nothing appended) if it cannot."""
        data = b"".join(map(frame, rows))
        try:
            done = os.write(self._fd, data)
            if done < len(data):  # rare (a signal, a full disk): the rest, or the error
                view = memoryview(data)[done:]
                while view:
                    view = view[os.write(self._fd, view) :]
        except OSError:
            # A disk that filled up mid-batch: leave no half of it for a restart to replay.
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        first, number = self._first, self.number
        for match_id, _, _ in rows:
            if match_id not in first:
                first[match_id] = number
                self._pins[number] = self._pins.get(number, 0) + 1
        return True

    def ended(self, match_id: str) -> None:
        """``match_id`` has ended, durably: its rows pin no segment any longer."""
        number = self._first.pop(match_id, None)
        if number is not None:
            self._pins[number] -= 1
            if not self._pins[number]:
                del self._pins[number]

    def seal(self) -> bool:
        """Make what the live file holds a segment and go on in a fresh file; whether there was
        anything to seal."""
        if self._size == 0:
            return False
        sealed = f"{self.path}.{self.number}"
        os.rename(self.path, sealed)
        fd = _open_locked(self.path)  # nobody else can hold a file that did not exist
        os.close(self._fd)
        self._segments.append((self.number, sealed, self._size))
        self._fd, self._size = fd, 0
        self.number += 1
        return True

    def segments(self) -> list[str]:
        """The sealed segments kept, oldest first."""
        return [path for _, path, _ in self._segments]

    def oldest(self, max_bytes: int) -> list[str]:
        """The oldest segments, as many as hold ``max_bytes`` together (one at least)."""
        out: list[str] = []
        total = 0
        for _, path, size in self._segments:
            total += size
            if out and total > max_bytes:
                break
            out.append(path)
        return out

    @property
    def kept_bytes(self) -> int:
        """What the sealed segments hold."""
        return sum(size for _, _, size in self._segments)

    def retire(self) -> list[str]:
        """Let go of the oldest segments that no match still running has a row in; their paths,
        for the caller to remove."""
        oldest_pinned = min(self._pins, default=self.number)
        gone = [path for number, path, _ in self._segments if number < oldest_pinned]
        del self._segments[: len(gone)]
        return gone

    def moved(self, paths: Sequence[str], running: Iterable[str]) -> None:
        """The store has the rows of matches still ``running`` of the oldest segments, ``paths``,
        and removed them: they pin nothing now (a match no longer running is forgotten; it ended
        without the store saying so to this log)."""
        gone = self._segments[: len(paths)]
        assert [path for _, path, _ in gone] == list(paths), "segments are moved oldest first"
        del self._segments[: len(paths)]
        number = gone[-1][0]
        running = set(running)
        for match_id, first in list(self._first.items()):
            if first <= number:
                self.ended(match_id)
                if match_id in running:
                    self._first[match_id] = number + 1
                    self._pins[number + 1] = self._pins.get(number + 1, 0) + 1

    def close(self) -> None:
        """Let the file go (its lock with it); removed if it holds nothing (a clean stop)."""
        if self._size == 0 and not self._segments:
            os.unlink(self.path)
        os.close(self._fd)
