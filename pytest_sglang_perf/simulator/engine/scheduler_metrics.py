"""The scheduler's side of `--enable-metrics`: what it publishes once at startup, its gauges as of its last log
line (a prefill batch or a decode window, when SGLang's scheduler refreshes them) and its forward-pass counters.

The engine keeps them; `/metrics` renders a frozen `SchedulerSnapshot` of them (api/prometheus.py), so that the
HTTP side never reads the engine's insides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pytest_sglang_perf.simulator.args.speculative import SpecConfig
from pytest_sglang_perf.simulator.engine.batcher import Batcher
from pytest_sglang_perf.simulator.engine.boot import GRAPH_PHASES
from pytest_sglang_perf.simulator.engine.info import graph_memory
from pytest_sglang_perf.simulator.engine.setup import EngineSetup


@dataclass(frozen=True)
class StartupFigures:
    """Sizes (GiB) and durations (s) fixed at startup."""

    max_total_num_tokens: int
    context_len: int
    weight_gib: float
    kv_cache_gib: float
    available_gib: float
    graph_gib: Mapping[str, float]
    """Device-graph memory of each phase (boot.GRAPH_PHASES)."""
    graph_seconds: Mapping[str, float]
    """Capture time of each graph phase."""
    phase_seconds: Mapping[str, float]
    """load_weight, kv_cache_allocation, scheduler_e2e, tokenizer_e2e."""

    @classmethod
    def of(cls, setup: EngineSetup) -> StartupFigures:
        memory, startup = setup.memory, setup.scheduler_startup
        phases = {"load_weight": startup.load_weight, "kv_cache_allocation": startup.kv_cache_allocation,
                  "scheduler_e2e": startup.scheduler_e2e, "tokenizer_e2e": setup.tokenizer_e2e}
        return cls(memory.kv_tokens, setup.resolution.context_len, memory.weight_gib, 2 * memory.kv_gib_each,
                   memory.final_gib, graph_memory(setup),
                   {phase: startup.cuda_graph.get(phase, 0.0) for phase in GRAPH_PHASES}, phases)


@dataclass(frozen=True)
class SchedulerGauges:
    """The scheduler's gauges at one moment."""

    running: int
    queued: int
    gen_throughput: float
    token_usage: float
    used_tokens: int
    accept_length: float
    accept_rate: float
    graph: bool
    """Whether a decode step of the running batch runs as a device graph."""
    spec_num_steps: int
    spec_num_draft_tokens: int

    @classmethod
    def read(cls, batcher: Batcher, spec: SpecConfig | None) -> SchedulerGauges:
        stats, used = batcher.stats, batcher.running_tokens
        return cls(
            running=batcher.running, queued=batcher.queued, gen_throughput=stats.last_gen_throughput,
            token_usage=round(used / max(1, stats.max_total_tokens), 2), used_tokens=used,
            accept_length=stats.last_accept_length or 0.0, accept_rate=stats.last_accept_rate or 0.0,
            graph=batcher.pacing.costs.uses_decode_graph(batcher.running),
            spec_num_steps=spec.num_steps if spec is not None else 0,
            spec_num_draft_tokens=spec.num_draft_tokens if spec is not None else 0,
        )


@dataclass(frozen=True)
class SchedulerSnapshot:
    """What `/metrics` shows of the scheduler."""

    startup: StartupFigures
    gauges: SchedulerGauges
    forward_passes: Mapping[tuple[str, bool], int]
    """Passes by ("prefill" or "decode", whether a device graph ran it), in the order they first ran."""
    forward_tokens: Mapping[str, int]
    """New tokens by "prefill" or "decode", in the order they first ran."""


class SchedulerMetrics:
    """The counters and the latest gauges, as the scheduler loop moves them."""

    def __init__(self, startup: StartupFigures, gauges: SchedulerGauges) -> None:
        self.startup, self.gauges = startup, gauges
        self._passes: dict[tuple[str, bool], int] = {}
        self._tokens: dict[str, int] = {}

    def forward(self, kind: str, graph: bool, tokens: int) -> None:
        """One prefill or decode forward pass of `tokens` new tokens (the batcher's `on_forward`)."""
        self._passes[kind, graph] = self._passes.get((kind, graph), 0) + 1
        self._tokens[kind] = self._tokens.get(kind, 0) + tokens

    def snapshot(self) -> SchedulerSnapshot:
        return SchedulerSnapshot(self.startup, self.gauges, MappingProxyType(dict(self._passes)),
                                 MappingProxyType(dict(self._tokens)))
