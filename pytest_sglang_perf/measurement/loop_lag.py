"""How busy the client was while it measured: its event loop's lag and its CPU use.

A chunk that arrives while the loop is busy waits until the loop gets to it, and its timestamp is late by that wait
where the loop stamps it (over TLS, off Linux; with the kernel's stamps only when the wait merges two of a stream's
chunks into one read, stamped_transport.py); either way a long wait says the client was struggling.
So the monitor measures that wait directly: every PROBE_EVERY seconds a probe thread queues a callback on the loop
and records how long the callback waited (the loop's lag). It also takes the process's CPU time over the
measurement, so a result says both how late the client could have been (`lag_p99`, see tail_lag) and how much of a
core it used (`cpu_share`). A client that falls behind shows here, instead of reading as a slower server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.stats import percentile

PROBE_EVERY = 0.02
"""Seconds between probes: 50 a second. Each costs the process ~0.2 ms of CPU here (a thread wake-up, the GIL, the
loop's wake-up pipe): 1.4% of a core at this pace, 4% at 5 ms (measured on the 2-core dev machine)."""


def tail_lag(lags: Sequence[float]) -> float:
    """The lags' 99th percentile, but never above the second-largest: below ~200 probes (four seconds of a
    measurement) a plain p99 is the single worst probe, and one late probe (a garbage collection, a page fault) is
    not a client that fell behind. Measured on the 2-core dev machine, a calm 1.4 s simulated cell (71 probes): the
    worst probe 0.4-11.9 ms, the second-worst 0.4-3.3 ms. `lag_max` keeps the worst."""
    ordered = sorted(lags)
    p99 = percentile(ordered, 99)
    return min(p99, ordered[-2]) if len(ordered) > 1 else p99


class LagMonitor:
    """`async with LagMonitor() as monitor:` around the requests; `monitor.load` afterwards.

    A probe thread queues a callback on the loop every `every` seconds (`call_soon_threadsafe`, which wakes the loop
    the way a socket that became readable does) and the callback records how long it waited: exactly how late a
    chunk arriving at that moment would have been stamped. A timer-based probe would miss a busy stretch (its timer
    just fires late, and libuv's timers have 1 ms steps anyway); a probe from outside the loop cannot.
    """

    def __init__(self, every: float = PROBE_EVERY) -> None:
        self._every = every
        self._lags: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = (0.0, 0.0)
        self.load: ClientLoad | None = None

    async def __aenter__(self) -> LagMonitor:
        loop = asyncio.get_running_loop()
        self._start = (time.perf_counter(), time.process_time())
        self._thread = threading.Thread(target=self._probe, args=(loop,), name="sglang-perf-lag", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        wall, cpu = time.perf_counter() - self._start[0], time.process_time() - self._start[1]
        lags = self._lags or [0.0]
        self.load = ClientLoad(lag_p50=percentile(lags, 50), lag_p99=tail_lag(lags), lag_max=max(lags),
                               probes=len(self._lags), cpu_share=cpu / wall if wall > 0 else 0.0, seconds=wall)

    def _probe(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stop.wait(self._every):
            try:
                loop.call_soon_threadsafe(self._stamp, time.perf_counter())
            except RuntimeError:  # the loop closed under us: nothing left to measure
                return

    def _stamp(self, sent: float) -> None:
        if not self._stop.is_set():
            self._lags.append(time.perf_counter() - sent)
