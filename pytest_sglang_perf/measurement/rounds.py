"""Concurrent rounds: N streams sent at once, each timed as `client.py` times one (measurement/concurrency.py says
what a round's metrics are).

Each stream of a round has a connection of its own (wire.py: opened before the round, one write to send, the reads
handled in the protocol's callback), so the client never caps the concurrency it was asked for and a read costs as
little as it can; each stream stamps its own send time, and a round's wall time runs from its first send to its last
token. The `/flush_cache` before a cold round goes through an aiohttp session (untimed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
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

Reader = Literal["wire", "aiohttp"]
"""How a round reads its streams: the bare-connection reader (wire.py), or aiohttp's client (for comparison)."""

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush


async def _run_rounds(base_url: str, requests: Sequence[ChatRequest], count: int, warmup: int,
                      api_key: str | None, flush: CacheFlush | None, loads: list[ClientLoad] | None,
                      reader: Reader) -> list[list[StreamRecord]]:
    rounds: list[list[StreamRecord]] = []
    bodies = [orjson.dumps(request.body()) for request in requests]
    timeout = max(request.timeout for request in requests)
    async with LagMonitor() as monitor, aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),  # never the client's limit: every stream of a round at once
            timeout=aiohttp.ClientTimeout(total=timeout), headers=request_headers(api_key),
            auto_decompress=False) as session:
        endpoint = Endpoint(base_url, api_key)
        pool: list[StreamProtocol] = []
        try:
            for index in range(warmup + count):
                if flush is not None:
                    await flush.run(session, base_url)
                if reader == "wire":
                    streams = await _wire_round(endpoint, pool, bodies, requests, timeout)
                else:
                    streams = await _aiohttp_round(session, endpoint.url, bodies, requests)
                if index >= warmup:
                    rounds.append(streams)
        finally:
            _close(pool)
    if loads is not None and monitor.load is not None:
        loads.append(monitor.load)
    return rounds


async def _wire_round(endpoint: Endpoint, pool: list[StreamProtocol], bodies: Sequence[bytes],
                      requests: Sequence[ChatRequest], timeout: float) -> list[StreamRecord]:
    """Every stream of one round on a kept-alive connection of its own (`pool`: opened before the round when it
    has none, or the server closed it), then all sent at once. On a failure every connection is closed (the pool
    emptied) and the first failure raised."""
    try:
        await _connected(endpoint, pool, len(requests), timeout)
        for protocol, body, request in zip(pool, bodies, requests, strict=False):  # no await: none closes now
            protocol.send(endpoint.request(body), request, endpoint.url)
        return await _all_done(pool[:len(requests)], requests, endpoint.url, timeout)
    except BaseException:
        _close(pool)
        raise


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


async def _all_done(protocols: Sequence[StreamProtocol], requests: Sequence[ChatRequest], url: str,
                    timeout: float) -> list[StreamRecord]:
    try:
        async with asyncio.timeout(timeout):
            return list(await asyncio.gather(*(protocol.done for protocol in protocols)))
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
               loads: list[ClientLoad] | None = None, reader: Reader = "wire") -> list[list[StreamRecord]]:
    """Send `warmup` + `count` rounds; in each, every request of `requests` at once (one connection per stream).
    Return the last `count` rounds' records. With `flush`, POST /flush_cache (untimed) before each round.
    Raises RequestFailed on the first bad request of a round (its other streams are cancelled). With `loads`, the
    client's own condition over the whole call (loop_lag.py) is appended to it."""
    if count < 1 or warmup < 0 or not requests:
        raise ValueError(f"run_rounds needs count >= 1, warmup >= 0 and a request, got count={count} "
                         f"warmup={warmup} requests={len(requests)}")
    _enough_files(len(requests))
    return run_sync(lambda: _run_rounds(base_url, requests, count, warmup, api_key, flush, loads, reader))


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
