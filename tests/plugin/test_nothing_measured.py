"""Nothing measured is never green: a gate run without SGLang fails with the cause, a plain run says so loudly."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from perf_project import fake_gpu_host, write_project

TWO_TESTS = "def test_x(sglang_perf):\n    pass\n\ndef test_y(sglang_perf):\n    pass\n"
GATE_ERROR = ("*sglang-perf: --sglang-require-real: 4 perf test(s) cannot run: SGLang is not installed; install it "
              "on this runner (pip install 'pytest-sglang-perf[[]sglang[]]'), or drop --sglang-require-real*")


@pytest.fixture(autouse=True)
def _without_sglang() -> None:
    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("SGLang is installed here; these runs are about machines without it")


def _project(pytester: pytest.Pytester, extra: str = "") -> None:
    write_project(pytester, {"a": [], "b": ["--max-running-requests", "8"]}, extra=extra)
    pytester.makepyfile(test_p=TWO_TESTS)


def test_a_plain_run_skips_and_ends_with_what_was_not_measured(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest()  # no -rs: the line must show in the default output
    result.assert_outcomes(skipped=4)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["sglang-perf: 0 of 4 cells measured: SGLang is not installed "
                                 "(pip install 'pytest-sglang-perf[[]sglang[]]'); run with --sglang-simulate*"])


@pytest.mark.parametrize("how", ["option", "ini", "env"])
def test_a_gate_run_fails_with_the_cause_and_the_fix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                     how: str) -> None:
    _project(pytester)
    args = ["--sglang-require-real"] if how == "option" else []
    if how == "ini":
        pytester.makeini("[pytest]\nsglang_require_real = true\n")
    if how == "env":
        monkeypatch.setenv("SGLANG_PERF_REQUIRE_REAL", "1")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([GATE_ERROR])
    assert "booting" not in result.stdout.str()


def test_a_gate_run_with_nothing_to_gate_is_not_an_error(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makepyfile(test_other="def test_plain():\n    pass\n")
    result = pytester.runpytest("--sglang-require-real", "test_other.py")
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_sglang_perf_run_passes_pytest_options_in_any_position(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.run(sys.executable, "-m", "pytest_sglang_perf.cli", "run", "-q", "-p", "no:cacheprovider",
                          "--sglang-simulate", "-k", "test_x", "test_p.py")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*2 passed, 2 deselected*"])


def _sglang_perf_run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest_sglang_perf.cli", "run", "-q", "-p", "no:cacheprovider", *args)


def test_sglang_perf_run_real_is_a_gate_that_never_suggests_the_simulator(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = _sglang_perf_run(pytester, "--real")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*sglang-perf run --real: 4 perf test(s) cannot run: SGLang is not installed; install "
                                 "it on this runner (pip install 'pytest-sglang-perf[[]sglang[]]')"])
    assert "--sglang-simulate" not in result.stdout.str() + result.stderr.str()  # --real refuses it


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_sglang_perf_run_on_a_gpu_host_without_sglang_fails_with_the_install_command(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU host is there to measure SGLang: not `0 of 4 cells measured` and exit 0, a CI job gone green."""
    fake_gpu_host(pytester, monkeypatch, 2)
    _project(pytester)
    result = _sglang_perf_run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*sglang-perf run: this host has GPUs (nvidia-smi), so the perf suite runs on SGLang, "
                                 "and 4 perf test(s) cannot run: SGLang is not installed; install it (pip install "
                                 "'pytest-sglang-perf[[]sglang[]]'), or add --sglang-simulate to run them on the "
                                 "simulator"])
    assert "cells measured" not in result.stdout.str()
    for simulated in (["--sglang-simulate"], ["-o", "sglang_simulate=true"]):  # asked for: nothing to refuse
        _sglang_perf_run(pytester, "--co", *simulated).stdout.fnmatch_lines(["*4 tests collected*"])


def test_plain_pytest_on_a_gpu_host_without_sglang_skips_loudly(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu_host(pytester, monkeypatch, 2)
    _project(pytester)
    result = pytester.runpytest("-q")
    result.assert_outcomes(skipped=4)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["sglang-perf: 0 of 4 cells measured: SGLang is not installed (pip install "
                                 "'pytest-sglang-perf[[]sglang[]]'); run with --sglang-simulate*"])


def test_a_gate_on_real_sglang_cannot_run_on_the_simulator(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("--sglang-require-real", "--sglang-simulate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sglang-require-real and --sglang-simulate contradict each other*drop one*"])
