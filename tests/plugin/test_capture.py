"""What the session says during a test reaches the terminal whatever pytest's capture is: held until the test's phase
ends while pytest captures (tests/plugin/test_gpu_conditions_run.py shows a held line), at once without capture."""

from __future__ import annotations

import pytest
from perf_project import write_project

TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""


@pytest.mark.parametrize("capture", [["-p", "no:capture"], ["-s"]])
def test_a_run_without_capture_works(pytester: pytest.Pytester, capture: list[str]) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_perf=TEST, test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("--sglang-simulate", *capture)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["sglang-perf: 1 cell: * 1 new, * (SIMULATED)"])
