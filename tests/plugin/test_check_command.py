"""`sglang-perf check`: the pre-flight as a command, for CI on a CPU runner to gate a matrix change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from perf_project import server_processes, write_project


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
    clean = _check(pytester.path, "--simulate", "--gpu", "NVIDIA RTX A6000")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    on_h100 = _check(pytester.path, "--simulate", "--gpu", "NVIDIA H100 80GB HBM3")
    assert on_h100.returncode == 1
    assert "[sbo] error: --enable-single-batch-overlap fails at startup on this GPU (SM90)" in on_h100.stdout


def test_missing_configuration_is_exit_2(tmp_path: Path) -> None:
    done = _check(tmp_path)
    assert done.returncode == 2
    assert "no configuration found" in done.stderr
