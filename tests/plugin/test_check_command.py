"""`sglang-perf check`: the pre-flight as a command, for CI on a CPU runner to gate a matrix change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from perf_project import (
    FAST_SIM,
    MOE_CONFIG,
    fake_gpu_host,
    server_processes,
    toml_list,
    use_model_config,
    write_project,
)


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_old_flag_fails_with_the_suggestion(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"ok": [], "old": ["--enforce-piecewise-cuda-graph"],
                             "twice": ["--tp-size", "1", "--tp", "2"]})
    done = _check(pytester.path, "--simulate")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[old] error: unrecognized arguments: --enforce-piecewise-cuda-graph" in done.stdout
    assert "use --cuda-graph-backend-prefill breakable" in done.stdout
    assert "[twice] warning: --tp-size is given twice with different values ('1', then '2')" in done.stdout
    assert "3 variants, 1 errors, 1 warnings" in done.stdout
    assert server_processes(pytester.path) == []


def test_clean_matrix_passes_and_gpu_rules_apply(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": [], "sbo": ["--enable-single-batch-overlap"]})
    dense_on_h100 = _check(pytester.path, "--simulate", "--gpu", "NVIDIA H100 80GB HBM3")
    assert dense_on_h100.returncode == 0, dense_on_h100.stdout + dense_on_h100.stderr  # SBO dies on MoE models only
    use_model_config(pytester, MOE_CONFIG)
    clean = _check(pytester.path, "--simulate", "--gpu", "NVIDIA RTX A6000")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    on_h100 = _check(pytester.path, "--simulate", "--gpu", "NVIDIA H100 80GB HBM3")
    assert on_h100.returncode == 1
    assert "[sbo] error: --enable-single-batch-overlap fails at startup on this GPU (SM90)" in on_h100.stdout


def test_missing_configuration_is_exit_2(tmp_path: Path) -> None:
    done = _check(tmp_path)
    assert done.returncode == 2
    assert "no configuration found" in done.stderr


TYPO = "unknown knob --sim-slowdwn (did you mean --sim-slowdown?)"


def _flat(text: str) -> str:
    """Text with its line wrapping undone (reports wrap long messages at spaces)."""
    return " ".join(text.split())


def test_a_knob_typo_fails_check_with_and_without_simulate(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": [], "slow": ["--sim-slowdown", "fast"]}, sim=[*FAST_SIM, "--sim-slowdwn", "0.2"])
    simulated = _check(pytester.path, "--simulate")
    assert simulated.returncode == 1, simulated.stdout + simulated.stderr
    assert simulated.stdout.splitlines()[:3] == [
        f"[a] error: simulate.args: {TYPO}",
        "[slow] error: variants.slow: invalid value 'fast' for --sim-slowdown: expected a number > -1",
        f"[slow] error: simulate.args: {TYPO}",
    ]
    real = _check(pytester.path)  # the typo still breaks every --sglang-simulate run: reported
    assert real.returncode == 1
    assert f"error: simulate.args: {TYPO} (a knob for --sglang-simulate runs)" in real.stdout.splitlines()
    assert "[slow] error: unrecognized arguments: --sim-slowdown fast" in real.stdout  # SGLang has no such flag


def test_the_session_reports_a_bad_knob_before_any_boot(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []}, sim=[*FAST_SIM, "--sim-slowdwn", "0.2"])
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest("--sglang-simulate", "--sglang-log-dir", "logs")
    result.assert_outcomes(errors=1)
    assert _flat(f"variant 'a' failed the pre-flight check; no server was started: simulate.args: {TYPO}") in \
        _flat(result.stdout.str())
    assert not (pytester.path / "logs" / "a.log").exists()


def test_check_simulate_judges_the_simulated_gpu_like_the_session(pytester: pytest.Pytester) -> None:
    """An SM90 rule applies to the simulated H200 in both, whatever nvidia-smi shows (here: nothing)."""
    sbo = "[sbo] error: --enable-single-batch-overlap fails at startup on this GPU (SM90)"
    write_project(pytester, {"sbo": ["--enable-single-batch-overlap"]}, sim=[*FAST_SIM, "--sim-gpu", "H200"])
    use_model_config(pytester, MOE_CONFIG)
    checked = _check(pytester.path, "--simulate")
    assert checked.returncode == 1
    assert sbo in checked.stdout and "GPU: H200, from the simulator" in checked.stdout
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    session = pytester.runpytest("--sglang-simulate")
    session.assert_outcomes(errors=1)
    assert _flat(sbo.removeprefix("[sbo] error: ")) in _flat(session.stdout.str())

    write_project(pytester, {"sbo": ["--enable-single-batch-overlap"]}, sim=[*FAST_SIM, "--sim-gpu", "RTX A6000"])
    assert _check(pytester.path, "--simulate").returncode == 0


def test_check_finds_the_configuration_from_a_subdirectory(pytester: pytest.Pytester) -> None:
    config = write_project(pytester, {"a": [], "old": ["--enforce-piecewise-cuda-graph"]})
    deep = pytester.mkdir("tests") / "deep"
    deep.mkdir()
    done = _check(deep, "--simulate")
    assert done.returncode == 1
    assert f"2 variants, 1 errors, 0 warnings ({config};" in done.stdout


def _one_gpu_host(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi as on a host with one H200 (first on PATH for this test and its subprocesses)."""
    fake_gpu_host(pytester, monkeypatch, 1)


TP2 = ("--tp-size 2 needs 2 GPUs for one server, but nvidia-smi shows 1 GPU on this host (NVIDIA H200); lower "
       "--tp-size, or run this variant on a host with 2 GPUs")


def test_more_gpus_than_nvidia_smi_shows_is_a_preflight_error(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _one_gpu_host(pytester, monkeypatch)
    simulator = toml_list([sys.executable, "-m", "pytest_sglang_perf.simulator"])
    write_project(pytester, {"tp2": ["--tp-size", "2"]}, extra=f"server_command = {simulator}")
    checked = _check(pytester.path)
    assert checked.returncode == 1
    assert f"[tp2] error: {TP2}" in checked.stdout.splitlines()
    assert "GPU: NVIDIA H200, from nvidia-smi" in checked.stdout

    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    session = pytester.runpytest_subprocess("--sglang-log-dir", "logs")  # nvidia-smi is asked once per process
    session.assert_outcomes(errors=1)
    assert _flat(f"variant 'tp2' failed the pre-flight check; no server was started: {TP2}") in \
        _flat(session.stdout.str())
    assert not (pytester.path / "logs" / "tp2.log").exists()
    assert _check(pytester.path, "--simulate").returncode == 0  # the simulator has no GPU count: not checked


def test_baselines_lists_the_configured_directory_from_a_subdirectory_with_units(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []}, extra='baseline_dir = "perf-baselines"',
                  request="max_tokens = 50\nrepeats = 2\nwarmup = 0\n")
    pytester.makepyfile(test_x="""
        def test_x(sglang_perf):
            sglang_perf.check(sglang_perf.measure("hello"))
    """)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    [path] = (pytester.path / "perf-baselines").glob("*.json")
    deep = pytester.mkdir("tests") / "deep"
    deep.mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "baselines"], cwd=deep,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pytest.LineMatcher(done.stdout.splitlines()).fnmatch_lines([
        f"{path}: 1 cell, SIMULATED (numbers from the simulator, not a GPU)",
        "  test_x.py::test_x",
        "    metric * a",
        "    output_throughput * tok/s",
        "    ttft * ms",
        "    n * 2 in 1 boot",
    ])
