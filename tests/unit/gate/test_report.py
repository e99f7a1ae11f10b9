from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict, check_all
from pytest_sglang_perf.gate.errored import BOOT, PREFLIGHT, ErroredVariant
from pytest_sglang_perf.gate.formats import format_value
from pytest_sglang_perf.gate.terminal import Pointers, failure_message, summary_lines

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
    assert lines[0] == "[default] regressed: output_throughput -9.1% (allowed -5.0%)"  # pytest's short summary line
    assert lines[1] == "sglang-perf: tests/perf/test_a.py::test_rbt [default]: regressed"
    assert lines[2].split() == ["metric", "baseline", "measured", "change", "allowed", "p", "detectable", "verdict"]
    assert lines[3].split()[:7] == ["output_throughput", "55.00", "tok/s", "50.00", "tok/s", "-9.1%", "-5.0%"]
    assert lines[3].split()[-1] == "REGRESSED"
    assert lines[3].split()[-3] == "<0.001"  # quiet samples: the change is certain
    assert lines[4].split()[:7] == ["ttft", "120.0", "ms", "121.0", "ms", "+0.8%", "+10.0%"]
    assert lines[4].split()[-1] == "ok"
    assert lines[-3].startswith("Not intended? Start with the server's log and findings above")
    assert lines[-2:] == ["Intended? Record the measured values as the new baseline:", f"  {REFRESH}"]
    assert "SIMULATED" not in "\n".join(lines)


def test_failure_headline_names_every_failing_metric_or_the_missing_baseline() -> None:
    slow = MetricCheck("output_throughput", "tok/s", 60.0, 50.0, -1 / 6, 0.05, Verdict.REGRESSED)
    late = MetricCheck("ttft", "s", 0.1, 0.12, 0.2, 0.1, Verdict.REGRESSED)
    fine = MetricCheck("tpot", "s", 0.005, 0.005, 0.0, 0.1, Verdict.OK)
    both = Cell("t", "v", (slow, fine, late), simulated=True)
    assert failure_message(both, "cmd").splitlines()[0] == (
        "[v] regressed: output_throughput -16.7% (allowed -5.0%), ttft +20.0% (allowed +10.0%)")
    new = failure_message(cell("t", "v", None, ttft=None), "cmd").splitlines()
    assert new[0] == "[v] new: no baseline recorded for this cell"
    assert new[-2:] == ["To record the measured values as the baseline, re-run with:", "  cmd"]
    stale = Cell("t", "v", (fine,), simulated=False, stale=("max_tokens 512 -> 128",))
    assert failure_message(stale, "cmd").splitlines()[0] == (
        "[v] stale: the baseline was recorded for something else: max_tokens 512 -> 128")


def test_failure_message_columns_are_aligned() -> None:
    lines = failure_message(cell("t", "default", 55.0), REFRESH).splitlines()[2:5]
    ends = {line.index("%") for line in lines[1:]}
    assert len(ends) == 1  # the change column is right-aligned
    assert lines[0].index("verdict") == lines[1].index("REGRESSED") == lines[2].index("ok")


def test_failure_message_says_simulated() -> None:
    message = failure_message(cell("t", "default", 55.0, simulated=True), REFRESH)
    assert message.splitlines()[1].endswith("regressed (SIMULATED)")


def test_summary_lists_every_variant_test_and_metric_and_counts_cells() -> None:
    cells = [
        cell("test_a", "default", 55.0),
        cell("test_b", "default", 50.0),
        cell("test_a", "prefill_graph", 40.0),
        cell("test_b", "prefill_graph", None, ttft=None),
        cell("test_c", "prefill_graph", 60.0, updated=True),
    ]
    lines = summary_lines(cells, verbosity=1)
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
    assert lines[-8] == ("sglang-perf: 5 cells: 1 ok, 1 regressed, 0 inconclusive, 1 improved, 1 new, 0 stale, "
                         "1 updated, 0 errored")
    assert lines[-7].startswith("sglang-perf: 1 cell(s) NOT GATED, no comparable baseline (1 new)")
    assert lines[-6] == "sglang-perf: 1 regressed cell. Not intended? Investigate:"
    assert lines[-1] == ("sglang-perf: to record these values as the new baselines (1 new, 1 improved), re-run with "
                         "--sglang-update-baselines")


