"""Turning stream records into a Result, and measure() end to end against the SGLang stream stub."""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections.abc import Iterator

import pytest
from sglang_stub import Script, StubServer

from pytest_sglang_perf.measurement.client import RequestFailed, StreamRecord
from pytest_sglang_perf.measurement.measure import build_result, measure, prompt_hash
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.samples import Sample

PARAMS = RequestParams(prompt="Write a red-black tree.", max_tokens=20, temperature=0.6, seed=3, repeats=3,
                       warmup=1)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def _record(chunk_times: list[float], tokens: int, verify_ct: int | None = None) -> StreamRecord:
    sample = Sample(ttft=chunk_times[0], e2e=chunk_times[-1], decode_time=chunk_times[-1] - chunk_times[0],
                    completion_tokens=tokens, prompt_tokens=5, chunks=len(chunk_times), spec_verify_ct=verify_ct,
                    spec_accept_length=None if verify_ct is None else tokens / verify_ct)
    return StreamRecord(sample, tuple(chunk_times), "x" * tokens, "length")


def test_prompt_hash_is_stable_and_covers_what_is_asked() -> None:
    digest = prompt_hash(PARAMS)
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert prompt_hash(dataclasses.replace(PARAMS)) == digest
    assert prompt_hash(dataclasses.replace(PARAMS, repeats=9, warmup=0)) == digest
    assert prompt_hash(dataclasses.replace(PARAMS, temperature=0.6000)) == digest
    changed = [dataclasses.replace(PARAMS, prompt="Write a B-tree."), dataclasses.replace(PARAMS, max_tokens=21),
               dataclasses.replace(PARAMS, temperature=0.7), dataclasses.replace(PARAMS, seed=4)]
    assert len({digest, *(prompt_hash(p) for p in changed)}) == 5


def test_build_result_summarises_every_metric_and_boot_seconds() -> None:
    records = [_record([0.10, 0.12, 0.15], 3, verify_ct=2), _record([0.20, 0.21, 0.30], 3, verify_ct=1),
               _record([0.30, 0.34, 0.36], 3, verify_ct=3)]
    result = build_result(records, variant="default", params=PARAMS, boot_seconds=42.5, simulated=True)
    assert set(result.summaries) == {"output_throughput", "decode_throughput", "ttft", "tpot", "accept_length",
                                     "boot_seconds"}
    assert result.summaries["ttft"].median == 0.20 and result.summaries["ttft"].n == 3
    assert result.summaries["output_throughput"].median == pytest.approx(3 / 0.30)
    assert result.summaries["accept_length"].median == 1.5
    assert result.summaries["boot_seconds"].median == 42.5 and result.summaries["boot_seconds"].n == 1
    assert result.samples == tuple(r.sample for r in records)
    assert (result.variant, result.params, result.prompt_hash, result.boot_seconds, result.simulated) == (
        "default", PARAMS, prompt_hash(PARAMS), 42.5, True)


def test_itl_percentiles_come_from_chunk_gaps() -> None:
    records = [_record([0.1, 0.11, 0.13], 3), _record([0.1, 0.14, 0.15, 0.2], 4)]
    result = build_result(records, variant="v", params=PARAMS, boot_seconds=1.0, simulated=False)
    gaps = sorted([0.01, 0.02, 0.04, 0.01, 0.05])
    assert result.itl_p50 == pytest.approx(statistics.median(gaps))
    assert result.itl_p99 == pytest.approx(0.05 - 0.01 * 0.04)


def test_a_metric_only_some_samples_have_is_summarised_over_those_samples() -> None:
    records = [_record([0.1, 0.2], 2, verify_ct=1), _record([0.1, 0.2], 2), _record([0.5], 1)]
    result = build_result(records, variant="v", params=PARAMS, boot_seconds=1.0, simulated=False)
    counts = {name: summary.n for name, summary in result.summaries.items()}
    assert counts == {"output_throughput": 3, "decode_throughput": 2, "ttft": 3, "tpot": 2, "accept_length": 1,
                      "boot_seconds": 1}
    assert len(result.samples) == 3  # none dropped


def test_single_chunk_records_have_no_itl() -> None:
    result = build_result([_record([0.5], 1)], variant="v", params=PARAMS, boot_seconds=1.0, simulated=False)
    assert (result.itl_p50, result.itl_p99) == (None, None)


def test_no_records_is_an_error() -> None:
    with pytest.raises(ValueError, match="no requests were measured for variant 'v'"):
        build_result([], variant="v", params=PARAMS, boot_seconds=1.0, simulated=False)


def test_importing_measure_does_not_import_aiohttp() -> None:
    import subprocess

    code = "import sys, pytest_sglang_perf.measurement.measure; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "False"


def test_measure_runs_warmup_and_repeats_against_a_server(stub: StubServer) -> None:
    stub.script = Script(ttft=0.03, chunks=10, interval=0.005, tokens_per_chunk=2, spec_verify_ct=5)
    result = measure(stub.url, model="stub-model", variant="default", params=PARAMS, boot_seconds=12.0,
                     simulated=True, api_key="k")
    assert len(stub.received) == 4 and len(result.samples) == 3
    assert {r.headers["Authorization"] for r in stub.received} == {"Bearer k"}
    assert stub.received[0].body["max_tokens"] == 20 and stub.received[0].body["seed"] == 3
    assert result.summaries["ttft"].median == pytest.approx(0.03, abs=0.015)  # a busy CI runner adds milliseconds
    assert result.summaries["accept_length"].median == 4.0
    # 19 tokens after the first over the stream's own decode span (9 gaps of 5 ms when the host is idle; a loaded host
    # delays or bunches chunks, so the span is bounded loosely and the metric checked against it exactly)
    spans = sorted(sample.decode_time for sample in result.samples)
    assert all(0.02 < span < 0.2 for span in spans)
    assert result.summaries["decode_throughput"].median == pytest.approx(19 / spans[1])
    assert result.summaries["boot_seconds"].median == 12.0
    assert result.itl_p50 == pytest.approx(0.005, abs=0.002)
    assert result.simulated and result.variant == "default" and result.prompt_hash == prompt_hash(PARAMS)


def test_measure_raises_on_a_short_request(stub: StubServer) -> None:
    stub.script = Script(chunks=4, reported_tokens=8, finish_reason="stop")
    with pytest.raises(RequestFailed, match=r"^short: asked 20, got 8 \(finish_reason=stop\)"):
        measure(stub.url, model="m", variant="v", params=PARAMS, boot_seconds=1.0, simulated=True)
