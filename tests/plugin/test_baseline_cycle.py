"""The baseline cycle as a user meets it: NEW -> record -> pass -> slowed server fails -> refresh -> pass."""

from __future__ import annotations

import json

import pytest
from perf_project import server_processes, write_project

TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_red_black_tree(sglang_perf):
    result = sglang_perf.measure(RED_BLACK_TREE)
    sglang_perf.check(result)
"""


def _baseline_files(pytester: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in (pytester.path / "baselines").glob("*.json"))


def test_baseline_cycle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"default": [], "overlap": ["--enable-single-batch-overlap"]})
    pytester.makepyfile(test_perf=TEST_FILE)

    first = pytester.runpytest("--sglang-simulate")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*test_red_black_tree*default*output_throughput*new*",
                                "*2 cells*2 new*", "*--sglang-update-baselines*"])
    assert _baseline_files(pytester) == []

    record = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines")
    record.assert_outcomes(passed=2)
    [name] = _baseline_files(pytester)
    data = json.loads((pytester.path / "baselines" / name).read_text())
    cells = data["entries"]["test_perf.py::test_red_black_tree"]
    assert set(cells) == {"default", "overlap"}
    assert len(cells["default"]["samples"]) == 3
    assert cells["overlap"]["args"] == ["--random-seed", "0", "--enable-single-batch-overlap"]

    again = pytester.runpytest("--sglang-simulate")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*2 cells*2 ok*"])

    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "0.2")
    slowed = pytester.runpytest("--sglang-simulate", "--sglang-variants", "overlap")
    slowed.assert_outcomes(failed=1)
    slowed.stdout.fnmatch_lines([
        "*FAILED test_perf.py::test_red_black_tree[[]overlap[]]*",
        "*output_throughput*regressed*",
        "*--sglang-update-baselines*",
    ])
    assert "SIMULATED" in slowed.stdout.str()

    refresh = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines")
    refresh.assert_outcomes(passed=2)
    after = pytester.runpytest("--sglang-simulate")
    after.assert_outcomes(passed=2)
    assert server_processes(pytester.path) == []
