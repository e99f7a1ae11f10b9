"""Every way a real server fails, injected with the simulator's `--sim-fault` (or SGLANG_SIM_FAULT), against the
plugin as a user runs it: each fault gives the user a clear error naming the test and what happened, no run outlives
its timeout, and no server process is left behind.

One project per test: a `good` variant (no fault) and a `bad` variant whose server carries the fault through the
variant's environment (`SGLANG_SIM_FAULT`), so the test also shows that a fault stays inside its variant.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest
from perf_project import FAST_SIM, TINY_CONFIG, server_processes, toml_list

TESTS = """
def test_measure(sglang_perf):
    sglang_perf.measure("Write a red-black tree in C.")

def test_again(sglang_perf):
    sglang_perf.measure("Explain it.")
"""


@dataclass(frozen=True)
class Budget:
    startup: float = 30.0
    request: float = 30.0

    def wall_limit(self) -> float:
        """Two boots (good, bad) and four tests' requests, at most, plus the interpreter's own start."""
        return 2 * self.startup + 4 * self.request


def _project(pytester: pytest.Pytester, fault: str, budget: Budget = Budget(), repeats: int = 2) -> None:
    model = pytester.path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_CONFIG))
    pytester.makefile(".toml", pyproject="\n".join([
        "[tool.sglang_perf]",
        'model = "model"',
        'args = ["--random-seed", "0"]',
        f'startup_timeout = "{budget.startup:g}s"',
        "[tool.sglang_perf.simulate]",
        f"args = {toml_list(FAST_SIM)}",
        "[tool.sglang_perf.request]",
        f'max_tokens = 100\nrepeats = {repeats}\nwarmup = 0\ntimeout = "{budget.request:g}s"',
        "[tool.sglang_perf.variants]",
        "good = []",
        f'bad = {{args = [], env = {{SGLANG_SIM_FAULT = "{fault}"}}}}',
    ]) + "\n")
    pytester.makepyfile(test_user=TESTS)


def _run(pytester: pytest.Pytester, budget: Budget = Budget()) -> pytest.RunResult:
    tic = time.monotonic()
    result = pytester.runpytest("--sglang-simulate", "-p", "no:cacheprovider")
    elapsed = time.monotonic() - tic
    assert elapsed < budget.wall_limit(), f"the run took {elapsed:.1f} s"
    assert server_processes(pytester.path) == [], "a server process was left behind"
    return result


@pytest.mark.parametrize(("fault", "reason", "log_line"), [
    ("crash-at-boot", "killed by SIGKILL during boot", "*torch.OutOfMemoryError: CUDA out of memory*"),
    ("fail-warmup", "killed by SIGKILL during boot", "*Initialization failed. warmup error: Traceback*"),
])
def test_server_dying_at_boot(pytester: pytest.Pytester, fault: str, reason: str, log_line: str) -> None:
    _project(pytester, fault)
    result = _run(pytester)
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_measure[[]bad[]]*",
        f"*SGLang server 'bad' failed to boot: {reason}*",
        "*exit code:*-9*",
        log_line,
    ])
    assert result.stdout.str().count("[bad] boot FAILED: ") == 1  # the dead variant is not booted again
    assert "more characters in the log file)" in result.stdout.str()  # the 15 kB server_args= line is clipped


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_server_hanging_at_boot_is_stopped_at_the_startup_timeout(pytester: pytest.Pytester) -> None:
    budget = Budget(startup=2.0)
    _project(pytester, "hang-at-boot", budget)
    result = _run(pytester, budget)
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_measure[[]bad[]]*",
        "*SGLang server 'bad' failed to boot: no readiness after 2 s (stuck while capturing graphs)*",
        "*Capture target prefill CUDA graph begin*",
    ])


@pytest.mark.parametrize(("fault", "message"), [
    pytest.param("http-500:1", "*[[]bad[]] request failed: HTTP 500 from POST http://127.0.0.1:*/v1/chat/completions: "
                 "Internal server error: *", marks=pytest.mark.slow),  # a status failure: unit-tested in test_client.py
    ("cut-stream:5", "*[[]bad[]] request failed: *after 5 content chunks*"),
    # Two more faults of the same path (the client's checks, unit-tested in test_client.py), in the slow lane:
    pytest.param("no-usage", "*[[]bad[]] request failed: server sent no usage*", marks=pytest.mark.slow),
    pytest.param("short:10", "*[[]bad[]] request failed: short: asked 100, got 90 (finish_reason=length)*",
                 marks=pytest.mark.slow),
])
def test_bad_answers_fail_the_measuring_test(pytester: pytest.Pytester, fault: str, message: str) -> None:
    _project(pytester, fault)
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*FAILED test_user.py::test_measure[[]bad[]]*"], consecutive=False)
    result.stdout.fnmatch_lines([message, "*server log: *bad.log*"])


def test_server_dying_mid_run(pytester: pytest.Pytester) -> None:
    _project(pytester, "die-after:1")
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "[[]bad[]] request failed: *(the server died or dropped the stream: check its log)",
        "the server process (pid *) is gone: killed by SIGKILL",
        "server log: *bad.log",
        "[[]bad[]] request failed: cannot connect to http://127.0.0.1:*",
        "the server process (pid *) is gone: killed by SIGKILL",
    ])
    assert "During handling of the above exception" not in result.stdout.str()


@pytest.mark.slow
def test_server_turning_slow_hits_the_request_timeout(pytester: pytest.Pytester) -> None:
    budget = Budget(request=1.0)
    _project(pytester, "slow-after:1:100", budget)
    result = _run(pytester, budget)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*[[]bad[]] request failed: timed out after 1 s (ChatRequest.timeout) on POST *: the server is hung or "
        "far slower than expected*",
    ])
