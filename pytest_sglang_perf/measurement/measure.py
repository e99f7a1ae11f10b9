"""One measurement: warmup + repeats of a fixed streamed request, summarised into a `Result`.

Importing this module is cheap: the client (aiohttp) is imported only when `measure()` runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from pytest_sglang_perf.measurement.prefix_cache import COLD, WARM, cold_cache_problem
from pytest_sglang_perf.measurement.result import RequestParams, Result
from pytest_sglang_perf.measurement.stats import Summary, percentile
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.server.startup import StartupFacts

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.client import ChatRequest, StreamRecord

_HASH_CHARS = 16


def prompt_text_hash(prompt: str) -> str:
    """Identifies the prompt's text alone (a cell's identity keeps the request's other fields beside it)."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:_HASH_CHARS]


def prompt_hash(params: RequestParams) -> str:
    """Identifies what was asked (prompt, max_tokens, temperature, seed; a warm prefix cache), not how often
    (repeats, warmup). A cold measurement hashes as before the prefix cache was controlled."""
    fields: list[object] = [params.prompt, params.max_tokens, float(params.temperature), params.seed]
    if params.prefix_cache == WARM:
        fields.append(WARM)
    key = json.dumps(fields)
    return hashlib.sha256(key.encode()).hexdigest()[:_HASH_CHARS]


def _chunk_gaps(records: Sequence[StreamRecord]) -> list[float]:
    return [b - a for record in records for a, b in pairwise(record.chunk_times)]


def build_result(records: Sequence[StreamRecord], *, variant: str, params: RequestParams, boot_seconds: float,
                 simulated: bool, startup: StartupFacts | None = None) -> Result:
    if not records:
        raise ValueError(f"no requests were measured for variant {variant!r}: repeats must be at least 1")
    samples = tuple(record.sample for record in records)
    gaps = _chunk_gaps(records)
    values = metric_values(samples, boot_seconds, None if startup is None else startup.graph_capture_seconds)
    return Result(
        variant=variant, params=params, prompt_hash=prompt_hash(params), samples=samples,
        summaries={name: Summary.of(v) for name, v in values.items()}, boot_seconds=boot_seconds,
        simulated=simulated, startup=startup,
        itl_p50=percentile(gaps, 50) if gaps else None,
        itl_p99=percentile(gaps, 99) if gaps else None,
        values=values,
    )


def measure(base_url: str, *, model: str, variant: str, params: RequestParams, boot_seconds: float,
            simulated: bool, api_key: str | None = None, timeout: float = 600.0,
            startup: StartupFacts | None = None, decided: Callable[[Result], bool] | None = None,
            flush_key: str | None = None) -> Result:
    """Send params.warmup + params.repeats requests to the server at base_url and summarise the repeats.

    The adaptive plan (params.max_repeats set): after the first round, one more request at a time while
    `decided(result so far)` is false, up to params.max_repeats requests. Every request is kept.
    With params.prefix_cache "cold" each request (the warmup too) follows a `/flush_cache` (with `flush_key`, the
    server's --admin-api-key, when it has one) and must report no prefix-cache hit.
    Raises client.RequestFailed if any request fails, is truncated, comes back short or hit a cache meant cold.
    """
    request = _chat_request(model, params, timeout)
    records: list[StreamRecord] = []

    def more(count: int, warmup: int) -> None:
        records.extend(_run(base_url, request, params, count, warmup, api_key, flush_key, len(records) + 1))

    def result() -> Result:
        return build_result(records, variant=variant, params=params, boot_seconds=boot_seconds,
                            simulated=simulated, startup=startup)

    more(params.repeats, params.warmup)
    limit = params.max_repeats or 0
    while len(records) < limit and not (decided is not None and decided(result())):
        more(1, 0)
    return result()


def _chat_request(model: str, params: RequestParams, timeout: float) -> ChatRequest:
    from pytest_sglang_perf.measurement.client import ChatRequest

    return ChatRequest(model=model, prompt=params.prompt, max_tokens=params.max_tokens,
                       temperature=params.temperature, seed=params.seed, timeout=timeout,
                       ignore_eos=params.ignore_eos)


def _run(base_url: str, request: ChatRequest, params: RequestParams, count: int, warmup: int,
         api_key: str | None, flush_key: str | None, first_number: int) -> list[StreamRecord]:
    """One round of requests; a cold round flushes before each and fails on a prefix-cache hit."""
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush
    from pytest_sglang_perf.measurement.client import RequestFailed, run_requests

    cold = params.prefix_cache == COLD
    records = run_requests(base_url, request, count=count, warmup=warmup, api_key=api_key,
                           flush=CacheFlush(flush_key) if cold else None)
    problem = cold_cache_problem([r.sample for r in records], first_number) if cold else None
    if problem is not None:
        raise RequestFailed(problem)
    return records
