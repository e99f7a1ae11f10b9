"""When each token of a simulated request is sent: pure timing math, no I/O.

A request's first token comes from the prefill at TTFT; then each decode step yields one token, or with
speculative decoding one verify step yields k tokens (accepted drafts + the bonus token). A verify step
accepts each further draft with probability p until one is rejected, truncated at the most a step can
yield; p is solved so that the mean of k is the `--sim-accept-length` knob. The step time makes one
stream's output rate the `--sim-decode-tok-s` knob. Every duration is multiplied by (1 + slowdown) and by
a per-request jitter factor. Step times are offsets from the request start (absolute deadlines), so a
late wake-up never shifts the later tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pytest_sglang_perf.simulator.knobs import Knobs
from pytest_sglang_perf.simulator.speculative import SpecConfig

_BISECTION_STEPS = 60
_MIN_JITTER_FACTOR = 0.1


@dataclass(frozen=True)
class Timing:
    ttft: float
    step_seconds: float
    """Nominal duration of one decode (or verify) step, before slowdown and jitter."""
    accept_length: float
    """Mean tokens per step (1 without speculative decoding)."""
    max_tokens_per_step: int
    time_scale: float
    noise: float
    speculative: bool

    @classmethod
    def from_knobs(cls, knobs: Knobs, spec: SpecConfig | None) -> Timing:
        max_per_step = spec.max_tokens_per_step if spec is not None else 1
        accept = min(knobs.accept_length, float(max_per_step)) if spec is not None else 1.0
        return cls(ttft=knobs.ttft, step_seconds=accept / knobs.decode_tok_s, accept_length=accept,
                   max_tokens_per_step=max_per_step, time_scale=knobs.time_scale, noise=knobs.noise,
                   speculative=spec is not None)


def accept_length_warning(knobs: Knobs, spec: SpecConfig | None) -> str | None:
    """Says so when --sim-accept-length cannot be reached with the resolved speculative settings."""
    if spec is None or knobs.accept_length <= spec.max_tokens_per_step:
        return None
    return (f"[simulator] --sim-accept-length {knobs.accept_length} is more than one verify step can yield "
            f"({spec.max_tokens_per_step} = speculative_num_steps + 1); using {spec.max_tokens_per_step}.")


@dataclass(frozen=True)
class RequestPlan:
    ttft: float
    step_times: tuple[float, ...]
    """Offset from the request start of each chunk; the first is the prefill token at ttft."""
    step_tokens: tuple[int, ...]
    """Tokens in each chunk."""
    verify_ct: int
    """Verify steps (speculative decoding only; 0 otherwise)."""
    correct_drafts: int
    correct_drafts_histogram: tuple[int, ...]
    """Verify steps by number of accepted drafts (index 0 = only the bonus token)."""

    @property
    def completion_tokens(self) -> int:
        return sum(self.step_tokens)

    @property
    def duration(self) -> float:
        return self.step_times[-1] if self.step_times else 0.0


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
    """One per request: 1 + noise * N(0, 1), kept positive."""
    if noise <= 0:
        return 1.0
    return max(_MIN_JITTER_FACTOR, 1.0 + noise * rng.gauss(0.0, 1.0))


def plan_request(num_tokens: int, timing: Timing, accept_rng: random.Random, jitter: float) -> RequestPlan:
    """The chunk schedule of one request that yields exactly num_tokens tokens."""
    scale = timing.time_scale * jitter
    ttft = timing.ttft * scale
    if num_tokens <= 0:
        return RequestPlan(ttft, (), (), 0, 0, ())
    counts = _step_counts(num_tokens - 1, timing, accept_rng)
    step = timing.step_seconds * scale
    times = (ttft, *(ttft + step * (i + 1) for i in range(len(counts))))
    if not timing.speculative:
        return RequestPlan(ttft, times, (1, *counts), 0, 0, ())
    histogram = [0] * timing.max_tokens_per_step
    for count in counts:
        histogram[count - 1] += 1
    return RequestPlan(ttft, times, (1, *counts), len(counts), sum(c - 1 for c in counts), tuple(histogram))


def _step_counts(remaining: int, timing: Timing, rng: random.Random) -> list[int]:
    if not timing.speculative:
        return [1] * remaining
    p = acceptance_probability(timing.accept_length, timing.max_tokens_per_step)
    counts: list[int] = []
    while remaining > 0:
        count = min(draw_step_tokens(rng, p, timing.max_tokens_per_step), remaining)
        counts.append(count)
        remaining -= count
    return counts
