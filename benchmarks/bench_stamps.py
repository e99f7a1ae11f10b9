"""What a kernel receive stamp costs the reader, and where: the same streams read four ways, side by side.

    python benchmarks/bench_stamps.py                      (~1 minute: 64 streams x 1,000 chunks/s, 3 rounds)
    python benchmarks/bench_stamps.py --streams 256 --rate 250 --rounds 5

A sender subprocess (pinned to one core; the reader runs pinned to the other) writes one 150-byte chunk to each of
N loopback TCP streams at every step of a common clock, as SGLang's decode steps do. The reader takes them in on a
uvloop loop and does nothing else with them (it counts them), so each column is the cost of getting a chunk and its
stamp, not of parsing it:

  uvloop, loop stamps   uvloop's own transport; `perf_counter()` in `data_received` (the plugin over TLS)
  ours, recv()          the plugin's transport (measurement/stamped_transport.py: its sockets on one epoll of its
                        own) reading with `recv()`: no stamp, so this is what its event handling costs
  ours, recvmsg()       the same reading with `recvmsg()`, the socket not asking for stamps: the system call's cost
  ours, kernel stamps   the plugin's transport as it runs: `recvmsg()` with `SO_TIMESTAMPNS`, the stamp converted

Rounds interleave the four, so a noisy stretch of the host touches each. Printed: CPU per chunk (the reader
process's user + system time over the chunks it took in: the median round, and the range), the system (kernel)
part of it (as getrusage splits the process's time, from scheduler ticks: rough, and only for rounds of a few
seconds; `perf record` tells it exactly), its share of a core, and each column against uvloop's. `--readers` runs
only some of them, e.g. under `perf record -g` to see where one reader's time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from served import pin, script, served

from pytest_sglang_perf.measurement import kernel_stamps
from pytest_sglang_perf.measurement.stamped_transport import StampedTransport

CHUNK = b"data: " + b"x" * 142 + b"\n\n"
"""150 bytes: the size of one of SGLang's streamed chat chunks (a token of content)."""
WARMUP = 0.5
"""Seconds of streaming before a round's clock starts (the connections' first reads, the loop settling)."""


# ------------------------------------------------------------------------------------------- the sender (subprocess)

