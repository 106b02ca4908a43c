"""Idle CPUs kept quick to wake while the server runs: Linux's CPU latency QoS.

Why. At human pace a server is idle between almost every two messages, and an idle CPU sleeps:
on a virtual machine whose idle is a halt (the ``haltpoll`` cpuidle driver with no polling, as
on this project's machines) every message then wakes a halted vCPU through the host, and the
server's code runs on cold caches. Measured (BENCHMARKS.md, session 12): at 200 human-paced
blind matches a shot's round trip p50 was 1.36 ms and 733 µs of server CPU; with idle CPUs
polling instead, 0.62 ms and 433 µs. The cost: idle cores spin, so the machine draws its full
CPU time from the host (and power on bare metal) whenever the server runs.

How. A process that writes a 32-bit latency in microseconds to ``/dev/cpu_dma_latency`` and
keeps the file open holds every CPU's idle states to those that wake within it; ``0`` leaves
only polling. The kernel drops the request when the file is closed, so a server that exits or
crashes gives it back (``Documentation/power/pm_qos_interface.rst``). This is what the
``latency-performance`` profile of ``tuned`` does for a whole machine; :func:`cpu_latency`
does it for as long as the server runs, when the operator asks (``serve --cpu-latency-us``).
Writing the file needs root (or a udev rule granting the server's user the device).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterator

__all__ = ["DEVICE", "CpuLatencyError", "cpu_latency", "current"]

_log = logging.getLogger("seabattle.latency")

#: The kernel's CPU latency QoS device.
DEVICE = "/dev/cpu_dma_latency"
_VALUE = struct.Struct("=i")  # the kernel reads a native 32-bit int (or its hex text)


class CpuLatencyError(OSError):
    """The latency asked for cannot be held; ``strerror`` names the latency, the device and
    why, in one line for the operator."""

    @classmethod
    def of(cls, us: int, device: str, e: OSError) -> CpuLatencyError:
        """The refusal of ``us`` by ``device``, from the ``OSError`` that said so."""
        why = f"cannot hold the CPU wake-up latency at {us} µs: {device}: {e.strerror}"
        return cls(e.errno, why)


def current(device: str | None = None) -> int:
    """The latency every CPU is held to now, in microseconds (the strictest request held;
    2000000000 when none is). ``device``: :data:`DEVICE` unless given."""
    fd = os.open(device or DEVICE, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(_VALUE.unpack(os.read(fd, _VALUE.size))[0])
    finally:
        os.close(fd)


@contextlib.contextmanager
def cpu_latency(us: int | None, device: str | None = None) -> Iterator[None]:
    """Hold every CPU's wake-up latency at ``us`` microseconds for the block (``None``: do
    nothing). Raises :class:`CpuLatencyError` if the device (:data:`DEVICE` unless given)
    cannot take the request."""
    if us is None:
        yield
        return
    device = device or DEVICE
    if not 0 <= us < 2**31:
        raise ValueError(f"a CPU latency is 0 to {2**31 - 1} µs, not {us}")
    try:
        fd = os.open(device, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as e:
        raise CpuLatencyError.of(us, device, e) from None
    try:
        try:
            os.write(fd, _VALUE.pack(us))
        except OSError as e:
            raise CpuLatencyError.of(us, device, e) from None
        _log.info("idle CPUs held to a %d µs wake-up (%s)", us, device)
        yield
    finally:
        os.close(fd)  # the kernel drops the request with the last descriptor
