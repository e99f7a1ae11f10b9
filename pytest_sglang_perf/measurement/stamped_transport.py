"""A plain TCP connection whose every read carries the kernel's receive stamp (kernel_stamps.py).

The event loop's own transports read with `recv()`, which drops the stamp, so this one reads with `recvmsg()` in an
`add_reader` callback and hands its protocol `received(data, at, kernel)`: the bytes and when they reached this
host, on `perf_counter()`'s clock (`kernel` False: the loop's own time of the read, when the kernel gave no stamp).
It has what wire.py's StreamProtocol asks of a transport (`write`, `close`, `get_extra_info("socket")`) and calls
the protocol as an asyncio transport would (`connection_made`; `eof_received`, after which it closes;
`connection_lost` on the loop's next turn). TLS connections keep the loop's transport and its stamps.
"""

from __future__ import annotations

import asyncio
import select
import socket
import weakref
from collections.abc import Callable
from time import perf_counter
from typing import Any, Protocol, TypeVar

from pytest_sglang_perf.measurement import kernel_stamps

_ANCILLARY_SIZE = kernel_stamps.ANCILLARY_SIZE
_CLOCK = kernel_stamps.Clock()
"""One for every connection: the clocks' offset is the host's."""
_STAMP = kernel_stamps.SO_TIMESTAMPNS
_SOL_SOCKET = socket.SOL_SOCKET
_unpack = kernel_stamps.unpack_timespec
_STAMP_SIZE = kernel_stamps.TIMESPEC_SIZE
READ_SIZE = 65536
"""Bytes one read may take (as libuv's reads); below glibc's mmap threshold, so a read's buffer is plain heap."""


class Receiver(Protocol):
    """What this transport calls: an asyncio protocol whose reads come with their stamp."""

    def connection_made(self, transport: Any) -> None: ...

    def received(self, data: bytes, at: float, kernel: bool) -> None: ...

    def eof_received(self) -> bool | None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


ReceiverT = TypeVar("ReceiverT", bound=Receiver)


async def open_stamped(host: str, port: int, factory: Callable[[], ReceiverT]) -> ReceiverT:
    """Connect to `host`:`port` (its addresses in the resolver's order; the first that answers), ask the socket for
    kernel receive stamps, and return the protocol made for it; raises the last address's OSError."""
    kernel_stamps.keep_on()  # first, so that the kernel has the connect's time to turn stamping on
    loop = asyncio.get_running_loop()
    addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    failure: OSError = OSError(f"no address found for {host}:{port}")
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        except BaseException:
            sock.close()
            raise
        kernel_stamps.enable(sock)
        protocol = factory()
        StampedTransport(loop, sock, protocol)
        return protocol
    raise failure


class StampedTransport:
    """The connection's socket on the loop: reads go to `protocol.received` with their stamp, writes that the
    socket does not take at once wait for it to be writable."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Receiver) -> None:
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._recvmsg = sock.recvmsg
        self._received = protocol.received
        self._pending = bytearray()
        self._closed = False
        protocol.connection_made(self)
        self._poller = _poller(loop)
        self._poller.add(self._fd, self._readable)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._sock if name == "socket" else default

    def is_closing(self) -> bool:
        return self._closed

    def write(self, data: bytes) -> None:
        if self._closed:
            return
        if self._pending:
            self._pending += data
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lose(exc)
            return
        if sent < len(data):
            self._pending += data[sent:]
            self._loop.add_writer(self._fd, self._writable)

    def close(self) -> None:
        self._lose(None)

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        del self._pending[:sent]
        if not self._pending:
            self._loop.remove_writer(self._fd)

    def _readable(self) -> None:
        """A read and its stamp: the kernel's, on perf_counter()'s clock, when its first control message is one
        (the only kind the socket asks for) and is no later than the loop's own stamp (`now`), else `now`. Inline,
        since it runs once per chunk: 1-2 us more than a plain recv() here (docs/client-measurement.md)."""
        try:
            data, ancillary, _, _ = self._recvmsg(READ_SIZE, _ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        now = perf_counter()
        if not data:
            self._protocol.eof_received()
            self._lose(None)
            return
        if ancillary:
            level, kind, stamp = ancillary[0]
            if kind == _STAMP and level == _SOL_SOCKET and len(stamp) >= _STAMP_SIZE:
                seconds, nanoseconds = _unpack(stamp)
                clock = _CLOCK
                if now > clock.stale_at:
                    clock.refresh()
                arrived = seconds + nanoseconds * 1e-9 + clock.offset
                if arrived < now:
                    self._received(data, arrived, True)
                    return
        self._received(data, now, False)

    def _lose(self, exc: Exception | None) -> None:
        """Stop reading and writing, close the socket, and tell the protocol on the loop's next turn (once)."""
        if self._closed:
            return
        self._closed = True
        self._poller.remove(self._fd)
        if self._pending:
            self._loop.remove_writer(self._fd)
            self._pending.clear()
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, exc)


class _Poller:
    """The loop's stamped connections on one epoll of their own, which the loop watches: each time it is ready, one
    callback reads every ready socket. Not the loop's `add_reader` per socket: uvloop (libuv) does not call a reader
    whose socket reports an error (a connection reset by the server), so the read that says "reset" would never
    come and the stream would wait out its timeout; an epoll of our own reports it as an event like any other."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll: select.epoll | None = None
        self._readers: dict[int, Callable[[], None]] = {}

    def add(self, fd: int, reader: Callable[[], None]) -> None:
        if self._epoll is None:
            self._epoll = select.epoll()
            self._loop.add_reader(self._epoll.fileno(), self._ready)
        self._epoll.register(fd, select.EPOLLIN)
        self._readers[fd] = reader

    def remove(self, fd: int) -> None:
        if self._readers.pop(fd, None) is None or self._epoll is None:
            return
        self._epoll.unregister(fd)
        if not self._readers:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()
            self._epoll = None

    def _ready(self) -> None:
        if self._epoll is None:
            return
        readers = self._readers
        for fd, _ in self._epoll.poll(0):
            reader = readers.get(fd)
            if reader is not None:
                reader()


_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Poller] = weakref.WeakKeyDictionary()


def _poller(loop: asyncio.AbstractEventLoop) -> _Poller:
    """The loop's poller (made on its first connection)."""
    poller = _POLLERS.get(loop)
    if poller is None:
        poller = _POLLERS[loop] = _Poller(loop)
    return poller