def serve() -> None:
    """Accept streams (each sends its step rate first, as a line) and write CHUNK to each at every step; a stream
    whose reader closed is dropped."""
    pin(0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    streams: list[socket.socket] = []
    period, next_step = 0.001, time.perf_counter()
    while True:
        period = _accept(listener, streams, period)
        for stream in list(streams):
            try:
                stream.send(CHUNK)
            except OSError:
                streams.remove(stream)
                stream.close()
        next_step += period
        _wait_until(next_step)


def _accept(listener: socket.socket, streams: list[socket.socket], period: float) -> float:
    """Take the streams that connected since the last step; the step period the last one asked for."""
    while True:
        try:
            stream, _ = listener.accept()
        except BlockingIOError:
            return period
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream.settimeout(5)
        rate = float(stream.recv(64).split(b"\n")[0])
        stream.setblocking(False)
        streams.append(stream)
        period = 1.0 / rate


def _wait_until(moment: float) -> None:
    """Sleep, then spin the last 0.3 ms (a sleep wakes up late by up to a few hundred microseconds)."""
    ahead = moment - time.perf_counter() - 0.0003
    if ahead > 0:
        time.sleep(ahead)
    while time.perf_counter() < moment:
        pass


# ---------------------------------------------------------------------------------------------------- the readers

class Counter(asyncio.Protocol):
    """A protocol that keeps nothing: it counts the reads (the plugin's transport calls `received`, uvloop's
    `data_received`)."""

    def __init__(self) -> None:
        self.reads = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received(data, perf_counter(), False)

    def received(self, data: bytes, at: float, kernel: bool) -> None:
        self.reads += 1

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        return None


class RecvTransport(StampedTransport):
    """The plugin's transport reading with `recv()`: no stamp (the loop's time instead)."""

    def _readable(self) -> None:
        try:
            data = self._sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self._protocol.eof_received()
            self._lose(None)
            return
        self._received(data, perf_counter(), False)


Opener = Callable[[int, float], Awaitable[Counter]]


async def _uvloop(port: int, rate: float) -> Counter:
    _, protocol = await asyncio.get_running_loop().create_connection(Counter, "127.0.0.1", port)
    protocol.transport.write(f"{rate}\n".encode())
    return protocol


def _ours(transport: type[StampedTransport], stamps: bool) -> Opener:
    async def open_stream(port: int, rate: float) -> Counter:
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        if stamps:
            kernel_stamps.enable(sock)
        protocol = Counter()
        transport(loop, sock, protocol).write(f"{rate}\n".encode())
        return protocol
    return open_stream


READERS: dict[str, Opener] = {
    "uvloop, loop stamps": _uvloop,
    "ours, recv()": _ours(RecvTransport, stamps=False),
    "ours, recvmsg()": _ours(StampedTransport, stamps=False),
    "ours, kernel stamps": _ours(StampedTransport, stamps=True),
}


Cost = tuple[float, float, float]
"""One reader's round: CPU seconds per chunk, of which system (kernel) seconds, and its share of a core."""


async def _round(opener: Opener, port: int, streams: int, rate: float, seconds: float) -> Cost:
    """One reader over `seconds`."""
    protocols = [await opener(port, rate) for _ in range(streams)]
    await asyncio.sleep(WARMUP)
    start, reads, wall = resource.getrusage(resource.RUSAGE_SELF), sum(p.reads for p in protocols), perf_counter()
    await asyncio.sleep(seconds)
    end, wall = resource.getrusage(resource.RUSAGE_SELF), perf_counter() - wall
    reads = sum(p.reads for p in protocols) - reads
    for protocol in protocols:
        protocol.transport.close()
    await asyncio.sleep(0.3)  # the sender drops them
    system = end.ru_stime - start.ru_stime
    cpu = (end.ru_utime - start.ru_utime) + system
    return cpu / max(reads, 1), system / max(reads, 1), cpu / wall


def main(args: argparse.Namespace) -> None:
    import uvloop

    pin(1)
    kernel_stamps.keep_on()  # as in a measurement: stamping stays on, for every column alike
    costs: dict[str, list[Cost]] = {name: [] for name in args.readers}
    with served(__file__) as (_, url):
        port = int(url.rsplit(":", 1)[1])
        for index in range(args.rounds):
            for name in args.readers:
                costs[name].append(uvloop.run(_round(READERS[name], port, args.streams, args.rate, args.seconds)))
            print(f"round {index + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    _print(costs, args)


def _print(costs: dict[str, list[Cost]], args: argparse.Namespace) -> None:
    print(f"{args.streams} streams x {args.rate:g} chunks/s each ({args.streams * args.rate:,.0f} chunks/s), "
          f"{args.rounds} rounds of {args.seconds:g} s; CPU per chunk: median round [range], of it in the kernel "
          "(median round; getrusage's tick-based split, rough), share of a core")
    uvloop = costs.get("uvloop, loop stamps")
    base = statistics.median(cost for cost, _, _ in uvloop) if uvloop else None
    for name, rounds in costs.items():
        per = sorted(cost * 1e6 for cost, _, _ in rounds)
        kernel = statistics.median(system * 1e6 for _, system, _ in rounds)
        core = statistics.median(share for _, _, share in rounds)
        median = statistics.median(per)
        against = f"  x{median / (base * 1e6):.2f} of uvloop's" if base else ""
        print(f"  {name:22s} {median:5.2f} us [{per[0]:5.2f}-{per[-1]:5.2f}], kernel {kernel:5.2f} us  "
              f"{core:4.0%} of a core{against}")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--streams", type=int, default=64, help="concurrent streams (default 64)")
    parser.add_argument("--rate", type=float, default=1000.0, help="chunks per second per stream (default 1000)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per reader per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each reading with all four (default 3)")
    parser.add_argument("--readers", type=_readers, default=list(READERS), metavar="NAME,...",
                        help=f"only these readers, of {', '.join(_NAMES)} (default: all)")


_NAMES = dict(zip(("uvloop", "recv", "recvmsg", "kernel"), READERS, strict=True))
"""--readers' names: uvloop, recv, recvmsg, kernel."""


def _readers(text: str) -> list[str]:
    unknown = [name for name in text.split(",") if name not in _NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown reader {', '.join(unknown)}: choose from {', '.join(_NAMES)}")
    return [_NAMES[name] for name in text.split(",")]


if __name__ == "__main__":
    if not kernel_stamps.available():
        sys.exit("bench_stamps: kernel receive stamps need Linux on a 64-bit asm-generic architecture")
    script(__doc__, serve, main, "run the sender (internal)", _options)
