"""`GET /metrics` with `--enable-metrics` (reference §6): the SGLang 0.5.23 metric families a client may read.

Names, types, HELP texts, label names and histogram buckets are SGLang's (srt/observability/metrics_collector.py,
http_request_metrics.py; tests/sglang_cpu/contract holds them to a real server). Scheduler families carry
`engine_type, model_name, moe_ep_rank, pp_rank, tp_rank` (rank 0 only exports them), tokenizer families
`engine_type, model_name` (+ `is_streaming`). Rendered in the Prometheus text format, labels sorted by name as
SGLang's multiprocess collector writes them. A family with no sample yet is not rendered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang_perf.simulator.args.resolve import Resolution

if TYPE_CHECKING:
    from pytest_sglang_perf.simulator.engine.engine import SimEngine

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ENGINE_TYPE = "unified"
"""DisaggregationMode.to_engine_type() without PD disaggregation."""
LATENCY_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
E2E_BUCKETS = (*LATENCY_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
TOKEN_LATENCY_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
                         0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
STARTUP_PHASES = ("load_weight", "kv_cache_allocation", "scheduler_e2e")

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


class SimMetrics:
    """The metric families of one server and the events that move them."""

    def __init__(self, model_name: str) -> None:
        self.families = {name: Family(name, kind, help_text, buckets)
                         for name, kind, help_text, buckets in _FAMILIES}
        self.tokenizer = {"engine_type": ENGINE_TYPE, "model_name": model_name}
        self.scheduler = {**self.tokenizer, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}

    @classmethod
    def for_server(cls, resolution: Resolution) -> SimMetrics:
        return cls(str(resolution.args.get("served_model_name")))

    def __getitem__(self, name: str) -> Family:
        return self.families["sglang:" + name]

    def render(self) -> str:
        lines = [line for family in self.families.values() for line in family.render()]
        return "\n".join(lines) + "\n"

    # -- events ------------------------------------------------------------------------------------

    def startup(self, engine: SimEngine) -> None:
        setup = engine.setup
        memory, startup = setup.memory, setup.scheduler_startup
        values = {"max_total_num_tokens": memory.kv_tokens, "context_len": setup.resolution.context_len,
                  "weight_memory_usage_gb": memory.weight_gib, "kv_cache_memory_usage_gb": 2 * memory.kv_gib_each,
                  "startup_available_gpu_memory_gb": memory.final_gib}
        for name, value in values.items():
            self[name].set(self.scheduler, value)
        graph_memory = engine.internal_state()["memory_usage"]["graph"]
        for phase in GRAPH_PHASES:
            self["graph_memory_usage_gb"].set({**self.scheduler, "phase": phase}, graph_memory.get(phase, 0.0))
            self["startup_cuda_graph_time_seconds"].set({**self.tokenizer, "phase": phase},
                                                        startup.cuda_graph.get(phase, 0.0))
        times = {"load_weight": startup.load_weight, "kv_cache_allocation": startup.kv_cache_allocation,
                 "scheduler_e2e": startup.scheduler_e2e, "tokenizer_e2e": setup.tokenizer_e2e}
        for phase, seconds in times.items():
            self["startup_time_seconds"].set({**self.tokenizer, "phase": phase}, seconds)
        self.scheduler_update(engine)

    def scheduler_update(self, engine: SimEngine) -> None:
        """Gauges SGLang refreshes with each prefill batch and decode window."""
        batcher, stats = engine.batcher, engine.stats
        running_tokens = batcher.running_tokens
        gauges = {"num_running_reqs": batcher.running, "num_queue_reqs": batcher.queued,
                  "gen_throughput": stats.last_gen_throughput, "cache_hit_rate": 0.0,
                  "token_usage": round(running_tokens / max(1, stats.max_total_tokens), 2),
                  "num_used_tokens": running_tokens,
                  "spec_accept_length": stats.last_accept_length or 0.0,
                  "spec_accept_rate": stats.last_accept_rate or 0.0,
                  "is_cuda_graph": float(engine.costs.uses_decode_graph(batcher.running))}
        spec = engine.setup.resolution.spec
        gauges["spec_num_steps"] = spec.num_steps if spec is not None else 0
        gauges["spec_num_draft_tokens"] = spec.num_draft_tokens if spec is not None else 0
        for name, value in gauges.items():
            self[name].set(self.scheduler, value)

    def forward(self, kind: str, graph: bool, tokens: int) -> None:
        """One prefill or decode forward pass of `tokens` new tokens."""
        self["cuda_graph_passes_total"].inc({**self.scheduler, "mode": f"{kind}_{'cuda_graph' if graph else 'none'}"})
        mode = "prefill_compute" if kind == "prefill" else "decode"
        self["realtime_tokens_total"].inc({**self.scheduler, "mode": mode}, tokens)

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
