"""Concurrent rounds: N streams sent at once, each timed as `client.py` times one (measurement/concurrency.py says
what a round's metrics are).

Each stream of a round has a connection of its own (wire.py: opened before the round, one write to send, the reads
handled in the protocol's callback), so the client never caps the concurrency it was asked for and a read costs as
little as it can; each stream stamps its own send time, and a round's wall time runs from its first send to its last
token. The `/flush_cache` before a cold round goes through an aiohttp session (untimed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

import aiohttp
import orjson

from pytest_sglang_perf.measurement import aiohttp_reader
from pytest_sglang_perf.measurement.client import (
    ChatRequest,
    RequestFailed,
    StreamRecord,
    request_headers,
    run_sync,
    timeout_failure,
)
from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.loop_lag import LagMonitor
from pytest_sglang_perf.measurement.wire import Endpoint, StreamProtocol

Reader = Literal["wire", "wire-loop-stamps", "wire-live", "aiohttp"]
"""How a round reads its streams: the bare-connection reader (wire.py; answers kept as they come and parsed after
the round, within DEFER_BUDGET; each read stamped by the kernel where it can be, stamped_transport.py), the same
reader with every read stamped by the event loop (as over TLS), the same reader parsing each read as it comes, or
aiohttp's client (the last three for benchmarks/bench_load.py's side-by-side columns)."""

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush


@dataclass
class ReadCost:
    """The measuring process's CPU seconds over a call's rounds (the bare-connection reader only): while their
    streams were open (reading and stamping, what can delay a stamp) and after (parsing the kept answers), and the
    wall-clock seconds the streams were open."""

    streaming: float = 0.0
    parsing: float = 0.0
    seconds: float = 0.0


async def _run_rounds(base_url: str, requests: Sequence[ChatRequest], count: int, warmup: int,
                      api_key: str | None, flush: CacheFlush | None, loads: list[ClientLoad] | None,
                      reader: Reader, cost: ReadCost | None) -> list[list[StreamRecord]]:
    rounds: list[list[StreamRecord]] = []
    bodies = [orjson.dumps(request.body()) for request in requests]
    timeout = max(request.timeout for request in requests)
    defer = reader in ("wire", "wire-loop-stamps") and deferred(requests)
    async with LagMonitor() as monitor, aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),  # never the client's limit: every stream of a round at once
            timeout=aiohttp.ClientTimeout(total=timeout), headers=request_headers(api_key),
            auto_decompress=False) as session:
        endpoint = Endpoint(base_url, api_key, kernel_stamps=reader != "wire-loop-stamps")
        pool: list[StreamProtocol] = []
        counted = StampCount()
        try:
            for index in range(warmup + count):
                if flush is not None:
                    await flush.run(session, base_url)
                if reader != "aiohttp":
                    streams = await _wire_round(endpoint, pool, bodies, requests, timeout, cost, defer,
                                                counted if index >= warmup else None)
                else:
                    streams = await _aiohttp_round(session, endpoint.url, bodies, requests)
                if index >= warmup:
                    rounds.append(streams)
        finally:
            _close(pool)
    if loads is not None and monitor.load is not None:
        loads.append(replace(monitor.load, reads=counted.reads, kernel_stamped=counted.kernel_stamped,
                             chunks=counted.chunks, shared=counted.shared))
    return rounds


@dataclass
class StampCount:
    """The measured rounds' reads (the bare-connection reader only), how many carried the kernel's receive stamp,
    and their content chunks, of which how many came in the same read as the chunk before them (so both carry that
    read's one stamp): the results file's `client.reads`, `kernel_stamped`, `chunks` and `shared`."""

    reads: int = 0
    kernel_stamped: int = 0
    chunks: int = 0
    shared: int = 0

    def add(self, protocols: Sequence[StreamProtocol], records: Sequence[StreamRecord]) -> None:
        self.reads += sum(protocol.reads for protocol in protocols)
        self.kernel_stamped += sum(protocol.kernel_stamped for protocol in protocols)
        for record in records:
            times = record.chunk_times
            self.chunks += len(times)
            self.shared += sum(1 for before, after in pairwise(times) if after == before)


DEFER_BUDGET = 256 * 1024 * 1024
"""Bytes a round's kept answers may take (wire.py's deferred reads): above it, reads are parsed as they come."""
BYTES_PER_TOKEN = 1024
"""A bound on a streamed chunk's size per token (SGLang 0.5.23's chat chunks are ~250-400 bytes, with the model's
name and the request's id in each)."""


def deferred(requests: Sequence[ChatRequest]) -> bool:
    """Whether a round's answers are kept as they come and parsed after its last stream (within DEFER_BUDGET)."""
    return sum(request.max_tokens for request in requests) * BYTES_PER_TOKEN <= DEFER_BUDGET


