"""Configuration: found once, validated with errors that name the file, the key and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang_perf.config.settings import ConfigError, Settings, load_settings, parse_settings
from pytest_sglang_perf.config.units import parse_duration, parse_percent
from pytest_sglang_perf.server.plan import flag_value, plan_server

MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
                "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1024}


def _parse(table: dict[str, object]) -> Settings:
    return parse_settings(table, source="sglang-perf.toml", root=Path("/proj"))


def test_minimal_settings_have_documented_defaults() -> None:
    s = parse_settings({"model": "m"}, source="x", root=Path("/proj"))
    assert [v.name for v in s.variants] == ["default"]
    assert s.tolerance("output_throughput") == 0.05
    assert s.tolerance("accept_length") == 0.03
    assert s.tolerance("ttft") == 0.10
    assert s.request.max_tokens == 512 and s.request.temperature == 0.6
    assert s.baseline_dir == Path("/proj/baselines")


def test_full_settings() -> None:
    s = parse_settings({
        "model": "Qwen/Qwen3.6-27B", "args": ["--tp-size", "2"], "startup_timeout": "1h30m",
        "variants": {"default": [], "sbo": {"args": ["--enable-single-batch-overlap"], "env": {"NCCL_X": "1"}}},
        "tolerance": {"ttft": "15%"}, "request": {"max_tokens": 64, "repeats": 5, "timeout": "2m"},
        "server_command": ["sglang", "serve"], "simulate": {"model_path": "m", "args": ["--sim-ttft", "0.1"]},
    }, source="x", root=Path("/proj"))
    assert s.startup_timeout == 5400
    assert s.variant("sbo").env == {"NCCL_X": "1"}
    assert s.tolerance("ttft") == pytest.approx(0.15)
    assert s.request.timeout == 120 and s.request.repeats == 5
    assert s.simulate.model_path == Path("/proj/m")


@pytest.mark.parametrize(("table", "message"), [
    ({}, "sglang-perf.toml: model: missing"),
    ({"model": "m", "variants": {"a b": []}}, "variants.a b: variant names may use letters"),
    ({"model": "m", "variants": {"a": "--x"}}, "variants.a: expected a list of flags"),
    ({"model": "m", "variants": {"a": {"arg": []}}}, "variants.a.arg: unknown key"),
    ({"model": "m", "args": ["--host", "0.0.0.0"]}, "args: remove --host"),
    ({"model": "m", "args": ["--port=1"]}, "args: remove --port"),
    ({"model": "m", "tolerance": {"ttft": 0.1}}, "tolerance.ttft: write a percentage like '5%'"),
    ({"model": "m", "request": {"repeats": 0}}, "request.repeats: expected a whole number >= 1 or \"auto\""),
    ({"model": "m", "request": {"repeats": "many"}}, "request.repeats: expected a whole number >= 1 or \"auto\""),
    ({"model": "m", "request": {"max_repeats": 2}}, "request.max_repeats: expected at least 3"),
    ({"model": "m", "request": {"ignore_eos": "yes"}}, "request.ignore_eos: expected true or false"),
    ({"model": "m", "gate": {"confidence": 1.0}}, "gate.confidence: expected a number from 0.5 to below 1"),
    ({"model": "m", "gate": {"alpha": 0.05}}, "gate.alpha: unknown key; known keys here: confidence, confirm, power"),
    ({"model": "m", "gate": {"confirm": "boot"}},
     "gate.confirm: expected one of 'auto', 'reboot', 'same-server', got 'boot'"),
    ({"model": "m", "request": {"temperature": "hot"}}, "request.temperature: expected a number from 0 to 2"),
    ({"model": "m", "startup_timeout": -5}, "startup_timeout: a duration must be positive"),
    ({"model": "m", "env": {"A": 1}}, "env: expected a table of strings"),
    ({"model": "m", "variants": {"a": {"url": "10.0.0.5:30000"}}}, "variants.a.url: expected a server's base URL"),
    ({"model": "m", "variants": {"a": {"url": "http://u:p@h:1"}}}, "variants.a.url: a server URL with user:password"),
])
def test_bad_values_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        _parse(table)
    assert message in str(info.value)
    assert str(info.value).startswith("sglang-perf.toml: ")


def test_the_conditions_table() -> None:
    s = _parse({"model": "m", "conditions": {"max_client_lag": "1ms", "max_steal": "20%", "settle_timeout": "5s",
                                             "max_others_per_core": 2}})
    assert (s.conditions.max_client_lag, s.conditions.max_steal, s.conditions.settle_timeout) == (0.001, 0.2, 5.0)
    assert s.conditions.max_others_per_core == 2.0
    with pytest.raises(ConfigError, match=r"conditions\.max_others_per_core: expected a positive number"):
        _parse({"model": "m", "conditions": {"max_others_per_core": 0}})
    gpu = _parse({"model": "m", "conditions": {"min_sm_clock": "80%", "min_memory_clock": "90%",
                                               "allow_foreign_gpu_processes": True, "wait_before_measuring": "20s"}})
    assert (gpu.conditions.min_sm_clock, gpu.conditions.min_memory_clock) == (0.8, 0.9)
    assert gpu.conditions.allow_foreign_gpu_processes and gpu.conditions.wait_before_measuring == 20.0
    with pytest.raises(ConfigError, match=r"conditions\.allow_foreign_gpu_processes: expected true or false, got "
                                          r"'yes'"):
        _parse({"model": "m", "conditions": {"allow_foreign_gpu_processes": "yes"}})
    assert _parse({"model": "m", "conditions": {"wait_before_measuring": "0s"}}).conditions.wait_before_measuring == 0
    with pytest.raises(ConfigError, match=r"conditions\.min_sm_clock: expected a share of the maximum between 0% and "
                                          r"100%"):
        _parse({"model": "m", "conditions": {"min_sm_clock": "150%"}})


def test_a_remote_variant_keeps_its_url_and_gpu() -> None:
    s = _parse({"model": "m", "variants": {"prod": {"url": "https://sglang.svc:30000/", "gpu": "NVIDIA H100"}}})
    assert (s.variant("prod").url, s.variant("prod").gpu) == ("https://sglang.svc:30000", "NVIDIA H100")


def test_the_adaptive_plan_and_the_gate_table() -> None:
    s = _parse({"model": "m", "request": {"repeats": "auto", "max_repeats": 9, "ignore_eos": False},
                "gate": {"confidence": 0.99, "power": 0.9}})
    assert (s.request.adaptive, s.request.repeats, s.request.max_repeats) == (True, 3, 9)
    assert s.request.ignore_eos is False
    assert (s.gate.confidence, s.gate.power) == (0.99, 0.9)
    default = _parse({"model": "m"})
    assert (default.request.adaptive, default.request.ignore_eos, default.gate.confidence) == (False, True, 0.95)


def test_lookup_order(tmp_path: Path) -> None:
    assert load_settings(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[tool.sglang_perf]\nmodel = "from-pyproject"\n')
    assert load_settings(tmp_path).model == "from-pyproject"  # type: ignore[union-attr]
    (tmp_path / "sglang-perf.toml").write_text('model = "from-own-file"\n')
    assert load_settings(tmp_path).model == "from-own-file"  # type: ignore[union-attr]
    other = tmp_path / "other.toml"
    other.write_text('[tool.sglang_perf]\nmodel = "explicit"\n')
    assert load_settings(tmp_path, other).model == "explicit"  # type: ignore[union-attr]


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "sglang-perf.toml").write_text('model = "x\n')
    with pytest.raises(ConfigError, match=r"sglang-perf.toml: not valid TOML"):
        load_settings(tmp_path)


def test_pyproject_without_table_is_ignored_unless_explicit(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert load_settings(tmp_path) is None
    with pytest.raises(ConfigError, match=r"has no \[tool.sglang_perf\] table"):
        load_settings(tmp_path, tmp_path / "pyproject.toml")


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("90s", 90), ("1h30m", 5400), (12, 12), ("2.5m", 150)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "", "5x", True, 0])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_percentages() -> None:
    assert parse_percent("5%") == pytest.approx(0.05)
    assert parse_percent(" 2.5 % ") == pytest.approx(0.025)
    for bad in ("5", 5, "five%", "5000%"):
        with pytest.raises(ValueError):
            parse_percent(bad)


def test_plan_simulated_and_real(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(MODEL_CONFIG))
    s = parse_settings({"model": "org/M", "args": ["--api-key", "sekret"], "variants": {"v": ["--x"]},
                        "simulate": {"model_path": "cfg", "args": ["--sim-ttft", "0.1"]}},
                       source="x", root=tmp_path)
    real = plan_server(s, s.variant("v"), simulate=False)
    assert real.command[1:] == ("-m", "sglang.launch_server", "--model-path", "org/M", "--api-key", "sekret", "--x")
    assert real.api_key == "sekret" and real.uses_default_launcher
    sim = plan_server(s, s.variant("v"), simulate=True)
    assert sim.command[1:3] == ("-m", "pytest_sglang_perf.simulator")
    assert sim.command[3:5] == ("--model-path", str(tmp_path / "cfg"))
    assert sim.command[-2:] == ("--sim-ttft", "0.1") and sim.args == ("--api-key", "sekret", "--x")


def test_simulating_an_unknown_hub_model_needs_a_local_config(tmp_path: Path) -> None:
    s = parse_settings({"model": "org/M"}, source="pyproject.toml [tool.sglang_perf]", root=tmp_path)
    with pytest.raises(ConfigError, match=r"neither a local folder with a config.json nor a model the plugin ships"):
        plan_server(s, s.variants[0], simulate=True)


def test_flag_values() -> None:
    args = ["--api-key", "a", "--x", "--api-key=b", "--admin-api-key", "c"]
    assert flag_value(args, "--api-key") == "b"
    assert flag_value(args, "--admin-api-key") == "c"
    assert flag_value(args, "--y") is None
