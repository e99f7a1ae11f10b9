"""A model's bytes estimated from its config.json alone (no checkpoint at hand).

Parameter counts come from sglang_facts/model_sizes.py (ModelConfig: attention, MLP or experts, embeddings, vision
tower), so that the estimate agrees with the simulator's sizes; config.json fields ModelConfig does not read refine
it: shared experts (`shared_expert_intermediate_size`, `n_shared_experts`, Llama-4's one), each layer's mixer and
whether it holds experts (roofline/layer_plan.py), Llama-4's dense MLP width (`intermediate_size_mlp`), MLA attention
(`kv_lora_rank`, DeepSeek), linear-attention layers (`linear_num_value_heads`, Qwen3-Next / Qwen3.5), the MTP layer
(`mtp_num_hidden_layers` / `num_nextn_predict_layers`) and `quantization_config` (roofline/weight_format.py), module by
module: a module the config leaves unquantized counts at the model dtype. Norms and biases are left out (well under
0.1% of a model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.config_fields import int_field, model_sizes
from pytest_sglang_perf.roofline.kv_cache import kv_notes, kv_shape
from pytest_sglang_perf.roofline.layer_plan import LINEAR, LayerPlan, ModuleNames, layer_plan
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes
from pytest_sglang_perf.roofline.weight_format import WeightFormat, weight_format
from pytest_sglang_perf.sglang_facts.model_fields import language_config
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig


@dataclass(frozen=True)
class _Layer:
    """Parameters of one decoder layer's parts."""

    attention: int
    """A full- or sliding-attention layer's attention."""
    linear_attention: int
    """A linear-attention layer's mixer (= attention when the config gives no linear-attention sizes)."""
    dense_mlp: int
    router: int
    shared: int
    """An MoE layer's shared experts (and their gate)."""
    expert: int


@dataclass(frozen=True)
class _Sums:
    attention: float
    other: float
    """The layers' bytes beyond their mixers: MLPs, routers, shared experts."""
    expert: float
    """One routed expert, averaged over the MoE layers."""


def weights_from_config(raw: Mapping[str, Any], *, source: str,
                        kv_dtype_bytes: float | None = None) -> WeightBytes:
    """The bytes of the model config.json `raw` describes (`source`: the file it came from), estimated; `notes` say
    what was assumed. `kv_dtype_bytes`: the KV cache's bytes per value (default: the model dtype's, as SGLang's
    `--kv-cache-dtype auto`). ModelBytesError (config_fields.py) when a field has the wrong type."""
    model = model_sizes(raw, source)
    text = language_config(raw)
    fmt = weight_format(raw, model.dtype, model.dtype_bytes)
    plan = layer_plan(model, text)
    params, names = _layer_params(model, text), ModuleNames.of(model, text)
    sums = _sum_layers(params, plan, fmt, names)
    draft, draft_unread = _draft_bytes(model, params, fmt, names)
    head = float(model.vocab_size * model.hidden_size * model.dtype_bytes)
    kv = kv_shape(model, text, plan, kv_dtype_bytes)
    return WeightBytes(
        layers=sums.attention + sums.other,
        expert=sums.expert,
        num_experts=model.num_experts if plan.moe_layers else 0,
        experts_per_token=model.experts_per_token if plan.moe_layers else 0,
        moe_layers=plan.moe_layers,
        lm_head=head,
        embedding=0.0 if model.tie_word_embeddings else head,
        draft_layer=draft,
        other=draft_unread + model.vision_params * model.dtype_bytes,
        kv_per_token=kv.per_token,
        kv_heads=kv.heads,
        dtype=fmt.label,
        exact=False,
        source=source,
        notes=_notes(model, raw, text, plan, fmt, kv_dtype_bytes),
        attention=sums.attention,
        kv_per_token_sliding=kv.per_token_sliding,
        sliding_window=kv.sliding_window,
    )


def _layer_params(model: ModelConfig, text: Mapping[str, Any]) -> _Layer:
    hidden = model.hidden_size
    expert = 3 * hidden * model.moe_intermediate_size
    own_mlp = model.num_experts * expert + hidden * model.num_experts if model.num_experts > 1 else (
        3 * hidden * model.intermediate_size)
    attention = _mla_params(text, hidden) or model.layer_params() - own_mlp
    dense_width = int_field(text, "intermediate_size_mlp") or model.intermediate_size
    return _Layer(attention=attention, linear_attention=_linear_attention_params(text, hidden) or attention,
                  dense_mlp=3 * hidden * dense_width, router=hidden * model.num_experts,
                  shared=_shared_expert_params(text, hidden, model.moe_intermediate_size), expert=expert)


