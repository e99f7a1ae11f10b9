"""The scheduler's decode-log window: `Decode batch` lines, last_gen_throughput, avg_spec_accept_length."""

from __future__ import annotations

import re

import pytest

from pytest_sglang_perf.simulator.decode_stats import DecodeStats


def _stats(num_draft_tokens: int = 4) -> DecodeStats:
    return DecodeStats(interval=40, max_total_tokens=100_000, num_draft_tokens=num_draft_tokens, cuda_graph_max_bs=48)


def test_accept_length_absent_until_a_window_closes() -> None:
    stats = _stats()
    stats.start_request(10)
    assert stats.record_steps([3] * 39) == []
    assert stats.avg_spec_accept_length is None
    lines = stats.record_steps([3, 2])
    assert len(lines) == 1
    assert re.fullmatch(r"Decode batch, #running-req: 1, #token: 130, token usage: 0\.00, accept len: 3\.00, "
                        r"accept rate: 0\.67, cuda graph: True, gen throughput \(token/s\): \d+\.\d\d, #queue-req: 0",
                        lines[0])
    assert stats.avg_spec_accept_length == pytest.approx(3.0)  # the trailing partial window is not counted
    assert stats.last_gen_throughput > 0


def test_cumulative_average_over_windows_and_reset() -> None:
    stats = _stats()
    stats.record_steps([4] * 40 + [2] * 40)
    assert stats.avg_spec_accept_length == pytest.approx(3.0)
    stats.reset()
    assert stats.avg_spec_accept_length is None


def test_no_spec_fields_without_speculative_decoding() -> None:
    stats = _stats(num_draft_tokens=0)
    line = stats.record_steps([1] * 40)[0]
    assert "accept len" not in line and "cuda graph: False" in line  # no running request
    assert stats.avg_spec_accept_length is None


def test_running_counters() -> None:
    stats = _stats()
    stats.start_request(100)
    stats.record_steps([2, 2])
    stats.finish_request(104)
    assert (stats.running_reqs, stats.running_tokens) == (0, 0)
