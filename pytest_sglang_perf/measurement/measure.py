"""One measurement: warmup + repeats of a fixed streamed request, summarised into a `Result`.

Importing this module is cheap: the client (aiohttp) is imported only when `measure()` runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import TYPE_CHECKING

from pytest_sglang_perf.measurement.client_load import ClientLoad, combined
from pytest_sglang_perf.measurement.concurrency import latency_percentiles
from pytest_sglang_perf.measurement.prefix_cache import COLD, WARM, cold_cache_problem
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import BootFacts, Result
from pytest_sglang_perf.measurement.stats import Summary, percentile
from pytest_sglang_perf.measurement.values import measures_prefill, metric_values, result_coverage

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.client import ChatRequest, StreamRecord

_HASH_CHARS = 16


def prompt_text_hash(prompt: str) -> str:
    """Identifies the prompt's text alone (a cell's identity keeps the request's other fields beside it)."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:_HASH_CHARS]


def prompt_hash(params: RequestParams) -> str:
    """Identifies what was asked (prompt, max_tokens, temperature, seed; a warm prefix cache; an exact prompt
    length), not how often (repeats, warmup). A cold measurement of a prompt of the test's own hashes as before the
    prefix cache and exact lengths existed."""
    fields: list[object] = [params.prompt, params.max_tokens, float(params.temperature), params.seed]
    if params.prefix_cache == WARM:
        fields.append(WARM)
    if params.prompt_tokens is not None:
        fields.append({"prompt_tokens": params.prompt_tokens})
    key = json.dumps(fields)
    return hashlib.sha256(key.encode()).hexdigest()[:_HASH_CHARS]


def _chunk_gaps(records: Sequence[StreamRecord]) -> list[float]:
    return [b - a for record in records for a, b in pairwise(record.chunk_times)]


def build_result(records: Sequence[StreamRecord], *, variant: str, params: RequestParams, boot_seconds: float | None,
                 simulated: bool, startup: BootFacts | None = None) -> Result:
    if not records:
        raise ValueError(f"no requests were measured for variant {variant!r}: repeats must be at least 1")
    samples = tuple(record.sample for record in records)
    gaps = _chunk_gaps(records)
    prefill = measures_prefill(params.prompt_tokens, params.prefix_cache)
    values = metric_values(samples, boot_seconds, None if startup is None else startup.graph_capture_seconds,
                           params.slo, prefill=prefill)
    return Result(
        variant=variant, params=params, prompt_hash=prompt_hash(params), samples=samples,
        summaries={name: Summary.of(v) for name, v in values.items()}, boot_seconds=boot_seconds,
        simulated=simulated, startup=startup,
        itl_p50=percentile(gaps, 50) if gaps else None,
        itl_p99=percentile(gaps, 99) if gaps else None,
        values=values,
        percentiles=latency_percentiles(samples, gaps),
        coverage=result_coverage(samples, prefill),
    )


def measure(base_url: str, *, model: str, variant: str, params: RequestParams, boot_seconds: float | None,
            simulated: bool, api_key: str | None = None, timeout: float = 600.0,
            startup: BootFacts | None = None, decided: Callable[[Result], bool] | None = None,
            flush_key: str | None = None) -> Result:
    """Send params.warmup + params.repeats requests to the server at base_url and summarise the repeats.

    The adaptive plan (params.max_repeats set): after the first round, one more request at a time while
    `decided(result so far)` is false, up to params.max_repeats requests. Every request is kept.
    With params.concurrency N > 1, each of those is a round of N streams sent at once (`_run_rounds`).
    With params.prefix_cache "cold" each request (the warmup too) follows a `/flush_cache` (with `flush_key`, the
    server's --admin-api-key, when it has one) and must report no prefix-cache hit.
    With params.prompt_tokens set, every request's usage must count exactly that many prompt tokens.
    Raises client.RequestFailed if any request fails, is truncated, comes back short, hit a cache meant cold or
    was not the exact length asked.
    """
    request = chat_request(model, params, timeout)
    records: list[StreamRecord] = []
    target = _Target(base_url, api_key, flush_key)

    def measured() -> int:
        """Requests measured so far (one stream), or rounds (concurrency N)."""
        return len(records) // params.concurrency

    def more(count: int, warmup: int) -> None:
        if params.concurrency > 1:
            records.extend(_run_rounds(target, request, params, count, warmup, measured()))
        else:
            records.extend(_run(target, request, params, count, warmup, measured() + 1))

    def result() -> Result:
        built = build_result(records, variant=variant, params=params, boot_seconds=boot_seconds,
                             simulated=simulated, startup=startup)
        return replace(built, client=combined(target.loads))

    more(params.repeats, params.warmup)
    limit = params.max_repeats or 0
    while measured() < limit and not (decided is not None and decided(result())):
        more(1, 0)
    return result()


