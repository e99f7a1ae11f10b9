"""The effective CUDA-graph plan (`cuda_graph_config` in `/server_info`), as SGLang 0.5.23 resolves it.

Precedence (srt/arg_groups/cuda_graph_hook.py::parse_cuda_graph_config): `--cuda-graph-config` JSON >
`--cuda-graph-backend-*` / `--cuda-graph-max-bs-*` / `--cuda-graph-bs-*` > `--disable-{prefill,decode}-cuda-graph`
> `--disable-cuda-graph` > defaults. Auto-disable rules for the prefill graph apply only while its backend
was not given explicitly ("locked"). Implemented rules: pipeline parallelism, two-batch overlap,
multimodal models outside SGLang's allow-list; more come with later issues.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig

FULL, BREAKABLE, DISABLED = "full", "breakable", "disabled"
DECODE, PREFILL = "decode", "prefill"

MSG_PP_PREFILL = ("Disabling breakable prefill CUDA graph by default for pipeline parallelism. "
                  "Set --cuda-graph-backend-prefill=breakable to opt in.")
MSG_BCG_INCOMPATIBLE = "Breakable CUDA graph is incompatible with {}; disabling prefill CUDA graph."

MULTIMODAL_BCG_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
})

MULTIMODAL_OFF_BY_DEFAULT = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration", "Step3VLForConditionalGeneration",
    "InklingForConditionalGeneration",
})
"""Multimodal archs SGLang serves text-only unless --enable-multimodal (configs/model_config.py)."""

_CONVENIENCE_FLAGS = (
    (DECODE, "backend", "cuda_graph_backend_decode"), (PREFILL, "backend", "cuda_graph_backend_prefill"),
    (DECODE, "max_bs", "cuda_graph_max_bs_decode"), (PREFILL, "max_bs", "cuda_graph_max_bs_prefill"),
    (PREFILL, "max_seq_len", "cuda_graph_max_seq_len_prefill"), (DECODE, "bs", "cuda_graph_bs_decode"),
    (PREFILL, "bs", "cuda_graph_bs_prefill"), (PREFILL, "max_context_size", "cuda_graph_prefill_max_context"),
)


@dataclass(frozen=True)
class PhasePlan:
    backend: str
    max_bs: int | None = None
    bs: tuple[int, ...] | None = None
    max_context_size: int | None = None
    full_prefill_max_req: int | None = None
    full_prefill_prefix_chunk_tokens: int | None = None
    max_seq_len: int | None = None

    @property
    def enabled(self) -> bool:
        return self.backend != DISABLED

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "max_bs": self.max_bs, "bs": None if self.bs is None else list(self.bs),
            "tc_compiler": "eager", "max_context_size": self.max_context_size,
            "full_prefill_max_req": self.full_prefill_max_req,
            "full_prefill_prefix_chunk_tokens": self.full_prefill_prefix_chunk_tokens,
            "max_seq_len": self.max_seq_len,
        }


@dataclass(frozen=True)
class CudaGraphPlan:
    decode: PhasePlan
    prefill: PhasePlan
    locked: frozenset[tuple[str, str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {DECODE: self.decode.to_dict(), PREFILL: self.prefill.to_dict()}

    def with_phase(self, phase: str, **changes: Any) -> CudaGraphPlan:
        updated = dataclasses.replace(getattr(self, phase), **changes)
        return dataclasses.replace(self, **{phase: updated})


def parse_cuda_graph_config(values: Mapping[str, Any]) -> CudaGraphPlan:
    """Merge the graph flags by precedence; remember which (phase, key) came from the user."""
    settings: dict[tuple[str, str], Any] = {}
    if values.get("disable_cuda_graph"):
        settings[(DECODE, "backend")] = settings[(PREFILL, "backend")] = DISABLED
    if values.get("disable_prefill_cuda_graph"):
        settings[(PREFILL, "backend")] = DISABLED
    if values.get("disable_decode_cuda_graph"):
        settings[(DECODE, "backend")] = DISABLED
    for phase, key, dest in _CONVENIENCE_FLAGS:
        if values.get(dest) is not None:
            settings[(phase, key)] = values[dest]
    for phase, phase_settings in (values.get("cuda_graph_config") or {}).items():
        for key, value in phase_settings.items():
            settings[(phase, key)] = value
    return CudaGraphPlan(
        decode=_phase(DECODE, FULL, settings), prefill=_phase(PREFILL, _default_prefill_backend(values), settings),
        locked=frozenset(settings),
    )


def _default_prefill_backend(values: Mapping[str, Any]) -> str:
    """cuda_graph_config.py::default_prefill_backend: breakable on CUDA, opt-in (disabled) on other devices."""
    device = str(values.get("device") or "cuda").split(":")[0]
    return BREAKABLE if device == "cuda" else DISABLED


def _phase(phase: str, default_backend: str, settings: Mapping[tuple[str, str], Any]) -> PhasePlan:
    fields = {key: value for (p, key), value in settings.items() if p == phase}
    if fields.get("bs") is not None:
        fields["bs"] = tuple(fields["bs"])
    return PhasePlan(**{"backend": default_backend, **fields})


def apply_compatibility(plan: CudaGraphPlan, values: Mapping[str, Any], model: ModelConfig,
                        messages: list[str]) -> CudaGraphPlan:
    """SGLang's prefill-graph auto-disable rules (skipped when the prefill backend was explicit)."""
    if (PREFILL, "backend") in plan.locked or plan.prefill.backend != BREAKABLE:
        return _apply_disaggregation_roles(plan, values)
    if int(values.get("pp_size") or 1) > 1:
        messages.append(MSG_PP_PREFILL)
        return _apply_disaggregation_roles(plan.with_phase(PREFILL, backend=DISABLED), values)
    reason = _bcg_incompatibility(values, model)
    if reason is not None:
        messages.append(MSG_BCG_INCOMPATIBLE.format(reason))
        plan = plan.with_phase(PREFILL, backend=DISABLED)
    return _apply_disaggregation_roles(plan, values)


