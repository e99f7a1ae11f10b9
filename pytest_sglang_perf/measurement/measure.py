"""One measurement: warmup + repeats of a fixed streamed request, summarised into a `Result`.

Importing this module is cheap: the client (aiohttp) is imported only when `measure()` runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from pytest_sglang_perf.measurement.metrics import GATED_ORDER
from pytest_sglang_perf.measurement.result import RequestParams, Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary, percentile
from pytest_sglang_perf.server.startup import StartupFacts

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.client import StreamRecord

_HASH_CHARS = 16


def prompt_hash(params: RequestParams) -> str:
    """Identifies what was asked (prompt, max_tokens, temperature, seed), not how often (repeats, warmup)."""
    key = json.dumps([params.prompt, params.max_tokens, float(params.temperature), params.seed])
    return hashlib.sha256(key.encode()).hexdigest()[:_HASH_CHARS]


def _summaries(samples: Sequence[Sample], boot_seconds: float, startup: StartupFacts | None) -> dict[str, Summary]:
    """A Summary per metric that every sample has, plus the server's boot costs (one value each)."""
    per_sample = [sample.metrics() for sample in samples]
    names = [name for name in GATED_ORDER if all(name in metrics for metrics in per_sample)]
    summaries = {name: Summary.of(metrics[name] for metrics in per_sample) for name in names}
    summaries["boot_seconds"] = Summary.of([boot_seconds])
    if startup is not None and startup.graph_capture_seconds is not None:
        summaries["graph_capture_seconds"] = Summary.of([startup.graph_capture_seconds])
    return summaries


def _chunk_gaps(records: Sequence[StreamRecord]) -> list[float]:
    return [b - a for record in records for a, b in pairwise(record.chunk_times)]


def build_result(records: Sequence[StreamRecord], *, variant: str, params: RequestParams, boot_seconds: float,
                 simulated: bool, startup: StartupFacts | None = None) -> Result:
    if not records:
        raise ValueError(f"no requests were measured for variant {variant!r}: repeats must be at least 1")
    samples = tuple(record.sample for record in records)
    gaps = _chunk_gaps(records)
    return Result(
        variant=variant, params=params, prompt_hash=prompt_hash(params), samples=samples,
        summaries=_summaries(samples, boot_seconds, startup), boot_seconds=boot_seconds, simulated=simulated,
        startup=startup,
        itl_p50=percentile(gaps, 50) if gaps else None,
        itl_p99=percentile(gaps, 99) if gaps else None,
    )


def measure(base_url: str, *, model: str, variant: str, params: RequestParams, boot_seconds: float,
            simulated: bool, api_key: str | None = None, timeout: float = 600.0,
            startup: StartupFacts | None = None) -> Result:
    """Send params.warmup + params.repeats requests to the server at base_url and summarise the repeats.

    Raises client.RequestFailed if any request fails, is truncated or comes back short.
    """
    from pytest_sglang_perf.measurement.client import ChatRequest, run_requests

    request = ChatRequest(model=model, prompt=params.prompt, max_tokens=params.max_tokens,
                          temperature=params.temperature, seed=params.seed, timeout=timeout)
    records = run_requests(base_url, request, count=params.repeats, warmup=params.warmup, api_key=api_key)
    return build_result(records, variant=variant, params=params, boot_seconds=boot_seconds, simulated=simulated,
                        startup=startup)
