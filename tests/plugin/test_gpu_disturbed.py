"""A server GPU busy before any request makes the measurement disturbed (issue 29, item 3), as a user meets it on the
GPU runner where it was seen: another process saturates the GPU, and NVML lists none of the server's processes (a
container with its own pid namespace), so no process can be called foreign and the GPU's utilization while the server
has no request is the only reading that sees the other user. Here the fake NVML (tests/fake_nvml/pynvml.py) answers
for a host of two H100s, lists no process at all, and reports a utilization the test sets; the simulated server holds
a claim on one of them. The recording is refused, `--sglang-ignore-conditions` records it anyway, and a provoked
regression is inconclusive, each saying which reading decided."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from perf_project import fake_gpu_host, write_project

FAKE_NVML = Path(__file__).resolve().parents[1] / "fake_nvml"
TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
H100 = {"name": "NVIDIA H100 80GB HBM3", "sm": 1980, "sm_max": 1980, "memory": 2619, "memory_max": 2619,
        "reasons": 0, "temperature": 60, "power_mw": 698_000, "power_limit_mw": 700_000, "processes": []}
"""A GPU at full work (the other process's bf16 matmul loop: 698/700 W), whose process list NVML leaves empty."""
REASON = re.compile(r"GPU (\d) busy before the measurement while the server had no request: utilization 100% in 3 "
                    r"readings over 1\.2 s; NVML lists none of the server's processes \(another pid namespace\), so "
                    r"this utilization stands in for another process on it")


def _utilization(project: pytest.Pytester, percent: int) -> None:
    gpu = {**H100, "utilization": percent}
    (project.path / "nvml.json").write_text(json.dumps({"gpus": [gpu, gpu]}))


@pytest.fixture
def shared_gpu(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project whose runs use their conditions, on a host whose GPUs the fake NVML reports 100% busy."""
    monkeypatch.delenv("SGLANG_PERF_IGNORE_CONDITIONS")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_gpu_host(pytester, monkeypatch, 2, name="NVIDIA H100 80GB HBM3")
    monkeypatch.setenv("FAKE_NVML_STATE", str(pytester.path / "nvml.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    _utilization(pytester, 100)
    write_project(pytester, {"default": []}, extra='[tool.sglang_perf.conditions]\nsettle_timeout = "1s"\n')
    pytester.makepyfile(test_perf=TEST)
    return pytester


def _run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("--sglang-simulate", "--sglang-gpu-lock-dir", str(project.path / "claims"),
                                        "--sglang-results", "results.json", *args)


def _flat(result: pytest.RunResult) -> str:
    return re.sub(r" sglang-perf: +(?=[a-z])", " ", " ".join(result.stdout.str().split()))


def _cell(project: pytest.Pytester) -> dict[str, Any]:
    [cell] = json.loads((project.path / "results.json").read_text())["cells"]
    assert isinstance(cell, dict)
    return cell


# three pytest runs on the simulator, ~20 s; the readings and the reasons: tests/unit/measurement, fast suite
@pytest.mark.slow
@pytest.mark.calm
def test_a_gpu_busy_before_any_request_refuses_the_baseline_and_makes_a_regression_inconclusive(
        shared_gpu: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = _run(shared_gpu, "--sglang-update-baselines")
    refused.assert_outcomes(failed=1)
    said = _flat(refused)
    found = REASON.search(said)
    assert found, said
    assert "the baseline of test_perf.py::test_p [default] was NOT recorded: it was measured under disturbed " \
           f"conditions ({found[0]})" in said
    said_before = re.search(r"\[default\] before the first measurement: (.*?); measuring anyway", said)
    assert said_before, said  # a busy host, when it is, is named first
    assert f"GPU {found[1]} is busy before any request (utilization 100%)" in said_before[1]
    assert not list((shared_gpu.path / "baselines").glob("*.json"))
    cell = _cell(shared_gpu)
    assert cell["entry"] is None and cell["withheld"].startswith(f"measured under disturbed conditions ({found[0]})")
    [gpu] = cell["gpu"]  # the claimed GPU, by the server's CUDA_VISIBLE_DEVICES: NVML lists none of its processes
    assert (gpu["index"], gpu["busy_before"], gpu["foreign_known"], gpu["foreign"]) == (int(found[1]), 100, False, [])

    _run(shared_gpu, "--sglang-update-baselines", "--sglang-ignore-conditions").assert_outcomes(passed=1)  # the way out
    assert len(list((shared_gpu.path / "baselines").glob("*.json"))) == 1

    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # twice as slow: a real regression, measured on a shared GPU
    shared = _run(shared_gpu)
    shared.assert_outcomes(passed=1)
    cell = _cell(shared_gpu)
    assert cell["verdict"] == "inconclusive", cell
    assert REASON.fullmatch(cell["disturbed"]), cell["disturbed"]
    assert cell["confirmation"]["gpu"][0]["busy_before"] == 100  # re-measured after a bounded wait, still busy
    assert "waiting up to 1 s for it to clear" in _flat(shared)