def chat_request(model: str, params: RequestParams, timeout: float) -> ChatRequest:
    """The request a measurement sends for `params` (and `cross_check` sends through the openai package)."""
    from pytest_sglang_perf.measurement.client import ChatRequest

    return ChatRequest(model=model, prompt=params.prompt, max_tokens=params.max_tokens,
                       temperature=params.temperature, seed=params.seed, timeout=timeout,
                       ignore_eos=params.ignore_eos)


def stream_prompt(prompt: str, stream: int, streams: int) -> str:
    """The prompt of stream `stream` (0-based) of a concurrent round: a label of its own first, so that no two
    streams of a round share a prefix beyond the chat template's (each prefills its prompt cold)."""
    return f"[{stream + 1}/{streams}] {prompt}"


@dataclass
class _Target:
    """Where the requests go, and the client's condition over each call so far (loop_lag.py)."""

    base_url: str
    api_key: str | None
    flush_key: str | None
    """The server's --admin-api-key, for /flush_cache."""
    loads: list[ClientLoad] = field(default_factory=list)


def _run_rounds(target: _Target, request: ChatRequest, params: RequestParams, count: int, warmup: int,
                first_round: int) -> list[StreamRecord]:
    """Rounds of params.concurrency streams at once; each sample knows its round and its start within the round.
    A cold round follows a /flush_cache. Its streams may read the chat template's few tokens that they share from
    the cache (SGLang's radix cache serves them to the later ones); the samples keep those counts."""
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush
    from pytest_sglang_perf.measurement.rounds import run_rounds

    n = params.concurrency
    streams = [replace(request, prompt=stream_prompt(request.prompt, k, n)) for k in range(n)]
    rounds = run_rounds(target.base_url, streams, count=count, warmup=warmup, api_key=target.api_key,
                        flush=CacheFlush(target.flush_key) if params.prefix_cache == COLD else None,
                        loads=target.loads)
    return [_placed(record, first_round + index, min(r.sent_at for r in records))
            for index, records in enumerate(rounds) for record in records]


def _placed(record: StreamRecord, round_index: int, round_start: float) -> StreamRecord:
    sample = replace(record.sample, round=round_index, start=record.sent_at - round_start)
    return replace(record, sample=sample)


def _run(target: _Target, request: ChatRequest, params: RequestParams, count: int, warmup: int,
         first_number: int) -> list[StreamRecord]:
    """One round of requests; a cold round flushes before each and fails on a prefix-cache hit."""
    from pytest_sglang_perf.measurement.cache_flush import CacheFlush
    from pytest_sglang_perf.measurement.client import RequestFailed
    from pytest_sglang_perf.measurement.rounds import run_requests

    cold = params.prefix_cache == COLD
    records = run_requests(target.base_url, request, count=count, warmup=warmup, api_key=target.api_key,
                           flush=CacheFlush(target.flush_key) if cold else None, loads=target.loads)
    problem = cold_cache_problem([r.sample for r in records], first_number) if cold else None
    if problem is None:
        problem = length_problem([r.sample.prompt_tokens for r in records], params.prompt_tokens)
    if problem is not None:
        raise RequestFailed(problem)
    return records


def length_problem(counted: Sequence[int], asked: int | None) -> str | None:
    """Why requests of a prompt built to be `asked` tokens long were not, by the server's own usage count; None when
    every one was (or no length was asked)."""
    wrong = sorted({value for value in counted if value != asked})
    if asked is None or not wrong:
        return None
    return (f"the prompt built for prompt_tokens={asked} (counted {asked} by the server's /v1/tokenize) came back "
            f"with usage.prompt_tokens {', '.join(map(str, wrong))}: this server's tokenize endpoint and its chat "
            "completions count the prompt differently, so no exact length can be promised here")
