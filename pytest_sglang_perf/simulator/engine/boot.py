"""The scheduler's boot, as SGLang 0.5.23 logs it (docs/sglang-0.5.23.md §2.1, §7.1).

Order (managers/scheduler.py::Scheduler.__init__ / init_model_worker): MoE/GEMM config checks (where
`--enable-single-batch-overlap` fails on SM90), target weights, draft weights, KV cache pools, then every CUDA graph
(target prefill, target decode or verify, draft decode and extend), then the `max_total_num_tokens=...` summary.
The HTTP port is opened only after these phases; the warmup runs after it (process/server.py).

Durations: `--sim-boot-seconds` is launch -> ready in total, split into phase shares (weights 40%, KV cache 10%,
CUDA graphs 35%, warmup 15%; without captured graphs their share goes to warmup). `--sim-load-seconds` and
`--sim-capture-seconds` fix those phases; the other phases share what is left of the total.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.log_wordings import LogWording, wording_for
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.sglang_facts.rules import DEFAULT_VERSION, load_rules
from pytest_sglang_perf.simulator.args.faults import Faults
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.args.memory import NOT_ENOUGH_MEMORY, MemoryPlan
from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.args.speculative import draft_architecture
from pytest_sglang_perf.simulator.engine.crash import (
    SchedulerCrash,
    not_enough_memory,
    out_of_memory_while_loading,
    sbo_on_sm90,
)
from pytest_sglang_perf.simulator.engine.schedule import jitter_factor
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes

Sleep = Callable[[float], Awaitable[None]]
NO_FAULTS = Faults()

GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
SHARES: Mapping[str, float] = {"load": 0.40, "kv": 0.10, "graphs": 0.35, "warmup": 0.15}
DRAFT_LOAD_SHARE = 0.25
"""Share of the weight-loading time spent on an EAGLE / MTP draft model."""
MSG_PREFILL_NO_SIZES = "Disable prefill CUDA graph because the capture size is not set"
_KV_DTYPES = {"float16": "torch.float16", "half": "torch.float16", "float32": "torch.float32",
              "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}


@dataclass(frozen=True)
class BootPlan:
    load_weight: float
    draft_load_weight: float
    kv_cache: float
    graphs: Mapping[str, float]
    """Capture seconds of each graph phase that is captured."""
    warmup: float

    @classmethod
    def split(cls, total: float, resolution: Resolution, decode_captured: bool, load_seconds: float | None = None,
              capture_seconds: float | None = None) -> BootPlan:
        phases = _captured_phases(resolution, decode_captured)
        shares = dict(SHARES)
        if not phases:
            shares["warmup"] += shares.pop("graphs")
        fixed = {"load": load_seconds, "graphs": capture_seconds if phases else None}
        durations = _durations(total, shares, {k: v for k, v in fixed.items() if v is not None and k in shares})
        draft = resolution.spec is not None and resolution.spec.is_eagle_family
        load = durations["load"]
        graphs = durations.get("graphs", 0.0)
        return cls(
            load_weight=load * (1 - DRAFT_LOAD_SHARE if draft else 1.0),
            draft_load_weight=load * DRAFT_LOAD_SHARE if draft else 0.0, kv_cache=durations["kv"],
            graphs={phase: graphs / len(phases) for phase in phases}, warmup=durations["warmup"],
        )

    @classmethod
    def for_knobs(cls, knobs: Knobs, resolution: Resolution, decode_captured: bool) -> BootPlan:
        """The knobs' durations, every one times (1 + slowdown) and the per-boot noise."""
        scale = knobs.time_scale * jitter_factor(random.Random(f"{knobs.noise_seed}|boot"), knobs.noise)
        load = None if knobs.load_seconds is None else knobs.load_seconds * scale
        capture = None if knobs.capture_seconds is None else knobs.capture_seconds * scale
        return cls.split(knobs.boot_seconds * scale, resolution, decode_captured, load, capture)


def _durations(total: float, shares: Mapping[str, float], fixed: Mapping[str, float]) -> dict[str, float]:
    """Fixed phases keep their seconds; the others share what is left of `total` by their shares."""
    rest = max(0.0, total - sum(fixed.values()))
    free = {name: share for name, share in shares.items() if name not in fixed}
    weight = sum(free.values()) or 1.0
    return {name: fixed[name] if name in fixed else rest * share / weight for name, share in shares.items()}


def _captured_phases(resolution: Resolution, decode_captured: bool) -> tuple[str, ...]:
    plan, spec = resolution.cuda_graph, resolution.spec
    phases: list[str] = []
    if plan.prefill.enabled and plan.prefill.bs:
        phases.append("prefill")
    if plan.decode.enabled and decode_captured:
        phases.append("target_verify" if spec is not None else "decode")
    if spec is not None and spec.is_eagle_family and plan.decode.enabled and decode_captured:
        phases.extend(("draft_decode", "draft_extend") if spec.num_steps > 1 else ("draft_extend",))
    return tuple(phases)


