"""A strict user project (`filterwarnings = error`) runs under pytest-xdist (`-n 2`) with this plugin installed.

pytest-benchmark comes with the plugin (a dependency), so it is loaded in every such project. Before 5.3 it warned
`Benchmarks are automatically disabled because xdist plugin is active` from its own `pytest_configure` in every xdist
run, and pytest (from 8.4 on) applies the ini's `filterwarnings` there: under `error`, INTERNALERROR before any test
(issue 29). 5.3 gives that notice only at exit, and only when a collected test uses `benchmark`; pyproject.toml's
floor (5.3.1, see requirements/floors.txt) admits no version that warns at configure. These runs prove it holds,
and that the plugin's own run under xdist (boot, measure, report) leaves no warning to turn into an error.

Each run is a subprocess, so that xdist really starts its workers (pytest-benchmark 5.2.3 warned in each of them too).
With pytest-benchmark 5.2.3 installed, both tests fail: pytest stops with INTERNALERROR in pytest_configure.
"""

from __future__ import annotations

import pytest
from perf_project import FAST_SIM, LOOSE, write_project

pytest.importorskip("xdist")

STRICT_INI = "[pytest]\nfilterwarnings =\n    error\n"
PLAIN_TESTS = """
import warnings


def test_plain():
    assert True


def test_own_warning_still_fails():
    warnings.warn("the project's own warning", UserWarning)
"""
PERF_TESTS = """
def test_hello(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Say hello.", max_tokens=16, repeats=2, warmup=0))
"""


def _assert_ran_cleanly(result: pytest.RunResult) -> None:
    """No INTERNALERROR, pytest-benchmark was loaded (its header line), and its xdist notice was never given."""
    text = result.stdout.str() + "\n" + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "\nbenchmark: " in result.stdout.str(), text
    assert "xdist plugin is active" not in text, text


def test_a_strict_project_without_perf_configuration_runs_under_xdist(pytester: pytest.Pytester) -> None:
    """The issue's crash itself: a project that never heard of perf tests. Its own warning still fails its test, so
    `error` was in force in the run."""
    pytester.makeini(STRICT_INI)
    pytester.makepyfile(test_plain=PLAIN_TESTS)

    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")

    _assert_ran_cleanly(result)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*UserWarning: the project's own warning*"])


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_a_strict_project_measures_under_xdist(pytester: pytest.Pytester) -> None:
    """A simulated perf test under `error`: the workers' boot, measurement and teardown (event loops, sockets,
    subprocesses) and the controller's report give no warning either."""
    project = write_project(pytester, {"default": []}, extra=LOOSE, sim=FAST_SIM)
    project.write_text(project.read_text() + '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    pytester.makepyfile(test_perf=PERF_TESTS)

    result = pytester.runpytest_subprocess("-n", "2", "--sglang-simulate", "--sglang-update-baselines")

    _assert_ran_cleanly(result)
    result.assert_outcomes(passed=1)
