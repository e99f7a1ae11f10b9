"""The KV cache one token adds, as a decode step reads it: K and V of every full-attention layer, of every
sliding-window layer (which reads at most its window), none for linear-attention / recurrent layers
(roofline/layer_plan.py); MLA (DeepSeek, deepseek_v2.py) caches one latent of `kv_lora_rank + qk_rope_head_dim` per
layer, which tensor parallelism does not split (1 head).

The dtype, unless the caller gives one (an explicit `--kv-cache-dtype`), is what SGLang's `--kv-cache-dtype auto`
picks (mem_cache/kv_cache_dtype.py): FP8 when the quantization config says `kv_cache_quant_algo` FP8, else the model
dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.config_fields import int_field
from pytest_sglang_perf.roofline.layer_plan import FULL, SLIDING, LayerPlan
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig


@dataclass(frozen=True)
class KvShape:
    per_token: float
    """K and V bytes of one token in every full-attention layer (MLA: every layer's latent)."""
    per_token_sliding: float
    """The same in every sliding-window layer."""
    sliding_window: int
    heads: int
    """KV heads per layer (1 for MLA)."""


def kv_shape(model: ModelConfig, text: Mapping[str, Any], plan: LayerPlan, kv_dtype_bytes: float | None) -> KvShape:
    """The KV cache of the model `model` sizes; `text`: its language model's config fields; `kv_dtype_bytes` None:
    as SGLang's --kv-cache-dtype auto."""
    kv_bytes = kv_dtype_bytes if kv_dtype_bytes is not None else _auto_kv_bytes(model, text)[0]
    kv_rank = int_field(text, "kv_lora_rank")
    if kv_rank:
        return KvShape(model.num_layers * (kv_rank + int_field(text, "qk_rope_head_dim")) * kv_bytes, 0.0, 0, 1)
    layer = 2.0 * model.num_kv_heads * model.head_dim * kv_bytes
    return KvShape(plan.count(FULL) * layer, plan.count(SLIDING) * layer, plan.sliding_window, model.num_kv_heads)


def kv_notes(model: ModelConfig, text: Mapping[str, Any], plan: LayerPlan,
             kv_dtype_bytes: float | None) -> list[str]:
    """The KV cache's layout where it is not plain, and its dtype when the caller did not say."""
    notes = list(plan.notes)
    layers = model.num_layers
    if plan.count(SLIDING):
        notes.append(f"sliding-window attention: {plan.count(SLIDING)} of {layers} layers read the KV cache of at "
                     f"most their last {plan.sliding_window} tokens")
    without_kv = layers - plan.count(FULL) - plan.count(SLIDING)
    if without_kv and not int_field(text, "kv_lora_rank"):
        notes.append(f"hybrid attention: KV cache in {layers - without_kv} of {layers} layers (the other "
                     f"{without_kv} are linear-attention / recurrent layers with a fixed-size state)")
    if kv_dtype_bytes is None:
        notes.append(_auto_kv_bytes(model, text)[1])
    return notes


def _auto_kv_bytes(model: ModelConfig, text: Mapping[str, Any]) -> tuple[float, str]:
    quant = text.get("quantization_config")
    if isinstance(quant, Mapping) and str(quant.get("kv_cache_quant_algo") or "").upper() == "FP8":
        return 1.0, "KV cache in fp8 (quantization_config's kv_cache_quant_algo), as SGLang's --kv-cache-dtype auto"
    return model.dtype_bytes, f"KV cache at the model dtype ({model.dtype}), as SGLang's --kv-cache-dtype auto"
