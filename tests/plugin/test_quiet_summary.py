"""What the end of a run says about the cells it did not gate, as a user meets it: with -q (no tables) each new,
stale and errored cell is named, a line each, with why; an inconclusive cell says why at the default verbosity; a
server whose GPUs could not be claimed says no server was started."""

from __future__ import annotations

import pytest
from perf_project import LOOSE, write_project

TEST_FILE = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
REQUEST = "max_tokens = {tokens}\nrepeats = 3\nwarmup = 1\n"


def _joined(result: pytest.RunResult) -> str:
    """The run's output with the summary's wrapping undone."""
    return " ".join(result.stdout.str().split())


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_quiet_names_each_cell_not_gated_or_errored_with_why(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One visible GPU: `a` is new, `b` stale (its request changed), `tp2` needs 2 GPUs and is never started."""
    variants = {"a": [], "b": ["--max-running-requests", "8"], "tp2": ["--tp-size", "2"]}
    write_project(pytester, variants, request=REQUEST.format(tokens=16), extra=LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    claims = ["--sglang-gpu-lock-dir", str(pytester.path / "claims")]
    pytester.runpytest("--sglang-simulate", *claims, "--sglang-variants", "b",
                       "--sglang-update-baselines").assert_outcomes(passed=1)
    write_project(pytester, variants, request=REQUEST.format(tokens=12), extra=LOOSE)

    result = pytester.runpytest("-q", "--sglang-simulate", *claims, "--sglang-log-dir", "logs")
    result.assert_outcomes(passed=2, errors=1)
    text = _joined(result)
    assert ("sglang-perf: ERRORED, nothing measured: tp2 (boot failed, no server started) test_perf.py::test_p[tp2] "
            "errored: boot failed, no server started: the server needs 2 GPU(s) (tp x pp x dp) but this host offers 1 "
            "(3);") in text
    assert ("sglang-perf: 2 cell(s) NOT GATED, no comparable baseline (1 new, 1 stale); --sglang-require-baselines "
            "fails them test_perf.py::test_p [a] new: no baseline recorded for this cell test_perf.py::test_p [b] "
            "stale: the baseline was recorded for something else: max_tokens 16 -> 12") in text
    # The claim failed before any server started: no exit code or empty log of a process that never ran.
    result.stdout.fnmatch_lines(["SGLang server 'tp2' was not started: the server needs 2 GPU(s)*",
                                 "  command: * --tp-size 2 * (not run)",
                                 "  no server process was started, so there is no exit code and no server log"])
    assert "exit code:" not in text and "(the log is empty)" not in text
    assert not (pytester.path / "logs" / "tp2.log").exists()


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_an_inconclusive_cell_says_why_at_the_default_verbosity(pytester: pytest.Pytester) -> None:
    """Its three measured requests run 12 times slower, its re-measure on the same server does not (a fresh boot
    would count its requests from 0 again): a regression that did not hold.
    The bands are wide (80%, latencies 500%), so only a slowdown that large is worse than allowed."""
    bands = '[tool.sglang_perf.tolerance]\noutput_throughput = "80%"\ndecode_throughput = "80%"\n' \
            'ttft = "500%"\ntpot = "500%"\n[tool.sglang_perf.gate]\nconfirm = "same-server"\n'
    write_project(pytester, {"b": []}, request=REQUEST.format(tokens=16), extra=bands)
    pytester.makepyfile(test_perf=TEST_FILE)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    write_project(pytester, {"b": {"args": [], "env": {"SGLANG_SIM_FAULT": "slow-after:1:12:3"}}},
                  request=REQUEST.format(tokens=16), extra=bands)

    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=1)
    text = _joined(result)
    assert ("sglang-perf: 1 inconclusive cell(s) passed (worse than allowed, not established); "
            "--sglang-fail-inconclusive fails them test_perf.py::test_p [b] inconclusive: output_throughput -9") in text
    reason = text.split("test_perf.py::test_p [b] inconclusive: ")[1]
    assert "(allowed -80.0%, re-measured " in reason
    assert "): the regression did not hold when re-measured on the same server" in reason
