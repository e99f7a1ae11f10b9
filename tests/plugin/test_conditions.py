"""The conditions of a measurement (issue 15, the host's side): how busy the host was and how the client kept up are
recorded in the results file and a failing cell's report; a regression re-measured on a busy host is `inconclusive`,
not red; a baseline measured there is refused; `--sglang-ignore-conditions` uses none of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from perf_project import write_project

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.conditions import disturbance
from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.host_load import HostLoad, host_load
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.stats import Summary

TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"
CONDITIONS = '[tool.sglang_perf.conditions]\nsettle_timeout = "1s"\n'
LINUX = pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="the host's conditions come from Linux's /proc")


@contextmanager
def busy_host() -> Iterator[None]:
    """Twice as many spinning processes as the host has cores."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture
def checked(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project whose runs use their conditions (the suite's conftest turns them off elsewhere)."""
    monkeypatch.delenv("SGLANG_PERF_IGNORE_CONDITIONS")
    write_project(pytester, {"default": []}, request=STEADY, extra=CONDITIONS)
    pytester.makepyfile(test_perf=TEST)
    return pytester


def _flat(result: pytest.RunResult) -> str:
    """The output on one line, without the prefix of the plugin's wrapped continuation lines."""
    return re.sub(r" sglang-perf: +(?=[a-z])", " ", " ".join(result.stdout.str().split()))


@pytest.mark.slow  # three runs beside spinning processes, ~15 s; readings and verdicts: unit tests, fast suite
@pytest.mark.calm
@LINUX
def test_a_regression_on_a_busy_host_is_inconclusive_with_the_reason(checked: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the recording is not what this test is about, and the suite may run on a busy host
    checked.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-ignore-conditions").assert_outcomes(
        passed=1)
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # twice as slow: a real regression, on a busy host
    with busy_host():
        busy = checked.runpytest("--sglang-simulate", "--sglang-results", "results.json", "-v")
        ignoring = checked.runpytest("--sglang-simulate", "--sglang-ignore-conditions")
    busy.assert_outcomes(passed=1)
    [cell] = json.loads((checked.path / "results.json").read_text())["cells"]
    assert cell["verdict"] == "inconclusive" and cell["disturbed"].startswith("host busy: ")
    assert cell["confirmation"]["host"]["runnable"] > 0  # re-measured (after a bounded wait for calm), still disturbed
    assert cell["entry"] is None  # a disturbed measurement offers `baseline accept` nothing, and says why
    assert cell["withheld"].startswith("measured under disturbed conditions (host busy: "), cell["withheld"]
    assert cell["host"]["cores"] == os.cpu_count() and cell["host"]["runnable"] > (os.cpu_count() or 1)
    assert cell["host"]["busy"] > 0.9 and cell["host"]["server_wait"] is not None
    said = _flat(busy)
    assert "the host is busy (" in said
    assert "other runnable tasks on" in said and "waiting up to 1 s for it to settle before the re-measure" in said

    ignoring.assert_outcomes(failed=1)  # the same regression, the conditions not used: red, and they are shown
    shown = _flat(ignoring)
    assert "regressed" in shown
    found = re.search(r"conditions: client lag p50/p99/max [\d./]+ ms, \d+% of a core"
                      r"(?:, kernel stamps(?: on \d+% of reads)?|, loop stamps); host: server waited for a CPU "
                      r"(\d+)% of the time, client (\d+)%; ([\d.]+) other runnable tasks "
                      rf"on {os.cpu_count()} cores, \d+% busy, steal \d+%, iowait \d+%, load [\d.]+", shown)
    assert found, shown
    assert float(found[3]) > (os.cpu_count() or 1)  # the spinning processes, the measurement's own left out
    assert "conditions of the re-measure: client lag" in shown


@pytest.mark.slow
@pytest.mark.calm
@LINUX
def test_a_baseline_measured_on_a_busy_host_is_refused(checked: pytest.Pytester) -> None:
    with busy_host():
        refused = checked.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-results", "r.json")
    refused.assert_outcomes(failed=1)
    [cell] = json.loads((checked.path / "r.json").read_text())["cells"]
    assert cell["verdict"] == "new" and cell["entry"] is None and cell["host"]["runnable"] > 0
    assert ("the baseline of test_perf.py::test_p [default] was NOT recorded: it was measured under disturbed "
            "conditions (host busy: ") in _flat(refused)
    assert not list((checked.path / "baselines").glob("*.json"))
    accept = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "baseline", "accept", "--dir",
                             "baselines", "--new-environment", "r.json"], cwd=checked.path, capture_output=True,
                            text=True, timeout=120)
    assert accept.returncode == 0, accept.stdout + accept.stderr  # nothing refused, nothing to accept: said why
    assert ("skipped   test_perf.py::test_p [default] (r.json): measured under disturbed conditions (host busy: "
            in accept.stdout), accept.stdout
    assert "--sglang-ignore-conditions to record it anyway" in " ".join(accept.stdout.split())
    assert not list((checked.path / "baselines").glob("*.json"))


