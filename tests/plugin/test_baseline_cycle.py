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


@pytest.mark.slow
@pytest.mark.calm
def test_baseline_cycle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"default": [], "capped": ["--max-running-requests", "8"]})
    pytester.makepyfile(test_perf=TEST_FILE)

    first = pytester.runpytest("--sglang-simulate")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([
        "variant default (SIMULATED)",
        "*test_perf.py::test_red_black_tree*output_throughput*new",
        "*2 cells*2 new*",
        "*--sglang-update-baselines*",
    ])
    assert _baseline_files(pytester) == []

    record = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines")
    record.assert_outcomes(passed=2)
    [name] = _baseline_files(pytester)
    data = json.loads((pytester.path / "baselines" / name).read_text())
    cells = data["entries"]["test_perf.py::test_red_black_tree"]
    assert set(cells) == {"default", "capped"}
    assert len(cells["default"]["samples"]) == 3
    assert cells["capped"]["args"] == ["--random-seed", "0", "--max-running-requests", "8"]

    again = pytester.runpytest("--sglang-simulate")
    again.assert_outcomes(passed=2)  # unchanged: never red (a busy machine may make a cell inconclusive, not failed)
    again.stdout.fnmatch_lines(["*2 cells*0 regressed*0 new, 0 stale*"])

    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "0.2")
    slowed = pytester.runpytest("--sglang-simulate", "--sglang-variants", "capped", "--sglang-results", "slow.json")
    slowed.assert_outcomes(failed=1)
    # The band is the 5% tolerance; the regression was re-measured on a fresh boot (the simulator boots in a second:
    # confirm = "auto" reboots) and held.
    cell = json.loads((pytester.path / "slow.json").read_text())["cells"][0]
    check, again_check = cell["metrics"]["output_throughput"], cell["confirmation"]["metrics"]["output_throughput"]
    assert check["allowed"] == 0.05 and check["change"] < -0.05 and check["p_value"] < 0.05
    assert again_check["verdict"] == "regressed" and len(cell["confirmation"]["samples"]) == 3
    assert cell["confirmation"]["on"] == "fresh-boot"
    slowed.stdout.fnmatch_lines([
        "*_ test_red_black_tree[[]capped[]] _*",
        "*test_perf.py::test_red_black_tree [[]capped[]]: regressed (confirmed: re-measured on a fresh boot, it "
        "regressed again) (SIMULATED)",
        "*metric*baseline*measured*change*re-measured*allowed*p*detectable*verdict",
        f"*output_throughput*{check['change'] * 100:+.1f}%*{again_check['change'] * 100:+.1f}%*-5.0%*REGRESSED",
        "*pytest 'test_perf.py::test_red_black_tree[[]capped[]]' --sglang-simulate --sglang-update-baselines",
        "FAILED test_perf.py::test_red_black_tree[[]capped[]]*",
    ])
    assert "SIMULATED" in slowed.stdout.str()

    refresh = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines")
    refresh.assert_outcomes(passed=2)
    after = pytester.runpytest("--sglang-simulate")
    after.assert_outcomes(passed=2)
    assert server_processes(pytester.path) == []
