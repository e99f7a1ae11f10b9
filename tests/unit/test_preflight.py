"""The pre-flight check: each kind of finding, against the simulator's SGLang 0.5.23 flag table."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.server.preflight import Level, check_variant
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4"]


def _messages(args: list[str], gpus: tuple[str, ...] = ()) -> list[tuple[Level, str]]:
    return [(f.level, f.message) for f in check_variant("v", args, flag_table_parser(), gpu_names=gpus)]


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


def test_single_batch_overlap_on_sm90_only() -> None:
    [(level, message)] = _messages(["--enable-single-batch-overlap"], ("NVIDIA H200",))
    assert level is Level.ERROR
    assert "(SM90)" in message and "SBO (single batch overlap) is not supported on SM90" in message
    assert _messages(["--enable-single-batch-overlap"], ("NVIDIA A100-SXM4-80GB",)) == []
    assert _messages(["--enable-single-batch-overlap"]) == []  # GPU unknown: nothing to say