def test_the_host_condition_from_proc_readings(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("2.50 1.00 0.50 3/120 999\n")
    start = (100, 0, 50, 800, 10, 0, 0, 40)
    end = (300, 0, 100, 900, 30, 0, 0, 70)  # 400 jiffies: 250 busy, 100 idle, 20 iowait, 30 steal
    host = host_load(start, end, [3, 5, 4], tmp_path)
    assert host is not None
    assert (host.runnable, host.samples, host.load1) == (4.0, 3, 2.5)
    assert (round(host.busy, 3), round(host.steal, 3), round(host.iowait, 3)) == (0.7, 0.075, 0.05)
    assert host_load(None, end, [1], tmp_path) is None and host_load(start, end, [], tmp_path) is None


@pytest.mark.parametrize(("host", "lag", "reason"), [
    (HostLoad(2, 0.5, 0.4, 0.0, 0.0, 0.5, 20, 0.02, 0.01), 0.0004, None),
    (HostLoad(2, 0.2, 1.0, 0.0, 0.0, 1.1, 20, 0.01, 0.37), 0.0004, None),  # the measurement's own load: not others'
    (HostLoad(2, 3.8, 1.0, 0.0, 0.0, 1.1, 20, 0.01, 0.37), 0.0004,
     "host busy: 3.8 other runnable tasks on 2 cores (limit 0.5 per core); the server waited for a CPU 1% of the time "
     "and the client waited for a CPU 37% of the time"),
    (HostLoad(2, 1.5, 1.0, 0.0, 0.0, 1.1, 20), 0.0004, "host busy: 1.5 other runnable tasks on 2 cores (limit 0.5 per "
     "core)"),
    (HostLoad(2, 0.5, 0.9, 0.4, 0.0, 0.5, 20, 0.02, 0.01), 0.0004,
     "CPU stolen by the hypervisor: 40% of the time (limit 30%)"),
    (None, 0.009, "the client fell behind: event-loop lag p99 9.0 ms (limit 5 ms)"),
])
def test_each_limit_names_itself(host: HostLoad | None, lag: float, reason: str | None) -> None:
    result = Result("v", RequestParams(prompt="p", max_tokens=10, repeats=1, warmup=0), "h", (),
                    {"ttft": Summary.of([0.1])}, 1.0, True,
                    client=ClientLoad(lag / 2, lag, lag, 50, 0.2, 1.0), host=host)
    assert disturbance(result, ConditionLimits()) == reason


@pytest.mark.parametrize(("stamped", "shared", "disturbed"), [
    (60, 0, False),  # every read kernel-stamped, no chunk read with another: the lag moved no timing
    (60, 2, True),  # two chunks share a read's stamp with the one before them
    (45, 0, True),  # a quarter of the reads were stamped by the late loop
])
def test_a_late_loop_counts_only_where_it_could_move_a_timing(stamped: int, shared: int, disturbed: bool) -> None:
    client = ClientLoad(0.004, 0.009, 0.012, 50, 0.9, 1.0, reads=60, kernel_stamped=stamped, chunks=58, shared=shared)
    result = Result("v", RequestParams(prompt="p", max_tokens=10, repeats=1, warmup=0), "h", (),
                    {"ttft": Summary.of([0.1])}, 1.0, True,
                    client=client)
    why = disturbance(result, ConditionLimits())
    assert why == ("the client fell behind: event-loop lag p99 9.0 ms (limit 5 ms)" if disturbed else None)


def test_the_re_measure_waits_for_the_other_tasks_to_leave_half_the_cores() -> None:
    from pytest_sglang_perf.gate.conditions import wait_for_calm

    heard: list[str] = []
    counts = iter([7, 7, 7, 7, 3, 3, 3, 3])  # 2 of the measurement's own: 5 others, then 1
    assert wait_for_calm(ConditionLimits(settle_timeout=30), heard.append, cores=4, sample=lambda: next(counts),
                         own=lambda: 2, every=0.0)
    assert heard == ["the host is busy (5.0 other runnable tasks on 4 cores): waiting up to 30 s for it to settle "
                     "before the re-measure"]
    assert wait_for_calm(ConditionLimits(settle_timeout=30), heard.append, cores=4, sample=lambda: 2, every=0.0)
    assert not wait_for_calm(ConditionLimits(settle_timeout=0.01), heard.append, cores=2, sample=lambda: 9,
                             every=0.0)
    assert heard[-1] == "the host did not settle within 0.01 s: re-measuring anyway"


def test_the_measurements_own_running_threads_are_counted(tmp_path: Path) -> None:
    from pytest_sglang_perf.measurement.host_load import running_threads

    for pid, states in ((10, "RSR"), (11, "SD")):
        for tid, state in enumerate(states):
            task = tmp_path / str(pid) / "task" / str(100 * pid + tid)
            task.mkdir(parents=True)
            (task / "stat").write_text(f"{tid} (python (x)) {state} 1 2 3\n")
    assert running_threads([10, 11, 12], tmp_path) == 2
