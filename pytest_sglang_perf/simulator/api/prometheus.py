"""`GET /metrics` with `--enable-metrics` (docs/sglang-0.5.23.md §6): the SGLang 0.5.23 metric families a client may
read.

Names, types, HELP texts, label names and histogram buckets are SGLang's (srt/observability/metrics_collector.py,
http_request_metrics.py; tests/sglang_cpu/contract holds them to a real server). Scheduler families carry
`engine_type, model_name, moe_ep_rank, pp_rank, tp_rank` (rank 0 only exports them), tokenizer families
`engine_type, model_name` (+ `is_streaming`). Rendered in the Prometheus text format, labels sorted by name as
SGLang's multiprocess collector writes them. A family with no sample yet is not rendered.

The tokenizer-side families move with the HTTP requests (`SimMetrics`' events); the scheduler-side ones (and the
startup times) come from the engine's frozen snapshot (engine/scheduler_metrics.py), read at each render.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.engine.scheduler_metrics import SchedulerSnapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ENGINE_TYPE = "unified"
"""DisaggregationMode.to_engine_type() without PD disaggregation."""
LATENCY_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
E2E_BUCKETS = (*LATENCY_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
TOKEN_LATENCY_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
                         0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    kind: str
    """gauge, counter or histogram."""
    help: str
    buckets: tuple[float, ...] = ()
    values: dict[Labels, float] = field(default_factory=dict)
    observations: dict[Labels, list[float]] = field(default_factory=dict)

    @classmethod
    def named(cls, name: str) -> Family:
        """An empty family of the table below."""
        kind, help_text, buckets = _SPECS[name]
        return cls(name, kind, help_text, buckets)

    def set(self, labels: Mapping[str, str], value: float) -> None:
        self.values[_key(labels)] = float(value)

    def inc(self, labels: Mapping[str, str], amount: float = 1.0) -> None:
        key = _key(labels)
        self.values[key] = self.values.get(key, 0.0) + amount

    def observe(self, labels: Mapping[str, str], value: float) -> None:
        self.observations.setdefault(_key(labels), []).append(value)

    def render(self) -> list[str]:
        samples = self._samples()
        if not samples:
            return []
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}", *samples]

    def _samples(self) -> list[str]:
        if self.kind != "histogram":
            return [f"{self.name}{_labels(key)} {_number(value)}" for key, value in self.values.items()]
        lines = []
        for key, values in self.observations.items():
            for bound in (*self.buckets, math.inf):
                count = sum(1 for value in values if value <= bound)
                le = "+Inf" if math.isinf(bound) else repr(float(bound))
                lines.append(f"{self.name}_bucket{_labels((*key, ('le', le)))} {_number(count)}")
            lines.append(f"{self.name}_sum{_labels(key)} {_number(sum(values))}")
            lines.append(f"{self.name}_count{_labels(key)} {_number(len(values))}")
        return lines


def _key(labels: Mapping[str, str]) -> Labels:
    return tuple(sorted(labels.items()))


def _labels(key: Iterable[tuple[str, str]]) -> str:
    pairs = sorted(key)
    return "{" + ",".join(f'{name}="{value}"' for name, value in pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    return repr(float(value))


_FAMILIES: tuple[tuple[str, str, str, tuple[float, ...]], ...] = (
    ("sglang:http_requests_active", "gauge", "Number of currently active HTTP requests", ()),
    ("sglang:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.",
     LATENCY_BUCKETS),
    ("sglang:e2e_request_latency_seconds", "histogram", "Histogram of End-to-end request latency in seconds",
     E2E_BUCKETS),
    ("sglang:request_time_per_output_token_seconds", "histogram",
     "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
     TOKEN_LATENCY_BUCKETS),
    ("sglang:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.",
     TOKEN_LATENCY_BUCKETS),
    ("sglang:startup_time_seconds", "gauge", "Engine startup duration by phase in seconds.", ()),
    ("sglang:startup_cuda_graph_time_seconds", "gauge", "CUDA graph capture duration by phase in seconds.", ()),
    ("sglang:http_requests_total", "counter", "Total number of HTTP requests by endpoint and method", ()),
    ("sglang:http_responses_total", "counter", "Total number of HTTP responses by endpoint and status code", ()),
    ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", ()),
    ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", ()),
    ("sglang:spec_verify_calls_total", "counter", "Number of speculative decoding verification calls.", ()),
    ("sglang:num_requests_total", "counter", "Number of requests processed.", ()),
    ("sglang:cuda_graph_passes_total", "counter", "Total number of forward passes categorized by CUDA graph.", ()),
    ("sglang:realtime_tokens_total", "counter",
     "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
     ()),
    ("sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache pool.", ()),
    ("sglang:weight_memory_usage_gb", "gauge", "Memory used by model weights in GB.", ()),
    ("sglang:kv_cache_memory_usage_gb", "gauge", "Memory used by the KV cache pools in GB.", ()),
    ("sglang:graph_memory_usage_gb", "gauge", "Memory used by captured device graphs in GB.", ()),
    ("sglang:context_len", "gauge", "Maximum context length.", ()),
    ("sglang:startup_available_gpu_memory_gb", "gauge", "Available GPU memory in GB at startup.", ()),
    ("sglang:num_running_reqs", "gauge", "The number of running requests.", ()),
    ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", ()),
    ("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", ()),
    ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", ()),
    ("sglang:token_usage", "gauge", "The token usage.", ()),
    ("sglang:num_used_tokens", "gauge", "The number of used tokens.", ()),
    ("sglang:spec_accept_length", "gauge",
     "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).", ()),
    ("sglang:spec_accept_rate", "gauge", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
     ()),
    ("sglang:spec_num_steps", "gauge", "Currently active speculative_num_steps.", ()),
    ("sglang:spec_num_draft_tokens", "gauge",
     "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).", ()),
    ("sglang:is_cuda_graph", "gauge", "Whether the batch is using CUDA graph.", ()),
)


_SPECS = {name: (kind, help_text, buckets) for name, kind, help_text, buckets in _FAMILIES}


class SimMetrics:
    """The metric families of one server: the HTTP side's events move the tokenizer families; `render` adds the
    scheduler's from the engine's snapshot."""

    def __init__(self, model_name: str) -> None:
        self.families = {name: Family.named(name) for name in _SPECS}
        self.tokenizer = {"engine_type": ENGINE_TYPE, "model_name": model_name}
        self.scheduler = {**self.tokenizer, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}

    @classmethod
    def for_server(cls, resolution: Resolution) -> SimMetrics:
        return cls(str(resolution.args.get("served_model_name")))

    def __getitem__(self, name: str) -> Family:
        return self.families["sglang:" + name]

    def render(self, scheduler: SchedulerSnapshot | None) -> str:
        """Every family with a sample, in the table's order; `scheduler` is None before the engine started."""
        published = _Publisher(self.tokenizer, self.scheduler)
        if scheduler is not None:
            published.snapshot(scheduler)
        families = (published.families.get(name, family) for name, family in self.families.items())
        lines = [line for family in families for line in family.render()]
        return "\n".join(lines) + "\n"

    # -- events ------------------------------------------------------------------------------------

    def first_token(self, ttft: float, streaming: bool) -> None:
        self["time_to_first_token_seconds"].observe(self._streaming(streaming), ttft)

    def inter_token(self, gaps: Sequence[float]) -> None:
        for gap in gaps:
            self["inter_token_latency_seconds"].observe(self.tokenizer, gap)

    def finished(self, prompt_tokens: int, completion_tokens: int, e2e: float, decode_seconds: float,
                 verify_ct: int, streaming: bool) -> None:
        labels = self._streaming(streaming)
        self["prompt_tokens_total"].inc(labels, prompt_tokens)
        self["generation_tokens_total"].inc(labels, completion_tokens)
        self["num_requests_total"].inc(labels)
        self["e2e_request_latency_seconds"].observe(labels, e2e)
        if completion_tokens > 1:
            self["request_time_per_output_token_seconds"].observe(labels, decode_seconds / (completion_tokens - 1))
        if verify_ct > 0:
            self["spec_verify_calls_total"].inc(self.tokenizer, verify_ct)

    def http_started(self, endpoint: str, method: str) -> None:
        labels = {"endpoint": endpoint, "method": method}
        self["http_requests_total"].inc(labels)
        self["http_requests_active"].inc(labels)

    def http_finished(self, endpoint: str, method: str, status: int) -> None:
        labels = {"endpoint": endpoint, "method": method}
        self["http_requests_active"].inc(labels, -1)
        self["http_responses_total"].inc({**labels, "status_code": str(status)})

    def _streaming(self, streaming: bool) -> dict[str, str]:
        return {**self.tokenizer, "is_streaming": "true" if streaming else "false"}


