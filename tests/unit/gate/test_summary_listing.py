"""The summary names the cells its counts are about (gate/terminal.py): each inconclusive cell with why at every
verbosity, and with -q (no tables) each new, stale and errored one too, a line each, capped."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict, check_metric, not_measured
from pytest_sglang_perf.gate.errored import BOOT, PREFLIGHT, ErroredVariant
from pytest_sglang_perf.gate.reasons import LISTED, inconclusive_reason
from pytest_sglang_perf.gate.terminal import summary_lines
from pytest_sglang_perf.measurement.metrics import EFFICIENCY

SLOWER = MetricCheck("output_throughput", "tok/s", 50.0, 45.0, -0.1, 0.05, Verdict.INCONCLUSIVE, p_value=0.12)
"""10% slower than the 5% allowed, not established (p 0.12)."""
OK = MetricCheck("ttft", "s", 0.1, 0.1, 0.0, 0.1, Verdict.OK, p_value=0.5)


def _joined(lines: list[str]) -> str:
    """The lines with the summary's wrapping undone."""
    return " ".join(" ".join(lines).split())


def test_a_change_without_statistical_evidence() -> None:
    cell = Cell("t.py::test_a", "b", (SLOWER, OK), simulated=False)
    assert inconclusive_reason(cell) == ("output_throughput -10.0% (allowed -5.0%, p 0.120): worse beyond the "
                                         "tolerance, but not statistically established")


def test_regressions_the_re_measure_did_not_repeat_share_their_reason() -> None:
    first = MetricCheck("output_throughput", "tok/s", 50.0, 40.0, -0.2, 0.05, Verdict.INCONCLUSIVE, p_value=0.001)
    late = MetricCheck("ttft", "s", 0.1, 0.15, 0.5, 0.1, Verdict.INCONCLUSIVE, p_value=0.001)
    again = MetricCheck("output_throughput", "tok/s", 50.0, 49.9, -0.002, 0.05, Verdict.OK, p_value=0.4)
    cell = Cell("t.py::test_a", "b", (first, late), simulated=False, confirmation=(again, OK))
    assert inconclusive_reason(cell) == ("output_throughput -20.0% (allowed -5.0%, re-measured -0.2%), ttft +50.0% "
                                         "(allowed +10.0%, re-measured +0.0%): the regression did not hold when "
                                         "re-measured on the same server")


def test_a_regression_re_measured_under_disturbed_conditions() -> None:
    first = MetricCheck("output_throughput", "tok/s", 50.0, 40.0, -0.2, 0.05, Verdict.INCONCLUSIVE, p_value=0.001)
    again = MetricCheck("output_throughput", "tok/s", 50.0, 40.5, -0.19, 0.05, Verdict.REGRESSED, p_value=0.001)
    cell = Cell("t.py::test_a", "b", (first,), simulated=False, confirmation=(again,),
                disturbed="host busy: 3.1 other runnable threads per core")
    assert inconclusive_reason(cell) == ("output_throughput -20.0% (allowed -5.0%): regressed again when "
                                         "re-measured, but under disturbed conditions: host busy: 3.1 other runnable "
                                         "threads per core")


def test_a_metric_inconclusive_before_its_cells_re_measure_keeps_its_own_reason() -> None:
    """ttft regressed and was re-measured; output_throughput was inconclusive already (the re-measure regressing it
    makes no regression of it: judge.confirmed only demotes)."""
    late = MetricCheck("ttft", "s", 0.1, 0.2, 1.0, 0.1, Verdict.INCONCLUSIVE, p_value=0.001)
    slower_again = MetricCheck("output_throughput", "tok/s", 50.0, 40.0, -0.2, 0.05, Verdict.REGRESSED, p_value=0.01)
    on_time = MetricCheck("ttft", "s", 0.1, 0.1, 0.0, 0.1, Verdict.OK, p_value=0.5)
    cell = Cell("t.py::test_a", "b", (SLOWER, late), simulated=False, confirmation=(slower_again, on_time))
    assert inconclusive_reason(cell).split("; ") == [
        "output_throughput -10.0% (allowed -5.0%, p 0.120): worse beyond the tolerance, but not statistically "
        "established",
        "ttft +100.0% (allowed +10.0%, re-measured +0.0%): the regression did not hold when re-measured on the same "
        "server",
    ]