def test_summary_marks_every_simulated_table() -> None:
    cells = [cell("t", "default", 50.0, simulated=True), cell("t", "other", 50.0, simulated=True)]
    lines = summary_lines(cells, refresh_flag="--flag")
    assert "variant default (SIMULATED): 1 cell ok (2 metrics; -v shows every metric)" in lines
    assert "variant other (SIMULATED): 1 cell ok (2 metrics; -v shows every metric)" in lines
    assert "variant default (SIMULATED)" in summary_lines(cells, verbosity=1)  # -v: the table under its title
    assert lines[-1] == ("sglang-perf: 2 cells: 2 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, "
                         "0 updated, 0 errored (SIMULATED)")


def test_summary_without_pending_changes_has_no_refresh_hint() -> None:
    lines = summary_lines([cell("t", "default", 50.0), cell("u", "default", 80.0, updated=True)])
    assert lines[-1] == ("sglang-perf: 2 cells: 1 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, "
                         "1 updated, 0 errored")
    assert not any("re-run" in line for line in lines)


def test_summary_uses_the_given_flag_and_singular_cell() -> None:
    lines = summary_lines([cell("t", "default", None, ttft=None)], refresh_flag="--regen")
    assert lines[-3] == ("sglang-perf: 1 cell: 0 ok, 0 regressed, 0 inconclusive, 0 improved, 1 new, 0 stale, "
                         "0 updated, 0 errored")
    assert lines[-1].endswith("(1 new), re-run with --regen")


def test_summary_of_a_cell_without_metrics_and_of_nothing() -> None:
    empty = Cell("t", "default", (), simulated=False)
    assert any("(no metrics)" in line for line in summary_lines([empty]))
    assert summary_lines([]) == []


def test_a_check_built_by_hand_is_reported_verbatim() -> None:
    check = MetricCheck("tpot", "s", 0.020, 0.025, 0.25, 0.1, Verdict.REGRESSED)
    text = failure_message(Cell("t", "v", (check,), simulated=False), "cmd")
    assert "20.0 ms" in text and "25.0 ms" in text and "+25.0%" in text and "+10.0%" in text


def test_default_tables_show_each_cells_first_and_notable_metrics_and_count_the_rest() -> None:
    cells = [cell("test_a", "default", 55.0), cell("test_b", "default", 50.0), cell("test_c", "default", 45.0)]
    lines = summary_lines(cells)
    rows = [line.split() for line in lines[2:5]]
    assert [(row[0], row[1], row[-1]) for row in rows] == [("test_a", "output_throughput", "REGRESSED"),
                                                            ("test_b", "output_throughput", "ok"),
                                                            ("test_c", "output_throughput", "improved")]
    assert lines[5] == "  (3 more metric(s): 3 ok; -v shows every metric)"  # the ttft rows
    assert len(summary_lines(cells, verbosity=1)) == len(lines) - 1 + 3


def test_quiet_summary_has_no_tables() -> None:
    lines = summary_lines([cell("t", "default", 50.0)], verbosity=-1)
    assert lines == ["sglang-perf: 1 cell: 1 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, 0 updated, "
                     "0 errored"]


