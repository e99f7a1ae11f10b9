"""A simulated run whose config.json lacks what the simulator needs is a usage error before any server starts."""

from __future__ import annotations

import pytest
from perf_project import TINY_CONFIG, server_processes, use_model_config, write_project


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    return pytester.runpytest("--sglang-simulate")


def test_an_empty_config_json_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": [], "b": ["--max-running-requests", "8"]})
    use_model_config(pytester, {})
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    config_file = pytester.path / "model" / "config.json"
    result.stderr.fnmatch_lines([
        f"*--sglang-simulate: {config_file} lacks architectures, hidden_size, num_hidden_layers, "
        "num_attention_heads, vocab_size, intermediate_size: the simulator needs these fields*"
        "copy the model's real config.json from its Hugging Face repository*",
    ])
    assert server_processes(pytester.path) == []


def test_a_config_json_without_one_field_names_it(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []})
    use_model_config(pytester, {key: value for key, value in TINY_CONFIG.items() if key != "vocab_size"})
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*model/config.json lacks vocab_size: the simulator needs these fields*"])


def test_a_config_json_that_is_not_json_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []})
    (pytester.path / "model" / "config.json").write_text("{")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*model/config.json is not valid JSON (Expecting*"])
