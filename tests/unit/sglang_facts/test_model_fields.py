"""The config.json fields the simulator needs (sglang_facts/model_fields.py): the check, the simulator's loading of
a config.json, its process's exit, and the plugin's plan (server/plan.py), which checks before any server starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.config.settings import ConfigError, parse_settings
from pytest_sglang_perf.server.plan import plan_server
from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE
from pytest_sglang_perf.sglang_facts.model_fields import (
    ModelConfigFileError,
    check_model_config,
    invalid_model_fields,
    missing_model_fields,
)
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfigError, load_model_config, model_config_from_dict

COMMON = ["architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]
DENSE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1024}
MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
       "num_hidden_layers": 48, "num_attention_heads": 32, "vocab_size": 151936, "num_experts": 128,
       "moe_intermediate_size": 768, "num_experts_per_tok": 8}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000, "num_local_experts": 8,
           "intermediate_size": 14336, "num_experts_per_tok": 2}
"""Mixtral gives one expert's width as intermediate_size."""
EXPERT_COUNT = "num_experts (or n_routed_experts, num_local_experts)"
EXPERT_SIZE = "moe_intermediate_size (or intermediate_size)"
TOPK = "num_experts_per_tok (or num_experts_per_token, top_k_experts, moe_top_k, moe_topk)"
REPO = Path(__file__).resolve().parents[3]


def _without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in keys}


def _multimodal(text: dict[str, Any]) -> dict[str, Any]:
    return {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
            "vision_config": {"depth": 2, "hidden_size": 64}, "text_config": _without(text, "architectures")}


def test_an_empty_config_lacks_every_field() -> None:
    assert missing_model_fields({}) == [*COMMON, "intermediate_size"]


@pytest.mark.parametrize("config", [DENSE, MOE, MIXTRAL, _multimodal(DENSE), _multimodal(MOE)])
def test_complete_configs_pass(config: dict[str, Any]) -> None:
    assert missing_model_fields(config) == [] and invalid_model_fields(config) == []
    assert check_model_config("config.json", config) is config


def test_a_dense_model_needs_its_mlp_width() -> None:
    assert missing_model_fields(_without(DENSE, "intermediate_size", "vocab_size")) == ["vocab_size",
                                                                                         "intermediate_size"]


def test_a_dense_config_may_name_one_expert() -> None:
    assert missing_model_fields({**_without(DENSE, "intermediate_size"), "num_experts": 1}) == ["intermediate_size"]


@pytest.mark.parametrize(("dropped", "missing"), [
    (("num_experts",), [EXPERT_COUNT]),  # moe_intermediate_size still says MoE
    (("moe_intermediate_size",), [EXPERT_SIZE]),
    (("num_experts_per_tok",), [TOPK]),
    (("num_experts_per_tok", "hidden_size"), ["hidden_size", TOPK]),
])
def test_an_moe_model_needs_its_experts(dropped: tuple[str, ...], missing: list[str]) -> None:
    assert missing_model_fields(_without(MOE, *dropped)) == missing


def test_multimodal_fields_count_under_text_config() -> None:
    config = _multimodal(_without(DENSE, "vocab_size"))
    assert missing_model_fields(config) == ["vocab_size"]
    assert missing_model_fields({**config, "vocab_size": 1024}) == []  # the top level counts too
    assert missing_model_fields(_without(config, "architectures")) == ["architectures", "vocab_size"]


def test_null_is_missing_and_bad_values_are_named() -> None:
    config = {**DENSE, "hidden_size": None, "vocab_size": "big", "num_hidden_layers": 0, "architectures": []}
    assert missing_model_fields(config) == ["hidden_size"]
    assert invalid_model_fields(config) == [
        "architectures must be a non-empty list of class names, not []",
        "num_hidden_layers must be a positive integer, not 0",
        'vocab_size must be a positive integer, not "big"',
    ]


def test_the_error_names_the_file_the_fields_and_the_fix() -> None:
    with pytest.raises(ModelConfigFileError) as caught:
        check_model_config("/m/config.json", _multimodal(_without(DENSE, "num_attention_heads")))
    assert str(caught.value).startswith("/m/config.json lacks num_attention_heads (looked for at the top level and "
                                        "under text_config): the simulator needs these fields")
    assert "copy the model's real config.json from its Hugging Face repository" in str(caught.value)
    with pytest.raises(ModelConfigFileError, match=r"^/m/config.json is not a JSON object"):
        check_model_config("/m/config.json", [DENSE])


def test_the_simulator_loads_only_a_complete_config(tmp_path: Path) -> None:
    config_file = tmp_path / "config.json"
    config_file.write_text("{}")
    with pytest.raises(ModelConfigError, match=rf"^Can't load the configuration of '{tmp_path}': {config_file} "
                                               r"lacks architectures, hidden_size, .*, intermediate_size: .*Hugging"):
        load_model_config(str(tmp_path))
    config_file.write_text("{")
    with pytest.raises(ModelConfigError, match=rf"{config_file} is not valid JSON"):
        load_model_config(str(tmp_path))
    config_file.write_text(json.dumps(MIXTRAL))
    model = load_model_config(str(tmp_path))
    assert (model.num_experts, model.moe_intermediate_size, model.experts_per_token) == (8, 14336, 2)


def test_unit_tests_may_still_give_partial_dicts() -> None:
    """model_config_from_dict (and build_engine's model_config) takes a dict as given: the check is on the file."""
    assert model_config_from_dict("/m", {"hidden_size": 1024}).num_layers == 32


@pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")
def test_the_simulator_process_exits_naming_the_missing_fields(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    done = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", str(tmp_path)],
                          capture_output=True, text=True, timeout=30, cwd=REPO)
    assert done.returncode == 1
    assert (f"{tmp_path}/config.json lacks architectures, hidden_size, num_hidden_layers, num_attention_heads, "
            "vocab_size, intermediate_size: the simulator needs these fields") in done.stderr


def _settings(root: Path) -> Any:
    return parse_settings({"model": "org/M", "simulate": {"model_path": "cfg"}}, source="x", root=root)


@pytest.mark.parametrize(("content", "message"), [
    ("{}", r"^--sglang-simulate: .*/cfg/config.json lacks architectures, hidden_size, .*: the simulator needs"),
    ("[]", r"^--sglang-simulate: .*/cfg/config.json is not a JSON object; copy the model's real config.json"),
    ("{", r"^--sglang-simulate: .*/cfg/config.json is not valid JSON \(Expecting"),
    (None, r"^x: simulate.model_path: .*/cfg/config.json does not exist"),
])
def test_the_plan_checks_the_simulated_model(tmp_path: Path, content: str | None, message: str) -> None:
    (tmp_path / "cfg").mkdir()
    if content is not None:
        (tmp_path / "cfg" / "config.json").write_text(content)
    settings = _settings(tmp_path)
    assert plan_server(settings, settings.variants[0], simulate=False).command[-1] == "org/M"  # a real run reads none
    with pytest.raises(ConfigError, match=message):
        plan_server(settings, settings.variants[0], simulate=True)


def test_the_plan_passes_a_complete_config(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(DENSE))
    settings = _settings(tmp_path)
    assert str(tmp_path / "cfg") in plan_server(settings, settings.variants[0], simulate=True).command


def test_the_repositorys_model_shapes_pass() -> None:
    for config_file in (REPO / "tests" / "perf" / "models").glob("*/config.json"):
        check_model_config(config_file, json.loads(config_file.read_text()))
