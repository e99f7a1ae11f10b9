"""A model's bytes, split the way a decode step reads them (the record `roofline/weights.py` gives out)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_FLOATS = ("layers", "expert", "lm_head", "embedding", "draft_layer", "other", "kv_per_token")
_INTS = ("num_experts", "experts_per_token", "moe_layers", "kv_heads")
_STRINGS = ("dtype", "source")
_OPTIONAL_FLOATS = ("attention", "kv_per_token_sliding")
_OPTIONAL_INTS = ("sliding_window",)
"""Fields added after the first records were written: a record without them reads them as their defaults."""


@dataclass(frozen=True)
class WeightBytes:
    """The whole model (before tensor or pipeline parallelism splits it), in bytes."""

    layers: float
    """Decoder layers except routed experts: attention, norms, dense MLPs, routers, shared experts, final norm."""
    expert: float
    """One routed expert of one MoE layer (0 for a dense model)."""
    num_experts: int
    """Routed experts per MoE layer (0 for a dense model)."""
    experts_per_token: int
    """Experts each token is routed to (config.json's top-k; 0 for a dense model)."""
    moe_layers: int
    """Layers with routed experts."""
    lm_head: float
    """The LM head, read by every forward; with tied embeddings, the embedding table."""
    embedding: float
    """The embedding table when it is not the LM head: a forward gathers a few rows, so it is not counted as read."""
    draft_layer: float
    """One draft forward's own weights: an MTP / NEXTN layer (its layer, input projection and norms; of an MoE draft
    layer the experts one token reads), an EAGLE draft's layers and input projection, a standalone draft model's
    layers (its experts one token reads); 0 without a draft. Its LM head is `draft_lm_head`, else `lm_head`."""
    other: float
    """Loaded, never read while decoding: vision / audio towers, a NEXTN layer's copies of the embedding and LM head,
    the experts of an MoE draft layer one token does not read, tensors not placed (named in `notes`)."""
    kv_per_token: float
    """K and V of one token: every full-attention layer, every KV head, at the KV cache's dtype (MLA: every layer's
    latent)."""
    kv_heads: int
    """KV heads per layer (1 for MLA: its latent is not split by tensor parallelism)."""
    dtype: str
    """The dominant weight dtype: "bf16", "fp8_e4m3", "int4 (awq)", ..."""
    exact: bool
    """True: summed from the checkpoint's safetensors headers; False: estimated from config.json."""
    source: str
    """The file(s) the numbers came from."""
    notes: tuple[str, ...] = ()
    """What was assumed or left out, in words a user reads."""
    attention: float = 0.0
    """The part of `layers` that is the layers' token mixers (attention, linear attention): attention data
    parallelism replicates it in every attention group. 0 in a record written before the field existed."""
    draft_lm_head: float | None = None
    """The LM head one draft forward reads when the draft has its own (an EAGLE3 draft with `draft_vocab_size`, a
    standalone draft model); None: the draft reads the target's, `lm_head`."""
    kv_per_token_sliding: float = 0.0
    """K and V of one token in every sliding-window attention layer (they read at most `sliding_window` tokens)."""
    sliding_window: int = 0
    """Tokens a sliding-window layer attends to (config.json's `sliding_window`); 0 without such layers."""

    @property
    def total(self) -> float:
        """Everything loaded: the checkpoint's size (and a separate draft model's)."""
        experts = self.expert * self.num_experts * self.moe_layers
        own_head = self.draft_lm_head or 0.0
        return self.layers + experts + self.lm_head + self.embedding + self.draft_layer + own_head + self.other

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; `total` is added for readers and ignored by from_dict."""
        return {**dataclasses.asdict(self), "notes": list(self.notes), "total": self.total}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WeightBytes:
        """The record to_dict wrote; ValueError naming the first field that is missing or of the wrong type."""
        values: dict[str, Any] = {}
        for name in _FLOATS:
            values[name] = float(_field(raw, name, (int, float)))
        for name in _INTS:
            values[name] = _field(raw, name, (int,))
        for name in _STRINGS:
            values[name] = _field(raw, name, (str,))
        values["exact"] = _field(raw, "exact", (bool,))
        for name in _OPTIONAL_FLOATS:
            if raw.get(name) is not None:
                values[name] = float(_field(raw, name, (int, float)))
        for name in _OPTIONAL_INTS:
            if raw.get(name) is not None:
                values[name] = _field(raw, name, (int,))
        if raw.get("draft_lm_head") is not None:
            values["draft_lm_head"] = float(_field(raw, "draft_lm_head", (int, float)))
        notes = _field(raw, "notes", (list,)) if "notes" in raw else []
        if not all(isinstance(note, str) for note in notes):
            raise ValueError("WeightBytes field 'notes' must be a list of strings")
        return cls(**values, notes=tuple(notes))


def _field(raw: Mapping[str, Any], name: str, types: tuple[type, ...]) -> Any:
    if name not in raw:
        raise ValueError(f"WeightBytes field '{name}' is missing")
    value = raw[name]
    is_bool = isinstance(value, bool)
    if not isinstance(value, types) or (is_bool and bool not in types):
        expected = " or ".join(kind.__name__ for kind in types)
        raise ValueError(f"WeightBytes field '{name}' must be {expected}, not {value!r}")
    return value
