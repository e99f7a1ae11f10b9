"""The GPUs' side of a measurement's conditions (issue 15), as a user sees it: a simulated server on a claimed GPU of
a host whose NVML is the fake one (tests/fake_nvml/pynvml.py; it lists a process on a GPU when the process's
CUDA_VISIBLE_DEVICES names that GPU, as a claimed simulator's does). The baseline keeps the conditions of each boot;
another process on the server's GPU is said before the first measurement, turns a regression inconclusive with the
reason, and shows in the results file and the Markdown report."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from perf_project import fake_gpu_host, write_project

FAKE_NVML = Path(__file__).resolve().parents[1] / "fake_nvml"
TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
H200 = {"name": "NVIDIA H200", "sm": 1980, "sm_max": 1980, "memory": 3201, "memory_max": 3201, "reasons": 0,
        "temperature": 45, "power_mw": 420_000, "power_limit_mw": 700_000, "utilization": 70,
        "processes_from_env": True}


@contextmanager
def other_process_on_gpu(index: int) -> Iterator[int]:
    """A process that "runs" on the GPU (the fake NVML lists it there)."""
    other = subprocess.Popen(["sleep", "300"], env={**os.environ, "CUDA_VISIBLE_DEVICES": str(index)})
    try:
        yield other.pid
    finally:
        other.kill()
        other.wait()


@pytest.fixture
def gpu_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("SGLANG_PERF_IGNORE_CONDITIONS")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_gpu_host(pytester, monkeypatch, 2)
    state = pytester.path / "nvml.json"
    state.write_text(json.dumps({"gpus": [H200, H200]}))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    write_project(pytester, {"default": []}, extra='[tool.sglang_perf.conditions]\nsettle_timeout = "1s"\n')
    pytester.makepyfile(test_perf=TEST)
    return pytester


def _run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("--sglang-simulate", "--sglang-gpu-lock-dir", str(project.path / "claims"),
                                        *args)


def _flat(result: pytest.RunResult) -> str:
    return re.sub(r" sglang-perf: +(?=[a-z])", " ", " ".join(result.stdout.str().split()))


# three pytest runs, ~20 s; the unit tests (tests/unit/measurement/test_gpu_conditions.py) are in the fast lane
@pytest.mark.slow
@pytest.mark.calm
def test_another_process_on_the_servers_gpu_is_said_and_makes_a_regression_inconclusive(
        gpu_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # recorded whatever the host's load (not this test's subject); the conditions are kept all the same
    _run(gpu_project, "--sglang-update-baselines", "--sglang-ignore-conditions").assert_outcomes(passed=1)
    [baseline] = (gpu_project.path / "baselines").glob("*.json")
    [boot] = json.loads(baseline.read_text())["entries"]["test_perf.py::test_p"]["default"]["boots"]
    [gpu] = boot["conditions"]["gpu"]  # the server ran on one claimed GPU, seen through NVML
    assert (gpu["name"], gpu["sm_mhz"], gpu["foreign"], gpu["foreign_known"]) == ("NVIDIA H200", 1980, [], True)
    assert boot["conditions"]["host"]["cores"] == os.cpu_count() and boot["conditions"]["client"]["probes"] > 0

    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # twice as slow: a real regression, with a GPU shared
    with other_process_on_gpu(int(gpu["index"])) as pid:
        shared = _run(gpu_project, "--sglang-results", "results.json", "--sglang-markdown", "report.md")
    shared.assert_outcomes(passed=1)
    said = _flat(shared)
    assert (f"[default] before the first measurement: GPU {gpu['index']} has 1 other process(es) on it (pid {pid}); "
            f"GPU {gpu['index']} is busy before any request (utilization 70%); measuring anyway "
            "(conditions.wait_before_measuring waits a bounded time for it to clear)") in said
    [cell] = json.loads((gpu_project.path / "results.json").read_text())["cells"]
    assert cell["verdict"] == "inconclusive"
    assert cell["disturbed"] == f"another process on GPU {gpu['index']}: pid {pid}"
    assert cell["gpu"][0]["foreign"] == [{"pid": pid, "memory": None}]
    assert cell["confirmation"]["gpu"][0]["foreign"] == [{"pid": pid, "memory": None}]  # re-measured, still there
    report = (gpu_project.path / "report.md").read_text()
    assert "## Conditions" in report and f"**another process on GPU {gpu['index']}: pid {pid}**" in report
    # a failing cell's `conditions:` lines name the GPU too: tests/unit/measurement/test_gpu_conditions.py (no third
    # run here)
