"""A recorded cell offers, in the results file, the very entry it wrote to its baseline file, every boot of
--sglang-boots N included: `sglang-perf baseline accept` of a refresh run's results keeps the boot-to-boot spread."""

from __future__ import annotations

import json

import pytest
from perf_project import write_project

from pytest_sglang_perf.session.baselines import REPLACED

TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_short(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, max_tokens=16))
"""


def test_a_recorded_cell_offers_the_entry_it_wrote(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request="max_tokens = 16\nrepeats = 2\nwarmup = 0\n")
    pytester.makepyfile(test_perf=TEST_FILE)
    run = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-boots", "2",
                             "--sglang-results", "r.json")
    run.assert_outcomes(passed=1)
    [cell] = json.loads((pytester.path / "r.json").read_text())["cells"]
    [path] = (pytester.path / "baselines").glob("*.json")
    stored = json.loads(path.read_text())["entries"]["test_perf.py::test_short"]["default"]
    assert cell["environment_key"] == path.stem
    assert cell["entry"] == stored and cell["withheld"] is None
    assert [boot["samples"] for boot in stored["boots"]] == [2, 2] and len(stored["samples"]) == 4
    assert stored["source"]["how"] == "recorded" and stored["source"]["host"]


def test_a_cell_checked_twice_offers_the_later_entry_and_says_so_of_the_earlier(pytester: pytest.Pytester) -> None:
    """Two checks of one test x variant in a refresh run: the baseline file keeps the later one, so the results file
    offers that one and says of the earlier why it offers none."""
    write_project(pytester, {"default": []}, request="max_tokens = 16\nrepeats = 2\nwarmup = 0\n")
    again = "    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, max_tokens=16))\n"
    pytester.makepyfile(test_perf=TEST_FILE + again)
    run = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-results", "r.json")
    run.assert_outcomes(passed=1)
    first, second = json.loads((pytester.path / "r.json").read_text())["cells"]
    [path] = (pytester.path / "baselines").glob("*.json")
    stored = json.loads(path.read_text())["entries"]["test_perf.py::test_short"]["default"]
    assert (first["entry"], first["withheld"]) == (None, REPLACED)
    assert (second["entry"], second["withheld"]) == (stored, None)
