"""Model config loading, SGLang's argument resolution (speculative, CUDA graphs, memory) and the memory plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE, load_flag_table
from pytest_sglang_perf.sglang_facts.gpus import H100_80GB
from pytest_sglang_perf.sglang_facts.model_sizes import (
    ModelConfig,
    ModelConfigError,
    load_model_config,
    model_config_from_dict,
)
from pytest_sglang_perf.simulator.args.command_line import parse_args_and_knobs
from pytest_sglang_perf.simulator.args.memory import effective_max_running_requests, plan_memory
from pytest_sglang_perf.simulator.args.resolve import MSG_LANGUAGE_ONLY, Resolution, resolve_args
from pytest_sglang_perf.simulator.args.speculative import (
    MSG_DRAFT_TOKENS,
    MSG_MAX_RUNNING,
    ResolutionError,
    SpecConfig,
    draft_architecture,
)

pytestmark = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")

QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "intermediate_size": 12288, "vocab_size": 151936, "max_position_embeddings": 40960,
            "torch_dtype": "bfloat16", "eos_token_id": 151645, "tie_word_embeddings": False}


@pytest.fixture()
def model() -> ModelConfig:
    return model_config_from_dict("/models/qwen3-8b", QWEN3_8B)


def _resolve(model: ModelConfig, *flags: str) -> Resolution:
    raw, _knobs = parse_args_and_knobs(load_flag_table(), ["--model-path", model.path, *flags], {})
    return resolve_args(raw, model, H100_80GB)


def test_load_model_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_8B))
    model = load_model_config(str(tmp_path))
    assert model.architectures == ("Qwen3ForCausalLM",) and model.model_type == "qwen3"
    assert model.context_len == 40960 and model.eos_token_id == 151645
    assert 7.5e9 < model.param_count() < 8.5e9  # Qwen3-8B has 8.2B parameters


def test_missing_config_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match=f"{tmp_path}/config.json does not exist.*--model-path"):
        load_model_config(str(tmp_path))


def test_nested_text_config_and_hybrid_layers() -> None:
    raw = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "vision_config": {},
           "text_config": {**QWEN3_8B, "max_position_embeddings": 262144,
                           "layer_types": ["linear_attention"] * 3 * 9 + ["full_attention"] * 9}}
    model = model_config_from_dict("m", raw)
    assert model.context_len == 262144 and model.is_multimodal and model.num_kv_layers == 9
    assert model.architecture == "Qwen3_5ForConditionalGeneration"


def test_serving_defaults(model: ModelConfig) -> None:
    res = _resolve(model)
    assert res["served_model_name"] == model.path and res["tokenizer_path"] == model.path
    assert isinstance(res["random_seed"], int) and res["device"] == "cuda"
    assert res["max_running_requests"] is None and res.spec is None and res.messages == ()
    assert res["chunked_prefill_size"] == 8192  # 80 GB GPU
    assert 0.8 < res["mem_fraction_static"] < 0.9
    assert res.context_len == 40960


def test_nextn_resolves_to_eagle_with_sglang_messages(model: ModelConfig) -> None:
    res = _resolve(model, "--speculative-algorithm", "nextn", "--speculative-num-steps", "3",
                   "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "5")
    assert res["speculative_algorithm"] == "EAGLE"
    assert res["max_running_requests"] == 48
    assert res["speculative_num_draft_tokens"] == 4
    assert res.messages == (MSG_MAX_RUNNING, MSG_DRAFT_TOKENS)
    assert res.spec is not None and res.spec.max_tokens_per_step == 4


def test_draft_architecture_names() -> None:
    spec = SpecConfig("EAGLE", 3, 1, 4)
    assert draft_architecture(spec, "Qwen3_5ForConditionalGeneration") == "Qwen3_5ForCausalLMMTP"
    assert draft_architecture(spec, "LlamaForCausalLM") == "LlamaForCausalLMEagle"
    assert draft_architecture(SpecConfig("EAGLE3", 3, 1, 4), "LlamaForCausalLM") == "LlamaForCausalLMEagle3"


def test_explicit_max_running_requests_is_kept(model: ModelConfig) -> None:
    res = _resolve(model, "--speculative-algorithm", "EAGLE", "--max-running-requests", "16")
    assert res["max_running_requests"] == 16 and MSG_MAX_RUNNING not in res.messages
    params = (res["speculative_num_steps"], res["speculative_eagle_topk"], res["speculative_num_draft_tokens"])
    assert params == (3, 1, 4)


def test_partial_eagle_params_fail_like_sglang(model: ModelConfig) -> None:
    with pytest.raises(ResolutionError, match="Pass all three"):
        _resolve(model, "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3")
    with pytest.raises(ResolutionError, match="Unknown speculative algorithm name: MAGIC"):
        _resolve(model, "--speculative-algorithm", "MAGIC")


def test_cuda_graph_defaults(model: ModelConfig) -> None:
    plan = _resolve(model).cuda_graph.to_dict()
    assert plan["decode"]["backend"] == "full" and plan["decode"]["max_bs"] == 256
    assert plan["decode"]["bs"][:5] == [1, 2, 4, 8, 12]
    assert plan["prefill"]["backend"] == "breakable" and plan["prefill"]["max_bs"] == 8192
    assert set(plan["prefill"]) >= {"backend", "max_bs", "bs", "tc_compiler", "max_context_size",
                                    "full_prefill_max_req", "full_prefill_prefix_chunk_tokens", "max_seq_len"}


@pytest.mark.parametrize(("flags", "prefill", "decode"), [
    (["--disable-prefill-cuda-graph"], "disabled", "full"),
    (["--cuda-graph-backend-prefill", "disabled"], "disabled", "full"),
    (["--disable-cuda-graph"], "disabled", "disabled"),
    (["--disable-cuda-graph", "--cuda-graph-backend-decode", "full"], "disabled", "full"),
    (["--cuda-graph-config", '{"prefill": {"backend": "full"}}', "--cuda-graph-backend-prefill", "disabled"],
     "full", "full"),
    (["--pp-size", "2"], "disabled", "full"),
    (["--pp-size", "2", "--cuda-graph-backend-prefill", "breakable"], "breakable", "full"),
    (["--enable-two-batch-overlap"], "disabled", "full"),
])
def test_cuda_graph_precedence_and_auto_disable(model: ModelConfig, flags: list[str], prefill: str,
                                                decode: str) -> None:
    res = _resolve(model, *flags)
    assert (res.cuda_graph.prefill.backend, res.cuda_graph.decode.backend) == (prefill, decode)
    assert res["cuda_graph_config"]["prefill"]["backend"] == prefill


def test_auto_disable_logs_sglang_message(model: ModelConfig) -> None:
    res = _resolve(model, "--enable-two-batch-overlap")
    message = "Breakable CUDA graph is incompatible with two-batch overlap; disabling prefill CUDA graph."
    assert res.messages == (message,)


def test_memory_plan(model: ModelConfig) -> None:
    res = _resolve(model, "--speculative-algorithm", "EAGLE")
    memory = plan_memory(res, model, H100_80GB)
    assert 15 < memory.weight_gib < 17  # 8.2B bf16 parameters
    assert memory.kv_tokens > 100_000
    assert memory.max_running_requests == 48
    assert max(memory.decode_capture_bs) == 48
    assert 0 < memory.final_gib < memory.after_kv_gib < memory.after_weights_gib < memory.free_gib


def test_effective_max_running_requests_without_a_cap(model: ModelConfig) -> None:
    res = _resolve(model)
    assert effective_max_running_requests(res, 400_000) == 4096
    assert effective_max_running_requests(res, 3000) == 1500


VL_TEXT = {"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
           "intermediate_size": 4096, "vocab_size": 32000, "max_position_embeddings": 32768}
MSG_MULTIMODAL = "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph."


def _vl(architecture: str) -> ModelConfig:
    raw = {"architectures": [architecture], "model_type": "vl", "vision_config": {"depth": 2, "hidden_size": 64},
           "text_config": VL_TEXT}
    return model_config_from_dict("/models/vl", raw)


@pytest.mark.parametrize(("architecture", "flags", "prefill", "logged"), [
    ("Qwen2_5_VLForConditionalGeneration", [], "disabled", True),
    ("Qwen3_5ForConditionalGeneration", [], "breakable", False),  # on 0.5.23's allow-list
    ("Qwen2_5_VLForConditionalGeneration", ["--cuda-graph-backend-prefill", "breakable"], "breakable", False),
    ("MuseGlimmerForConditionalGeneration", ["--language-model-only"], "breakable", False),
    ("Qwen2_5_VLForConditionalGeneration", ["--language-only"], "disabled", True),  # does not change the rule
    ("Gemma3ForConditionalGeneration", [], "breakable", False),  # multimodal off by default
    ("Gemma3ForConditionalGeneration", ["--enable-multimodal"], "disabled", True),
], ids=["qwen2.5-vl", "qwen3.5", "explicit-backend-locks", "language-model-only-allowed", "language-only", "gemma3",
        "gemma3-multimodal"])
def test_multimodal_prefill_graph_rule(architecture: str, flags: list[str], prefill: str, logged: bool) -> None:
    """docs/sglang-0.5.23.md §8.1 item 2: the `multimodal model` rule, its 0.5.23 allow-list, and its lock."""
    res = _resolve(_vl(architecture), *flags)
    assert res.cuda_graph.prefill.backend == res["cuda_graph_config"]["prefill"]["backend"] == prefill
    assert (MSG_MULTIMODAL in res.messages) is logged


def test_language_only_without_encoder_urls_only_logs() -> None:
    """docs/sglang-0.5.23.md §8.5: not an error since 0.5.23, one log line."""
    res = _resolve(_vl("Qwen3_5ForConditionalGeneration"), "--language-only")
    assert res.messages == (MSG_LANGUAGE_ONLY,)
    assert _resolve(_vl("Qwen3_5ForConditionalGeneration"), "--language-only", "--encoder-urls",
                    "http://127.0.0.1:1").messages == ()


def test_language_model_only_is_for_few_architectures() -> None:
    """srt/arg_groups/model_hook.py::handle_language_model_only."""
    with pytest.raises(ResolutionError, match=r"--language-model-only does not support \['Qwen2_5_VL"):
        _resolve(_vl("Qwen2_5_VLForConditionalGeneration"), "--language-model-only")
    with pytest.raises(ResolutionError, match="cannot be combined with --language-only"):
        _resolve(_vl("MuseGlimmerForConditionalGeneration"), "--language-model-only", "--language-only")


def test_topk_without_steps_fails_like_sglang(model: ModelConfig) -> None:
    with pytest.raises(ResolutionError) as error:
        _resolve(model, "--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1")
    assert error.value.traceback_line() == "AssertionError"
