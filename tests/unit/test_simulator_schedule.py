"""Timing math of simulated requests: token counts, accept length, step pacing, slowdown, jitter."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from pytest_sglang_perf.simulator.knobs import Knobs
from pytest_sglang_perf.simulator.schedule import (
    Timing,
    accept_length_warning,
    acceptance_probability,
    draw_step_tokens,
    expected_tokens_per_step,
    jitter_factor,
    plan_request,
)
from pytest_sglang_perf.simulator.speculative import SpecConfig

SPEC = SpecConfig("EAGLE", num_steps=3, eagle_topk=1, num_draft_tokens=4)


def _timing(spec: SpecConfig | None = None, **knobs: Any) -> Timing:
    return Timing.from_knobs(Knobs(**knobs), spec)


@pytest.mark.parametrize("tokens", [1, 2, 5, 97, 512])
@pytest.mark.parametrize("spec", [None, SPEC])
def test_exact_token_count(tokens: int, spec: SpecConfig | None) -> None:
    plan = plan_request(tokens, _timing(spec), random.Random(1), 1.0)
    assert plan.completion_tokens == tokens
    assert plan.step_tokens[0] == 1  # the prefill token
    assert len(plan.step_times) == len(plan.step_tokens)


def test_without_spec_one_token_per_step_at_the_knob_rate() -> None:
    plan = plan_request(101, _timing(decode_tok_s=200, ttft=0.1), random.Random(0), 1.0)
    assert set(plan.step_tokens) == {1} and plan.verify_ct == 0
    assert plan.ttft == pytest.approx(0.1) and plan.step_times[0] == pytest.approx(0.1)
    assert plan.duration == pytest.approx(0.1 + 100 / 200)


def test_deadlines_are_absolute_offsets() -> None:
    plan = plan_request(1000, _timing(decode_tok_s=1000, ttft=0.0), random.Random(0), 1.0)
    assert plan.step_times[500] == pytest.approx(0.5)  # no accumulated drift
    gaps = {round(b - a, 9) for a, b in zip(plan.step_times, plan.step_times[1:], strict=False)}
    assert gaps == {0.001}


def test_spec_mean_accept_length_and_bound() -> None:
    plan = plan_request(30001, _timing(SPEC, accept_length=2.6), random.Random(3), 1.0)
    per_step = plan.step_tokens[1:-1]  # the last step may be truncated
    assert max(per_step) <= SPEC.num_steps + 1 and min(per_step) >= 1
    assert statistics.fmean(per_step) == pytest.approx(2.6, rel=0.02)
    assert plan.verify_ct == len(plan.step_tokens) - 1
    assert sum(plan.correct_drafts_histogram) == plan.verify_ct
    assert plan.correct_drafts == plan.completion_tokens - 1 - plan.verify_ct


def test_spec_output_rate_matches_knob() -> None:
    timing = _timing(SPEC, accept_length=3.0, decode_tok_s=120, ttft=0.0)
    plan = plan_request(6001, timing, random.Random(5), 1.0)
    assert (plan.completion_tokens - 1) / plan.duration == pytest.approx(120, rel=0.03)


def test_accept_length_is_capped_by_steps_plus_one() -> None:
    timing = _timing(SPEC, accept_length=9.0)
    assert timing.accept_length == 4.0
    plan = plan_request(401, timing, random.Random(0), 1.0)
    assert set(plan.step_tokens[1:]) == {4}


def test_unreachable_accept_length_is_reported() -> None:
    message = accept_length_warning(Knobs(accept_length=9.0), SPEC)
    assert message is not None and "--sim-accept-length 9.0" in message and "using 4" in message
    assert accept_length_warning(Knobs(accept_length=4.0), SPEC) is None
    assert accept_length_warning(Knobs(accept_length=9.0), None) is None


def test_accept_length_ignored_without_spec() -> None:
    assert _timing(None, accept_length=3.5).accept_length == 1.0


def test_slowdown_stretches_every_duration() -> None:
    base = plan_request(50, _timing(decode_tok_s=100, ttft=0.05), random.Random(0), 1.0)
    slow = plan_request(50, _timing(decode_tok_s=100, ttft=0.05, slowdown=0.2), random.Random(0), 1.0)
    assert slow.ttft == pytest.approx(base.ttft * 1.2)
    assert slow.duration == pytest.approx(base.duration * 1.2)


def test_same_seed_same_schedule() -> None:
    a = plan_request(300, _timing(SPEC), random.Random("k"), 1.0)
    b = plan_request(300, _timing(SPEC), random.Random("k"), 1.0)
    assert a == b


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
    plan = plan_request(0, _timing(), random.Random(0), 1.0)
    assert plan.completion_tokens == 0 and plan.step_times == ()
