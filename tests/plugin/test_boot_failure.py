"""A variant whose server cannot boot errors its own tests; the other variants still run."""

from __future__ import annotations

import pytest
from perf_project import server_processes, write_project


def test_unknown_flag_errors_only_its_variant(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"good": [], "old_flag": ["--enforce-piecewise-cuda-graph"]})
    pytester.makepyfile(test_boot="""
        def test_a(sglang_perf):
            assert sglang_perf.server.boot_seconds > 0

        def test_b(sglang_perf):
            pass
    """)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2, errors=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_a[[]old_flag[]]*",
        "*exit*code*2*",
        "*--enforce-piecewise-cuda-graph*",
        "*unrecognized arguments: --enforce-piecewise-cuda-graph*",
    ])
    assert out.count("] booting (") == 2  # the failed boot is not retried for test_b
    assert server_processes(pytester.path) == []