def _bcg_incompatibility(values: Mapping[str, Any], model: ModelConfig) -> str | None:
    if int(values.get("dcp_size") or 1) > 1:
        return "decode context parallel (dcp_size > 1)"
    if values.get("enable_two_batch_overlap"):
        return "two-batch overlap"
    if multimodal_enabled(values, model) and not any(arch in MULTIMODAL_BCG_ARCHS for arch in model.architectures):
        return "multimodal model"
    return None


def multimodal_enabled(values: Mapping[str, Any], model: ModelConfig) -> bool:
    """configs/model_config.py::ModelConfig.is_multimodal: a multimodal architecture, unless --language-model-only,
    or an architecture whose multimodal path is off by default without --enable-multimodal."""
    if not model.is_multimodal or values.get("language_model_only"):
        return False
    if any(arch in MULTIMODAL_OFF_BY_DEFAULT for arch in model.architectures):
        return bool(values.get("enable_multimodal"))
    return values.get("enable_multimodal") is not False


def _apply_disaggregation_roles(plan: CudaGraphPlan, values: Mapping[str, Any]) -> CudaGraphPlan:
    mode = values.get("disaggregation_mode")
    if mode == "prefill":
        return plan.with_phase(DECODE, backend=DISABLED)
    if mode == "decode":
        return plan.with_phase(PREFILL, backend=DISABLED)
    return plan


def capacity_defaults(gpu_memory_mib: int, tp_size: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode max_bs) by GPU memory, srt/arg_groups/memory_hook.py."""
    gib = gpu_memory_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 4096, 48 if tp_size < 4 else 160
    if gib < 60:
        return 4096, 32 if tp_size < 4 else 160
    if gib < 160:
        return 8192, 256 if tp_size < 4 else 512
    return 16384, 512


def decode_batch_sizes(max_bs: int, speculative: bool, no_padding: bool) -> tuple[int, ...]:
    if no_padding:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    else:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
                 *range(272, max_bs + 1, 16)]
    sizes = [bs for bs in sizes if bs <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return tuple(sizes)


def prefill_token_buckets(max_tokens: int) -> tuple[int, ...]:
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return tuple(s for s in sizes if s <= max_tokens)


def materialize_sizes(plan: CudaGraphPlan, values: Mapping[str, Any], decode_max_bs_default: int) -> CudaGraphPlan:
    """Fill in max_bs and the bs lists (needs chunked_prefill_size already resolved)."""
    decode_max = plan.decode.max_bs
    if decode_max is None:
        decode_max = decode_max_bs_default
        requested = values.get("max_running_requests")
        if requested is not None and decode_max > requested:
            decode_max = int(requested)
    if plan.decode.bs is None:
        bs = decode_batch_sizes(decode_max, values.get("speculative_algorithm") is not None,
                                bool(values.get("disable_cuda_graph_padding")))
        plan = plan.with_phase(DECODE, max_bs=decode_max, bs=bs)
    else:
        plan = plan.with_phase(DECODE, max_bs=max(plan.decode.bs))
    return _materialize_prefill(plan, values)


def _materialize_prefill(plan: CudaGraphPlan, values: Mapping[str, Any]) -> CudaGraphPlan:
    max_bs = plan.prefill.max_bs
    if max_bs is None:
        max_bs = int(values["chunked_prefill_size"])
        if values.get("max_total_tokens") is not None:
            max_bs = min(max_bs, int(values["max_total_tokens"]))
        if "llama-2" in str(values.get("model_path", "")).lower():
            max_bs = min(max_bs, 4096)
    bs = plan.prefill.bs if plan.prefill.bs is not None else prefill_token_buckets(max_bs)
    return plan.with_phase(PREFILL, max_bs=max_bs, bs=bs)


def graph_reserve_mb(plan: CudaGraphPlan) -> float:
    """Memory SGLang sets aside for graphs when it derives mem_fraction_static."""
    reserved = 0.0
    if plan.decode.enabled and plan.decode.max_bs:
        reserved += plan.decode.max_bs * 2
    if plan.prefill.enabled and plan.prefill.bs:
        reserved += len(plan.prefill.bs) * 8
    return reserved
