"""What a user reads: the header, the summary table, the results file, and the option help."""

from __future__ import annotations

import importlib.util
import json

import pytest
from perf_project import write_project

TEST_FILE = """
def test_hello(sglang_perf):
    sglang_perf.check(sglang_perf.measure("hello", max_tokens=60, repeats=2, warmup=0))
"""


def test_summary_and_results_file(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": [], "b": ["--max-running-requests", "4"]})
    pytester.makepyfile(test_r=TEST_FILE)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results", "out/results.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "sglang-perf: pyproject.toml [[]tool.sglang_perf[]]; model model; variants: a, b; SIMULATED*",
        "sglang-perf: [[]a[]] ready in * s (SIMULATED; graphs * s; config ok; log a.log)",
        "*= sglang-perf =*",
        "variant a (SIMULATED)",
        "*test_r.py::test_hello*output_throughput*new",
        "  (5 more metric(s): 5 new; -v shows every metric)",
        "variant b (SIMULATED)",
        "*test_r.py::test_hello*output_throughput*new",
    ])
    data = json.loads((pytester.path / "out" / "results.json").read_text())
    assert data["simulated"] is True
    cells = {(c["test_id"], c["variant"]): c for c in data["cells"]}
    assert set(cells) == {("test_r.py::test_hello", "a"), ("test_r.py::test_hello", "b")}
    cell = cells[("test_r.py::test_hello", "a")]
    assert len(cell["samples"]) == 2
    assert cell["metrics"]["output_throughput"]["measured"] > 0
    assert cell["metrics"]["output_throughput"]["verdict"] == "new"
    assert data["environment"]["model"] == "model"
    assert data["errored"] == []


def test_no_configuration_errors_the_test_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no configuration found: add a [[]tool.sglang_perf[]] table*"])


def test_help_lists_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "SGLang performance regression tests:",
        "*--sglang-config=PATH*",
        "*--sglang-simulate*",
        "*--sglang-variants=NAMES*",
        "*--sglang-update-baselines*",
        "*--sglang-results=PATH*",
        "*--sglang-log-dir=PATH*",
        "*--sglang-require-real*",
        "*--sglang-strict-flags*",
        "*--sglang-heartbeat=SECONDS*",
    ])


def test_without_sglang_or_simulate_tests_skip_with_a_reason(pytester: pytest.Pytester) -> None:
    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here; the skip path is for machines without it")
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SGLang is not installed*run with --sglang-simulate*"])
    assert "booting" not in result.stdout.str()