def test_a_metric_not_measured_or_not_testable_or_not_comparable() -> None:
    missing = not_measured("tpot", [[0.005, 0.005]], 0.1)
    no_accept = not_measured("accept_length", [[3.0, 3.0]], 0.1)
    zeros = check_metric("goodput", [[0.0, 2.0, 2.0]], [0.0, 0.0, 0.5], 0.05)
    assert zeros.verdict is Verdict.INCONCLUSIVE
    other = MetricCheck(EFFICIENCY, "ratio", 0.5, 0.4, -0.2, 0.05, Verdict.INCONCLUSIVE, p_value=0.001,
                        note=f"{EFFICIENCY}: not comparable: the model's bytes were exact, now estimated")
    cell = Cell("t.py::test_a", "b", (missing, no_accept, zeros, other), simulated=False)
    assert inconclusive_reason(cell).split("; ") == [
        "tpot, accept_length: not measured in this run",
        "goodput -100.0% (allowed -5.0%): no statistical test (a value of 0 among the samples)",
        f"{EFFICIENCY} -20.0% (allowed -5.0%): not comparable: the model's bytes were exact, now estimated",
    ]


@pytest.mark.parametrize("verbosity", [-1, 0, 1])
def test_each_inconclusive_cell_is_named_with_why_at_every_verbosity(verbosity: int) -> None:
    lines = summary_lines([Cell("t.py::test_a", "b", (SLOWER, OK), simulated=False)], verbosity=verbosity)
    count = lines.index("sglang-perf: 1 inconclusive cell(s) passed (worse than allowed, not established); "
                        "--sglang-fail-inconclusive fails them")
    assert _joined(lines[count + 1:]).startswith(
        "t.py::test_a [b] inconclusive: output_throughput -10.0% (allowed -5.0%, p 0.120): worse beyond the "
        "tolerance, but not statistically established")


def _new(test_id: str) -> Cell:
    return Cell(test_id, "a", (check_metric("output_throughput", None, [50.0, 50.1, 49.9], 0.05),), simulated=False)


def test_quiet_names_each_new_stale_and_errored_cell_with_why() -> None:
    stale = Cell("t.py::test_s", "a", (OK,), simulated=False, stale=("max_tokens 200 -> 128", "--tp-size 1 -> 2"))
    errored = [ErroredVariant("sbo", PREFLIGHT, "fails on SM90\nsecond line", ("t.py::test_a[sbo]",)),
               ErroredVariant("tp2", BOOT, "the server needs 2 GPU(s)", ("t.py::test_a[tp2]",), started=False)]
    lines = summary_lines([_new("t.py::test_n"), stale], errored=errored, verbosity=-1)
    assert lines[1:] == [
        "sglang-perf: ERRORED, nothing measured: sbo (pre-flight check failed), tp2 (boot failed, no server started)",
        "  t.py::test_a[sbo] errored: pre-flight check failed: fails on SM90",
        "  t.py::test_a[tp2] errored: boot failed, no server started: the server needs 2 GPU(s)",
        "sglang-perf: 2 cell(s) NOT GATED, no comparable baseline (1 new, 1 stale); --sglang-require-baselines fails "
        "them",
        "  t.py::test_n [a] new: no baseline recorded for this cell",
        "  t.py::test_s [a] stale: the baseline was recorded for something else: max_tokens 200 -> 128; --tp-size 1 "
        "-> 2",
        "sglang-perf: to record these values as the new baselines (1 stale, 1 new), re-run with "
        "--sglang-update-baselines",
    ]


def test_the_default_verbosity_leaves_naming_them_to_its_tables() -> None:
    lines = summary_lines([_new("t.py::test_n")], verbosity=0)
    assert not any(line.startswith("  t.py::test_n [a] new") for line in lines)


def test_a_long_list_names_the_first_and_counts_the_rest_except_with_v() -> None:
    cells = [_new(f"t.py::test_{i}") for i in range(LISTED + 2)]
    quiet = summary_lines(cells, verbosity=-1)
    named = [line for line in quiet if line.startswith("  t.py::test_")]
    assert named == [f"  t.py::test_{i} [a] new: no baseline recorded for this cell" for i in range(LISTED)]
    assert quiet[quiet.index(named[-1]) + 1] == "  ... and 2 more (-v names every one)"
    errored = [ErroredVariant("bad", BOOT, "exited with code 1", tuple(f"t.py::test_{i}[bad]" for i in range(9)))]
    assert summary_lines([], errored=errored, verbosity=-1)[-1] == "  ... and 4 more (-v names every one)"
    inconclusive = [Cell(f"t.py::test_{i}", "b", (SLOWER,), simulated=False) for i in range(LISTED + 1)]
    assert sum(" inconclusive: " in line for line in summary_lines(inconclusive, verbosity=1)) == LISTED + 1
