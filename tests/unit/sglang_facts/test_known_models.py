"""The model configs the project ships (sglang_facts/known_models.py): their numbers, the id lookup, the order in
which a simulated run finds its config.json (server/plan.py), the simulator's own lookup and the identity's hash."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from pathlib import Path

import pytest

from pytest_sglang_perf.config.settings import ConfigError, Settings, parse_settings, table_location
from pytest_sglang_perf.server.plan import plan_server
from pytest_sglang_perf.session.identity import server_identity
from pytest_sglang_perf.sglang_facts.known_models import (
    MODELS_DIR,
    known_model_ids,
    model_config_file,
    shipped_config,
)
from pytest_sglang_perf.sglang_facts.model_fields import check_model_config
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfigError, load_model_config
from pytest_sglang_perf.sglang_facts.parsers import choose_parser

REPO = Path(__file__).resolve().parents[3]
REQUIRED_IDS = ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3.6-27B",
                "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-30B-A3B")
TINY = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 256}
PYPROJECT = "pyproject.toml [tool.sglang_perf]"


def test_the_required_models_are_shipped_and_complete() -> None:
    assert set(REQUIRED_IDS) <= set(known_model_ids())
    for model_id in known_model_ids():
        config_file = shipped_config(model_id)
        assert config_file is not None
        check_model_config(config_file, json.loads(config_file.read_text(encoding="utf-8")))


def test_the_shipped_files_are_package_data() -> None:
    """pyproject.toml installs them: every shipped file matches a package-data pattern."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = REPO / "pytest_sglang_perf"
    for path in MODELS_DIR.glob("*.json"):
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns["pytest_sglang_perf"]), relative


@pytest.mark.parametrize(("model_id", "params_b", "active_b"), [
    ("Qwen/Qwen3-8B", 8.19, None),                     # model card: 8.2B
    ("meta-llama/Llama-3.1-8B-Instruct", 8.03, None),  # 8.03B
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.35),                # 30.5B total, 3.3B activated (embedding included)
])
def test_the_numbers_give_the_published_parameter_counts(model_id: str, params_b: float,
                                                         active_b: float | None) -> None:
    model = load_model_config(model_id)
    assert model.param_count() / 1e9 == pytest.approx(params_b, rel=0.01)
    if active_b is not None:
        active = model.active_param_count() + model.vocab_size * model.hidden_size  # + the embedding table
        assert active / 1e9 == pytest.approx(active_b, rel=0.02)


def test_the_moe_and_multimodal_shapes_are_read_as_such() -> None:
    moe = load_model_config("Qwen/Qwen3-30B-A3B")
    assert (moe.num_experts, moe.experts_per_token, moe.moe_intermediate_size) == (128, 8, 768)
    assert "num_experts_per_tok" in moe.text_keys and moe.text_model_type == "qwen3_moe"
    vl = load_model_config("Qwen/Qwen2.5-VL-7B-Instruct")
    assert vl.is_multimodal and vl.architecture == "Qwen2_5_VLForConditionalGeneration"
    assert vl.language_param_count() / 1e9 == pytest.approx(7.61, rel=0.01)  # Qwen2.5-7B's language model
    assert vl.vision_params > 0


def test_the_projects_own_qwen36_shape_is_the_shipped_one() -> None:
    shipped = shipped_config("Qwen/Qwen3.6-27B")
    assert shipped is not None
    assert shipped.read_bytes() == (REPO / "tests/perf/models/qwen3.6-27b/config.json").read_bytes()


def test_lookup_is_by_exact_id_in_any_case(tmp_path: Path) -> None:
    assert shipped_config("qwen/qwen3-8b") == shipped_config("Qwen/Qwen3-8B") == MODELS_DIR / "Qwen--Qwen3-8B.json"
    for other in ("Qwen/Qwen3-8B-Base", "Qwen3-8B", "Qwen/Qwen3", "org/M", ""):
        assert shipped_config(other) is None


