"""The aiohttp reader: a streamed chat request through an aiohttp session, kept for the side-by-side benchmark
(benchmarks/bench_load.py, `reader="aiohttp"` in rounds.py). Every measurement reads through wire.py; both feed the
same StreamAccumulator (client.py), so both judge a stream alike.
"""

from __future__ import annotations

from time import perf_counter

import aiohttp

from pytest_sglang_perf.measurement.client import (
    ERROR_BODY_LIMIT,
    ChatRequest,
    RequestFailed,
    StreamAccumulator,
    StreamRecord,
    broken_failure,
    clip_line,
    connect_failure,
    status_failure,
    timeout_failure,
)


async def _read_stream(response: aiohttp.ClientResponse, acc: StreamAccumulator, t0: float) -> None:
    """Feed every SSE event to `acc`, stamping each read once before parsing it."""
    carry = b""
    async for data in response.content.iter_any():
        t = perf_counter() - t0
        events = (carry + data if carry else data).split(b"\n\n")
        carry = events.pop()
        for event in events:
            acc.feed_event(event, t)
    if carry.strip():
        acc.feed_event(carry, perf_counter() - t0)


async def _answer_failure(response: aiohttp.ClientResponse, url: str) -> RequestFailed:
    text = (await response.content.read(ERROR_BODY_LIMIT)).decode(errors="replace")
    if response.status != 200:
        return status_failure(response.status, url, text)
    return RequestFailed(f"expected a text/event-stream answer from POST {url}, got {response.content_type}: "
                         f"{clip_line(text)} (does the server support stream=true?)", status=200, body=text)


async def send_one(session: aiohttp.ClientSession, url: str, body: bytes, request: ChatRequest) -> StreamRecord:
    acc = StreamAccumulator()
    t0 = perf_counter()
    try:
        async with session.post(url, data=body) as response:
            if response.status != 200 or response.content_type != "text/event-stream":
                raise await _answer_failure(response, url)
            await _read_stream(response, acc, t0)
    except TimeoutError:
        raise timeout_failure(url, request, len(acc.times)) from None
    except aiohttp.ClientConnectorError as exc:
        raise connect_failure(url, exc) from None
    except aiohttp.ClientError as exc:
        raise broken_failure(url, len(acc.times), exc) from None
    return acc.record(request, t0)
