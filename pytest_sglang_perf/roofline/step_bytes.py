"""The bytes one decode step must read from one GPU's memory, on the step's critical path: the floor under its time
at a given bandwidth (roofline/ceiling.py).

One step is one forward of the target over `verify_tokens` tokens per request (1 without speculative decoding; the
draft tokens plus one with EAGLE / NEXTN / MTP), preceded by `draft_steps` forwards of the draft. Each forward
reads its weights once whatever the batch (the matrix-vector products stream every weight), except an MoE layer's
routed experts: only the experts the step's tokens are routed to are read.

Parallelism: tensor parallelism splits each weight matrix over `tp` GPUs, which read their shares at the same time,
so the critical path reads 1/tp of the weights. Pipeline parallelism puts the layers on `pp` stages that, for one
step of one batch, run one after another: the step still waits for every layer's weights to be read, at one GPU's
bandwidth per stage in sequence, so pp does not shorten it (bytes are weights / tp, not / (tp x pp)). The KV cache
is split by KV head over tp; a GPU holds at least one head (a model with fewer KV heads than tp replicates them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.weight_bytes import WeightBytes


@dataclass(frozen=True)
class DecodeShape:
    """One decode step's shape."""

    tp: int = 1
    pp: int = 1
    verify_tokens: int = 1
    """Tokens each request puts through the target per step: 1, or speculative_num_draft_tokens."""
    draft_steps: int = 0
    """Forwards of the draft per step: speculative_num_steps (0 without speculative decoding)."""
    context_tokens: int = 0
    """Tokens in each request's KV cache when the step runs."""
    batch: int = 1
    """Requests decoded together."""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "verify_tokens", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"DecodeShape.{name} must be at least 1, not {getattr(self, name)}")
        for name in ("draft_steps", "context_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"DecodeShape.{name} must be 0 or more, not {getattr(self, name)}")


@dataclass(frozen=True)
class StepBytes:
    """Bytes one GPU reads on the critical path of one decode step."""

    target: float
    """The target's weights one verify forward reads: layers, the experts its tokens touch, the LM head."""
    draft: float
    """The draft forwards' weights: each reads the draft layer and the LM head."""
    kv: float
    """The KV cache the target's attention reads."""

    @property
    def total(self) -> float:
        return self.target + self.draft + self.kv

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total": self.total}


def expected_experts(num_experts: int, experts_per_token: int, tokens: int) -> float:
    """Experts of one MoE layer that `tokens` tokens touch, each routed to `experts_per_token` of `num_experts`,
    expected value for uniform routing: E x (1 - (1 - k/E)^T). One token touches k; many touch nearly all."""
    if num_experts <= 0:
        return 0.0
    share = min(1.0, experts_per_token / num_experts)
    return num_experts * (1 - (1 - share) ** max(1, tokens))


def decode_step_bytes(weights: WeightBytes, shape: DecodeShape) -> StepBytes:
    """What one decode step of `shape` reads per GPU on its critical path (module docstring). The draft layer's own
    KV cache (one layer) is left out."""
    touched = expected_experts(weights.num_experts, weights.experts_per_token, shape.batch * shape.verify_tokens)
    target = weights.layers + weights.moe_layers * touched * weights.expert + weights.lm_head
    draft = shape.draft_steps * (weights.draft_layer + weights.lm_head)
    return StepBytes(target=target / shape.tp, draft=draft / shape.tp, kv=_kv_bytes(weights, shape))


def _kv_bytes(weights: WeightBytes, shape: DecodeShape) -> float:
    if weights.kv_heads <= 0:
        return shape.batch * shape.context_tokens * weights.kv_per_token / shape.tp
    heads_per_gpu = max(1, weights.kv_heads // shape.tp)
    return shape.batch * shape.context_tokens * weights.kv_per_token * heads_per_gpu / weights.kv_heads
