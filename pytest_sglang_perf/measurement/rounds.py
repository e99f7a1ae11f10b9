"""Concurrent rounds: N streams sent at once, each timed as `client.py` times one (measurement/concurrency.py says
what a round's metrics are).

The streams of a round share one `aiohttp` session without a connection limit, so the client never caps the
concurrency it was asked for; each stream stamps its own send time, and a round's wall time runs from its first
send to its last token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import aiohttp
import orjson

from pytest_sglang_perf.measurement.client import (
    CHAT_PATH,
    ChatRequest,
    RequestFailed,
    StreamRecord,
    request_headers,
    run_sync,
    send_one,
)
from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.loop_lag import LagMonitor

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush


async def _run_rounds(base_url: str, requests: Sequence[ChatRequest], count: int, warmup: int,
                      api_key: str | None, flush: CacheFlush | None,
                      loads: list[ClientLoad] | None) -> list[list[StreamRecord]]:
    url = base_url.rstrip("/") + CHAT_PATH
    bodies = [orjson.dumps(request.body()) for request in requests]
    timeout = aiohttp.ClientTimeout(total=max(request.timeout for request in requests))
    connector = aiohttp.TCPConnector(limit=0)  # never the client's limit: every stream of a round at once
    rounds: list[list[StreamRecord]] = []
    async with LagMonitor() as monitor, aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=request_headers(api_key), auto_decompress=False) as session:
        for index in range(warmup + count):
            if flush is not None:
                await flush.run(session, base_url)
            streams = await _round(session, url, bodies, requests)
            if index >= warmup:
                rounds.append(streams)
    if loads is not None and monitor.load is not None:
        loads.append(monitor.load)
    return rounds


async def _round(session: aiohttp.ClientSession, url: str, bodies: Sequence[bytes],
                 requests: Sequence[ChatRequest]) -> list[StreamRecord]:
    """Every stream of one round, started together; the first failure cancels the others and is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(send_one(session, url, body, request))
                     for body, request in zip(bodies, requests, strict=True)]
    except BaseExceptionGroup as failed:
        first = failed.exceptions[0]
        raise first if isinstance(first, Exception) else failed from None
    return [task.result() for task in tasks]


def run_rounds(base_url: str, requests: Sequence[ChatRequest], *, count: int, warmup: int,
               api_key: str | None = None, flush: CacheFlush | None = None,
               loads: list[ClientLoad] | None = None) -> list[list[StreamRecord]]:
    """Send `warmup` + `count` rounds; in each, every request of `requests` at once (one connection per stream).
    Return the last `count` rounds' records. With `flush`, POST /flush_cache (untimed) before each round.
    Raises RequestFailed on the first bad request of a round (its other streams are cancelled). With `loads`, the
    client's own condition over the whole call (loop_lag.py) is appended to it."""
    if count < 1 or warmup < 0 or not requests:
        raise ValueError(f"run_rounds needs count >= 1, warmup >= 0 and a request, got count={count} "
                         f"warmup={warmup} requests={len(requests)}")
    _enough_files(len(requests))
    return run_sync(lambda: _run_rounds(base_url, requests, count, warmup, api_key, flush, loads))


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
