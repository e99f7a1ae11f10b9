"""prefill_throughput from the samples (measurement/values.py): defined for a cold measurement of exact prompt length,
per request, as prompt tokens not read from the cache over TTFT; and every reader of samples (the recorder, the
gate's baselines, the A/B, the plots) decides it from the request's settings alike (docs/prefill.md §2)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.ab import CellSamples
from pytest_sglang_perf.gate.baseline import BaselineEntry, BootRecord
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import measures_prefill, metric_values
from pytest_sglang_perf.plots.data import cell_values

SAMPLES = [Sample(ttft=0.25, e2e=0.3, decode_time=0.05, completion_tokens=8, prompt_tokens=2048, chunks=8,
                  cached_tokens=0),
           Sample(ttft=0.20, e2e=0.25, decode_time=0.05, completion_tokens=8, prompt_tokens=2048, chunks=8,
                  cached_tokens=48)]


def test_the_rate_is_computed_tokens_over_ttft_and_only_when_asked() -> None:
    values = metric_values(SAMPLES, None, None, prefill=True)
    assert values["prefill_throughput"] == pytest.approx((2048 / 0.25, 2000 / 0.20))
    assert "prefill_throughput" not in metric_values(SAMPLES, None, None)
    assert measures_prefill(2048, "cold") and not measures_prefill(2048, "warm") and not measures_prefill(None, "cold")


@pytest.mark.parametrize(("prompt_tokens", "cache", "defined"), [(2048, "cold", True), (2048, "warm", False),
                                                                 (None, "cold", False)])
def test_every_reader_of_samples_agrees(prompt_tokens: int | None, cache: str, defined: bool) -> None:
    settings = RequestSettings(max_tokens=8, prefix_cache=cache, prompt_tokens=prompt_tokens)
    cell = {"test_id": "t::test_prefill", "variant": "default", "simulated": True, "prompt_hash": "abc",
            "samples": [s.to_dict() for s in SAMPLES], "params": settings.to_dict()}
    assert ("prefill_throughput" in CellSamples.from_results_cell(cell).values) is defined
    assert ("prefill_throughput" in cell_values(cell)) is defined
    entry = BaselineEntry(test_id="t::test_prefill", variant="default", summaries={"ttft": Summary.of([0.25, 0.20])},
                          samples=tuple(SAMPLES), args=(), prompt_hash="abc", params=settings, recorded_at="now",
                          commit=None, environment={}, boots=(BootRecord(len(SAMPLES), None, None),))
    assert ("prefill_throughput" in entry.boot_values()) is defined
