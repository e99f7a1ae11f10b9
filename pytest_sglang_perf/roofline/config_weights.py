"""A model's bytes estimated from its config.json alone (no checkpoint at hand).

Parameter counts come from sglang_facts/model_sizes.py (ModelConfig: attention, MLP or experts, embeddings, vision
tower), so that the estimate agrees with the simulator's sizes; config.json fields ModelConfig does not read refine
it: shared experts (`shared_expert_intermediate_size`, `n_shared_experts`), dense layers of an MoE model
(`first_k_dense_replace`, `moe_layer_freq`, `decoder_sparse_step`, `mlp_only_layers`), MLA attention
(`kv_lora_rank`, DeepSeek), linear-attention layers (`linear_num_value_heads`, Qwen3-Next / Qwen3.5), the MTP layer
(`mtp_num_hidden_layers` / `num_nextn_predict_layers`) and `quantization_config` (roofline/weight_format.py). Norms
and biases are left out (well under 0.1% of a model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.weight_bytes import WeightBytes
from pytest_sglang_perf.roofline.weight_format import WeightFormat, weight_format
from pytest_sglang_perf.sglang_facts.model_fields import language_config
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig, model_config_from_dict


@dataclass(frozen=True)
class _Layer:
    """Parameters of one decoder layer's parts."""

    attention: int
    """A full-attention layer's attention."""
    linear_attention: int
    """A linear-attention layer's mixer (= attention when the config gives no linear-attention sizes)."""
    dense_mlp: int
    moe_shared: int
    """An MoE layer's router and shared experts."""
    expert: int


def weights_from_config(raw: Mapping[str, Any], *, source: str,
                        kv_dtype_bytes: float | None = None) -> WeightBytes:
    """The bytes of the model config.json `raw` describes (`source`: where it came from), estimated; `notes` say
    what was assumed. `kv_dtype_bytes`: the KV cache's bytes per value (default: the model dtype's, as SGLang's
    `--kv-cache-dtype auto`)."""
    model = model_config_from_dict(source, raw)
    text = language_config(raw)
    fmt = weight_format(raw, model.dtype, model.dtype_bytes)
    layer = _layer_params(model, text)
    moe_layers = _moe_layer_count(text, model.num_layers) if model.num_experts > 1 else 0
    linear_layers = model.num_layers - model.num_kv_layers
    layers = ((model.num_layers - linear_layers) * layer.attention + linear_layers * layer.linear_attention
              + (model.num_layers - moe_layers) * layer.dense_mlp + moe_layers * layer.moe_shared)
    draft, draft_unread = _draft_params(model, layer, moe_layers > 0)
    head = model.vocab_size * model.hidden_size * model.dtype_bytes
    kv_per_token, kv_heads = kv_cache_per_token(model, text, kv_dtype_bytes)
    return WeightBytes(
        layers=layers * fmt.linear_bytes,
        expert=layer.expert * fmt.linear_bytes if moe_layers else 0.0,
        num_experts=model.num_experts if moe_layers else 0,
        experts_per_token=model.experts_per_token if moe_layers else 0,
        moe_layers=moe_layers,
        lm_head=float(head),
        embedding=0.0 if model.tie_word_embeddings else float(head),
        draft_layer=draft * fmt.linear_bytes,
        other=draft_unread * fmt.linear_bytes + model.vision_params * model.dtype_bytes,
        kv_per_token=kv_per_token,
        kv_heads=kv_heads,
        dtype=fmt.label,
        exact=False,
        source=source,
        notes=_notes(model, raw, text, fmt, kv_dtype_bytes),
    )


def _layer_params(model: ModelConfig, text: Mapping[str, Any]) -> _Layer:
    hidden = model.hidden_size
    expert = 3 * hidden * model.moe_intermediate_size
    dense = 3 * hidden * model.intermediate_size
    own_mlp = model.num_experts * expert + hidden * model.num_experts if model.num_experts > 1 else dense
    attention = _mla_params(text, hidden) or model.layer_params() - own_mlp
    return _Layer(attention=attention, linear_attention=_linear_attention_params(text, hidden) or attention,
                  dense_mlp=dense, moe_shared=hidden * model.num_experts + _shared_expert_params(text, hidden),
                  expert=expert)


def _mla_params(text: Mapping[str, Any], hidden: int) -> int:
    """DeepSeek's multi-head latent attention (deepseek_v2.py): q (through a low-rank `q_lora_rank` when given),
    the KV down-projection to `kv_lora_rank` + the rope part, its up-projection, the output projection."""
    kv_rank = _int(text, "kv_lora_rank")
    if not kv_rank:
        return 0
    heads, rope = _int(text, "num_attention_heads"), _int(text, "qk_rope_head_dim")
    nope, v_dim, q_rank = _int(text, "qk_nope_head_dim"), _int(text, "v_head_dim"), _int(text, "q_lora_rank")
    q_out = heads * (nope + rope)
    q = hidden * q_rank + q_rank * q_out if q_rank else hidden * q_out
    return q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden


def _linear_attention_params(text: Mapping[str, Any], hidden: int) -> int:
    """A Gated DeltaNet mixer (qwen3_next.py / qwen3_5.py): q, k, v and z projections, b and a, the causal
    convolution over q, k, v, the output projection."""
    value_heads = _int(text, "linear_num_value_heads")
    if not value_heads:
        return 0
    key_dim = _int(text, "linear_num_key_heads") * _int(text, "linear_key_head_dim")
    value_dim = value_heads * _int(text, "linear_value_head_dim")
    conv = (2 * key_dim + value_dim) * (_int(text, "linear_conv_kernel_dim") or 4)
    return hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * value_heads + conv + value_dim * hidden


