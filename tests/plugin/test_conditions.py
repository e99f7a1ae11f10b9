"""The conditions of a measurement are recorded (issue 15, first step): how busy the host was and how the client
kept up, in the results file and in a failing cell's report. Verdicts do not use them yet."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from perf_project import write_project

from pytest_sglang_perf.measurement.host_load import host_load

TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"


@pytest.fixture
def busy_host() -> Iterator[int]:
    """One more spinning process than the host has cores, for the duration of the test."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) + 1)]
    try:
        yield len(hogs)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="the host's conditions are read from Linux's /proc")
def test_a_regression_on_a_busy_host_shows_the_host_was_busy(pytester: pytest.Pytester, busy_host: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"default": []}, request=STEADY)
    pytester.makepyfile(test_perf=TEST)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # twice as slow: a real regression, on top of the busy host
    result = pytester.runpytest("--sglang-simulate", "--sglang-results", "results.json")
    result.assert_outcomes(failed=1)
    shown = " ".join(result.stdout.str().split())
    found = re.search(r"conditions: client lag p50/p99/max [\d./]+ ms, \d+% of a core; host: ([\d.]+) runnable tasks "
                      rf"on {os.cpu_count()} cores, \d+% busy, steal \d+%, iowait \d+%, load [\d.]+", shown)
    assert found, shown
    assert float(found[1]) > (os.cpu_count() or 1) - 0.5  # the spinning processes were seen waiting for a core
    assert "conditions of the re-measure: client lag" in shown
    [cell] = json.loads((pytester.path / "results.json").read_text())["cells"]
    host = cell["client"]["host"]
    assert host["cores"] == os.cpu_count() and host["runnable"] > (os.cpu_count() or 1) - 0.5
    assert host["busy"] > 0.9 and host["samples"] >= 3


def test_the_host_condition_from_proc_readings(tmp_path: Path) -> None:
    (tmp_path / "loadavg").write_text("2.50 1.00 0.50 3/120 999\n")
    start = (100, 0, 50, 800, 10, 0, 0, 40)
    end = (300, 0, 100, 900, 30, 0, 0, 70)  # 400 jiffies: 250 busy, 100 idle, 20 iowait, 30 steal
    host = host_load(start, end, [3, 5, 4], tmp_path)
    assert host is not None
    assert (host.runnable, host.samples, host.load1) == (3.0, 3, 2.5)  # the sampler itself left out
    assert (round(host.busy, 3), round(host.steal, 3), round(host.iowait, 3)) == (0.7, 0.075, 0.05)
    assert host_load(None, end, [1], tmp_path) is None and host_load(start, end, [], tmp_path) is None
