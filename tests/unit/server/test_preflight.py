"""The pre-flight check: each kind of finding, against the simulator's SGLang 0.5.23 flag table."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_sglang_perf.server.preflight import Level, check_variant
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]


def _messages(args: list[str], gpus: tuple[str, ...] = (), model: dict[str, Any] | None = None
              ) -> list[tuple[Level, str]]:
    return [(f.level, f.message) for f in check_variant("v", args, flag_table_parser(), gpu_names=gpus,
                                                         model_config=model)]


def test_the_seed_matrix_is_clean_on_the_engineers_gpus() -> None:
    for variant in ([], ["--cuda-graph-backend-prefill", "breakable"], ["--enable-single-batch-overlap"]):
        assert _messages(["--tp-size", "2", *SPEC, *variant], ("NVIDIA RTX A6000",) * 2) == []


def test_old_flag_gets_its_new_name() -> None:
    [(level, message)] = _messages(["--enforce-piecewise-cuda-graph"])
    assert level is Level.ERROR
    assert "unrecognized arguments: --enforce-piecewise-cuda-graph" in message
    assert "was renamed: use --cuda-graph-backend-prefill breakable" in message


def test_typo_gets_the_closest_real_flag() -> None:
    [(_, message)] = _messages(["--chunked-prefil-size", "4096"])
    assert "did you mean --chunked-prefill-size" in message


def test_ambiguous_prefix() -> None:
    [(level, message)] = _messages(["--cuda-graph-max-bs", "8"])
    assert level is Level.ERROR
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode" in message
    assert message.endswith("use --cuda-graph-max-bs-decode")


def test_bad_choice() -> None:
    [(_, message)] = _messages(["--cuda-graph-backend-prefill", "tc_piecewise"])
    assert "tc_piecewise was removed; select breakable, full, or disabled" in message


def test_flag_given_twice_with_different_values_warns() -> None:
    [(level, message)] = _messages(["--tp-size", "2", "--mem-fraction-static", "0.8", "--tp", "4"])
    assert level is Level.WARNING
    assert "--tp-size is given twice with different values ('2', then '4')" in message
    assert _messages(["--tp-size", "2", "--tp-size", "2"]) == []


@pytest.mark.parametrize("drop", ["--speculative-eagle-topk", "--speculative-num-draft-tokens"])
def test_partial_speculative_triple(drop: str) -> None:
    i = SPEC.index(drop)
    [(level, message)] = _messages(SPEC[:i] + SPEC[i + 2:])
    assert level is Level.ERROR
    assert f"missing: {drop}" in message


def test_speculative_without_the_triple_is_fine() -> None:
    assert _messages(["--speculative-algorithm", "EAGLE"]) == []
    assert _messages(["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"]) == []


DENSE_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096}
DENSE_QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096}
MOE_QWEN3 = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 128,
             "num_experts_per_tok": 8}
DENSE_QWEN35 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                "text_config": {"model_type": "qwen3_5_text", "hidden_size": 5120}, "vision_config": {}}
SBO = ["--enable-single-batch-overlap"]


def test_single_batch_overlap_on_sm90_only_for_a_model_that_runs_sglangs_moe_config() -> None:
    # SGLang 0.5.23 raises it in initialize_moe_config, which runs only when the text config has an MoE top-k
    [(level, message)] = _messages(SBO, ("NVIDIA H200",), MOE_QWEN3)
    assert level is Level.ERROR
    assert message.startswith("--enable-single-batch-overlap fails at startup on this GPU (SM90) with this model (its "
                              "text config has an MoE top-k (SGLang then runs initialize_moe_config)): SBO (single "
                              "batch overlap) is not supported on SM90")
    assert _messages(SBO, ("NVIDIA H100 80GB HBM3",), DENSE_LLAMA) == []  # a dense model boots with SBO on an H100
    assert _messages(SBO, ("NVIDIA H200",), DENSE_QWEN3) == []
    # a config class that defines the top-k by default counts, read from a multimodal config's text_config
    assert [level for level, _ in _messages(SBO, ("NVIDIA H200",), DENSE_QWEN35)] == [Level.ERROR]
    assert [level for level, _ in _messages(SBO, ("NVIDIA H200",), {"text_config": {"moe_topk": None}})] == [
        Level.ERROR]  # SGLang asks hasattr: a key given as null counts
    assert _messages(SBO, ("NVIDIA A100-SXM4-80GB",), MOE_QWEN3) == []
    assert _messages(SBO, (), MOE_QWEN3) == []  # GPU unknown: nothing to say


def test_single_batch_overlap_on_sm90_with_a_model_not_known_here_is_a_warning() -> None:
    [(level, message)] = _messages(SBO, ("NVIDIA H200",))
    assert level is Level.WARNING
    assert ("fails at startup on this GPU (SM90) if its text config has an MoE top-k (SGLang then runs "
            "initialize_moe_config); this model's config.json was not found") in message


