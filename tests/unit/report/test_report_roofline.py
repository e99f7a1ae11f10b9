"""The summary's roofline section (report/roofline.py): the basis each ceiling was computed from, in words, and the
probe's line; the section's per-cell lines are tested with the ceiling (tests/unit/roofline)."""

from __future__ import annotations

from report_records import PARAMS

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.report.roofline import basis, roofline_lines, weights_basis
from pytest_sglang_perf.roofline.ceiling import Bandwidth, DecodeCeiling
from pytest_sglang_perf.roofline.step_bytes import StepBytes

GB = 1e9
H200 = Bandwidth(4200.0, "datasheet", "NVIDIA H200", "4800 GB/s x 0.88")


def ceiling(*, draft: float = 0.0, exact: bool = True, notes: tuple[str, ...] = ()) -> DecodeCeiling:
    """16 GB of target weights (plus `draft`), 0.5 GB of KV cache, at 4200 GB/s."""
    return DecodeCeiling(StepBytes(16.0 * GB, draft * GB, 0.5 * GB), H200, 1.0, 200.0, exact, "safetensors", notes)


def test_the_weights_basis_of_a_plain_model() -> None:
    """No draft: the weights alone, exact, no note count."""
    assert weights_basis(ceiling()) == ("ceilings from datasheet 4200 GB/s on NVIDIA H200 and 16.00 GB of weights per "
                                        "step, exact; -v: each cell's KV cache and tokens per step")


def test_the_weights_basis_of_a_speculative_model_splits_target_and_draft() -> None:
    """With a draft: the sum, the split, estimated, and how many notes -v shows."""
    found = weights_basis(ceiling(draft=4.0, exact=False, notes=("a", "b")))
    assert found == ("ceilings from datasheet 4200 GB/s on NVIDIA H200 and 20.00 GB of weights per step (target "
                     "16.00, draft 4.00), estimated; -v: each cell's KV cache and tokens per step, and 2 note(s) on "
                     "the bytes")


def test_a_cells_basis_adds_its_kv_cache_and_tokens_per_step() -> None:
    """Everything the ceiling was computed from: bandwidth, total bytes and their parts, tokens per step."""
    assert basis(ceiling()) == ("datasheet 4200 GB/s on NVIDIA H200; 16.50 GB per step: target 16.00, KV 0.50, "
                                "exact; tokens per step 1.00")
    assert basis(ceiling(draft=4.0)) == ("datasheet 4200 GB/s on NVIDIA H200; 20.50 GB per step: target 16.00, "
                                         "draft 4.00, KV 0.50, exact; tokens per step 1.00")


def test_the_probes_line_follows_the_title() -> None:
    """A real run's section names the GPU probe under its title, without the SIMULATED tag."""
    cell = Result("default", PARAMS, "h", (), {}, 1.0, False, roofline=ceiling())
    lines = roofline_lines([("t::a", cell)], simulated=False, probe="1x NVIDIA H200: read 4321 GB/s")
    assert lines[:2] == ["sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1",
                         "GPU probe: 1x NVIDIA H200: read 4321 GB/s"]
    # 16.5 GB at 4200 GB/s: a 3.93 ms step, 254.5 tok/s
    words = " ".join(" ".join(lines[2:]).split())  # lines wrap at 120
    assert words.startswith("variant default: ceilings from datasheet 4200 GB/s on NVIDIA H200 and 16.00 GB of "
                            "weights per step, exact; -v: each cell's KV cache and tokens per step ")
    assert "t::a [default]: 200.0 of 254.5 tok/s: decode at 79% of the bandwidth ceiling" in words
