"""Every measured cell is also a pytest-benchmark benchmark: its JSON, saved runs, comparisons and histograms.

Four simulator runs of a small project: a default run (pytest-benchmark says and saves nothing), then an autosaved
run with --benchmark-json and a histogram, a second autosaved run compared with the first, and a slowed run that
--benchmark-compare-fail fails. The rounds are our requests' end-to-end latencies, not re-timed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from perf_project import write_project

from pytest_sglang_perf.pytest_plugin.benchmark_bridge import ReplayClock, mark_items, wanted

TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))

def test_twice(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Say hello.", repeats=2, max_tokens=100))
    sglang_perf.check(sglang_perf.measure("Say goodbye.", repeats=2, max_tokens=100))
"""
VARIANTS = {"default": [], "capped": ["--max-running-requests", "8"]}
CELLS = {(test, variant) for test in ("test_perf.py::test_tree", "test_perf.py::test_twice") for variant in VARIANTS}
PYTEST_BENCHMARK = Path(sys.executable).with_name("pytest-benchmark")


def _project(pytester: pytest.Pytester) -> None:
    write_project(pytester, VARIANTS)
    pytester.makepyfile(test_perf=TEST_FILE)


def _text(result: pytest.RunResult) -> str:
    return " ".join((result.stdout.str() + "\n" + result.stderr.str()).split())


def _first_cells(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Our results file's cells by (test id, variant); a test that checked twice: its first cell."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for cell in results["cells"]:
        cells.setdefault((cell["test_id"], cell["variant"]), cell)
    return cells


def test_the_replay_clock_replays_each_duration_exactly() -> None:
    clock = ReplayClock("test_perf.py::test_tree[default]")
    clock.load([0.125, 0.1 + 0.2, 3.0])
    rounds = []
    for _ in range(3):
        clock.rewind()
        start = clock()
        clock.play()
        rounds.append(clock() - start)
    assert rounds == [0.125, 0.1 + 0.2, 3.0]  # exact: every round starts at 0
    assert clock() == clock() == 3.0  # reading it never moves it
    with pytest.raises(RuntimeError, match="no recorded duration left"):
        clock.play()
    assert str(clock) == ("sglang-perf replay clock (per-request e2e of test_perf.py::test_tree[default], "
                          "not re-timed)")
    assert repr(clock) == "ReplayClock('test_perf.py::test_tree[default]')"


@pytest.mark.parametrize(("args", "asked", "expected"), [
    ((), False, False),
    ((), True, True),
    (("--benchmark-json", "out.json"), False, True),
    (("--benchmark-autosave",), False, True),
    (("--benchmark-histogram",), False, True),
    (("--benchmark-save", "mine"), False, True),
    (("--benchmark-verbose",), False, True),
    (("--benchmark-min-rounds", "9"), False, False),  # not an output: no reason to feed
    (("--benchmark-json", "out.json", "--benchmark-skip"), False, False),  # requesting the fixture would skip
    (("--benchmark-disable",), True, False),
    (("--benchmark-disable", "--benchmark-enable"), True, True),
    (("-p", "no:benchmark"), True, False),
])
def test_cells_are_fed_only_when_asked(pytester: pytest.Pytester, args: tuple[str, ...], asked: bool,
                                       expected: bool) -> None:
    config = pytester.parseconfigure(*args)
    assert wanted(config, asked) is expected


def test_asking_for_pytest_benchmark_without_its_plugin_is_a_usage_error(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("-p", "no:benchmark")
    with pytest.raises(pytest.UsageError, match=r"--sglang-benchmark .* plugin is not loaded in this run \(-p no:"):
        mark_items(config, [], True)
    mark_items(config, [], False)  # not asked: nothing to say


def test_a_default_run_leaves_pytest_benchmark_silent(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-variants", "default")
    result.assert_outcomes(passed=2)
    text = _text(result)
    assert "sglang-perf" in text and "benchmark '" not in text and "Legend:" not in text
    # pytest-benchmark makes its (empty) storage folder whenever it is loaded; nothing was saved in it
    assert [p for p in (pytester.path / ".benchmarks").rglob("*") if p.is_file()] == []


@pytest.mark.slow
@pytest.mark.calm
def test_saved_runs_compare_and_render(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # under xdist, pytest-benchmark would take the inner run for a worker
    _project(pytester)
    storage = f"file://{pytester.path / 'store'}"
    first = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-results", "ours.json", "--benchmark-json", "bench.json",
        "--benchmark-autosave", f"--benchmark-storage={storage}", f"--benchmark-histogram={pytester.path}/hist/h")
    first.assert_outcomes(passed=4)
    text = _text(first)
    assert "benchmark 'test_perf.py::test_tree': 2 tests" in text and "test_tree[capped]" in text
    _check_json(json.loads((pytester.path / "bench.json").read_text()),
                json.loads((pytester.path / "ours.json").read_text()))
    svgs = {path.name: path.read_text() for path in (pytester.path / "hist").glob("*.svg")}
    assert svgs and all(name.startswith("h-") for name in svgs)
    assert any("test_tree[default]" in svg and "test_tree[capped]" in svg for svg in svgs.values())

    second = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-variants", "capped", "--benchmark-autosave",
                                           f"--benchmark-storage={storage}", "--benchmark-compare=0001")
    second.assert_outcomes(passed=2)
    text = _text(second)
    assert "Comparing against benchmarks from:" in text and "0001_" in text
    assert "test_tree[capped] (0001_" in text and "test_tree[capped] (NOW)" in text

    saved = _cli(f"--storage={storage}", "list")
    assert saved.count(".json") == 2 and "0001_" in saved and "0002_" in saved
    compared = _cli(f"--storage={storage}", "compare", "0001", "0002", "--group-by=group")
    assert "test_perf.py::test_twice" in compared and "test_twice[capped] (0002_" in compared

    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "0.5")
    slowed = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-variants", "capped",
                                           f"--benchmark-storage={storage}", "--benchmark-compare=0002",
                                           "--benchmark-compare-fail=mean:5%")
    text = _text(slowed)
    # pytest-benchmark ends the run with its PerformanceRegression (a traceback, exit status 1) after the tests,
    # which pass: the gate had no baseline, its cells are new
    slowed.stdout.fnmatch_lines(["test_perf.py ..*"])
    assert slowed.ret == 1 and "Performance has regressed" in text
    assert "test_tree[capped] (0002_" in text and "Field 'mean' has failed PercentageRegressionCheck" in text


