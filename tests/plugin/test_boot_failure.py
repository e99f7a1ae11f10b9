"""A variant whose server cannot boot errors its own tests; the other variants still run."""

from __future__ import annotations

import pytest
from perf_project import MOE_CONFIG, server_processes, use_model_config, write_project

TESTS = """
    def test_a(sglang_perf):
        assert sglang_perf.server.boot_seconds > 0

    def test_b(sglang_perf):
        pass
"""


def _unwrapped(result: pytest.RunResult) -> pytest.LineMatcher:
    """The output with each line the plugin wrapped at 120 characters (`sglang-perf:   ...`) joined again."""
    lines: list[str] = []
    for line in result.outlines:
        if line.startswith("sglang-perf:   ") and lines:
            lines[-1] += " " + line.removeprefix("sglang-perf:").strip()
        else:
            lines.append(line)
    return pytest.LineMatcher(lines)


def test_server_exiting_at_boot_errors_only_its_variant(pytester: pytest.Pytester) -> None:
    # Passes the argument parser (so the pre-flight check lets it through) but fails SGLang's resolution.
    write_project(pytester, {"good": [], "bad_algo": ["--speculative-algorithm", "MEDUSA"]})
    pytester.makepyfile(test_boot=TESTS)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_a[[]bad_algo[]]*",
        "*exit*code 1*",
        "*--speculative-algorithm MEDUSA*",
        "*Unknown speculative algorithm name: MEDUSA*",
        "hint: --speculative-algorithm MEDUSA is not an algorithm this SGLang knows*",
    ])
    output = result.stdout.str()
    assert output.count("[bad_algo] boot FAILED: ") == 1  # the failed boot is not retried for test_b
    assert output.count("[good] ready in ") == 1
    assert server_processes(pytester.path) == []


def test_unknown_flag_fails_the_preflight_and_starts_no_server(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"good": [], "old_flag": ["--enforce-piecewise-cuda-graph"]})
    pytester.makepyfile(test_boot=TESTS)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_a[[]old_flag[]]*",
        "*variant 'old_flag' failed the pre-flight check; no server was started*",
    ])
    _unwrapped(result).fnmatch_lines([
        "sglang-perf: pre-flight [[]old_flag[]] error: unrecognized arguments: --enforce-piecewise-cuda-graph*"
        "was renamed: use --cuda-graph-backend-prefill breakable*there it was deprecated for "
        "--cuda-graph-backend-prefill=tc_piecewise*",
    ])
    assert "] ready in " in result.stdout.str() and "[old_flag] ready" not in result.stdout.str()  # only the good
    assert server_processes(pytester.path) == []


def test_single_batch_overlap_on_a_simulated_h200_is_stopped_before_boot_for_an_moe_model(
        pytester: pytest.Pytester) -> None:
    write_project(pytester, {"plain": [], "sbo": ["--enable-single-batch-overlap"]},
                  sim=["--sim-gpu", "H200", "--sim-decode-tok-s", "2000", "--sim-boot-seconds", "0.3"])
    use_model_config(pytester, MOE_CONFIG)
    pytester.makepyfile(test_boot=TESTS)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2, errors=2)
    _unwrapped(result).fnmatch_lines([
        "sglang-perf: pre-flight [[]sbo[]] error: --enable-single-batch-overlap fails at startup on this GPU (SM90)"
        " with this model (its text config has an MoE top-k (SGLang then runs initialize_moe_config)): SBO (single "
        "batch overlap) is not supported on SM90 GPUs*",
    ])
    assert result.stdout.str().count("] ready in ") == 1  # the plain variant only
    assert server_processes(pytester.path) == []


def test_single_batch_overlap_on_a_simulated_h200_runs_for_a_dense_model(pytester: pytest.Pytester) -> None:
    """SGLang 0.5.23 raises the SBO error only inside initialize_moe_config: a dense Llama boots with it on SM90."""
    write_project(pytester, {"sbo": ["--enable-single-batch-overlap"]},
                  sim=["--sim-gpu", "H200", "--sim-decode-tok-s", "2000", "--sim-boot-seconds", "0.3"])
    pytester.makepyfile(test_boot=TESTS)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2)
    assert "pre-flight" not in result.stdout.str() and "[sbo] ready in " in result.stdout.str()


def test_single_batch_overlap_runs_on_an_a6000(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"sbo": ["--enable-single-batch-overlap"]},
                  sim=["--sim-decode-tok-s", "2000", "--sim-boot-seconds", "0.3"])
    monkeypatch.setenv("SGLANG_SIM_GPU", "A6000")  # SM86: the pre-flight and the simulator both let it run
    pytester.makepyfile(test_boot=TESTS)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=2)
    assert "pre-flight" not in result.stdout.str()
