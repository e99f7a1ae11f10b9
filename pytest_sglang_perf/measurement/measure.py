"""One measurement: warmup + repeats of a fixed streamed request, summarised into a `Result`.

Importing this module is cheap: the client (aiohttp) is imported only when `measure()` runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from pytest_sglang_perf.measurement.result import RequestParams, Result
from pytest_sglang_perf.measurement.stats import Summary, percentile
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.server.startup import StartupFacts

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.client import StreamRecord

_HASH_CHARS = 16


def prompt_text_hash(prompt: str) -> str:
    """Identifies the prompt's text alone (a cell's identity keeps the request's other fields beside it)."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:_HASH_CHARS]


def prompt_hash(params: RequestParams) -> str:
    """Identifies what was asked (prompt, max_tokens, temperature, seed), not how often (repeats, warmup)."""
    key = json.dumps([params.prompt, params.max_tokens, float(params.temperature), params.seed])
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
            startup: StartupFacts | None = None, decided: Callable[[Result], bool] | None = None) -> Result:
    """Send params.warmup + params.repeats requests to the server at base_url and summarise the repeats.

    The adaptive plan (params.max_repeats set): after the first round, one more request at a time while
    `decided(result so far)` is false, up to params.max_repeats requests. Every request is kept.
    Raises client.RequestFailed if any request fails, is truncated or comes back short.
    """
    from pytest_sglang_perf.measurement.client import ChatRequest, run_requests

    request = ChatRequest(model=model, prompt=params.prompt, max_tokens=params.max_tokens,
                          temperature=params.temperature, seed=params.seed, timeout=timeout,
                          ignore_eos=params.ignore_eos)
    records = list(run_requests(base_url, request, count=params.repeats, warmup=params.warmup, api_key=api_key))

    def result() -> Result:
        return build_result(records, variant=variant, params=params, boot_seconds=boot_seconds,
                            simulated=simulated, startup=startup)

    limit = params.max_repeats or 0
    while len(records) < limit and not (decided is not None and decided(result())):
        records.extend(run_requests(base_url, request, count=1, warmup=0, api_key=api_key))
    return result()