def _sum_layers(params: _Layer, plan: LayerPlan, fmt: WeightFormat, names: ModuleNames) -> _Sums:
    attention = other = experts = 0.0
    for index, (mixer, moe) in enumerate(zip(plan.mixers, plan.moe, strict=True)):
        prefix = names.layer(index)
        mixer_params = params.linear_attention if mixer == LINEAR else params.attention
        attention += mixer_params * fmt.mean_bytes(names.mixer(prefix, linear=mixer == LINEAR))
        if not moe:
            other += params.dense_mlp * fmt.mean_bytes(names.dense_mlp(prefix))
            continue
        other += params.router * fmt.model_bytes + params.shared * fmt.mean_bytes(names.shared(prefix))
        experts += params.expert * fmt.bytes_for(names.experts(prefix), expert=True)
    return _Sums(attention, other, experts / plan.moe_layers if plan.moe_layers else 0.0)


def _mla_params(text: Mapping[str, Any], hidden: int) -> int:
    """DeepSeek's multi-head latent attention (deepseek_v2.py): q (through a low-rank `q_lora_rank` when given),
    the KV down-projection to `kv_lora_rank` + the rope part, its up-projection, the output projection."""
    kv_rank = int_field(text, "kv_lora_rank")
    if not kv_rank:
        return 0
    heads, rope, nope, v_dim, q_rank = (int_field(text, key) for key in (
        "num_attention_heads", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"))
    q_out = heads * (nope + rope)
    q = hidden * q_rank + q_rank * q_out if q_rank else hidden * q_out
    return q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden


def _linear_attention_params(text: Mapping[str, Any], hidden: int) -> int:
    """A Gated DeltaNet mixer (qwen3_next.py / qwen3_5.py): q, k, v and z projections, b and a, the causal
    convolution over q, k, v, the output projection."""
    value_heads = int_field(text, "linear_num_value_heads")
    if not value_heads:
        return 0
    key_dim = int_field(text, "linear_num_key_heads") * int_field(text, "linear_key_head_dim")
    value_dim = value_heads * int_field(text, "linear_value_head_dim")
    conv = (2 * key_dim + value_dim) * (int_field(text, "linear_conv_kernel_dim") or 4)
    return hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * value_heads + conv + value_dim * hidden


def _shared_expert_params(text: Mapping[str, Any], hidden: int, expert_width: int) -> int:
    """Qwen2-MoE / Qwen3-Next: one shared expert of `shared_expert_intermediate_size` and its gate; DeepSeek:
    `n_shared_experts` experts of `moe_intermediate_size`; Llama-4: always one of the experts' width (llama4.py)."""
    width = int_field(text, "shared_expert_intermediate_size")
    if width:
        return 3 * hidden * width + hidden
    if str(text.get("model_type") or "").startswith("llama4"):
        return 3 * hidden * expert_width
    return int_field(text, "n_shared_experts") * 3 * hidden * expert_width


def _draft_bytes(model: ModelConfig, params: _Layer, fmt: WeightFormat, names: ModuleNames) -> tuple[float, float]:
    """(what one draft forward of one token reads, what the MTP layers hold beyond it): a full-attention layer, its
    MLP (MoE, as DeepSeek's and Qwen3.5-MoE's MTP layers are: the top-k experts read), the input projection 2h -> h.
    A second MTP layer is not read."""
    if model.mtp_layers <= 0:
        return 0.0, 0.0
    prefix = names.draft_layer()
    fc = 2 * model.hidden_size * model.hidden_size * fmt.bytes_for(names.draft_projection())
    attention = params.attention * fmt.mean_bytes(names.mixer(prefix, linear=False))
    if model.num_experts <= 1:
        whole = attention + params.dense_mlp * fmt.mean_bytes(names.dense_mlp(prefix)) + fc
        return whole, (model.mtp_layers - 1) * whole
    expert = params.expert * fmt.bytes_for(names.experts(prefix), expert=True)
    read = (attention + params.router * fmt.model_bytes + params.shared * fmt.mean_bytes(names.shared(prefix)) + fc
            + model.experts_per_token * expert)
    unread = (model.num_experts - model.experts_per_token) * expert
    return read, unread + (model.mtp_layers - 1) * (read + unread)


def _notes(model: ModelConfig, raw: Mapping[str, Any], text: Mapping[str, Any], plan: LayerPlan, fmt: WeightFormat,
           kv_dtype_bytes: float | None) -> tuple[str, ...]:
    notes = ["estimated from config.json (no safetensors checkpoint read): parameter counts from its sizes, norms "
             "and biases left out"]
    if fmt.note:
        notes.append(fmt.note)
    if model.tie_word_embeddings:
        notes.append("tied embeddings: the embedding table is the LM head, read by every forward")
    if plan.count(LINEAR) and not int_field(text, "linear_num_value_heads"):
        notes.append("linear-attention layers counted with full-attention weights (config.json gives no "
                     "linear_num_value_heads)")
    if 0 < plan.moe_layers < model.num_layers:
        notes.append(f"routed experts in {plan.moe_layers} of {model.num_layers} layers, the others dense")
    if model.vision_params:
        notes.append("vision tower estimated from vision_config, counted as loaded, not read while decoding")
    if "audio_config" in raw:
        notes.append("audio tower not estimated (not read while decoding)")
    notes.extend(kv_notes(model, text, plan, kv_dtype_bytes))
    return tuple(notes)