@dataclass(frozen=True)
class StartupTime:
    load_weight: float
    kv_cache_allocation: float
    scheduler_e2e: float
    cuda_graph: Mapping[str, float]

    def to_dict(self) -> dict[str, object]:
        return {"load_weight": self.load_weight, "kv_cache_allocation": self.kv_cache_allocation,
                "scheduler_e2e": self.scheduler_e2e,
                "cuda_graph": {phase: self.cuda_graph.get(phase, 0.0) for phase in GRAPH_PHASES}}


def engine_startup_line(startup: StartupTime, tokenizer_e2e: float) -> str:
    graphs = ", ".join(f"{phase}={startup.cuda_graph.get(phase, 0.0):.2f}" for phase in GRAPH_PHASES)
    return (f"Engine startup timings (s): load_weight={startup.load_weight:.2f}, "
            f"kv_cache_allocation={startup.kv_cache_allocation:.2f}, scheduler_e2e={startup.scheduler_e2e:.2f}, "
            f"cuda_graph={{{graphs}}}, tokenizer_e2e={tokenizer_e2e:.2f}")


SBO_FLAG = "--enable-single-batch-overlap"


def scheduler_init_check(resolution: Resolution, model: ModelConfig, gpu: Gpu) -> SchedulerCrash | None:
    """What fails in Scheduler.__init__ before any weight loads: SBO on an SM90 GPU for a model whose text config
    has an MoE top-k (docs/sglang-0.5.23.md §8.5), by the same rule the pre-flight check applies
    (sglang_facts/data/sglang-<version>-rules.json `fatal_on_gpu`)."""
    if not resolution.args.get("enable_single_batch_overlap"):
        return None
    for rule in load_rules(DEFAULT_VERSION).fatal_on_gpu:  # the version the simulator models
        if rule.flag == SBO_FLAG and gpu.sm in rule.sm and (
                rule.model is None or rule.model.matches_fields(model.text_keys, model.text_model_type)):
            return sbo_on_sm90()
    return None


def scheduler_ranks(resolution: Resolution) -> tuple[str, ...]:
    """The log prefix of every scheduler rank, rank 0 first."""
    args = resolution.args
    return rank_prefixes(resolution.tp_size, int(args.get("pp_size") or 1), int(args.get("dp_size") or 1))


