"""A red that holds across boots (issue 29), as a user sees it on the simulator: a regression is re-measured on a
fresh boot before it fails (`[gate] confirm`, session/confirmation.py), so one slow boot (the simulator's
`slow-boot:1:F` fault: the run's first boot of each variant F times slower, later boots not) is not a regression,
while confirm = "same-server" confirms the slow boot's own state; and a recording refused for disturbed
conditions keeps every level of a sweep, says each refusal once and calls no withheld cell regressed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from perf_project import fake_gpu_host, write_project

FAKE_NVML = Path(__file__).resolve().parents[1] / "fake_nvml"
TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
SWEEP = """
def test_sweep(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python.", concurrency=[1, 2]))
"""
STEADY = "max_tokens = 100\nrepeats = 4\nwarmup = 1\n"
TOLERANT_LATENCY = '[tool.sglang_perf.tolerance]\nttft = "500%"\ntpot = "500%"\n'
"""The gate's subject is the throughput: a busy 2-core host moves a 20 ms simulated TTFT by tens of percent."""


def _cells(path: Path) -> list[dict[str, object]]:
    cells: list[dict[str, object]] = json.loads(path.read_text())["cells"]
    return cells


def _project(pytester: pytest.Pytester, confirm: str | None) -> pytest.Pytester:
    gate = "" if confirm is None else f'[tool.sglang_perf.gate]\nconfirm = "{confirm}"\n'
    write_project(pytester, {"default": []}, request=STEADY, extra=TOLERANT_LATENCY + gate)
    pytester.makepyfile(test_perf=TEST)
    return pytester


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
@pytest.mark.calm
def test_a_slow_first_boot_is_not_a_regression_on_a_fresh_boot(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(pytester, None)  # confirm = "auto": the simulator boots in a second, so it reboots
    project.runpytest("--sglang-simulate", "--sglang-update-baselines",
                      "--sglang-ignore-conditions").assert_outcomes(passed=1)
    monkeypatch.setenv("SGLANG_SIM_FAULT", "slow-boot:1:2")  # this run's first boot twice as slow, the next not
    slow_boot = project.runpytest("--sglang-simulate", "--sglang-ignore-conditions", "--sglang-results", "r.json")
    slow_boot.assert_outcomes(passed=1)
    [cell] = _cells(project.path / "r.json")
    metrics = cell["metrics"]
    assert isinstance(metrics, dict) and metrics["output_throughput"]["change"] < -0.3  # measured on the slow boot
    assert cell["verdict"] == "inconclusive"
    confirmation = cell["confirmation"]
    assert isinstance(confirmation, dict) and confirmation["on"] == "fresh-boot"
    assert abs(confirmation["metrics"]["output_throughput"]["change"]) < 0.3
    slow_boot.stdout.fnmatch_lines(["*[[]default[]] a regression: booting the server again to re-measure it on a "
                                    "fresh boot*"])
    assert "did not hold when re-measured on a fresh boot" in " ".join(slow_boot.stdout.str().split())


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
@pytest.mark.calm
def test_same_server_confirms_what_the_slow_boot_keeps(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented cost of confirm = "same-server": the re-measure repeats the boot's state."""
    project = _project(pytester, "same-server")
    project.runpytest("--sglang-simulate", "--sglang-update-baselines",
                      "--sglang-ignore-conditions").assert_outcomes(passed=1)
    monkeypatch.setenv("SGLANG_SIM_FAULT", "slow-boot:1:2")
    slow_boot = project.runpytest("--sglang-simulate", "--sglang-ignore-conditions", "--sglang-results", "r.json")
    slow_boot.assert_outcomes(failed=1)
    [cell] = _cells(project.path / "r.json")
    confirmation = cell["confirmation"]
    assert cell["verdict"] == "regressed" and isinstance(confirmation, dict) and confirmation["on"] == "same-server"
    slow_boot.stdout.fnmatch_lines(["*regressed (confirmed: re-measured on the same server, it regressed again)*"])
    assert "booting the server again" not in slow_boot.stdout.str()


@pytest.mark.slow  # three runs in subprocesses with a fake NVML, ~25 s
def test_a_refused_recording_keeps_every_level_says_it_once_and_regresses_nothing(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_PERF_IGNORE_CONDITIONS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_gpu_host(pytester, monkeypatch, 1)
    state = pytester.path / "nvml.json"
    gpu = {"name": "NVIDIA H200", "sm": 1980, "sm_max": 1980, "memory": 3201, "memory_max": 3201, "reasons": 0,
           "temperature": 45, "power_mw": 420_000, "power_limit_mw": 700_000, "utilization": 70,
           "processes_from_env": True}
    state.write_text(json.dumps({"gpus": [gpu]}))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    write_project(pytester, {"default": []}, request=STEADY,
                  extra='[tool.sglang_perf.conditions]\nsettle_timeout = "1s"\nwait_before_measuring = "0s"\n')
    pytester.makepyfile(test_perf=SWEEP)
    args = ("--sglang-simulate", "--sglang-gpu-lock-dir", str(pytester.path / "claims"))
    pytester.runpytest_subprocess(*args, "--sglang-update-baselines",
                                  "--sglang-ignore-conditions").assert_outcomes(passed=1)

    state.write_text(json.dumps({"gpus": [{**gpu, "reasons": 0x8}]}))  # hw slowdown: every measurement disturbed
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # and twice as slow: each level worse than its baseline
    refused = pytester.runpytest_subprocess(*args, "--sglang-update-baselines", "--sglang-results", "r.json")
    refused.assert_outcomes(failed=1)
    cells = _cells(pytester.path / "r.json")
    assert sorted(str(c["test_id"]) for c in cells) == ["test_perf.py::test_sweep", "test_perf.py::test_sweep@c2"]
    assert {c["verdict"] for c in cells} == {"inconclusive"}, [c["verdict"] for c in cells]
    assert all(str(c["withheld"]).startswith("measured under disturbed conditions (GPU 0 slowed down") for c in cells)
    text = refused.stdout.str()
    # the failure's own report; pytest's short summary after it repeats the message (whole when CI is set)
    failure = text.split(" FAILURES ")[1].split(" short test summary info ")[0]
    for level in ("", "@c2"):
        assert failure.count(f"the baseline of test_perf.py::test_sweep{level} [default] was NOT recorded") == 1, text
    assert "During handling of the above exception" not in text
