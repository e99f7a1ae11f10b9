from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict, check_all
from pytest_sglang_perf.gate.terminal import failure_message, format_value, summary_lines

REFRESH = "pytest 'tests/perf/test_a.py::test_rbt[default]' --sglang-update-baselines"


def summ(median: float) -> list[float]:
    """Three quiet samples around `median`."""
    return [median * 0.999, median, median * 1.001]


def cell(test_id: str, variant: str, throughput: float | None, ttft: float | None = 0.120,
         simulated: bool = False, updated: bool = False) -> Cell:
    """Measured 50 tok/s and 121 ms TTFT against the given baselines (None: no baseline)."""
    baseline = {k: [summ(v)] for k, v in (("output_throughput", throughput), ("ttft", ttft)) if v is not None}
    measured = {"output_throughput": summ(50.0), "ttft": summ(0.121)}
    checks = check_all(measured, baseline or None, {"output_throughput": 0.05})
    return Cell(test_id, variant, checks, simulated, updated)


@pytest.mark.parametrize(
    ("metric", "value", "text"),
    [
        ("output_throughput", 52.314, "52.31 tok/s"),
        ("decode_throughput", 1234.56, "1234.6 tok/s"),
        ("ttft", 0.1204, "120.4 ms"),
        ("tpot", 0.00512, "5.12 ms"),
        ("boot_seconds", 12.345, "12.35 s"),
        ("accept_length", 3.0, "3.00 tok/step"),
        ("itl_p99", 0.123456, "0.1235"),
    ],
)
def test_format_value(metric: str, value: float, text: str) -> None:
    assert format_value(metric, value) == text


def test_cell_verdict_is_the_worst_check_unless_updated() -> None:
    assert cell("t", "default", 55.0).verdict is Verdict.REGRESSED
    assert cell("t", "default", 50.0).verdict is Verdict.OK
    assert cell("t", "default", 45.0).verdict is Verdict.IMPROVED
    assert cell("t", "default", 55.0, ttft=None).verdict is Verdict.REGRESSED
    assert cell("t", "default", 50.0, ttft=None).verdict is Verdict.NEW
    assert cell("t", "default", 55.0, updated=True).verdict is Verdict.UPDATED


def test_failure_message_is_a_table_ending_with_the_refresh_command() -> None:
    lines = failure_message(cell("tests/perf/test_a.py::test_rbt", "default", 55.0), REFRESH).splitlines()
    assert lines[0] == "sglang-perf: tests/perf/test_a.py::test_rbt [default]: regressed"
    assert lines[1].split() == ["metric", "baseline", "measured", "change", "allowed", "p", "detectable", "verdict"]
    assert lines[2].split()[:7] == ["output_throughput", "55.00", "tok/s", "50.00", "tok/s", "-9.1%", "-5.0%"]
    assert lines[2].split()[-1] == "REGRESSED"
    assert lines[2].split()[-3] == "<0.001"  # quiet samples: the change is certain
    assert lines[3].split()[:7] == ["ttft", "120.0", "ms", "121.0", "ms", "+0.8%", "+10.0%"]
    assert lines[3].split()[-1] == "ok"
    assert lines[-1].strip() == REFRESH
    assert "SIMULATED" not in "\n".join(lines)


def test_failure_message_columns_are_aligned() -> None:
    lines = failure_message(cell("t", "default", 55.0), REFRESH).splitlines()[1:4]
    ends = {line.index("%") for line in lines[1:]}
    assert len(ends) == 1  # the change column is right-aligned
    assert lines[0].index("verdict") == lines[1].index("REGRESSED") == lines[2].index("ok")


def test_failure_message_says_simulated() -> None:
    message = failure_message(cell("t", "default", 55.0, simulated=True), REFRESH)
    assert message.splitlines()[0].endswith("regressed (SIMULATED)")


def test_summary_lists_every_variant_test_and_metric_and_counts_cells() -> None:
    cells = [
        cell("test_a", "default", 55.0),
        cell("test_b", "default", 50.0),
        cell("test_a", "prefill_graph", 40.0),
        cell("test_b", "prefill_graph", None, ttft=None),
        cell("test_c", "prefill_graph", 60.0, updated=True),
    ]
    lines = summary_lines(cells)
    assert lines[0] == "variant default"
    assert lines[1].split() == ["test", "metric", "baseline", "measured", "change", "p", "detectable", "verdict"]
    assert lines[2].split()[:7] == ["test_a", "output_throughput", "55.00", "tok/s", "50.00", "tok/s", "-9.1%"]
    assert lines[2].split()[-1] == "REGRESSED"
    assert lines[3].split()[:6] == ["ttft", "120.0", "ms", "121.0", "ms", "+0.8%"]
    assert lines[3].split()[-1] == "ok"
    assert lines[3].index("ttft") == lines[2].index("output_throughput")  # names left-aligned
    assert lines[6] == "variant prefill_graph"
    assert lines[8].split()[-1] == "improved" and "+25.0%" in lines[8].split()
    assert lines[10].split()[:6] == ["test_b", "output_throughput", "-", "50.00", "tok/s", "n/a"]
    assert lines[10].split()[-1] == "new"
    assert lines[12].split()[-3:] == ["updated", "(was", "REGRESSED)"]
    assert lines[-3] == ("sglang-perf: 5 cells: 1 ok, 1 regressed, 0 inconclusive, 1 improved, 1 new, 0 stale, "
                         "1 updated")
    assert lines[-2].startswith("sglang-perf: 1 cell(s) NOT GATED, no comparable baseline (1 new)")
    assert lines[-1] == (
        "re-run with --sglang-update-baselines to record the measured values as the new baselines "
        "(1 regressed, 1 new, 1 improved)"
    )


def test_summary_marks_every_simulated_table() -> None:
    cells = [cell("t", "default", 50.0, simulated=True), cell("t", "other", 50.0, simulated=True)]
    lines = summary_lines(cells, refresh_flag="--flag")
    assert "variant default (SIMULATED)" in lines
    assert "variant other (SIMULATED)" in lines
    assert lines[-1] == ("sglang-perf: 2 cells: 2 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, "
                         "0 updated (SIMULATED)")


def test_summary_without_pending_changes_has_no_refresh_hint() -> None:
    lines = summary_lines([cell("t", "default", 50.0), cell("u", "default", 80.0, updated=True)])
    assert lines[-1] == ("sglang-perf: 2 cells: 1 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, "
                         "1 updated")
    assert not any("re-run" in line for line in lines)


def test_summary_uses_the_given_flag_and_singular_cell() -> None:
    lines = summary_lines([cell("t", "default", None, ttft=None)], refresh_flag="--regen")
    assert lines[-3] == ("sglang-perf: 1 cell: 0 ok, 0 regressed, 0 inconclusive, 0 improved, 1 new, 0 stale, "
                         "0 updated")
    assert lines[-1].startswith("re-run with --regen to record")


def test_summary_of_a_cell_without_metrics_and_of_nothing() -> None:
    empty = Cell("t", "default", (), simulated=False)
    assert any("(no metrics)" in line for line in summary_lines([empty]))
    assert summary_lines([]) == []


def test_a_check_built_by_hand_is_reported_verbatim() -> None:
    check = MetricCheck("tpot", "s", 0.020, 0.025, 0.25, 0.1, Verdict.REGRESSED)
    text = failure_message(Cell("t", "v", (check,), simulated=False), "cmd")
    assert "20.0 ms" in text and "25.0 ms" in text and "+25.0%" in text and "+10.0%" in text
