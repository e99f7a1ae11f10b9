"""The bytes one decode step reads per GPU on its critical path (roofline/step_bytes.py), for the shipped configs:
these are the numbers the decode ceiling divides a bandwidth by."""

from __future__ import annotations

import dataclasses
import re

import pytest
from test_roofline_weights import DEEPSEEK_V3, GPT_OSS, LLAMA, QWEN_MOE, QWEN_MTP, QWEN_VL, estimate

from pytest_sglang_perf.roofline.step_bytes import (
    DecodeShape,
    StepBytes,
    busiest_group_experts,
    decode_step_bytes,
    expected_experts,
)
from pytest_sglang_perf.roofline.weights import weights_from_config

GB = 1e9


def test_llama_8b_reads_15_gb_per_step() -> None:
    step = decode_step_bytes(estimate(LLAMA), DecodeShape())
    assert step.target / GB == pytest.approx(15.009, abs=0.001)
    assert (step.draft, step.kv) == (0, 0)
    assert step.total == step.target


def test_llama_8b_kv_cache_at_600_tokens() -> None:
    """The issue's H200 measurement shape: batch 1, 600 tokens of context; 128 KiB of K and V per token."""
    step = decode_step_bytes(estimate(LLAMA), DecodeShape(context_tokens=600))
    assert step.kv == 600 * 131072
    assert step.total / GB == pytest.approx(15.088, abs=0.001)


def test_qwen3_30b_a3b_reads_more_experts_for_more_tokens() -> None:
    """One token reads its 8 of 128 experts per layer (~3B active); 4 verify tokens touch ~29 of 128."""
    weights = estimate(QWEN_MOE)
    one = decode_step_bytes(weights, DecodeShape())
    four = decode_step_bytes(weights, DecodeShape(verify_tokens=4))
    assert one.target / GB == pytest.approx(6.083, abs=0.001)
    assert four.target / GB == pytest.approx(15.652, abs=0.001)
    touched = 128 * (1 - (1 - 8 / 128) ** 4)
    assert four.target - one.target == pytest.approx(48 * (touched - 8) * weights.expert)
    assert decode_step_bytes(weights, DecodeShape(batch=2, verify_tokens=2)).target == four.target


def test_qwen2_5_vl_reads_no_vision_tower_while_decoding() -> None:
    weights = estimate(QWEN_VL)
    step = decode_step_bytes(weights, DecodeShape())
    assert step.target == weights.layers + weights.lm_head
    assert step.target / GB == pytest.approx(14.141, abs=0.001)
    assert weights.total - step.target == pytest.approx(weights.embedding + weights.other)


def test_qwen3_6_27b_nextn_3_steps_4_verify_tokens_on_2_gpus() -> None:
    """The seed's case: tp 2, NEXTN with 3 draft steps and 4 draft tokens, 600 tokens of context."""
    weights = estimate(QWEN_MTP)
    step = decode_step_bytes(weights, DecodeShape(tp=2, verify_tokens=4, draft_steps=3, context_tokens=600))
    assert step.target / GB == pytest.approx(25.095, abs=0.001)
    assert step.draft == 3 * (weights.draft_layer + weights.lm_head) / 2
    assert step.draft / GB == pytest.approx(5.088, abs=0.001)
    assert step.kv == 600 * weights.kv_per_token / 2
    assert step.total / GB == pytest.approx(30.262, abs=0.001)
    assert step.to_dict() == {"target": step.target, "draft": step.draft, "kv": step.kv, "total": step.total}


def test_pipeline_stages_run_in_sequence_so_pp_reads_the_same() -> None:
    weights = estimate(LLAMA)
    assert decode_step_bytes(weights, DecodeShape(pp=4)) == decode_step_bytes(weights, DecodeShape())
    assert decode_step_bytes(weights, DecodeShape(tp=4)).target == decode_step_bytes(weights, DecodeShape()).target / 4


def test_a_gpu_holds_at_least_one_kv_head() -> None:
    """Llama-3.1-8B has 8 KV heads: at tp 16 each GPU still reads one (SGLang replicates them)."""
    weights = estimate(LLAMA)
    at = {tp: decode_step_bytes(weights, DecodeShape(tp=tp, context_tokens=1000)).kv for tp in (1, 8, 16)}
    assert at[8] == at[16] == at[1] / 8


def test_mla_kv_cache_is_not_split_by_tensor_parallelism() -> None:
    weights = weights_from_config(DEEPSEEK_V3, source="deepseek")
    on_8 = decode_step_bytes(weights, DecodeShape(tp=8, context_tokens=1000))
    assert on_8.kv == 1000 * 61 * 576 * 2


def test_a_draft_needs_a_draft_layer() -> None:
    weights = dataclasses.replace(estimate(LLAMA), draft_layer=0.0)
    assert decode_step_bytes(weights, DecodeShape(draft_steps=2)).draft == 2 * weights.lm_head


