"""What one scheduler rank does with its GPU's memory at boot: weights, KV cache, CUDA graphs.

Sizes follow SGLang's arithmetic where it is simple (KV tokens = memory left under mem_fraction_static /
bytes per token; the request cap of kv_cache_configurator.py::resolve_max_num_reqs); graph memory is a
plausible constant per captured size.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang_perf.sglang_facts.gpus import Gpu, gib
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.simulator.args.cudagraph import CudaGraphPlan
from pytest_sglang_perf.simulator.args.resolve import Resolution

NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."
_DECODE_GRAPH_GIB = (0.08, 0.012)
"""Fixed + per captured batch size."""
_PREFILL_GRAPH_GIB = (0.05, 0.004)
_DRAFT_GRAPH_GIB = 0.15


@dataclass(frozen=True)
class MemoryPlan:
    free_gib: float
    weight_gib: float
    draft_weight_gib: float
    kv_tokens: int
    kv_gib_each: float
    """Size of the K pool, and of the V pool."""
    decode_graph_gib: float
    prefill_graph_gib: float
    draft_graph_gib: float
    max_running_requests: int
    decode_capture_bs: tuple[int, ...]

    # Free memory after each boot step, in SGLang's order (scheduler.py::init_model_worker): target weights, draft
    # weights, KV pools, then every CUDA graph (target prefill, target decode/verify, draft graphs).

    @property
    def after_weights_gib(self) -> float:
        return self.free_gib - self.weight_gib

    @property
    def after_draft_weights_gib(self) -> float:
        return self.after_weights_gib - self.draft_weight_gib

    @property
    def after_kv_gib(self) -> float:
        return self.after_draft_weights_gib - 2 * self.kv_gib_each

    @property
    def after_prefill_graph_gib(self) -> float:
        return self.after_kv_gib - self.prefill_graph_gib

    @property
    def after_decode_graph_gib(self) -> float:
        return self.after_prefill_graph_gib - self.decode_graph_gib

    @property
    def final_gib(self) -> float:
        return self.after_decode_graph_gib - self.draft_graph_gib


def plan_memory(resolution: Resolution, model: ModelConfig, gpu: Gpu) -> MemoryPlan:
    tp = resolution.tp_size
    weight = gib(model.param_count() * model.dtype_bytes) / tp
    draft = _draft_weight_gib(resolution, model) / tp
    rest = gpu.free_gib - weight - draft - gpu.total_gib * (1 - float(resolution["mem_fraction_static"]))
    tokens = _kv_tokens(resolution, rest, model.kv_bytes_per_token(tp))
    max_running = effective_max_running_requests(resolution, tokens)
    capture = tuple(bs for bs in (resolution.cuda_graph.decode.bs or ()) if bs <= max_running)
    if not captures_decode_graph(resolution):
        capture = ()
    return MemoryPlan(
        free_gib=gpu.free_gib, weight_gib=weight, draft_weight_gib=draft, kv_tokens=tokens,
        kv_gib_each=gib(tokens * model.kv_bytes_per_token(tp)) / 2,
        decode_graph_gib=_decode_graph_gib(resolution.cuda_graph, capture),
        prefill_graph_gib=_prefill_graph_gib(resolution.cuda_graph),
        draft_graph_gib=_DRAFT_GRAPH_GIB if resolution.spec is not None else 0.0,
        max_running_requests=max_running, decode_capture_bs=capture,
    )


def _draft_weight_gib(resolution: Resolution, model: ModelConfig) -> float:
    """An EAGLE/MTP draft: embeddings plus one decoder layer."""
    if resolution.spec is None or not resolution.spec.is_eagle_family:
        return 0.0
    layer = (model.param_count() - model.vocab_size * model.hidden_size) / max(1, model.num_layers)
    return gib((model.vocab_size * model.hidden_size + layer) * model.dtype_bytes)


def _kv_tokens(resolution: Resolution, rest_gib: float, bytes_per_token: int) -> int:
    tokens = int(rest_gib * 1024**3 // bytes_per_token) if rest_gib > 0 else 0
    if resolution.args.get("max_total_tokens") is not None:
        tokens = min(tokens, int(resolution["max_total_tokens"]))
    page = int(resolution.args.get("page_size") or 1)
    return tokens // page * page


def captures_decode_graph(resolution: Resolution) -> bool:
    """cuda_graph_setup.py::capture_decode_graph: on CPU a decode graph is captured only with
    --enable-torch-compile (elsewhere the resolved decode backend decides, see CudaGraphPlan)."""
    return resolution.args.get("device") != "cpu" or bool(resolution.args.get("enable_torch_compile"))


def effective_max_running_requests(resolution: Resolution, kv_tokens: int) -> int:
    """kv_cache_configurator.py::resolve_max_num_reqs."""
    estimated = max(min(int(kv_tokens / resolution.context_len * 512), 4096), 2048)
    requested = resolution.args.get("max_running_requests")
    if requested is None:
        return max(1, min(estimated, kv_tokens // 2))
    per_dp = max(1, int(requested) // int(resolution.args.get("attn_dp_size") or 1))
    return max(1, min(per_dp, kv_tokens // 2))


def _decode_graph_gib(plan: CudaGraphPlan, capture: tuple[int, ...]) -> float:
    if not plan.decode.enabled or not capture:
        return 0.0
    return _DECODE_GRAPH_GIB[0] + _DECODE_GRAPH_GIB[1] * len(capture)


def _prefill_graph_gib(plan: CudaGraphPlan) -> float:
    if not plan.prefill.enabled or not plan.prefill.bs:
        return 0.0
    return _PREFILL_GRAPH_GIB[0] + _PREFILL_GRAPH_GIB[1] * len(plan.prefill.bs)