def test_errored_variants_count_as_cells_and_are_named() -> None:
    errored = [ErroredVariant("sbo", PREFLIGHT, "fails on SM90", ("t[sbo]", "u[sbo]")),
               ErroredVariant("bad", BOOT, "exited with code 1", ("t[bad]",))]
    lines = summary_lines([cell("t", "default", 50.0)], errored=errored, verbosity=-1)
    assert lines == [
        "sglang-perf: 4 cells: 1 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, 0 updated, 3 errored",
        "sglang-perf: ERRORED, nothing measured: sbo (pre-flight check failed), bad (boot failed)",
        "  t[sbo] errored: pre-flight check failed: fails on SM90",  # -q: each errored test (no servers section)
        "  u[sbo] errored: pre-flight check failed: fails on SM90",
        "  t[bad] errored: boot failed: exited with code 1",
    ]
    assert summary_lines([], errored=errored[1:], verbosity=-1)[0].startswith("sglang-perf: 1 cell: 0 ok,")


def test_a_regression_hint_says_how_to_investigate_and_how_to_accept() -> None:
    pointers = Pointers(logs=".pytest_cache/d/sglang-perf/logs/20250101-120000-7/", results="out/results.json")
    lines = summary_lines([cell("t", "default", 55.0), cell("u", "default", 55.0)], pointers=pointers)
    assert lines[-5:] == [
        "sglang-perf: 2 regressed cells. Not intended? Investigate:",
        "  server logs:   .pytest_cache/d/sglang-perf/logs/20250101-120000-7/ (a <variant>.log per variant)",
        "  what ran:      each variant's effective configuration, in the sglang-perf servers section above",
        "  every sample:  out/results.json; compare two runs: sglang-perf compare before.json after.json",
        "Intended? Record the new values: the command at the end of each failure, or re-run with "
        "--sglang-update-baselines",
    ]
    quiet = summary_lines([cell("t", "default", 55.0)], verbosity=-1, pointers=Pointers(servers_shown=False))
    assert quiet[-3:-1] == ["  what ran:      each variant's effective configuration: the sglang-perf servers "
                            "section (without -q)", "  every sample:  re-run with --sglang-results FILE; compare "
                            "two runs: sglang-perf compare before.json after.json"]
    assert not any("re-run with --sglang-update-baselines to record" in line for line in lines)


def test_summary_lines_are_wrapped_at_120_characters_between_whole_changes() -> None:
    prompt = "prompt changed (hash 643a59ef84a786bc -> f811f532f085b7ef)"
    stale = Cell("tests/perf/test_a.py::test_rbt", "default", cell("t", "default", 50.0).checks, simulated=False,
                 stale=("max_tokens 512 -> 128", prompt, "--tp-size 1 -> 2"))
    lines = summary_lines([stale])
    assert lines[3:5] == [
        "  tests/perf/test_a.py::test_rbt: the baseline is not comparable (recorded for something else): max_tokens "
        "512 -> 128;",
        f"    {prompt}; --tp-size 1 -> 2",
    ]
    assert all(len(line) <= 120 for line in lines[:1] + lines[3:])  # all but the table's header and row


def _noisy_cell(test_id: str) -> Cell:
    """Two requests 30% apart: they cannot detect a 5% change of output_throughput."""
    checks = check_all({"output_throughput": [40.0, 52.0]}, {"output_throughput": [[50.0, 51.0]]},
                       {"output_throughput": 0.05})
    return Cell(test_id, "default", checks, simulated=False)


def test_underpowered_cells_are_named_with_v_and_counted_by_default() -> None:
    cells = [_noisy_cell("test_a"), _noisy_cell("test_b")]
    assert all(c.checks[0].underpowered for c in cells)
    full = [line for line in summary_lines(cells, verbosity=1) if line.startswith("warning:")]
    assert [line.split()[1:3] for line in full] == [["test_a", "[default]:"], ["test_b", "[default]:"]]
    brief = " ".join(" ".join(summary_lines(cells)).split())
    assert brief.count("warning: ") == 1
    assert ("warning: 2 cells measure too few requests to detect a change as small as their tolerance (-v names "
            "them); measure more (request.repeats, or repeats = \"auto\")") in brief
    one = [line for line in summary_lines(cells[:1]) if line.startswith("warning:")]
    assert one[0].startswith("warning: test_a [default]: 2 requests detect only changes of output_throughput >= ")
