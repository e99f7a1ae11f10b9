"""Resolved server args: the raw flags plus what SGLang 0.5.23's resolution pipeline derives from them.

The result is what SGLang shows in its `server_args={...}` log line and in `/server_info`: every field
by its argparse dest, resolved. The pipeline order follows srt/arg_groups/pipeline.py: serving defaults,
CUDA-graph config, GPU-memory defaults, then speculative decoding. Messages are the resolution log
lines SGLang prints, in order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.simulator.args.cudagraph import (
    CudaGraphPlan,
    apply_compatibility,
    capacity_defaults,
    graph_reserve_mb,
    materialize_sizes,
    parse_cuda_graph_config,
)
from pytest_sglang_perf.simulator.args.release_0_5_13 import as_fields, flat_graph_fields, plan_flags, plays_0_5_13
from pytest_sglang_perf.simulator.args.server_fields import complete_record
from pytest_sglang_perf.simulator.args.speculative import ResolutionError, SpecConfig, resolve_speculative

ENCODER_DISAGG_ARCHS = frozenset({
    "Qwen2VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration", "Dots3NoteForCausalLM",
    "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration", "KimiK3ForConditionalGeneration",
    "MiMoV2ForCausalLM", "Glm5NextForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "MuseSparkForConditionalGeneration",
})
"""Architectures SGLang 0.5.23 serves with --encoder-only / --language-only."""
LANGUAGE_MODEL_ONLY_ARCHS = ("DeepseekV4ForCausalLM", "MuseGlimmerForConditionalGeneration",
                             "Cosmos3ForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration")
"""server_args.py::ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES (0.5.23)."""
_NOT_WITH_LANGUAGE_MODEL_ONLY = (("encoder_only", "--encoder-only"), ("language_only", "--language-only"),
                                 ("enable_prefix_mm_cache", "--enable-prefix-mm-cache"),
                                 ("enable_broadcast_mm_inputs_process", "--enable-broadcast-mm-inputs-process"),
                                 ("mm_enable_dp_encoder", "--mm-enable-dp-encoder"))
MSG_LANGUAGE_ONLY = ("--language-only is set without --encoder-urls. Encoders are expected to register dynamically "
                     "via the EncoderBootstrapServer.")


@dataclass(frozen=True)
class Resolution:
    args: Mapping[str, Any]
    """Every server arg by dest, resolved (read-only)."""
    messages: tuple[str, ...]
    spec: SpecConfig | None
    cuda_graph: CudaGraphPlan
    context_len: int

    def __getitem__(self, dest: str) -> Any:
        return self.args[dest]

    @property
    def tp_size(self) -> int:
        return int(self.args.get("tp_size") or 1)


def resolve_args(raw: Mapping[str, Any], model: ModelConfig, gpu: Gpu) -> Resolution:
    """Raises speculative.ResolutionError for combinations SGLang rejects. A command line of 0.5.13 (the simulator
    playing it) is read as 0.5.13 reads it first (release_0_5_13.py)."""
    values = dict(raw)
    messages: list[str] = []
    old = plays_0_5_13(values)
    if old:
        as_fields(values)
    complete_record(values)
    _serving_defaults(values)
    _language_model_only(values, model)
    graph_flags = {**values, **plan_flags(values, model)} if old else values
    plan = apply_compatibility(parse_cuda_graph_config(graph_flags), values, model, messages)
    plan = _gpu_memory_settings(values, plan, gpu)
    spec = resolve_speculative(values, model, messages)
    _encoder_disaggregation(values, model, messages)
    if old:
        flat_graph_fields(values, plan.to_dict())
    else:
        values["cuda_graph_config"] = plan.to_dict()
    if "attn_dp_size" in values or "enable_dp_attention" not in values:  # before 0.5.22 the flag is its own field
        values["enable_dp_attention"] = int(values.get("attn_dp_size") or 1) > 1
    return Resolution(
        args=MappingProxyType(values), messages=tuple(messages), spec=spec, cuda_graph=plan,
        context_len=int(values.get("context_length") or model.context_len),
    )


def _serving_defaults(values: dict[str, Any]) -> None:
    """srt/arg_groups/serving_hook.py::handle_missing_default_values (and page size)."""
    model_path = values.get("model_path")
    if values.get("tokenizer_path") is None:
        values["tokenizer_path"] = model_path
    if values.get("served_model_name") is None:
        values["served_model_name"] = model_path
    values["device"] = str(values.get("device") or "cuda").split(":")[0]
    if values.get("random_seed") is None:
        values["random_seed"] = random.randint(0, 1 << 30)
    if values.get("page_size") is None:
        values["page_size"] = 1


def _language_model_only(values: Mapping[str, Any], model: ModelConfig) -> None:
    """srt/arg_groups/model_hook.py::handle_language_model_only: few architectures, no multimodal companions."""
    if not values.get("language_model_only"):
        return
    for dest, flag in _NOT_WITH_LANGUAGE_MODEL_ONLY:
        if values.get(dest):
            raise ResolutionError(f"--language-model-only cannot be combined with {flag}")
    if values.get("disaggregation_mode") != "null" and model.model_type != "deepseek_v41":
        raise ResolutionError("--language-model-only is incompatible with --disaggregation-mode prefill/decode")
    if not any(arch in LANGUAGE_MODEL_ONLY_ARCHS for arch in model.architectures):
        raise ResolutionError(f"--language-model-only does not support {list(model.architectures)}. "
                              f"Supported: {list(LANGUAGE_MODEL_ONLY_ARCHS)}.")


def _encoder_disaggregation(values: dict[str, Any], model: ModelConfig, messages: list[str]) -> None:
    """srt/arg_groups/pd_disaggregation_hook.py::handle_encoder_disaggregation (its validation)."""
    encoder_only, language_only = bool(values.get("encoder_only")), bool(values.get("language_only"))
    if values.get("enable_prefix_mm_cache") and not encoder_only:
        raise ResolutionError("--enable-prefix-mm-cache requires --encoder-only to be enabled")
    if encoder_only and language_only:
        raise ResolutionError("Cannot set --encoder-only and --language-only together")
    if encoder_only and values.get("disaggregation_mode") != "null":
        raise ResolutionError("Cannot set --encoder-only and --disaggregation-mode prefill/decode together")
    if language_only and not values.get("encoder_urls"):
        messages.append(MSG_LANGUAGE_ONLY)
    if values.get("encoder_transfer_backend") == "auto":  # server_args.py::resolve_encoder_transfer_backend
        kimi_k3_tp = model.architecture == "KimiK3ForConditionalGeneration" and int(values.get("tp_size") or 1) > 1
        values["encoder_transfer_backend"] = "zmq_to_tokenizer" if kimi_k3_tp else "zmq_to_scheduler"
    if (encoder_only or language_only) and model.architecture not in ENCODER_DISAGG_ARCHS:
        raise ResolutionError(
            f"Model type {model.architecture} is not supported for encoder disaggregation. Supported architectures: "
            "Qwen2VL, Qwen3VL, Qwen3.5, InternS2, Qwen2Audio, Qwen2.5Omni, Dots3-Note, Kimi, MiMoV2, GLM5Next, "
            "MiniMax-M3, MuseSpark.")


def _gpu_memory_settings(values: dict[str, Any], plan: CudaGraphPlan, gpu: Gpu) -> CudaGraphPlan:
    """srt/arg_groups/memory_hook.py::handle_gpu_memory_settings."""
    tp_size = int(values.get("tp_size") or 1)
    chunked_default, decode_max_bs = capacity_defaults(gpu.memory_mib, tp_size)
    if values.get("chunked_prefill_size") is None:
        values["chunked_prefill_size"] = chunked_default
    plan = materialize_sizes(plan, values, decode_max_bs)
    if values.get("mem_fraction_static") is None:
        values["mem_fraction_static"] = _mem_fraction_static(values, plan, gpu)
    return plan


def _mem_fraction_static(values: Mapping[str, Any], plan: CudaGraphPlan, gpu: Gpu) -> float:
    chunked = int(values["chunked_prefill_size"])
    activation_tokens = max(chunked if chunked > 0 else int(values.get("max_prefill_tokens") or 16384), 2048)
    parallel = int(values.get("tp_size") or 1) * int(values.get("pp_size") or 1)
    reserved = 512 + activation_tokens * 1.5 + parallel / 8 * 1024 + graph_reserve_mb(plan)
    if gpu.memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu.memory_mib - reserved) / gpu.memory_mib, 3)
