"""Tokens per step (accept length) and step durations (Pacing: roofline or knobs, slowdown, noise)."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest
from sim_setup import LLAMA_1B, SEED_CONFIG, SEED_FLAGS, costs, engine

from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.args.speculative import SpecConfig
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.requests import PromptSpec
from pytest_sglang_perf.simulator.engine.schedule import (
    Acceptance,
    Pacing,
    accept_length_warning,
    acceptance_probability,
    draw_step_tokens,
    expected_tokens_per_step,
    jitter_factor,
    plan_tokens,
)

SPEC = SpecConfig("EAGLE", num_steps=3, eagle_topk=1, num_draft_tokens=4)


def _acceptance(spec: SpecConfig | None = None, **knobs: Any) -> Acceptance:
    return Acceptance.from_knobs(Knobs(**knobs), spec)


@pytest.mark.parametrize("tokens", [1, 2, 5, 97, 512])
@pytest.mark.parametrize("spec", [None, SPEC])
def test_exact_token_count(tokens: int, spec: SpecConfig | None) -> None:
    plan = plan_tokens(tokens, _acceptance(spec), random.Random(1))
    assert plan.completion_tokens == tokens
    assert plan.step_tokens[0] == 1  # the prefill token


def test_without_spec_one_token_per_step() -> None:
    plan = plan_tokens(101, _acceptance(), random.Random(0))
    assert set(plan.step_tokens) == {1} and plan.verify_ct == 0 and plan.correct_drafts_histogram == ()


def test_spec_mean_accept_length_and_bound() -> None:
    plan = plan_tokens(30001, _acceptance(SPEC, accept_length=2.6), random.Random(3))
    per_step = plan.step_tokens[1:-1]  # the last step may be truncated
    assert max(per_step) <= SPEC.num_steps + 1 and min(per_step) >= 1
    assert statistics.fmean(per_step) == pytest.approx(2.6, rel=0.02)
    assert plan.verify_ct == len(plan.step_tokens) - 1
    assert sum(plan.correct_drafts_histogram) == plan.verify_ct
    assert plan.correct_drafts == plan.completion_tokens - 1 - plan.verify_ct


def test_accept_length_is_capped_by_steps_plus_one() -> None:
    acceptance = _acceptance(SPEC, accept_length=9.0)
    assert acceptance.accept_length == 4.0
    assert set(plan_tokens(401, acceptance, random.Random(0)).step_tokens[1:]) == {4}


def test_unreachable_accept_length_is_reported() -> None:
    message = accept_length_warning(Knobs(accept_length=9.0), SPEC)
    assert message is not None and "--sim-accept-length 9.0" in message and "using 4" in message
    assert accept_length_warning(Knobs(accept_length=4.0), SPEC) is None
    assert accept_length_warning(Knobs(accept_length=9.0), None) is None


def test_accept_length_ignored_without_spec() -> None:
    assert _acceptance(None, accept_length=3.5).accept_length == 1.0


def test_same_seed_same_plan() -> None:
    assert plan_tokens(300, _acceptance(SPEC), random.Random("k")) == plan_tokens(300, _acceptance(SPEC),
                                                                                  random.Random("k"))


@pytest.mark.parametrize("mean", [1.0, 1.5, 2.0, 3.0, 3.9, 4.0])
def test_acceptance_probability_inverts_the_mean(mean: float) -> None:
    p = acceptance_probability(mean, 4)
    assert expected_tokens_per_step(p, 4) == pytest.approx(mean, abs=1e-9)


def test_draws_follow_the_probability() -> None:
    rng = random.Random(11)
    p = acceptance_probability(2.2, 4)
    draws = [draw_step_tokens(rng, p, 4) for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(2.2, rel=0.02)


def test_jitter_is_seeded_and_scaled_by_noise() -> None:
    assert jitter_factor(random.Random(1), 0.0) == 1.0
    factors = [jitter_factor(random.Random(i), 0.05) for i in range(2000)]
    assert statistics.pstdev(factors) == pytest.approx(0.05, rel=0.1)
    assert jitter_factor(random.Random(9), 0.05) == jitter_factor(random.Random(9), 0.05)


def test_zero_tokens_is_an_empty_plan() -> None:
    assert plan_tokens(0, _acceptance(), random.Random(0)).completion_tokens == 0


# ---- Pacing -------------------------------------------------------------------------------------


def _pacing(offset: float = 1.0, flags: tuple[str, ...] = SEED_FLAGS, **knobs: Any) -> Pacing:
    knob_values = Knobs(**knobs)
    step_costs = costs(SEED_CONFIG, *flags, gpu="RTX A6000")
    acceptance = Acceptance.from_knobs(knob_values, SPEC if "--speculative-algorithm" in flags else None)
    return Pacing.from_knobs(knob_values, step_costs, acceptance, offset)


def test_decode_tok_s_knob_sets_the_single_stream_rate_exactly() -> None:
    pacing = _pacing(decode_tok_s=120.0, accept_length=3.0)
    assert 3.0 / pacing.decode_step(1, 0) == pytest.approx(120.0)
    assert pacing.decode_step(1, 50_000) == pacing.decode_step(1, 0)  # the knob's rate holds at any context
    assert pacing.decode_step(8, 0) > pacing.decode_step(1, 0)  # batching still costs, as the roofline says


def test_without_knobs_the_roofline_sets_the_rate() -> None:
    pacing, plain = _pacing(), costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    assert pacing.decode_step(1, 0) == plain.decode_step(1, 0)
    assert pacing.decode_step(1, 100_000) > pacing.decode_step(1, 0)  # reading the KV cache takes time
    assert pacing.prefill(500) == plain.prefill(500)


def test_ttft_knob_fixes_the_prefill() -> None:
    pacing = _pacing(ttft=0.08)
    assert pacing.prefill(10) == pacing.prefill(5000) == pytest.approx(0.08)


def test_slowdown_boot_offset_and_request_factor_multiply_every_duration() -> None:
    base, slow = _pacing(decode_tok_s=100.0, ttft=0.05), _pacing(1.05, decode_tok_s=100.0, ttft=0.05, slowdown=0.2)
    assert slow.decode_step(1, 0) == pytest.approx(base.decode_step(1, 0) * 1.2 * 1.05)
    assert slow.prefill(10) == pytest.approx(0.05 * 1.2 * 1.05)
    assert base.decode_step(1, 0, factor=3.0) == pytest.approx(base.decode_step(1, 0) * 3.0)


def test_llama_on_h100_is_fast() -> None:
    step = costs(LLAMA_1B).decode_step(1, 0)
    assert 1 / step > 300  # a 1.2B model on an H100: launch and scheduling overhead dominate


def test_noise_is_a_seeded_boot_offset_plus_a_per_request_jitter() -> None:
    def boot(seed: int, noise: float = 0.05) -> SimEngine:
        return engine(LLAMA_1B, knobs=Knobs(noise=noise, seed=seed, decode_tok_s=100.0))

    assert boot(1).pacing.time_scale == boot(1).pacing.time_scale != boot(2).pacing.time_scale
    assert boot(1, noise=0.0).pacing.time_scale == 1.0
    sim = boot(3)
    prompt = PromptSpec("p", 10, 50, 0, True, None)
    jitters = [sim.generation(prompt).jitter for _ in range(200)]
    assert 0.03 < statistics.pstdev(jitters) < 0.07 and len(set(jitters)) == 200
    again = boot(3)
    assert [again.generation(prompt).jitter for _ in range(200)] == jitters  # seeded: a rerun repeats them
