"""Receive timestamps from the kernel: when a read's bytes reached this host, not when the client got to them.

With `SO_TIMESTAMPNS` set on a TCP socket, Linux stamps each arriving segment as the network stack takes it in
(CLOCK_REALTIME) and `recvmsg()` returns, as one control message, the stamp of the last segment that read consumed
(docs/client-measurement.md, "Kernel receive stamps"). A stamp taken so is as early as a stamp can be: it no longer
waits for the event loop to reach the socket, so N streams whose chunks arrive at once all get their own arrival
time, and a client busy with something else (a garbage collection, another stream's read) does not make a chunk
late.

Python 3.11's `socket` module names neither option, so their numbers are data here: 35 (`SO_TIMESTAMPNS` and
`SCM_TIMESTAMPNS`, include/uapi/asm-generic/socket.h) on the architectures below; elsewhere (and on other systems)
`available()` is False and reads are stamped by the event loop as before.
"""

from __future__ import annotations

import atexit
import platform
import socket
import struct
import sys
from time import perf_counter, time

SO_TIMESTAMPNS = 35
"""The socket option (SOL_SOCKET level) and the control message's type, in asm-generic's numbering."""
GENERIC_MACHINES = frozenset({"x86_64", "amd64", "aarch64", "arm64", "ppc64le", "riscv64", "s390x"})
"""64-bit Linux architectures that take asm-generic's socket option numbers (alpha, mips, parisc and sparc number
them otherwise)."""
_TIMESPEC = struct.Struct("@qq")
"""struct timespec on a 64-bit Linux: seconds, nanoseconds."""
unpack_timespec = _TIMESPEC.unpack_from
"""A stamp's control message data (at least TIMESPEC_SIZE bytes): (seconds, nanoseconds)."""
TIMESPEC_SIZE = _TIMESPEC.size
ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
"""recvmsg()'s control buffer: room for one timestamp message (0 where the system has no control messages)."""


def available() -> bool:
    """Whether this system's sockets can be asked for kernel receive stamps (Linux on a listed architecture)."""
    return sys.platform == "linux" and platform.machine().lower() in GENERIC_MACHINES


def enable(sock: socket.socket) -> bool:
    """Ask `sock` for a receive stamp with every read; False when the kernel refuses."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


_keeper: socket.socket | None = None


def keep_on() -> None:
    """Keep the kernel's receive stamping on for the rest of the process: one socket that asks for stamps, open
    until the process exits. Linux turns stamping on a moment after the first socket asks (net_enable_timestamp in
    net/core/dev.c defers it to a work queue) and off when the last one closes; a read that comes before it is on
    has no stamp (and gets the loop's). Without a keeper, every measurement's new connections would race again."""
    global _keeper
    if _keeper is None:
        keeper = socket.socket()
        if enable(keeper):
            _keeper = keeper
            atexit.register(keeper.close)  # closed before the interpreter's teardown could warn of it
        else:
            keeper.close()


class Clock:
    """The offset from the kernel's stamps (wall clock) to `perf_counter()`'s clock: a read's arrival is
    `seconds + nanoseconds * 1e-9 + clock.offset`, after `clock.refresh()` once `now > clock.stale_at`.

    The offset is read (both clocks, back to back) at most every REFRESH seconds of reads, so most reads cost one
    unpack and two additions. A wall clock that NTP slews moves little in that time: 0.1 us at ntpd's limit (500
    parts per million), 17 us at chrony's default limit (83,333 ppm, only while it corrects a large offset). A
    stepped wall clock is followed within REFRESH; until then a stamp after the step is off by the step, unless
    that puts it after the read (then the read's own `perf_counter()` stands)."""

    REFRESH = 0.0002

    def __init__(self) -> None:
        self.offset = 0.0
        self.stale_at = -1.0

    def refresh(self) -> None:
        here = perf_counter()
        self.offset = here - time()
        self.stale_at = here + self.REFRESH