class SchedulerBoot:
    """Logs and waits through the boot phases of every scheduler rank (run by the main process).

    Raises crash.SchedulerCrash where a real scheduler would raise; `hang-at-boot` waits forever in the first
    CUDA-graph capture (or after the KV cache when nothing is captured)."""

    def __init__(self, resolution: Resolution, model: ModelConfig, memory: MemoryPlan, plan: BootPlan,
                 log: SimLogger, sleep: Sleep, gpu: Gpu, faults: Faults = NO_FAULTS,
                 wording: LogWording | None = None) -> None:
        self.resolution, self.model, self.memory, self.plan = resolution, model, memory, plan
        self.log, self.sleep, self.gpu, self.faults = log, sleep, gpu, faults
        self.wording = wording or wording_for(DEFAULT_VERSION)
        """The played release's wordings of the capture lines (sglang_facts/log_wordings.py)."""
        self.ranks = scheduler_ranks(resolution)
        self.graph_times: dict[str, float] = {}

    async def run(self) -> StartupTime:
        tic = time.perf_counter()
        crash = scheduler_init_check(self.resolution, self.model, self.gpu)
        if crash is not None:
            raise crash
        load = await self._load_weights(self.model.architecture, self.memory.free_gib, self.memory.weight_gib,
                                         self.plan.load_weight, self.faults.crash_at_boot)
        spec = self.resolution.spec
        if self.plan.draft_load_weight > 0 and spec is not None:
            load += await self._load_weights(draft_architecture(spec, self.model.architecture),
                                             self.memory.after_weights_gib, self.memory.draft_weight_gib,
                                             self.plan.draft_load_weight)
        kv = await self._kv_cache()
        if not self.plan.graphs:
            await self._maybe_hang()
        graphs = (self._decode_graph, self._prefill_graph) if self.wording.decode_first else \
            (self._prefill_graph, self._decode_graph)
        for capture in graphs:
            await capture()
        if spec is not None and spec.is_eagle_family:
            await self._draft_graphs()
        self._summary_line()
        return StartupTime(load, kv, time.perf_counter() - tic, dict(self.graph_times))

    def _all_ranks(self, message: str) -> None:
        for prefix in self.ranks:
            self.log.info(message, prefix)

    def _rank0(self, message: str) -> None:
        self.log.info(message, self.ranks[0])

    async def _load_weights(self, kind: str, avail: float, usage: float, seconds: float, crash: bool = False) -> float:
        tic = time.perf_counter()
        self._all_ranks(f"Load weight begin. avail mem={avail:.2f} GB")
        if crash:
            await self.sleep(seconds / 2)
            raise out_of_memory_while_loading(self.gpu, max(usage / 8, 0.01))
        await self.sleep(seconds)
        elapsed = time.perf_counter() - tic
        self._all_ranks(f"Load weight end. elapsed={elapsed:.2f} s, type={kind}, avail mem={avail - usage:.2f} GB, "
                        f"mem usage={usage:.2f} GB.")
        return elapsed

    async def _kv_cache(self) -> float:
        memory = self.memory
        if memory.kv_tokens <= 0:
            raise not_enough_memory(NOT_ENOUGH_MEMORY)
        tic = time.perf_counter()
        dtype = _KV_DTYPES.get(str(self.resolution.args.get("kv_cache_dtype")), _KV_DTYPES.get(
            self.model.dtype, "torch.bfloat16"))
        self._all_ranks(f"KV Cache is allocated. dtype: {dtype}, #tokens: {memory.kv_tokens}, "
                        f"K size: {memory.kv_gib_each:.2f} GB, V size: {memory.kv_gib_each:.2f} GB")
        await self.sleep(self.plan.kv_cache)
        self._all_ranks(f"Memory pool end. avail mem={memory.after_kv_gib:.2f} GB")
        return time.perf_counter() - tic

    async def _prefill_graph(self) -> None:
        prefill, words = self.resolution.cuda_graph.prefill, self.wording
        if not prefill.enabled:
            self._all_ranks(words.prefill_disabled)
            return
        if "prefill" not in self.plan.graphs:
            self.log.warning(MSG_PREFILL_NO_SIZES, self.ranks[0])
            return
        avail, usage = self.memory.after_kv_gib, self.memory.prefill_graph_gib
        sizes = {"backend": prefill.backend, "num_tokens": list(prefill.bs or ()), "avail": avail}
        self._all_ranks(words.prefill_begin.format(**sizes))
        if words.prefill_sizes is not None:
            self._rank0(words.prefill_sizes.format(**sizes))
        elapsed = await self._capture("prefill")
        self._all_ranks(words.prefill_end.format(elapsed=elapsed, usage=usage, after=avail - usage))

    async def _decode_graph(self) -> None:
        spec, words = self.resolution.spec, self.wording
        phase = "target_verify" if spec is not None else "decode"
        if phase not in self.plan.graphs:
            return
        avail, usage = self.memory.after_prefill_graph_gib, self.memory.decode_graph_gib
        fields = {"name": "target verify" if spec is not None else "target decode",
                  "graph": words.graph(self.resolution.args.get("device")),
                  "backend": self.resolution.cuda_graph.decode.backend,
                  "per_req": spec.num_draft_tokens if spec is not None else 1,
                  "bs": list(self.memory.decode_capture_bs), "avail": avail}
        self._all_ranks(words.decode_begin.format(**fields))
        if words.decode_sizes is not None:
            self._rank0(words.decode_sizes.format(**fields))
        elapsed = await self._capture(phase)
        self._all_ranks(words.decode_end.format(**fields, elapsed=elapsed, usage=usage, after=avail - usage))

    async def _draft_graphs(self) -> None:
        spec, words = self.resolution.spec, self.wording
        assert spec is not None
        backend = self.resolution.cuda_graph.decode.backend
        bs = list(self.memory.decode_capture_bs)
        avail = self.memory.after_decode_graph_gib
        for phase, name, per_req in (("draft_decode", "decode", spec.eagle_topk),
                                     ("draft_extend", "extend", spec.num_draft_tokens)):
            if phase not in self.plan.graphs:
                continue
            fields = {"draft_name": words.draft_names[name], "backend": backend, "per_req": per_req, "bs": bs}
            self._rank0(words.draft_begin.format(**fields, avail=avail))
            elapsed = await self._capture(phase)
            usage = self.memory.draft_graph_gib / 2
            avail -= usage
            self._rank0(words.draft_end.format(**fields, elapsed=elapsed, usage=usage, after=avail))

    async def _capture(self, phase: str) -> float:
        tic = time.perf_counter()
        await self._maybe_hang()
        await self.sleep(self.plan.graphs[phase])
        elapsed = time.perf_counter() - tic
        self.graph_times[phase] = elapsed
        return elapsed

    async def _maybe_hang(self) -> None:
        """The `hang-at-boot` fault: a capture that never returns (a signal still stops the process)."""
        if self.faults.hang_at_boot:
            await asyncio.Event().wait()

    def _summary_line(self) -> None:
        args = self.resolution.args
        line = (f"max_total_num_tokens={self.memory.kv_tokens}, "
                f"chunked_prefill_size={args.get('chunked_prefill_size')}, "
                f"max_prefill_tokens={args.get('max_prefill_tokens')}, "
                f"max_running_requests={self.memory.max_running_requests}, "
                f"context_len={self.resolution.context_len}, available_gpu_mem={self.memory.final_gib:.2f} GB")
        tp = self.resolution.tp_size
        for index in range(0, len(self.ranks), tp):
            self.log.info(line, self.ranks[index])
