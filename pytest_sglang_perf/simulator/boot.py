"""The scheduler's boot, as SGLang 0.5.23 logs it: weights, KV cache, CUDA-graph captures (§7.1).

`--sim-boot-seconds` is the whole launch -> ready time, split into phases; the HTTP port is opened only
after these phases, and the warmup share runs after it (see app.py / cli.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes
from pytest_sglang_perf.simulator.memory import NOT_ENOUGH_MEMORY, MemoryPlan
from pytest_sglang_perf.simulator.model import ModelConfig
from pytest_sglang_perf.simulator.resolve import Resolution
from pytest_sglang_perf.simulator.speculative import draft_architecture

Sleep = Callable[[float], Awaitable[None]]

GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
SHARE_LOAD, SHARE_KV, SHARE_GRAPHS, SHARE_WARMUP = 0.40, 0.10, 0.35, 0.15
MSG_PREFILL_DISABLED = ("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
                        "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
MSG_PREFILL_NO_SIZES = "Disable prefill CUDA graph because the capture size is not set"
_KV_DTYPES = {"float16": "torch.float16", "half": "torch.float16", "float32": "torch.float32",
              "fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}


class BootError(RuntimeError):
    """The scheduler cannot start (e.g. no memory left for the KV cache)."""


@dataclass(frozen=True)
class BootPlan:
    load_weight: float
    draft_load_weight: float
    kv_cache: float
    graphs: Mapping[str, float]
    """Capture seconds of each graph phase that is captured."""
    warmup: float

    @classmethod
    def split(cls, total: float, resolution: Resolution, decode_captured: bool) -> BootPlan:
        draft = resolution.spec is not None and resolution.spec.is_eagle_family
        phases = _captured_phases(resolution, decode_captured)
        graph_total = total * SHARE_GRAPHS
        load = total * SHARE_LOAD
        return cls(
            load_weight=load * (0.75 if draft else 1.0), draft_load_weight=load * 0.25 if draft else 0.0,
            kv_cache=total * SHARE_KV,
            graphs={phase: graph_total / len(phases) for phase in phases} if phases else {},
            warmup=total * SHARE_WARMUP if phases else total * (SHARE_WARMUP + SHARE_GRAPHS),
        )


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


class SchedulerBoot:
    """Logs and waits through the boot phases of every scheduler rank (run by the main process)."""

    def __init__(self, resolution: Resolution, model: ModelConfig, memory: MemoryPlan, plan: BootPlan,
                 log: SimLogger, sleep: Sleep) -> None:
        self.resolution, self.model, self.memory, self.plan = resolution, model, memory, plan
        self.log, self.sleep = log, sleep
        args = resolution.args
        self.ranks = rank_prefixes(resolution.tp_size, int(args.get("pp_size") or 1), int(args.get("dp_size") or 1))
        self.graph_times: dict[str, float] = {}

    async def run(self) -> StartupTime:
        tic = time.perf_counter()
        load = await self._load_weights(self.model.architecture, self.memory.free_gib, self.memory.weight_gib,
                                         self.plan.load_weight)
        kv = await self._kv_cache()
        await self._prefill_graph()
        await self._decode_graph()
        if self.plan.draft_load_weight > 0 and self.resolution.spec is not None:
            draft = draft_architecture(self.resolution.spec, self.model.architecture)
            load += await self._load_weights(draft, self.memory.after_decode_graph_gib,
                                             self.memory.draft_weight_gib, self.plan.draft_load_weight)
            await self._draft_graphs()
        self._summary_line()
        return StartupTime(load, kv, time.perf_counter() - tic, dict(self.graph_times))

    def _all_ranks(self, message: str) -> None:
        for prefix in self.ranks:
            self.log.info(message, prefix)

    def _rank0(self, message: str) -> None:
        self.log.info(message, self.ranks[0])

    async def _load_weights(self, kind: str, avail: float, usage: float, seconds: float) -> float:
        tic = time.perf_counter()
        self._all_ranks(f"Load weight begin. avail mem={avail:.2f} GB")
        await self.sleep(seconds)
        elapsed = time.perf_counter() - tic
        self._all_ranks(f"Load weight end. elapsed={elapsed:.2f} s, type={kind}, avail mem={avail - usage:.2f} GB, "
                        f"mem usage={usage:.2f} GB.")
        return elapsed

    async def _kv_cache(self) -> float:
        memory = self.memory
        if memory.kv_tokens <= 0:
            raise BootError(NOT_ENOUGH_MEMORY)
        tic = time.perf_counter()
        dtype = _KV_DTYPES.get(str(self.resolution.args.get("kv_cache_dtype")), _KV_DTYPES.get(
            self.model.dtype, "torch.bfloat16"))
        self._all_ranks(f"KV Cache is allocated. dtype: {dtype}, #tokens: {memory.kv_tokens}, "
                        f"K size: {memory.kv_gib_each:.2f} GB, V size: {memory.kv_gib_each:.2f} GB")
        await self.sleep(self.plan.kv_cache)
        self._all_ranks(f"Memory pool end. avail mem={memory.after_kv_gib:.2f} GB")
        return time.perf_counter() - tic

    async def _prefill_graph(self) -> None:
        prefill = self.resolution.cuda_graph.prefill
        if not prefill.enabled:
            self._all_ranks(MSG_PREFILL_DISABLED)
            return
        if "prefill" not in self.plan.graphs:
            self.log.warning(MSG_PREFILL_NO_SIZES, self.ranks[0])
            return
        avail = self.memory.after_kv_gib
        self._all_ranks(f"Capture target prefill CUDA graph begin. backend={prefill.backend}, "
                        f"num_tokens={list(prefill.bs or ())}, avail mem={avail:.2f} GB")
        elapsed = await self._timed_sleep("prefill")
        usage = self.memory.prefill_graph_gib
        self._all_ranks(f"Capture target prefill CUDA graph end. elapsed={elapsed:.2f} s, "
                        f"mem usage={usage:.2f} GB, avail mem={avail - usage:.2f} GB.")

    async def _decode_graph(self) -> None:
        spec = self.resolution.spec
        phase = "target_verify" if spec is not None else "decode"
        if phase not in self.plan.graphs:
            return
        name = "target verify" if spec is not None else "target decode"
        per_req = spec.num_draft_tokens if spec is not None else 1
        avail = self.memory.after_prefill_graph_gib
        self._all_ranks(f"Capture {name} CUDA graph begin. backend={self.resolution.cuda_graph.decode.backend}, "
                        f"num_tokens_per_req={per_req}, avail mem={avail:.2f} GB")
        elapsed = await self._timed_sleep(phase)
        usage = self.memory.decode_graph_gib
        self._all_ranks(f"Capture {name} CUDA graph end. bs={list(self.memory.decode_capture_bs)}, "
                        f"elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={avail - usage:.2f} GB.")

    async def _draft_graphs(self) -> None:
        spec = self.resolution.spec
        assert spec is not None
        backend = self.resolution.cuda_graph.decode.backend
        bs = list(self.memory.decode_capture_bs)
        avail = self.memory.after_draft_weights_gib
        for phase, name, per_req in (("draft_decode", "decode", spec.eagle_topk),
                                     ("draft_extend", "extend", spec.num_draft_tokens)):
            if phase not in self.plan.graphs:
                continue
            self._rank0(f"Capture draft {name} CUDA graph begin. backend={backend}, num_tokens_per_req={per_req}, "
                        f"bs={bs}, avail mem={avail:.2f} GB")
            elapsed = await self._timed_sleep(phase)
            usage = self.memory.draft_graph_gib / 2
            avail -= usage
            self._rank0(f"Capture draft {name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, "
                        f"avail mem={avail:.2f} GB.")

    async def _timed_sleep(self, phase: str) -> float:
        tic = time.perf_counter()
        await self.sleep(self.plan.graphs[phase])
        elapsed = time.perf_counter() - tic
        self.graph_times[phase] = elapsed
        return elapsed

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
