"""A test that checks two measurements gives two cells, each with its own samples in the results file (and the
baseline entry that recording it would write)."""

from __future__ import annotations

import json

import pytest
from perf_project import write_project

TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_two(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, max_tokens=16))
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, max_tokens=40))
"""


def test_each_check_keeps_its_own_measurement(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_perf=TEST_FILE)
    run = pytester.runpytest("--sglang-simulate", "--sglang-results", "r.json")
    run.assert_outcomes(passed=1)
    assert f"sglang-perf: wrote results {pytester.path / 'r.json'}" in " ".join(run.stdout.str().split())
    cells = json.loads((pytester.path / "r.json").read_text())["cells"]
    assert [c["params"]["max_tokens"] for c in cells] == [16, 40]
    assert [{s["completion_tokens"] for s in c["samples"]} for c in cells] == [{16}, {40}]
    assert [c["entry"]["params"]["max_tokens"] for c in cells] == [16, 40]
    assert all(c["environment_key"] and c["entry"]["samples"] == c["samples"] for c in cells)