def _check_json(bench: dict[str, Any], ours: dict[str, Any]) -> None:
    """One benchmark per cell, grouped by test, its rounds our requests' end-to-end latencies, with our cell."""
    assert bench["machine_info"]["python_version"] and "id" in bench["commit_info"]
    benchmarks = {(b["group"], b["param"]): b for b in bench["benchmarks"]}
    assert set(benchmarks) == CELLS and len(bench["benchmarks"]) == len(CELLS)
    for key, cell in _first_cells(ours).items():
        stats, info = benchmarks[key]["stats"], benchmarks[key]["extra_info"]
        rounds = stats["data"]
        assert stats["rounds"] == len(rounds) == info["samples"] and stats["iterations"] == 1
        assert stats["min"] == min(rounds) and stats["max"] == max(rounds)
        # the rounds are the requests the gate judged: its throughput is theirs (ignore_eos: max_tokens each)
        tokens = 200 if key[0].endswith("test_tree") else 100
        throughput = info["metrics"]["output_throughput"]["measured"]
        assert throughput == pytest.approx(statistics.median(tokens / seconds for seconds in rounds))
        assert info["variant"] == key[1] and info["verdict"] == cell["verdict"] == "new"
        assert info["simulated"] is True and "authority" in info
        for name, metric in cell["metrics"].items():
            assert info["metrics"][name] == {field: metric[field] for field in
                                             ("measured", "baseline", "change", "allowed", "unit", "verdict")}
        assert info["metrics"]["output_throughput"]["unit"] == "tok/s"
        assert benchmarks[key]["options"]["timer"] == (f"sglang-perf replay clock (per-request e2e of "
                                                       f"{key[0]}[{key[1]}], not re-timed)")
    for variant in VARIANTS:  # a test that checked once: its rounds are exactly the results file's samples
        key = ("test_perf.py::test_tree", variant)
        cell, tree = _first_cells(ours)[key], benchmarks[key]
        assert tree["stats"]["data"] == [sample["e2e"] for sample in cell["samples"]]
        assert tree["extra_info"]["prompt_hash"] == cell["prompt_hash"]
    twice = benchmarks[("test_perf.py::test_twice", "default")]["extra_info"]
    assert twice["checks"] == 2 and "the first one's requests" in twice["note"]
    second = [cell for cell in ours["cells"] if (cell["test_id"], cell["variant"]) == ("test_perf.py::test_twice",
                                                                                       "default")][1]
    [later] = twice["later"]
    assert later["prompt_hash"] == second["prompt_hash"] != twice["prompt_hash"] and later["samples"] == 2
    assert later["metrics"]["output_throughput"]["measured"] == second["metrics"]["output_throughput"]["measured"]
    assert later["verdict"] == second["verdict"] and later["concurrency"] == 1
    assert benchmarks[("test_perf.py::test_tree", "default")]["extra_info"]["checks"] == 1


def _cli(*args: str) -> str:
    """pytest-benchmark's own command (its `list` and `compare`), as a user runs it."""
    done = subprocess.run([str(PYTEST_BENCHMARK), *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    return " ".join((done.stdout + done.stderr).split())