def _shared_expert_params(text: Mapping[str, Any], hidden: int) -> int:
    """Qwen2-MoE / Qwen3-Next: one shared expert of `shared_expert_intermediate_size` and its gate; DeepSeek:
    `n_shared_experts` experts of `moe_intermediate_size`."""
    width = _int(text, "shared_expert_intermediate_size")
    if width:
        return 3 * hidden * width + hidden
    return _int(text, "n_shared_experts") * 3 * hidden * _int(text, "moe_intermediate_size")


def _moe_layer_count(text: Mapping[str, Any], layers: int) -> int:
    """Layers with routed experts: DeepSeek's first `first_k_dense_replace` layers are dense and then every
    `moe_layer_freq`-th; Qwen-MoE's every `decoder_sparse_step`-th not in `mlp_only_layers`."""
    first, freq = _int(text, "first_k_dense_replace"), _int(text, "moe_layer_freq") or 1
    step = _int(text, "decoder_sparse_step") or 1
    listed = text.get("mlp_only_layers")
    dense = set(listed) if isinstance(listed, list) else set()
    return sum(index >= first and index % freq == 0 and (index + 1) % step == 0 and index not in dense
               for index in range(layers))


def _draft_params(model: ModelConfig, layer: _Layer, moe: bool) -> tuple[float, float]:
    """(what one draft forward of one token reads, what the MTP layers hold beyond it): a full-attention layer, its
    MLP (MoE: top-k experts read), the input projection 2h -> h. A second MTP layer is not read."""
    if model.mtp_layers <= 0:
        return 0.0, 0.0
    fc = 2 * model.hidden_size * model.hidden_size
    if not moe:
        whole = layer.attention + layer.dense_mlp + fc
        return float(whole), float((model.mtp_layers - 1) * whole)
    read = layer.attention + layer.moe_shared + fc + model.experts_per_token * layer.expert
    unread = (model.num_experts - model.experts_per_token) * layer.expert
    return float(read), float(unread + (model.mtp_layers - 1) * (read + unread))


def kv_cache_per_token(model: ModelConfig, text: Mapping[str, Any],
                       kv_dtype_bytes: float | None) -> tuple[float, int]:
    """(K and V bytes of one token in every full-attention layer, KV heads per layer); `text`: the language model's
    config fields. MLA (DeepSeek) caches one latent of `kv_lora_rank` + `qk_rope_head_dim` per layer, which tensor
    parallelism does not split (1 head). `kv_dtype_bytes` None: as SGLang's --kv-cache-dtype auto."""
    kv_bytes = kv_dtype_bytes if kv_dtype_bytes is not None else _auto_kv_bytes(model, text)[0]
    kv_rank = _int(text, "kv_lora_rank")
    if kv_rank:
        return model.num_layers * (kv_rank + _int(text, "qk_rope_head_dim")) * kv_bytes, 1
    return 2.0 * model.num_kv_layers * model.num_kv_heads * model.head_dim * kv_bytes, model.num_kv_heads


def _notes(model: ModelConfig, raw: Mapping[str, Any], text: Mapping[str, Any], fmt: WeightFormat,
           kv_dtype_bytes: float | None) -> tuple[str, ...]:
    notes = ["estimated from config.json (no safetensors checkpoint read): parameter counts from its sizes, norms "
             "and biases left out"]
    if fmt.note:
        notes.append(fmt.note)
    if model.tie_word_embeddings:
        notes.append("tied embeddings: the embedding table is the LM head, read by every forward")
    if model.num_kv_layers < model.num_layers:
        notes.append(f"hybrid attention: KV cache in {model.num_kv_layers} of {model.num_layers} layers")
        if not _int(text, "linear_num_value_heads"):
            notes.append("linear-attention layers counted with full-attention weights (config.json gives no "
                         "linear_num_value_heads)")
    if model.vision_params:
        notes.append("vision tower estimated from vision_config, counted as loaded, not read while decoding")
    if "audio_config" in raw:
        notes.append("audio tower not estimated (not read while decoding)")
    notes.extend(kv_notes(model, text, kv_dtype_bytes))
    return tuple(notes)


def kv_notes(model: ModelConfig, text: Mapping[str, Any], kv_dtype_bytes: float | None) -> list[str]:
    """What the KV cache's dtype was taken to be, when the caller did not say."""
    return [] if kv_dtype_bytes is not None else [_auto_kv_bytes(model, text)[1]]


def _auto_kv_bytes(model: ModelConfig, text: Mapping[str, Any]) -> tuple[float, str]:
    """SGLang's `--kv-cache-dtype auto` (mem_cache/kv_cache_dtype.py): FP8 when the quantization config says
    `kv_cache_quant_algo` FP8, else the model dtype."""
    quant = text.get("quantization_config")
    if isinstance(quant, Mapping) and str(quant.get("kv_cache_quant_algo") or "").upper() == "FP8":
        return 1.0, "KV cache in fp8 (quantization_config's kv_cache_quant_algo), as SGLang's --kv-cache-dtype auto"
    return model.dtype_bytes, f"KV cache at the model dtype ({model.dtype}), as SGLang's --kv-cache-dtype auto"


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
