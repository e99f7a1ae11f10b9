"""The bytes one decode step must read from one GPU's memory, on the step's critical path: the floor under its time
at a given bandwidth (roofline/ceiling.py).

One step is one forward of the target over `verify_tokens` tokens per request (1 without speculative decoding; the
draft tokens plus one with EAGLE / NEXTN / MTP), preceded by `draft_steps` forwards of the draft. Each forward
reads its weights once whatever the batch (the matrix-vector products stream every weight), except an MoE layer's
routed experts: only the experts the step's tokens are routed to are read.

Parallelism, as SGLang 0.5.23 lays the GPUs out (runtime_context.py `derive_parallel_widths`): tensor parallelism
splits each weight matrix over `tp` GPUs, which read their shares at the same time, so one GPU reads 1/tp of them.
Attention data parallelism (`attn_dp`, ServerArgs `attn_dp_size`) splits the tp GPUs into attn_dp groups of
attn_tp = tp / attn_dp GPUs, each serving its own requests with its own copy of the attention weights: a GPU reads
1/attn_tp of the layers' token mixers (`WeightBytes.attention`) and the KV heads of its group's requests; the other
weights (MLPs, experts, LM head) stay split over all tp GPUs. Expert parallelism (`ep`, `ep_size`) puts
num_experts / ep whole experts on each of ep groups of tp / ep GPUs (moe_tp_size = tp / ep), which split each of
them: a GPU reads, of the experts its group holds, those the step's tokens touch, / (tp / ep). Its share of the
touched experts varies from step to step and the step waits for the busiest group: with ep > 1 the count is the
expected largest over the ep groups (each expert touched with probability 1 - (1 - k/E)^T, independently: a
binomial per group); with ep = 1 it is the expected count itself. Pipeline parallelism puts the layers on `pp`
stages that, for one step of one batch, run one after another: pp does not shorten the step (bytes are weights / tp,
not / (tp x pp)). The KV cache is split by KV head over attn_tp; a GPU holds at least one head (a model with fewer KV
heads than attn_tp replicates them).
"""

from __future__ import annotations

import dataclasses
import math
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
    attn_dp: int = 1
    """Attention data-parallel groups inside the tp GPUs (ServerArgs `attn_dp_size`); it divides tp."""
    ep: int = 1
    """Expert-parallel groups inside the tp GPUs (ServerArgs `ep_size`); it divides tp."""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "verify_tokens", "batch", "attn_dp", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"DecodeShape.{name} must be at least 1, not {getattr(self, name)}")
        for name in ("draft_steps", "context_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"DecodeShape.{name} must be 0 or more, not {getattr(self, name)}")
        for name in ("attn_dp", "ep"):
            if self.tp % getattr(self, name):
                raise ValueError(f"DecodeShape.{name} ({getattr(self, name)}) must divide tp ({self.tp})")

    @property
    def attn_tp(self) -> int:
        """GPUs one attention group splits its attention weights and KV heads over."""
        return self.tp // self.attn_dp


@dataclass(frozen=True)
class StepBytes:
    """Bytes one GPU reads on the critical path of one decode step."""

    target: float
    """The target's weights one verify forward reads: layers, the experts its tokens touch, the LM head."""
    draft: float
    """The draft forwards' weights: each reads the draft's layer(s) and an LM head (its own or the target's)."""
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
    return num_experts * _touch_chance(num_experts, experts_per_token, tokens)


def busiest_group_experts(num_experts: int, experts_per_token: int, tokens: int, groups: int) -> float:
    """The expected largest number of touched experts among `groups` expert-parallel groups holding num_experts /
    groups experts each (module docstring); `groups` 1: expected_experts."""
    if groups <= 1 or num_experts <= 0:
        return expected_experts(num_experts, experts_per_token, tokens)
    held = math.ceil(num_experts / groups)
    chance = _touch_chance(num_experts, experts_per_token, tokens)
    below = 0.0
    expected_max = 0.0
    for count in range(held):
        below += math.comb(held, count) * chance**count * (1 - chance) ** (held - count)
        expected_max += 1 - min(1.0, below) ** groups
    return expected_max


def decode_step_bytes(weights: WeightBytes, shape: DecodeShape) -> StepBytes:
    """What one decode step of `shape` reads per GPU on its critical path (module docstring). The draft's own KV
    cache is left out."""
    tokens = shape.batch * shape.verify_tokens
    touched = busiest_group_experts(weights.num_experts, weights.experts_per_token, tokens, shape.ep)
    experts = weights.moe_layers * touched * weights.expert * shape.ep
    attention = min(weights.attention, weights.layers)
    target = (weights.layers - attention + experts + weights.lm_head) / shape.tp + attention / shape.attn_tp
    head = weights.draft_lm_head if weights.draft_lm_head is not None else weights.lm_head
    draft = shape.draft_steps * (weights.draft_layer + head)
    return StepBytes(target=target, draft=draft / shape.tp, kv=_kv_bytes(weights, shape))


def _kv_bytes(weights: WeightBytes, shape: DecodeShape) -> float:
    """The KV cache of the requests on the busiest attention group, read by one of its GPUs."""
    requests = math.ceil(shape.batch / shape.attn_dp)
    window = min(shape.context_tokens, weights.sliding_window)
    per_request = shape.context_tokens * weights.kv_per_token + window * weights.kv_per_token_sliding
    if weights.kv_heads <= 0:
        return requests * per_request / shape.attn_tp
    heads_per_gpu = max(1, weights.kv_heads // shape.attn_tp)
    return requests * per_request * heads_per_gpu / weights.kv_heads


def _touch_chance(num_experts: int, experts_per_token: int, tokens: int) -> float:
    """The chance one expert is touched by `tokens` tokens, each routed to `experts_per_token` of `num_experts`."""
    share = min(1.0, experts_per_token / num_experts)
    return float(1 - (1 - share) ** max(1, tokens))
