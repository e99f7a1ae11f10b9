"""Where a checkpoint tensor belongs in a decode step, from its name alone: a decoder layer (its token mixer apart:
`self_attn.`, `linear_attn.`, `attention.`, `attn.`), one routed expert, the LM head, the embedding table, the MTP /
NEXTN draft layer, or something never read while decoding.

The names are Hugging Face checkpoints' own, as SGLang 0.5.23's weight loaders read them (sglang/srt/models/):
`model.layers.N.` and `model.embed_tokens`, `lm_head` (llama.py, qwen2.py, qwen3.py); routed experts
`mlp.experts.E.{gate,up,down}_proj` (qwen3_moe.py via FusedMoE.make_expert_params_mapping, Mixtral's
`block_sparse_moe.experts.E.w1`), fused 3-D expert tensors `mlp.experts.gate_up_proj` / `down_proj`
(qwen3_5_mtp.py's fused_expert_params_mapping, gpt-oss); DeepSeek-style NEXTN layers stored as
`model.layers.{num_hidden_layers}.` with `eh_proj`, `enorm`, `hnorm`, `shared_head` and their own copies of
`embed_tokens` and `shared_head.head` (deepseek_nextn.py); Qwen3.5-style MTP weights under `mtp.` (`mtp.fc`,
`mtp.pre_fc_norm_*`, `mtp.layers.0.`, `mtp.norm`; qwen3_5_mtp.py); multimodal models nest the language model
under `model.language_model.` (qwen3_5.py) or `language_model.` (LLaVA-style) and keep their towers under
`visual.` / `model.visual.` (qwen2_5_vl.py, qwen3_5.py), `vision_tower.`, `multi_modal_projector.`, `audio_tower.`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Part(enum.Enum):
    LAYERS = "layers"
    """Decoder layers except their token mixers and routed experts; the final norm."""
    ATTENTION = "attention"
    """A decoder layer's token mixer: `self_attn.`, `linear_attn.`, `attention.`, `attn.` (part of the layers)."""
    EXPERT = "expert"
    LM_HEAD = "lm_head"
    EMBEDDING = "embedding"
    DRAFT = "draft"
    """The first MTP / NEXTN layer, except its routed experts."""
    DRAFT_EXPERT = "draft_expert"
    TOWER = "tower"
    """A vision or audio encoder and its projector: loaded, never read while decoding."""
    UNREAD = "unread"
    """Loaded but not read while decoding, for a known reason (`Placement.why`)."""
    UNKNOWN = "unknown"
    """A name the rules do not know."""


@dataclass(frozen=True)
class Placement:
    part: Part
    layer: int | None = None
    """The decoder layer (EXPERT)."""
    expert: int | None = None
    """The expert of a per-expert tensor; None for a fused tensor holding every expert of the layer."""
    why: str = ""
    """UNREAD: why the tensor is not read while decoding, in words a user reads."""


_TOWERS = frozenset({"visual", "vision_tower", "vision_model", "vision_encoder", "multi_modal_projector",
                     "mm_projector", "audio_tower", "audio_model", "audio_encoder", "image_newline",
                     "vision_embed_tokens"})
_EMBEDDINGS = frozenset({"embed_tokens", "wte", "word_embeddings", "tok_embeddings"})
_STEM = re.compile(r"^(?:model|transformer)\.")
_LAYER = re.compile(r"^(?:model\.|transformer\.)?(?:layers|h)\.(\d+)\.(.*)$")
_MTP_LAYER = re.compile(r"^(?:model\.)?mtp\.layers\.(\d+)\.(.*)$")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)\.")
_FUSED_EXPERTS = re.compile(r"(?:^|\.)experts\.(?!\d)")
_MIXER = re.compile(r"^(?:self_attn|linear_attn|attention|attn|self_attention)\.")
_NEXTN_COPIES = {
    "embed_tokens.": "the NEXTN layer's copy of the embedding table (SGLang's draft shares the target's)",
    "shared_head.head.": "the NEXTN layer's copy of the LM head (SGLang's draft reads the target's LM head)",
}


def normalized(name: str) -> str:
    """The name with a multimodal model's language-model prefix taken off: `model.language_model.X` -> `model.X`
    (Qwen3.5, transformers >= 4.52), `language_model.model.X` -> `model.X` (LLaVA-style)."""
    if name.startswith("language_model."):
        name = name[len("language_model."):]
    return name.replace("model.language_model.", "model.", 1)


def place(name: str, num_layers: int) -> Placement:
    """Where `name` belongs; `num_layers` is config.json's `num_hidden_layers` (a layer index at or past it is a
    NEXTN layer)."""
    name = normalized(name)
    top = _STEM.sub("", name).split(".", 1)[0]
    if top in _TOWERS:
        return Placement(Part.TOWER)
    if top == "mtp":
        return _mtp(name)
    match = _LAYER.match(name)
    if match:
        return _layer(int(match.group(1)), match.group(2), num_layers)
    return _model_level(name, top)


def _layer(index: int, rest: str, num_layers: int) -> Placement:
    if index < num_layers:
        plain = Part.ATTENTION if _MIXER.match(rest) else Part.LAYERS
        return _expert_or(plain, Part.EXPERT, index, rest)
    if index > num_layers:
        return Placement(Part.UNREAD, why="a second NEXTN layer (one draft forward runs the first)")
    for prefix, why in _NEXTN_COPIES.items():
        if rest.startswith(prefix):
            return Placement(Part.UNREAD, why=why)
    return _expert_or(Part.DRAFT, Part.DRAFT_EXPERT, index, rest)


def _mtp(name: str) -> Placement:
    match = _MTP_LAYER.match(name)
    if match is None:
        return Placement(Part.DRAFT)
    if int(match.group(1)) > 0:
        return Placement(Part.UNREAD, why="a second MTP layer (one draft forward runs the first)")
    return _expert_or(Part.DRAFT, Part.DRAFT_EXPERT, 0, match.group(2))


def _expert_or(plain: Part, expert: Part, layer: int, rest: str) -> Placement:
    per_expert = _EXPERT.search(rest)
    if per_expert:
        return Placement(expert, layer, int(per_expert.group(1)))
    if _FUSED_EXPERTS.search(rest):
        return Placement(expert, layer)
    return Placement(plain, layer)


def _model_level(name: str, top: str) -> Placement:
    if top == "lm_head":
        return Placement(Part.LM_HEAD)
    if top in _EMBEDDINGS:
        return Placement(Part.EMBEDDING)
    if "rotary_emb." in name:
        return Placement(Part.UNREAD, why="a rotary-embedding buffer (recomputed, not a weight)")
    if top in ("norm", "final_layernorm", "ln_f"):
        return Placement(Part.LAYERS)
    return Placement(Part.UNKNOWN)
