"""What the session hands the report wing (session/run_record.py): each cell's measurement for the A/B section."""

from __future__ import annotations

from pathlib import Path

from report_records import cell, result, run_record

from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.gate.results_file import CellRecord

TEST_A, TEST_B = "tests/perf/test_p.py::test_a", "tests/perf/test_p.py::test_b"


def test_results_are_keyed_by_test_and_variant(tmp_path: Path) -> None:
    """One entry per (test id, variant), each the result its record carries."""
    a, a_tp2, b = result(), result("tp2", e2e=0.8), result(e2e=1.2)
    record = run_record([CellRecord(cell(TEST_A, "default", Verdict.OK), a),
                         CellRecord(cell(TEST_A, "tp2", Verdict.OK), a_tp2),
                         CellRecord(cell(TEST_B, "default", Verdict.NEW), b)], logs_path=tmp_path)
    assert record.results == {(TEST_A, "default"): a, (TEST_A, "tp2"): a_tp2, (TEST_B, "default"): b}


def test_a_tests_last_check_wins(tmp_path: Path) -> None:
    """A test that checked the same variant twice is compared on its second measurement."""
    first, second = result(e2e=1.0), result(e2e=2.0)
    record = run_record([CellRecord(cell(TEST_A, "default", Verdict.OK), first),
                         CellRecord(cell(TEST_A, "default", Verdict.REGRESSED), second)], logs_path=tmp_path)
    assert record.results == {(TEST_A, "default"): second}


def test_a_cell_that_measured_nothing_has_no_result(tmp_path: Path) -> None:
    """A record without a result (the test failed before measuring) is left out."""
    record = run_record([CellRecord(cell(TEST_A, "default")), CellRecord(cell(TEST_B, "default", Verdict.OK),
                                                                          result())], logs_path=tmp_path)
    assert list(record.results) == [(TEST_B, "default")]