def test_a_local_folder_comes_before_the_shipped_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert model_config_file("Qwen/Qwen3-8B") == shipped_config("Qwen/Qwen3-8B")
    (tmp_path / "Qwen" / "Qwen3-8B").mkdir(parents=True)
    (tmp_path / "Qwen" / "Qwen3-8B" / "config.json").write_text(json.dumps(TINY))
    assert model_config_file("Qwen/Qwen3-8B") == Path("Qwen/Qwen3-8B/config.json")
    assert load_model_config("Qwen/Qwen3-8B").hidden_size == 64


def test_the_simulator_names_the_known_models_for_an_unknown_id() -> None:
    with pytest.raises(ModelConfigError, match=r"'org/M' is not a model the simulator ships a config for "
                                               r"\(.*Qwen/Qwen3-8B.*\)\. .*point --model-path at a local model folder"):
        load_model_config("org/M")


def _settings(tmp_path: Path, model: str, source: str = PYPROJECT, **simulate: str) -> Settings:
    table: dict[str, object] = {"model": model}
    if simulate:
        table["simulate"] = simulate
    return parse_settings(table, source=source, root=tmp_path)


def _planned(settings: Settings) -> tuple[str, Path | None]:
    plan = plan_server(settings, settings.variants[0], simulate=True)
    return plan.command[plan.command.index("--model-path") + 1], plan.model_config


def _folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(TINY))
    return path


def test_a_known_id_is_simulated_with_its_shipped_config(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "Qwen/Qwen3-30B-A3B")
    assert _planned(settings) == ("Qwen/Qwen3-30B-A3B", shipped_config("Qwen/Qwen3-30B-A3B"))
    real = plan_server(settings, settings.variants[0], simulate=False)
    assert real.model_config is None and "Qwen/Qwen3-30B-A3B" in real.command


def test_the_resolution_order(tmp_path: Path) -> None:
    """[simulate] model_path > the model as a local folder > the shipped config."""
    local = _folder(tmp_path / "Qwen" / "Qwen3-8B")
    assert _planned(_settings(tmp_path, "Qwen/Qwen3-8B")) == (str(local), local / "config.json")
    explicit = _folder(tmp_path / "cfg")
    assert _planned(_settings(tmp_path, "Qwen/Qwen3-8B", model_path="cfg")) == (str(explicit),
                                                                                explicit / "config.json")


@pytest.mark.parametrize(("source", "where"), [
    (PYPROJECT, "[tool.sglang_perf.simulate] in pyproject.toml"),
    ("sglang-perf.toml", "[simulate] in sglang-perf.toml"),
    ("ci/perf.toml [tool.sglang_perf]", "[tool.sglang_perf.simulate] in ci/perf.toml"),
])
def test_an_unknown_id_is_a_usage_error_that_says_where_to_point(tmp_path: Path, source: str, where: str) -> None:
    assert table_location(source, "simulate") == where
    with pytest.raises(ConfigError) as caught:
        _planned(_settings(tmp_path, "org/M", source=source))
    message = str(caught.value)
    assert message.startswith(f"{source}: model = 'org/M': --sglang-simulate needs the model's config.json")
    assert all(model_id in message for model_id in REQUIRED_IDS)
    assert "https://huggingface.co/org/M/blob/main/config.json" in message
    assert message.endswith(f'set model_path = "<that folder>" under {where}')


def test_a_missing_explicit_folder_names_the_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cfg/config.json does not exist; .* or fix model_path under "
                                          r"\[tool.sglang_perf.simulate\] in pyproject.toml$"):
        _planned(_settings(tmp_path, "Qwen/Qwen3-8B", model_path="cfg"))


def test_the_identity_hashes_the_shipped_config(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "Qwen/Qwen3-8B")
    plan = plan_server(settings, settings.variants[0], simulate=True)
    identity, _ = server_identity(plan, choose_parser(simulate=True), model="Qwen/Qwen3-8B", model_dir=None,
                                  gpu_name="NVIDIA H100 80GB HBM3")
    shipped = shipped_config("Qwen/Qwen3-8B")
    assert shipped is not None
    assert identity.model_config == hashlib.sha256(shipped.read_bytes()).hexdigest()[:16]
