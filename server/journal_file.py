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
file (:meth:`FileLog.seal`: renamed to ``PATH.1``, a fresh ``PATH`` opened) and the store moves
the sealed file's rows of running matches into the ``journal`` table in one transaction, made
durable before the file is removed (``store_journal.JournalStore.import_journal_file``); a
server that starts moves whatever an earlier one left (``PATH.1``, then ``PATH``) before it takes
up its running matches. So the file only ever holds the rows since the last move.

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
from collections.abc import Iterable

__all__ = ["SUFFIX", "FileLog", "LogBusy", "frame", "read_frames"]

SUFFIX = ".journal-log"
"""What the log's path adds to the database's."""

_HEAD = struct.Struct("<II")
_N = struct.Struct("<I")
#: No entry is near this long (a custody ``place`` is a few hundred bytes): a longer length is
#: corruption, not a frame.
_MAX_PAYLOAD = 1 << 20

Row = tuple[str, int, bytes]
"""(match id as hex, entry number from 0, packed entry), as the journal queues it."""


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
    """The journal file of one server (see the module docstring); :class:`LogBusy` if another
    process holds it."""

    def __init__(self, path: str) -> None:
        """Own the log at ``path`` (created readable by this user only)."""
        self.path = path
        self.sealed = path + ".1"  #: where :meth:`seal` puts the file the store is to move
        self._fd = _open_locked(path)
        self._size = os.fstat(self._fd).st_size

    def write(self, rows: Iterable[Row]) -> bool:
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
        return True

    def seal(self) -> bool:
        """Hand what the file holds to the store (renamed to :attr:`sealed`) and go on in a fresh
        file, unless a sealed file still waits; whether a sealed file waits now."""
        if os.path.exists(self.sealed):
            return True
        if self._size == 0:
            return False
        os.rename(self.path, self.sealed)
        fd = _open_locked(self.path)  # nobody else can hold a file that did not exist
        os.close(self._fd)
        self._fd, self._size = fd, 0
        return True

    def close(self) -> None:
        """Let the file go (its lock with it); removed if it holds nothing (a clean stop)."""
        if self._size == 0 and not os.path.exists(self.sealed):
            os.unlink(self.path)
        os.close(self._fd)
