"""A model's sizes: what SGLang reads from `config.json` at `--model-path` (a local folder's, else the config
the project ships for a known Hugging Face id).

Only sizes and names are read (architecture, context length, layer and head counts); they feed the simulator's
`/model_info`, memory plan, log lines and timing model (simulator/engine/roofline.py), and the plugin's estimate of
the bytes a decode step reads when no checkpoint is at hand (roofline/weights.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.sglang_facts.known_models import known_models_text, model_config_file
from pytest_sglang_perf.sglang_facts.model_fields import (
    EXPERT_COUNT_KEYS,
    EXPERT_SIZE_KEYS,
    MOE_TOPK_KEYS,
    ModelConfigFileError,
    first_given,
    language_config,
    read_model_config,
)

_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "max_seq_len",
                 "model_max_length")
_DEFAULT_CONTEXT_LEN = 2048
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1}
_MTP_LAYER_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")


class ModelConfigError(Exception):
    """config.json is missing, unreadable, or lacks a field the simulator needs (sglang_facts/model_fields.py); the
    message names the path and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    path: str
    architectures: tuple[str, ...]
    model_type: str | None
    context_len: int
    hidden_size: int
    num_layers: int
    num_kv_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    dtype: str
    is_multimodal: bool
    eos_token_id: int | None
    attn_output_gate: bool = False
    """Qwen3-Next-style gated attention: the query projection is twice as wide."""
    vision_params: int = 0
    """The vision tower's parameters (loaded, not read while decoding)."""
    mtp_layers: int = 0
    """Multi-token-prediction layers shipped in the checkpoint (the NEXTN / MTP draft)."""
    text_keys: frozenset[str] = frozenset()
    """The keys of the Hugging Face text config (a multimodal config's `text_config`): what the rules' model
    conditions read (sglang_facts/rules.py ModelCondition, e.g. SBO on SM90)."""
    text_model_type: str | None = None

    @property
    def architecture(self) -> str:
        return self.architectures[0] if self.architectures else "LlamaForCausalLM"

    @property
    def dtype_bytes(self) -> int:
        return _DTYPE_BYTES.get(self.dtype, 2)

    def param_count(self) -> int:
        """Estimated parameter count of what SGLang loads: embeddings, attention, MLP or all experts, vision tower."""
        return self.language_param_count() + self.vision_params

    def language_param_count(self) -> int:
        """The language model: embeddings, layers (all experts), LM head."""
        return self._embed_params() + self.num_layers * self.layer_params()

    def layer_params(self) -> int:
        """One decoder layer (all experts)."""
        return self._attention_params() + self._mlp_params(self.num_experts)

    def decode_read_params(self, tokens: int = 1) -> float:
        """Parameters one forward over `tokens` tokens reads: every layer's weights and the LM head, not the embedding
        table (a forward gathers a few of its rows). MoE: the experts the tokens route to, expected value for
        uniform routing of top-k of E experts: E * (1 - (1 - k/E)^tokens)."""
        lm_head = self.vocab_size * self.hidden_size
        if self.num_experts <= 1:
            return self.num_layers * self.layer_params() + lm_head
        share = min(1.0, self.experts_per_token / self.num_experts)
        touched = self.num_experts * (1 - (1 - share) ** max(1, tokens))
        experts = 3 * self.hidden_size * self.moe_intermediate_size * touched
        layer = self._attention_params() + experts + self.hidden_size * self.num_experts
        return self.num_layers * layer + lm_head

    def draft_read_params(self) -> int:
        """Parameters one forward of an MTP / EAGLE draft reads: one decoder layer, its input projection (2h -> h)
        and the LM head it shares with the target."""
        return self.layer_params() + 2 * self.hidden_size * self.hidden_size + self.vocab_size * self.hidden_size

    def _embed_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def active_param_count(self) -> int:
        """Parameters one token is multiplied with (MoE: only its routed experts), LM head included: 2 FLOPs each."""
        active = min(self.experts_per_token, self.num_experts)
        layers = self.num_layers * (self._attention_params() + self._mlp_params(active))
        return self.vocab_size * self.hidden_size + layers

    def kv_bytes_per_token(self, tp_size: int) -> int:
        """K and V bytes one token takes on one tensor-parallel rank."""
        kv_heads = max(1, self.num_kv_heads // max(1, tp_size))
        return 2 * self.num_kv_layers * kv_heads * self.head_dim * self.dtype_bytes

    def _attention_params(self) -> int:
        q = self.num_attention_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        q_proj = 2 * q if self.attn_output_gate else q
        return self.hidden_size * (q_proj + q + 2 * kv)

    def _mlp_params(self, experts: int) -> int:
        if self.num_experts <= 1:
            return 3 * self.hidden_size * self.intermediate_size
        return experts * 3 * self.hidden_size * self.moe_intermediate_size + self.hidden_size * self.num_experts


def load_model_config(model_path: str) -> ModelConfig:
    """The model at `model_path`, from its config.json, which must give every field the simulator needs: a local
    folder's own, else the shipped config of a model id the project knows (sglang_facts/known_models.py), as SGLang
    reads a local folder first and a Hugging Face id from the hub."""
    config_file = model_config_file(model_path)
    if config_file is None:
        raise ModelConfigError(
            f"Can't load the configuration of '{model_path}': {Path(model_path) / 'config.json'} does not exist, and "
            f"'{model_path}' is not a model the simulator ships a config for ({known_models_text()}). "
            "The simulator reads the model's config.json from --model-path; point --model-path at a "
            "local model folder that contains config.json (copying the model's config.json is enough)."
        )
    try:
        raw = read_model_config(config_file)
    except ModelConfigFileError as exc:
        raise ModelConfigError(f"Can't load the configuration of '{model_path}': {exc}") from None
    return model_config_from_dict(model_path, raw)


def model_config_from_dict(model_path: str, raw: Mapping[str, Any]) -> ModelConfig:
    """A model from a config dict as given: unchecked, a missing size is a made-up default (unit tests give partial
    dicts); load_model_config checks a real config.json first."""
    text = language_config(raw)
    hidden = int(text.get("hidden_size", 4096))
    heads = int(text.get("num_attention_heads", 32))
    layers = int(text.get("num_hidden_layers", 32))
    num_experts = int(first_given(text, EXPERT_COUNT_KEYS, 1))
    return ModelConfig(
        path=model_path,
        architectures=tuple(raw.get("architectures") or text.get("architectures") or ()),
        model_type=raw.get("model_type"),
        context_len=int(first_given(text, _CONTEXT_KEYS, first_given(raw, _CONTEXT_KEYS, _DEFAULT_CONTEXT_LEN))),
        hidden_size=hidden,
        num_layers=layers,
        num_kv_layers=_kv_layer_count(text, layers),
        num_attention_heads=heads,
        num_kv_heads=int(text.get("num_key_value_heads") or heads),
        head_dim=int(text.get("head_dim") or hidden // heads),
        intermediate_size=int(text.get("intermediate_size", 4 * hidden)),
        vocab_size=int(text.get("vocab_size", 32000)),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        num_experts=num_experts,
        experts_per_token=int(first_given(text, MOE_TOPK_KEYS, 1 if num_experts <= 1 else 8)),
        moe_intermediate_size=int(first_given(text, EXPERT_SIZE_KEYS, 4 * hidden)),
        dtype=str(raw.get("torch_dtype") or raw.get("dtype") or text.get("torch_dtype") or "bfloat16"),
        is_multimodal="vision_config" in raw or "audio_config" in raw,
        eos_token_id=_eos_token_id(raw.get("eos_token_id", text.get("eos_token_id"))),
        attn_output_gate=bool(text.get("attn_output_gate", False)),
        vision_params=_vision_params(raw.get("vision_config")),
        mtp_layers=int(first_given(text, _MTP_LAYER_KEYS, 0)),
        text_keys=frozenset(_hf_text_config(raw)),
        text_model_type=_hf_text_config(raw).get("model_type"),
    )


def _vision_params(vision: Any) -> int:
    """A ViT: per block attention (4 h^2) and MLP (2 h i), plus a patch merger (4h)^2 + 4h * out."""
    if not isinstance(vision, dict):
        return 0
    hidden = int(vision.get("hidden_size") or 0)
    depth = int(vision.get("depth") or vision.get("num_hidden_layers") or 0)
    inner = int(vision.get("intermediate_size") or 4 * hidden)
    out = int(vision.get("out_hidden_size") or hidden)
    return depth * (4 * hidden * hidden + 2 * hidden * inner) + 16 * hidden * hidden + 4 * hidden * out


def _hf_text_config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """SGLang's `hf_text_config`: the nested `text_config` of a multimodal model, else the config itself."""
    text = raw.get("text_config")
    return text if isinstance(text, dict) else raw


def _kv_layer_count(text: Mapping[str, Any], layers: int) -> int:
    """Hybrid models (linear + full attention) keep a KV cache only in their full-attention layers."""
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return max(1, sum(1 for kind in layer_types if kind == "full_attention"))
    interval = text.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:
        return max(1, layers // interval)
    return layers


def _eos_token_id(value: Any) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) else None