async def _wire_round(endpoint: Endpoint, pool: list[StreamProtocol], bodies: Sequence[bytes],
                      requests: Sequence[ChatRequest], timeout: float, cost: ReadCost | None,
                      defer: bool, counted: StampCount | None) -> list[StreamRecord]:
    """Every stream of one round on a kept-alive connection of its own (`pool`: opened before the round when it
    has none, or the server closed it), then all sent at once; the answers are read once the last has ended (a
    deferred answer is parsed only then, when no stream is left whose stamps its parsing could delay). On a
    failure every connection is closed (the pool emptied) and the first failure raised."""
    try:
        await _connected(endpoint, pool, len(requests), timeout)
        protocols = pool[:len(requests)]
        started, wall = time.process_time(), time.perf_counter()
        for protocol, body, request in zip(protocols, bodies, requests, strict=True):  # no await: none closes now
            protocol.send(endpoint.request(body), request, endpoint.url, defer=defer)
        await _all_ended(protocols, requests, endpoint.url, timeout)
        streamed, wall = time.process_time(), time.perf_counter() - wall
        records = [protocol.outcome() for protocol in protocols]
        if counted is not None:
            counted.add(protocols, records)
    except BaseException:
        _close(pool)
        raise
    if cost is not None:
        cost.streaming += streamed - started
        cost.parsing += time.process_time() - streamed
        cost.seconds += wall
    return records


async def _connected(endpoint: Endpoint, pool: list[StreamProtocol], streams: int, timeout: float) -> None:
    """`pool` holds `streams` open connections: new ones where it had none or the server closed one (checked again
    after every connect, since the server may close an idle one meanwhile)."""
    while True:
        stale = [index for index in range(streams) if index >= len(pool) or not pool[index].open]
        if not stale:
            return
        for index in stale:
            protocol = await endpoint.connect(timeout)
            if index < len(pool):
                pool[index] = protocol
            else:
                pool.append(protocol)


def _close(pool: list[StreamProtocol]) -> None:
    for protocol in pool:
        protocol.close()
    pool.clear()


async def _all_ended(protocols: Sequence[StreamProtocol], requests: Sequence[ChatRequest], url: str,
                     timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(protocol.ended for protocol in protocols))
    except TimeoutError:
        slowest = min(protocols, key=lambda p: p.chunks)
        raise timeout_failure(url, requests[0], slowest.chunks) from None


async def _aiohttp_round(session: aiohttp.ClientSession, url: str, bodies: Sequence[bytes],
                         requests: Sequence[ChatRequest]) -> list[StreamRecord]:
    """The same round through aiohttp's client (kept for benchmarks/bench_load.py's side-by-side column)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(aiohttp_reader.send_one(session, url, body, request))
                     for body, request in zip(bodies, requests, strict=True)]
    except BaseExceptionGroup as failed:
        first = failed.exceptions[0]
        raise first if isinstance(first, Exception) else failed from None
    return [task.result() for task in tasks]


def run_rounds(base_url: str, requests: Sequence[ChatRequest], *, count: int, warmup: int,
               api_key: str | None = None, flush: CacheFlush | None = None,
               loads: list[ClientLoad] | None = None, reader: Reader = "wire",
               cost: ReadCost | None = None) -> list[list[StreamRecord]]:
    """Send `warmup` + `count` rounds; in each, every request of `requests` at once (one connection per stream).
    Return the last `count` rounds' records. With `flush`, POST /flush_cache (untimed) before each round.
    Raises RequestFailed on the first bad request of a round (its other streams are cancelled). With `loads`, the
    client's own condition over the whole call (loop_lag.py) is appended to it; with `cost`, the CPU the rounds
    took while streaming and after (ReadCost) is added to it."""
    if count < 1 or warmup < 0 or not requests:
        raise ValueError(f"run_rounds needs count >= 1, warmup >= 0 and a request, got count={count} "
                         f"warmup={warmup} requests={len(requests)}")
    _enough_files(len(requests))
    return run_sync(lambda: _run_rounds(base_url, requests, count, warmup, api_key, flush, loads, reader, cost))


_SPARE_FILES = 64
"""Open files a round leaves for everything else (logs, pipes, the flush's connection)."""


def _enough_files(streams: int) -> None:
    """Raise the soft limit of open files to what `streams` sockets need (a stream that cannot open its socket
    would read as "cannot connect": the server blamed for the client's limit); fail clearly when the hard limit is
    too low."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = streams + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise RequestFailed(f"{streams} streams at once need about {need} open files, and this process may open "
                            f"at most {hard} (ulimit -n): raise the limit or measure fewer streams")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def run_requests(base_url: str, request: ChatRequest, *, count: int, warmup: int, api_key: str | None = None,
                 flush: CacheFlush | None = None, loads: list[ClientLoad] | None = None) -> list[StreamRecord]:
    """Send `warmup` + `count` identical streamed requests one after another on one kept-alive connection (a new one
    only when the server closed it: rounds.py with one stream); return the last `count` records. With `flush`, POST
    /flush_cache (untimed) before each request. With `loads`, the client's own condition over the whole call
    (loop_lag.py) is appended to it. Raises RequestFailed on the first bad request (CacheFlushFailed on a failed
    flush)."""
    if count < 1 or warmup < 0:
        raise ValueError(f"run_requests needs count >= 1 and warmup >= 0, got count={count} warmup={warmup}")
    rounds = run_rounds(base_url, [request], count=count, warmup=warmup, api_key=api_key, flush=flush, loads=loads)
    return [streams[0] for streams in rounds]
