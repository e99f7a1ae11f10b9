"""The bandwidth ceiling of a decode cell (roofline/ceiling.py), the step's shape from /server_info
(roofline/server_shape.py) and the summary's lines (report/roofline.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_sglang_perf.roofline.ceiling import Bandwidth, DecodeCeiling, ceiling_record
from pytest_sglang_perf.roofline.server_shape import decode_shape, draft_model_path, kv_dtype_bytes
from pytest_sglang_perf.roofline.step_bytes import StepBytes

GB = 1e9
SEED_INFO = {"tp_size": 2, "pp_size": 1, "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
             "speculative_num_draft_tokens": 4, "speculative_eagle_topk": 1, "kv_cache_dtype": "auto",
             "model_path": "Qwen/Qwen3.6-27B", "speculative_draft_model_path": "Qwen/Qwen3.6-27B"}


def _ceiling(measured: float, *, step_gb: float = 30.0, gb_s: float = 600.0, accept: float = 3.0) -> DecodeCeiling:
    step = StepBytes(target=step_gb * GB * 0.8, draft=step_gb * GB * 0.2, kv=0.0)
    return DecodeCeiling(step=step, bandwidth=Bandwidth(gb_s, "measured", "NVIDIA RTX A6000", "read of 1 GiB"),
                         accept_length=accept, measured_tok_s=measured, bytes_exact=False, bytes_source="config.json")


def test_the_ceiling_is_bandwidth_over_bytes_times_accept_length() -> None:
    ceiling = _ceiling(50.0)
    assert ceiling.step_seconds == pytest.approx(30.0 / 600.0)  # 30 GB at 600 GB/s: 50 ms a step
    assert ceiling.tok_s == pytest.approx(3.0 / 0.05)  # 3 tokens a step: 60 tok/s
    assert ceiling.efficiency == pytest.approx(50.0 / 60.0)


def test_a_bandwidth_bound_decode_says_what_flags_can_gain_at_most() -> None:
    assert _ceiling(49.8).diagnosis() == ("decode at 83% of the bandwidth ceiling: memory-bandwidth bound; graph or "
                                          "overlap flags can gain at most ~17% of the step (+20% tok/s)")


def test_an_overhead_bound_decode_says_the_weights_are_not_the_limit() -> None:
    text = _ceiling(20.0).diagnosis()
    assert text.startswith("decode at 33% of the bandwidth ceiling: not bound by the weight read")


def test_between_the_two_only_the_share_is_said() -> None:
    assert _ceiling(36.0).diagnosis() == "decode at 60% of the bandwidth ceiling"


def test_faster_than_the_ceiling_says_the_inputs_are_wrong() -> None:
    text = _ceiling(70.0).diagnosis()
    assert "faster than the weights can be read" in text and "estimated, config.json" in text
    assert "measured bandwidth is wrong" in text


def test_the_record_keeps_the_figures_or_the_reason() -> None:
    record = ceiling_record(_ceiling(50.0))
    assert record is not None and record["efficiency"] == pytest.approx(50 / 60)
    assert record["bandwidth"] == {"gb_s": 600.0, "source": "measured", "gpu": "NVIDIA RTX A6000",
                                   "detail": "read of 1 GiB"}
    assert record["step_bytes"]["draft"] == pytest.approx(6 * GB)
    assert ceiling_record("no GPU") == {"unavailable": "no GPU"}
    assert ceiling_record(None) is None
    assert Bandwidth.from_dict(record["bandwidth"]) == _ceiling(1.0).bandwidth


def test_the_seed_servers_step_is_one_speculative_round() -> None:
    shape = decode_shape(SEED_INFO, context_tokens=600)
    assert (shape.tp, shape.pp, shape.verify_tokens, shape.draft_steps, shape.context_tokens) == (2, 1, 4, 3, 600)
    assert draft_model_path(SEED_INFO) is None  # NEXTN: the draft is the checkpoint's own MTP layer


def test_without_speculative_decoding_a_step_is_one_token() -> None:
    shape = decode_shape({"tp_size": 1, "speculative_algorithm": None, "speculative_num_steps": 3}, context_tokens=10)
    assert (shape.tp, shape.pp, shape.verify_tokens, shape.draft_steps) == (1, 1, 1, 0)


def test_ngram_drafts_cost_no_forward_and_eagle_names_its_draft_model() -> None:
    ngram = decode_shape({**SEED_INFO, "speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 12},
                         context_tokens=0)
    assert (ngram.verify_tokens, ngram.draft_steps) == (12, 0)
    assert draft_model_path({**SEED_INFO, "speculative_draft_model_path": "/m/eagle3"}) == "/m/eagle3"


@pytest.mark.parametrize(("value", "expected"), [("auto", None), ("fp8_e4m3", 1.0), ("bf16", 2.0), (None, None),
                                                  ("fp4_mx_block16", 0.5)])
def test_kv_cache_dtype_bytes(value: str | None, expected: float | None) -> None:
    assert kv_dtype_bytes({"kv_cache_dtype": value}) == expected


def test_the_section_says_each_cells_ceiling_and_each_note_once_per_variant() -> None:
    from pytest_sglang_perf.measurement.request import RequestParams
    from pytest_sglang_perf.measurement.result import Result
    from pytest_sglang_perf.report.roofline import roofline_lines

    params = RequestParams(prompt="p", max_tokens=8, temperature=0.6, seed=0, repeats=1, warmup=0)
    noted = replace(_ceiling(49.8), notes=("estimated from config.json",))

    def result(variant: str, roofline: DecodeCeiling | str | None) -> Result:
        return Result(variant, params, "h", (), {}, 1.0, True, roofline=roofline)

    lines = roofline_lines([("t::a", result("v", noted)), ("t::b", result("v", noted)), ("t::c", result("w", "no GPU")),
                            ("t::d", result("w", "no GPU")), ("t::e", result("w", None))], simulated=True)
    text = "\n".join(lines)
    assert lines[0] == "sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1 (SIMULATED)"
    assert text.count("decode at 83% of the bandwidth ceiling") == 2
    assert "note:" not in text and "and 1 note(s) on the bytes" in " ".join(text.split())  # -v shows them
    assert text.count("variant w: no GPU") == 1
    assert "t::e" not in text  # no decode, no line
    words = " ".join(text.split())  # lines wrap at 120
    assert words.count("variant v: ceilings from measured 600 GB/s on NVIDIA RTX A6000 and 30.00 GB of weights per "
                      "step (target 24.00, draft 6.00), estimated") == 1  # once per variant by default
    both = [("t::a", result("v", noted)), ("t::b", result("v", noted))]
    verbose = " ".join(" ".join(roofline_lines(both, simulated=True, verbose=True)).split())
    assert "ceilings from" not in verbose and verbose.count("note: estimated from config.json") == 1
    assert verbose.count("(measured 600 GB/s on NVIDIA RTX A6000; 30.00 GB per step: target 24.00, draft 6.00, KV "
                         "0.00, estimated; tokens per step 3.00)") == 2  # -v: each cell's whole basis
    assert roofline_lines([("t::e", result("w", None))], simulated=False) == []
