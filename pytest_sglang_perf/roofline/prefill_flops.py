"""The floating-point work of one prefill: what a prompt of N tokens costs a GPU before its first token
(docs/prefill.md §4).

Per GPU, for a prompt of N new tokens after P already in the KV cache (0 on a cold cache), prefilled in chunks of
C tokens (`chunked_prefill_size`; the whole prompt when C is 0 or larger than N):

    linear    = 2 x (active parameters - LM head) / tp x N    every token through every weight it is multiplied
                                                                with (MoE: its routed experts only), 2 FLOPs per
                                                                multiply-add
    head      = 2 x LM head / tp                              SGLang computes the logits of the last position only
    attention = sum over chunks of 4 x c x (p + c / 2)        QK^T and PV of each chunk's c queries over the p keys
                x query heads x head_dim / tp x full-attention    before it and, causally, over its own
                layers

The parameter counts are sglang_facts/model_sizes.py's, from config.json (the same the simulator's timing model
uses): attention and MLP projections, routed experts at top-k, the LM head. Norms, rotary embeddings, the softmax,
activations and sampling are left out: elementwise, well under 1% of the FLOPs at any length worth a ceiling.
The quadratic term counts the layers model_sizes.py counts as holding a KV cache (`num_kv_layers`): a config whose
`layer_types` names its linear-attention or sliding-window layers has them left out (their attention is linear in N
or bounded by the window: a floor); a config that sets only `sliding_window` (Mistral-style) has every layer
counted as full attention, which overstates a long prompt's FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig


@dataclass(frozen=True)
class PrefillFlops:
    """One prefill's FLOPs on one GPU, term by term."""

    prompt_tokens: int
    """New tokens prefilled (not read from the prefix cache)."""
    chunks: int
    linear: float
    head: float
    attention: float
    tp: int

    @property
    def total(self) -> float:
        return self.linear + self.head + self.attention

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "chunks": self.chunks, "linear": self.linear,
                "head": self.head, "attention": self.attention, "total": self.total, "tp": self.tp}


def prefill_flops(model: ModelConfig, new_tokens: int, *, tp: int = 1, chunk_size: int = 0,
                  cached_tokens: int = 0) -> PrefillFlops:
    """The FLOPs of prefilling `new_tokens` after `cached_tokens` on one of `tp` GPUs, in chunks of `chunk_size`
    (0: one step)."""
    if new_tokens < 1 or tp < 1:
        raise ValueError(f"a prefill needs at least one token and one GPU, got {new_tokens} tokens on tp {tp}")
    head_params = model.vocab_size * model.hidden_size
    linear = 2.0 * (model.active_param_count() - head_params) * new_tokens / tp
    width = model.num_attention_heads * model.head_dim / tp
    step = chunk_size if chunk_size > 0 else new_tokens
    attention, done, chunks = 0.0, 0, 0
    while done < new_tokens:
        size = min(step, new_tokens - done)
        attention += 4.0 * size * (cached_tokens + done + size / 2) * width * model.num_kv_layers
        done += size
        chunks += 1
    return PrefillFlops(new_tokens, chunks, linear, 2.0 * head_params / tp, attention, tp)