@pytest.mark.parametrize(("experts", "top_k", "tokens", "touched"), [
    (128, 8, 1, 8.0), (128, 8, 1000, 128.0), (0, 0, 5, 0.0), (4, 8, 1, 4.0), (64, 2, 2, 64 * (1 - (62 / 64) ** 2)),
])
def test_expected_experts(experts: int, top_k: int, tokens: int, touched: float) -> None:
    assert expected_experts(experts, top_k, tokens) == pytest.approx(touched)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("tp", 0, "DecodeShape.tp must be at least 1, not 0"),
    ("verify_tokens", 0, "DecodeShape.verify_tokens must be at least 1, not 0"),
    ("draft_steps", -1, "DecodeShape.draft_steps must be 0 or more, not -1"),
    ("context_tokens", -5, "DecodeShape.context_tokens must be 0 or more, not -5"),
])
def test_a_bad_shape_names_its_field(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        DecodeShape(**{field: value})


def test_step_bytes_total() -> None:
    assert StepBytes(target=1.0, draft=2.0, kv=3.5).total == 6.5


def test_a_sliding_window_layer_reads_at_most_its_window() -> None:
    weights = weights_from_config(GPT_OSS, source="gpt-oss")
    short, long = (decode_step_bytes(weights, DecodeShape(context_tokens=tokens)).kv for tokens in (100, 10_000))
    assert short == 100 * (weights.kv_per_token + weights.kv_per_token_sliding)
    assert long == 10_000 * weights.kv_per_token + 128 * weights.kv_per_token_sliding


def test_attention_data_parallelism_replicates_attention_weights_and_kv_heads() -> None:
    """tp 8 in 4 attention-DP groups of 2 GPUs: a GPU reads half the attention weights and half the KV heads of its
    group's request; the MLPs and the LM head stay split over all 8."""
    weights = estimate(LLAMA)
    plain = decode_step_bytes(weights, DecodeShape(tp=8, context_tokens=1000))
    dp = decode_step_bytes(weights, DecodeShape(tp=8, attn_dp=4, context_tokens=1000))
    assert dp.target - plain.target == pytest.approx(weights.attention / 2 - weights.attention / 8)
    assert (plain.kv, dp.kv) == (1000 * weights.kv_per_token / 8, 1000 * weights.kv_per_token / 2)
    batch = decode_step_bytes(weights, DecodeShape(tp=8, attn_dp=4, batch=6, context_tokens=1000))
    assert batch.kv == 2 * dp.kv  # 6 requests over 4 groups: the busiest holds 2


def test_mla_under_attention_data_parallelism() -> None:
    """DeepSeek-V3 at tp 8 with 8 attention-DP groups: each GPU reads all its requests' MLA attention weights."""
    weights = weights_from_config(DEEPSEEK_V3, source="deepseek")
    step = decode_step_bytes(weights, DecodeShape(tp=8, attn_dp=8, context_tokens=1000))
    mla = 7168 * 1536 + 1536 * 128 * 192 + 7168 * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * 7168
    assert weights.attention == 61 * mla * 2
    assert step.target == pytest.approx(weights.attention + (weights.layers - weights.attention + 58 * 8
                                                             * weights.expert + weights.lm_head) / 8)
    assert step.kv == 1000 * 61 * 576 * 2


def test_expert_parallelism_waits_for_the_busiest_group() -> None:
    """Qwen3-30B-A3B at tp 4: with ep 4 each group holds 32 whole experts; one token's 8 land unevenly, and the
    step waits for the group with the most."""
    weights = estimate(QWEN_MOE)
    tp_only = decode_step_bytes(weights, DecodeShape(tp=4))
    with_ep = decode_step_bytes(weights, DecodeShape(tp=4, ep=4))
    busiest = busiest_group_experts(128, 8, 1, 4)
    assert 2 < busiest < 8
    assert with_ep.target - tp_only.target == pytest.approx(48 * weights.expert * (busiest * 4 - 8) / 4)
    assert decode_step_bytes(weights, DecodeShape(tp=4, ep=4, verify_tokens=1000)).target == pytest.approx(
        decode_step_bytes(weights, DecodeShape(tp=4, verify_tokens=1000)).target)


@pytest.mark.parametrize(("experts", "top_k", "tokens", "groups", "busiest"), [
    (4, 1, 1, 2, (1 - 0.5625**2) + (1 - 0.9375**2)),  # 2 experts a group, each touched with chance 1/4
    (128, 8, 1, 1, 8.0),
    (16, 2, 1, 16, 1 - (1 - 2 / 16) ** 16),  # one expert a group: the chance any is touched
    (0, 0, 1, 4, 0.0),
])
def test_busiest_group_experts(experts: int, top_k: int, tokens: int, groups: int, busiest: float) -> None:
    assert busiest_group_experts(experts, top_k, tokens, groups) == pytest.approx(busiest)


def test_a_draft_with_its_own_lm_head_reads_it() -> None:
    weights = dataclasses.replace(estimate(LLAMA), draft_layer=1e9, draft_lm_head=0.25e9)
    assert decode_step_bytes(weights, DecodeShape(tp=2, draft_steps=3)).draft == 3 * 1.25e9 / 2


@pytest.mark.parametrize(("field", "message"), [
    ("attn_dp", "DecodeShape.attn_dp (3) must divide tp (8)"), ("ep", "DecodeShape.ep (3) must divide tp (8)")])
def test_data_and_expert_parallel_groups_divide_tp(field: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        DecodeShape(tp=8, **{field: 3})
