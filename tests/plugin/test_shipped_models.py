"""--sglang-simulate as a new user meets it: a model id the plugin knows needs no config.json, an unknown one is a
usage error that says where to point, and the simulator's own errors show their cause first."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import pytest
from perf_project import FAST_SIM, server_processes, toml_list

from pytest_sglang_perf.sglang_facts.known_models import shipped_config

TEST_FILE = """
def test_short(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Say hi.", max_tokens=64, repeats=2, warmup=0))
"""


def _project(pytester: pytest.Pytester, model: str, *, sim: Iterable[str] = FAST_SIM,
             variants: str = "default = []") -> None:
    """A pyproject.toml naming `model`, with no model folder and no [tool.sglang_perf.simulate] model_path."""
    pytester.makepyprojecttoml("\n".join([
        "[tool.sglang_perf]",
        f"model = {json.dumps(model)}",
        'startup_timeout = "60s"',
        "[tool.sglang_perf.simulate]",
        f"args = {toml_list(sim)}",
        "[tool.sglang_perf.variants]",
        variants,
    ]))
    pytester.makepyfile(test_short=TEST_FILE)


def test_a_known_model_id_runs_without_a_config_json(pytester: pytest.Pytester) -> None:
    _project(pytester, "Qwen/Qwen3-8B")
    result = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-log-dir", "logs")
    result.assert_outcomes(passed=1)
    assert list(pytester.path.rglob("config.json")) == []
    [log] = (pytester.path / "logs").rglob("default.log")
    assert " -m pytest_sglang_perf.simulator --model-path Qwen/Qwen3-8B --sim-" in log.read_text().splitlines()[0]
    [baseline] = (pytester.path / "baselines").glob("*.json")
    entry = json.loads(baseline.read_text())["entries"]["test_short.py::test_short"]["default"]
    shipped = shipped_config("Qwen/Qwen3-8B")
    assert shipped is not None
    assert entry["identity"]["model_config"] == hashlib.sha256(shipped.read_bytes()).hexdigest()[:16]
    assert server_processes(pytester.path) == []


def test_an_unknown_model_id_without_a_config_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester, "org/Unknown-7B")
    result = pytester.runpytest("--sglang-simulate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*pyproject.toml [[]tool.sglang_perf[]]: model = 'org/Unknown-7B': --sglang-simulate needs the model's "
        "config.json*neither a local folder with a config.json nor a model the plugin ships a config for (*"
        "Qwen/Qwen3-8B*); copy the model's config.json (from https://huggingface.co/org/Unknown-7B/blob/main/"
        'config.json; no weights needed) into a folder and set model_path = "<that folder>" under '
        "[[]tool.sglang_perf.simulate[]] in pyproject.toml",
    ])
    assert "booting" not in result.stdout.str()


def _cause_comes_first(result: pytest.RunResult, cause: str) -> None:
    """`cause` is shown before any command line or log tail, and no argparse usage text is."""
    lines = result.stdout.lines
    first = next(i for i, line in enumerate(lines) if cause in line)
    command = next((i for i, line in enumerate(lines) if line.startswith("  command:")), len(lines))
    assert first < command
    assert not any("usage: sglang serve" in line for line in lines)


def test_a_knob_typo_shows_the_simulators_cause_first(pytester: pytest.Pytester) -> None:
    _project(pytester, "Qwen/Qwen3-8B", sim=["--sim-slowdwn", "0.2", *FAST_SIM])
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(errors=1)
    _cause_comes_first(result, "unknown knob --sim-slowdwn (did you mean --sim-slowdown?)")
    assert server_processes(pytester.path) == []


def test_a_bad_simulator_variable_is_the_boot_reports_cause(pytester: pytest.Pytester) -> None:
    _project(pytester, "Qwen/Qwen3-8B",
             variants='default = []\nslow = { args = [], env = { SGLANG_SIM_SLOWDOWN = "lots" } }')
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(passed=1, errors=1)
    _cause_comes_first(result, "invalid value 'lots' for environment variable SGLANG_SIM_SLOWDOWN: expected a "
                               "number > -1")


def test_a_failed_resolution_is_the_boot_reports_cause(pytester: pytest.Pytester) -> None:
    # Passes the argument parser (the pre-flight lets it through); the simulator fails as SGLang's resolution does.
    _project(pytester, "Qwen/Qwen3-8B", variants='bad = ["--speculative-algorithm", "MEDUSA"]')
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "SGLang server 'bad' failed to boot: exited with code 1 during boot",
        "  cause:      *Unknown speculative algorithm name: MEDUSA",
        "  command:    *--model-path Qwen/Qwen3-8B --speculative-algorithm MEDUSA*",
    ])
