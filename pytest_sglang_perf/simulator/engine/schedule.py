"""What a simulated request yields per step, and how long steps take: pure math, no I/O.

A request's first token comes from the prefill; then each decode step yields one token, or with speculative
decoding one verify step yields k tokens (accepted drafts + the bonus token). A verify step accepts each further
draft with probability p until one is rejected, truncated at the most a step can yield; p is solved so that the
mean of k is the `--sim-accept-length` knob. Token counts are drawn when the request arrives (`plan_tokens`);
*when* each step ends is the batcher's business (batcher.py), from `Pacing`: the roofline model of the GPU
(roofline.py), or the `--sim-decode-tok-s` / `--sim-ttft` knobs when given, times (1 + slowdown), a per-boot
offset and each request's jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.args.speculative import SpecConfig
from pytest_sglang_perf.simulator.engine.roofline import StepCosts

_BISECTION_STEPS = 60
_MIN_JITTER_FACTOR = 0.1


@dataclass(frozen=True)
class Acceptance:
    accept_length: float
    """Mean tokens per step (1 without speculative decoding)."""
    max_tokens_per_step: int
    speculative: bool

    @classmethod
    def from_knobs(cls, knobs: Knobs, spec: SpecConfig | None) -> Acceptance:
        if spec is None:
            return cls(1.0, 1, False)
        return cls(min(knobs.accept_length, float(spec.max_tokens_per_step)), spec.max_tokens_per_step, True)

    @property
    def probability(self) -> float:
        return acceptance_probability(self.accept_length, self.max_tokens_per_step)


def accept_length_warning(knobs: Knobs, spec: SpecConfig | None) -> str | None:
    """Says so when --sim-accept-length cannot be reached with the resolved speculative settings."""
    if spec is None or knobs.accept_length <= spec.max_tokens_per_step:
        return None
    return (f"[simulator] --sim-accept-length {knobs.accept_length} is more than one verify step can yield "
            f"({spec.max_tokens_per_step} = speculative_num_steps + 1); using {spec.max_tokens_per_step}.")


@dataclass(frozen=True)
class TokenPlan:
    step_tokens: tuple[int, ...]
    """Tokens of each step; the first is the prefill's token."""
    verify_ct: int
    """Verify steps (speculative decoding only; 0 otherwise)."""
    correct_drafts: int
    correct_drafts_histogram: tuple[int, ...]
    """Verify steps by number of accepted drafts (index 0 = only the bonus token)."""

    @property
    def completion_tokens(self) -> int:
        return sum(self.step_tokens)


def acceptance_probability(mean_tokens: float, max_tokens_per_step: int) -> float:
    """p such that E[k] = 1 + p + p^2 + ... + p^(max-1) equals mean_tokens (clamped to [1, max])."""
    if max_tokens_per_step <= 1 or mean_tokens <= 1:
        return 0.0
    if mean_tokens >= max_tokens_per_step:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(_BISECTION_STEPS):
        mid = (low + high) / 2
        if expected_tokens_per_step(mid, max_tokens_per_step) < mean_tokens:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def expected_tokens_per_step(p: float, max_tokens_per_step: int) -> float:
    return sum(p**j for j in range(max_tokens_per_step))


def draw_step_tokens(rng: random.Random, p: float, max_tokens_per_step: int) -> int:
    tokens = 1
    while tokens < max_tokens_per_step and rng.random() < p:
        tokens += 1
    return tokens


def jitter_factor(rng: random.Random, noise: float) -> float:
    """1 + noise * N(0, 1), kept positive: one per request (or per boot)."""
    if noise <= 0:
        return 1.0
    return max(_MIN_JITTER_FACTOR, 1.0 + noise * rng.gauss(0.0, 1.0))


def plan_tokens(num_tokens: int, acceptance: Acceptance, rng: random.Random) -> TokenPlan:
    """The tokens of each step of a request that yields exactly num_tokens tokens."""
    if num_tokens <= 0:
        return TokenPlan((), 0, 0, ())
    counts = _step_counts(num_tokens - 1, acceptance, rng)
    if not acceptance.speculative:
        return TokenPlan((1, *counts), 0, 0, ())
    histogram = [0] * acceptance.max_tokens_per_step
    for count in counts:
        histogram[count - 1] += 1
    return TokenPlan((1, *counts), len(counts), sum(c - 1 for c in counts), tuple(histogram))


def _step_counts(remaining: int, acceptance: Acceptance, rng: random.Random) -> list[int]:
    if not acceptance.speculative:
        return [1] * remaining
    p = acceptance.probability
    counts: list[int] = []
    while remaining > 0:
        count = min(draw_step_tokens(rng, p, acceptance.max_tokens_per_step), remaining)
        counts.append(count)
        remaining -= count
    return counts


@dataclass(frozen=True)
class Pacing:
    """Step durations as the server runs them: the roofline costs, the knob overrides, slowdown and boot offset."""

    costs: StepCosts
    decode_scale: float
    """1 with the roofline model; with --sim-decode-tok-s, what makes one stream decode at exactly that rate."""
    ttft: float | None
    """--sim-ttft: every prefill takes this long (else the roofline's prefill time)."""
    time_scale: float
    """(1 + slowdown) x the per-boot offset."""
    use_context: bool
    """Whether the KV cache read grows steps (the roofline model); off with --sim-decode-tok-s, whose rate is exact."""

    @classmethod
    def from_knobs(cls, knobs: Knobs, costs: StepCosts, acceptance: Acceptance, boot_offset: float) -> Pacing:
        scale = 1.0
        if knobs.decode_tok_s is not None:
            scale = acceptance.accept_length / knobs.decode_tok_s / costs.decode_step(1, 0)
        return cls(costs, scale, knobs.ttft, knobs.time_scale * boot_offset, knobs.decode_tok_s is None)

    def decode_step(self, batch: int, context_tokens: int, factor: float = 1.0) -> float:
        """One decode (verify) step of `batch` requests; `factor` is the batch's jitter and any fault slowdown."""
        context = context_tokens if self.use_context else 0
        return self.costs.decode_step(batch, context) * self.decode_scale * self.time_scale * factor

    def prefill(self, new_tokens: int, factor: float = 1.0, cached_tokens: int = 0,
                attention_flops: float = 0.0, finishing: int = 1) -> float:
        """One prefill step computing `new_tokens` (`cached_tokens` more of its prompts are not computed in it: read
        from the radix cache, or other chunks'; `attention_flops`: the step's attention term,
        StepCosts.attention_flops; `finishing`: requests whose last chunk it is, each computing its logits).
        --sim-ttft is the prefill of a prompt with nothing cached: a step takes the computed share of it."""
        if self.ttft is None:
            seconds = self.costs.prefill(new_tokens, attention_flops, finishing)
        else:
            seconds = self.ttft * new_tokens / max(1, new_tokens + cached_tokens)
        return seconds * self.time_scale * factor