class _Publisher:
    """The scheduler-side families of one snapshot."""

    def __init__(self, tokenizer: Mapping[str, str], scheduler: Mapping[str, str]) -> None:
        self.tokenizer, self.scheduler = tokenizer, scheduler
        self.families: dict[str, Family] = {}

    def set(self, name: str, labels: Mapping[str, str], value: float) -> None:
        full = "sglang:" + name
        self.families.setdefault(full, Family.named(full)).set(labels, value)

    def snapshot(self, snapshot: SchedulerSnapshot) -> None:
        self.startup(snapshot)
        self.gauges(snapshot)
        for (kind, graph), passes in snapshot.forward_passes.items():
            mode = f"{kind}_{'cuda_graph' if graph else 'none'}"
            self.set("cuda_graph_passes_total", {**self.scheduler, "mode": mode}, passes)
        for kind, tokens in snapshot.forward_tokens.items():
            mode = "prefill_compute" if kind == "prefill" else "decode"
            self.set("realtime_tokens_total", {**self.scheduler, "mode": mode}, tokens)

    def startup(self, snapshot: SchedulerSnapshot) -> None:
        startup = snapshot.startup
        values = {"max_total_num_tokens": startup.max_total_num_tokens, "context_len": startup.context_len,
                  "weight_memory_usage_gb": startup.weight_gib, "kv_cache_memory_usage_gb": startup.kv_cache_gib,
                  "startup_available_gpu_memory_gb": startup.available_gib}
        for name, value in values.items():
            self.set(name, self.scheduler, value)
        for phase, gib in startup.graph_gib.items():
            self.set("graph_memory_usage_gb", {**self.scheduler, "phase": phase}, gib)
        for phase, seconds in startup.graph_seconds.items():
            self.set("startup_cuda_graph_time_seconds", {**self.tokenizer, "phase": phase}, seconds)
        for phase, seconds in startup.phase_seconds.items():
            self.set("startup_time_seconds", {**self.tokenizer, "phase": phase}, seconds)

    def gauges(self, snapshot: SchedulerSnapshot) -> None:
        """Gauges SGLang refreshes with each prefill batch and decode window."""
        gauges = snapshot.gauges
        values = {"num_running_reqs": gauges.running, "num_queue_reqs": gauges.queued,
                  "gen_throughput": gauges.gen_throughput, "cache_hit_rate": 0.0, "token_usage": gauges.token_usage,
                  "num_used_tokens": gauges.used_tokens, "spec_accept_length": gauges.accept_length,
                  "spec_accept_rate": gauges.accept_rate, "is_cuda_graph": float(gauges.graph),
                  "spec_num_steps": gauges.spec_num_steps, "spec_num_draft_tokens": gauges.spec_num_draft_tokens}
        for name, value in values.items():
            self.set(name, self.scheduler, value)
