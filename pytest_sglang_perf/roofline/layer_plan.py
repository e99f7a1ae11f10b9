"""Each decoder layer's kind, from config.json, as SGLang 0.5.23 builds the layers: its token mixer and whether its
MLP holds routed experts; and the names of a layer's linear modules, which a quantization config's list of
unquantized modules is matched against (roofline/weight_format.py).

Mixers (`layer_types`, else `full_attention_interval`): `full_attention` keeps a KV cache of every token;
`sliding_attention` (gpt-oss, Gemma 3) attends to the last `sliding_window` tokens, so it reads at most that many
(with no `sliding_window` given it is counted as full attention, and said so); every other kind (`linear_attention`
of Qwen3-Next / Qwen3.5, Mamba, convolutions) keeps a fixed-size state, no growing KV cache: these are the layers
sglang_facts/model_sizes.py does not count in `num_kv_layers`. With `full_attention_interval` N, every N-th layer is
full attention and the others linear (Qwen3-Next).

MoE layers (a model with more than one routed expert): Llama-4's `interleave_moe_layer_step` S makes layer i MoE when
(i + 1) % S == 0, every layer when S is 0 (llama4.py `_is_moe_layer`); DeepSeek / GLM-4-MoE's first
`first_k_dense_replace` layers are dense, then every `moe_layer_freq`-th (deepseek_v2.py `_is_layer_sparse`);
`decoder_sparse_step` and `mlp_only_layers` (xllm.py) make layer i MoE when (i + 1) % step == 0 and i is not listed,
except for the Qwen MoE families, whose SGLang models make every layer sparse and read neither field
(qwen2_moe.py, qwen3_moe.py, qwen3_next.py, qwen3_5.py: "all layers are sparse").

Module names are the checkpoints' (the lists are written in them): `model.layers.N.self_attn.{q,k,v,o}_proj` (MLA:
`q_a_proj`, `q_b_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`, `o_proj`), `linear_attn.{in_proj_qkvz,in_proj_ba,out_proj}`
(qwen3_next.py), the MLP under `mlp.` (Llama-4: `feed_forward.`, Mixtral's experts: `block_sparse_moe.`) with
`{gate,up,down}_proj`, `shared_expert.` (Qwen) or `shared_experts.` (DeepSeek), the experts as SGLang's FusedMoE
names them (`mlp.experts`); the MTP layer as `model.layers.{num_hidden_layers}.` with `eh_proj` (deepseek_nextn.py) or
`mtp.layers.0.` with `mtp.fc` (qwen3_5_mtp.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.config_fields import int_field
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig

FULL = "full"
SLIDING = "sliding"
LINEAR = "linear"


@dataclass(frozen=True)
class LayerPlan:
    mixers: tuple[str, ...]
    """Per decoder layer: FULL, SLIDING or LINEAR."""
    moe: tuple[bool, ...]
    """Per decoder layer: whether its MLP holds routed experts."""
    sliding_window: int = 0
    """Tokens a SLIDING layer attends to; 0 without such layers."""
    notes: tuple[str, ...] = ()

    def count(self, mixer: str) -> int:
        return self.mixers.count(mixer)

    @property
    def moe_layers(self) -> int:
        return sum(self.moe)


@dataclass(frozen=True)
class ModuleNames:
    """The checkpoint names of a layer's linear modules (module docstring)."""

    mlp: str = "mlp"
    shared_name: str = "shared_expert"
    mla: bool = False
    draft_prefix: str = "mtp.layers.0."
    draft_fc: str = "mtp.fc"

    @classmethod
    def of(cls, model: ModelConfig, text: Mapping[str, Any]) -> ModuleNames:
        model_type = str(text.get("model_type") or "")
        mlp = "feed_forward" if model_type.startswith("llama4") else (
            "block_sparse_moe" if model_type == "mixtral" else "mlp")
        nextn = f"model.layers.{model.num_layers}."
        return cls(mlp=mlp, shared_name="shared_experts" if int_field(text, "n_shared_experts") else "shared_expert",
                   mla=bool(int_field(text, "kv_lora_rank")),
                   draft_prefix=nextn if int_field(text, "num_nextn_predict_layers") else "mtp.layers.0.",
                   draft_fc=nextn + "eh_proj" if int_field(text, "num_nextn_predict_layers") else "mtp.fc")

    @staticmethod
    def layer(index: int) -> str:
        return f"model.layers.{index}."

    def mixer(self, prefix: str, *, linear: bool) -> tuple[str, ...]:
        if linear:
            return tuple(f"{prefix}linear_attn.{name}" for name in ("in_proj_qkvz", "in_proj_ba", "out_proj"))
        projections = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj") if self.mla else (
            "q_proj", "k_proj", "v_proj", "o_proj")
        return tuple(f"{prefix}self_attn.{name}" for name in projections)

    def dense_mlp(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}{self.mlp}.{name}" for name in ("gate_proj", "up_proj", "down_proj"))

    def shared(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}{self.mlp}.{self.shared_name}.{name}" for name in ("gate_proj", "up_proj", "down_proj"))

    def experts(self, prefix: str) -> str:
        return f"{prefix}{self.mlp}.experts"

    def draft_layer(self) -> str:
        return self.draft_prefix

    def draft_projection(self) -> str:
        return self.draft_fc


def layer_plan(model: ModelConfig, text: Mapping[str, Any]) -> LayerPlan:
    """The layers of the model `model` gives the sizes of; `text`: its language model's config fields."""
    layers = model.num_layers
    mixers, window, notes = _mixers(text, layers)
    moe = tuple(_is_moe(text, index) for index in range(layers)) if model.num_experts > 1 else (False,) * layers
    return LayerPlan(mixers, moe, window, notes)


def _mixers(text: Mapping[str, Any], layers: int) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    types = text.get("layer_types")
    window = int_field(text, "sliding_window")
    if isinstance(types, list) and types:
        named = [types[index] if index < len(types) else "full_attention" for index in range(layers)]
        sliding = named.count("sliding_attention")
        if sliding and not window:
            return tuple(FULL if kind == "sliding_attention" else _kind(kind) for kind in named), 0, (
                f"{sliding} sliding-window layer(s) counted as full attention: config.json gives no sliding_window",)
        return tuple(_kind(kind) for kind in named), window if sliding else 0, ()
    interval = int_field(text, "full_attention_interval")
    if interval:
        return tuple(FULL if (index + 1) % interval == 0 else LINEAR for index in range(layers)), 0, ()
    return (FULL,) * layers, 0, ()


def _kind(layer_type: str) -> str:
    if layer_type == "full_attention":
        return FULL
    return SLIDING if layer_type == "sliding_attention" else LINEAR


def _is_moe(text: Mapping[str, Any], index: int) -> bool:
    step = text.get("interleave_moe_layer_step")
    if isinstance(step, int) and not isinstance(step, bool):  # given, 0 included
        return step == 0 or (index + 1) % step == 0
    if index < int_field(text, "first_k_dense_replace") or index % (int_field(text, "moe_layer_freq") or 1):
        return False
    if str(text.get("model_type") or "").startswith("qwen"):
        return True
    listed = text.get("mlp_only_layers")
    dense = listed if isinstance(listed, list) else []
    return (index + 1) % (int_field(text, "decoder_sparse_step") or 1) == 0 and index not in dense
