"""The scheduler's batch statistics: `Decode batch` / `Prefill batch` lines (docs/sglang-0.5.23.md §7.2, §7.3),
last_gen_throughput and avg_spec_accept_length (§5.2)."""

from __future__ import annotations

import re

import pytest

from pytest_sglang_perf.simulator.engine.decode_stats import DecodeStats

DECODE_LINE = re.compile(
    r"Decode batch, #running-req: (?P<running>\d+), #token: (?P<tokens>\d+), token usage: \d+\.\d\d, "
    r"(?:accept len: (?P<accept>\d+\.\d\d), accept rate: (?P<rate>\d+\.\d\d), )?(?:waiting-image-req: 0, )?"
    r"(?P<label>cuda|cpu) graph: (?P<graph>True|False), gen throughput \(token/s\): (?P<gen>\d+\.\d\d), "
    r"#queue-req: (?P<queue>\d+)")
PREFILL_LINE = re.compile(
    r"Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: 0, token usage: \d+\.\d\d, #running-req: \d+, "
    r"#queue-req: \d+, #pending-token: 0, (?:cuda|cpu) graph: (?:True|False), input throughput \(token/s\): \d+\.\d\d")


def _stats(num_draft_tokens: int = 4, graph_label: str = "cuda graph", extra: str = "") -> DecodeStats:
    stats = DecodeStats(interval=40, max_total_tokens=100_000, num_draft_tokens=num_draft_tokens,
                        graph_label=graph_label, extra=extra)
    stats.start(0.0)
    return stats


def test_accept_length_absent_until_a_window_closes() -> None:
    stats = _stats()
    assert [stats.decode_step([3], 100 + 3 * i, True, 0, 0.05 * i) for i in range(1, 40)] == [None] * 39
    assert stats.avg_spec_accept_length is None
    line = stats.decode_step([2], 250, True, 0, 2.0)
    assert line is not None
    match = DECODE_LINE.fullmatch(line)
    assert match is not None, line
    assert (match["running"], match["tokens"], match["graph"], match["queue"]) == ("1", "250", "True", "0")
    assert float(match["accept"]) == pytest.approx((39 * 3 + 2) / 40, abs=0.005)
    assert float(match["rate"]) == pytest.approx((39 * 2 + 1) / (40 * 3), abs=0.005)
    assert float(match["gen"]) == pytest.approx((39 * 3 + 2) / 2.0, abs=0.01)  # the window's tokens / its time
    assert stats.avg_spec_accept_length == pytest.approx((39 * 3 + 2) / 40)
    assert stats.last_gen_throughput == pytest.approx(59.5)


def test_a_batch_step_counts_each_request_verify() -> None:
    stats = _stats()
    for i in range(40):
        line = stats.decode_step([4, 2, 3], 900, False, 2, 0.1 * (i + 1))
    assert line is not None and DECODE_LINE.fullmatch(line) is not None
    assert "#running-req: 3," in line and "#queue-req: 2" in line and "cuda graph: False" in line
    assert stats.avg_spec_accept_length == pytest.approx(3.0)  # per request-verify, not per step
    assert stats.last_gen_throughput == pytest.approx(40 * 9 / 4.0)


def test_cumulative_average_ignores_the_partial_window_and_flush_resets() -> None:
    stats = _stats()
    for i in range(80):
        stats.decode_step([4 if i < 40 else 2], 10, True, 0, i * 0.01)
    for i in range(20):
        stats.decode_step([1], 10, True, 0, 1 + i * 0.01)
    assert stats.avg_spec_accept_length == pytest.approx(3.0)
    stats.reset(5.0)
    assert stats.avg_spec_accept_length is None and stats.forward_ct == 0
    assert stats.last_gen_throughput > 0  # kept until the next window closes


def test_no_spec_fields_without_speculative_decoding_and_the_cpu_label() -> None:
    stats = _stats(num_draft_tokens=0, graph_label="cpu graph")
    lines = [stats.decode_step([1], 50, False, 0, i * 0.01) for i in range(1, 41)]
    assert lines[-1] is not None and "accept len" not in lines[-1] and "cpu graph: False" in lines[-1]
    assert stats.avg_spec_accept_length is None


def test_prefill_line_throughput_is_tokens_over_time_since_the_last_prefill() -> None:
    stats = _stats()
    line = stats.prefill_line(2, 300, 1, 120, 0, True, 2.0)
    assert PREFILL_LINE.fullmatch(line), line
    assert "#new-seq: 2, #new-token: 300," in line and "input throughput (token/s): 150.00" in line


def test_language_only_decode_lines_show_waiting_images() -> None:
    stats = _stats(num_draft_tokens=0, extra="waiting-image-req: 0, ")
    line = [stats.decode_step([1], 5, True, 0, i) for i in range(1, 41)][-1]
    assert line is not None and "waiting-image-req: 0, cuda graph: True" in line
