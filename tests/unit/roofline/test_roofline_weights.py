"""A model's bytes estimated from config.json (roofline/config_weights.py, weight_format.py) and the WeightBytes
record: the shipped configs (Llama-3.1-8B dense, Qwen3-30B-A3B MoE, Qwen2.5-VL-7B multimodal, Qwen3.6-27B with an
MTP layer), quantized and DeepSeek-shaped configs, and the record's JSON form."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from pytest_sglang_perf.roofline.config_fields import ModelBytesError
from pytest_sglang_perf.roofline.weight_format import is_skipped, weight_format
from pytest_sglang_perf.roofline.weights import WeightBytes, weights_from_config
from pytest_sglang_perf.sglang_facts.known_models import shipped_config
from pytest_sglang_perf.sglang_facts.model_sizes import load_model_config

GB = 1e9
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
QWEN_VL = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN_MTP = "Qwen/Qwen3.6-27B"
DEEPSEEK_V3 = {
    # DeepSeek-V3's config.json sizes (huggingface.co/deepseek-ai/DeepSeek-V3); its report: 671B parameters,
    # 37B activated per token, a 14B MTP module (embedding and LM head copies included).
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "torch_dtype": "bfloat16",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
}
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def shipped(model_id: str) -> dict[str, Any]:
    path = shipped_config(model_id)
    assert path is not None
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def estimate(model_id: str, **kwargs: Any) -> WeightBytes:
    return weights_from_config(shipped(model_id), source=model_id, **kwargs)


def read_per_token(weights: WeightBytes) -> float:
    """What one forward of one token reads: layers, top-k experts per MoE layer, the LM head."""
    return weights.layers + weights.moe_layers * weights.experts_per_token * weights.expert + weights.lm_head


def test_llama_8b_dense_reads_15_gb_of_its_16_per_forward() -> None:
    weights = estimate(LLAMA)
    assert weights.total / GB == pytest.approx(16.06, abs=0.005)
    assert read_per_token(weights) / GB == pytest.approx(15.01, abs=0.005)
    assert weights.embedding == weights.lm_head == 128256 * 4096 * 2
    assert (weights.expert, weights.num_experts, weights.moe_layers, weights.draft_layer, weights.other) == (
        0, 0, 0, 0, 0)
    assert weights.kv_per_token == 2 * 32 * 8 * 128 * 2 and weights.kv_heads == 8
    assert (weights.dtype, weights.exact, weights.source) == ("bf16", False, LLAMA)
    assert any("estimated from config.json" in note for note in weights.notes)


def test_the_estimate_agrees_with_the_simulators_model_sizes() -> None:
    """The same counts as sglang_facts/model_sizes.py (the simulator's), for every shipped config."""
    for model_id in (LLAMA, QWEN_MOE, QWEN_VL, QWEN_MTP):
        model, weights = load_model_config(model_id), estimate(model_id)
        assert weights.total - weights.draft_layer == pytest.approx(model.param_count() * 2, rel=1e-3)
        assert read_per_token(weights) == pytest.approx(model.decode_read_params() * 2, rel=1e-9)
        assert weights.kv_per_token == model.kv_bytes_per_token(1)


def test_qwen3_30b_a3b_moe_reads_its_active_3b_per_token() -> None:
    weights = estimate(QWEN_MOE)
    assert (weights.num_experts, weights.experts_per_token, weights.moe_layers) == (128, 8, 48)
    assert weights.expert == 3 * 2048 * 768 * 2
    assert weights.total / GB == pytest.approx(61.06, abs=0.01)
    assert read_per_token(weights) / GB == pytest.approx(6.08, abs=0.01)  # 3.04B parameters of 30.5B


def test_qwen2_5_vl_counts_its_vision_tower_as_loaded_not_read() -> None:
    weights = estimate(QWEN_VL)
    model = load_model_config(QWEN_VL)
    assert weights.other == model.vision_params * 2 > 1.0 * GB
    assert read_per_token(weights) / GB == pytest.approx(14.14, abs=0.01)
    assert weights.total == pytest.approx(read_per_token(weights) + weights.embedding + weights.other)
    assert any("vision tower" in note for note in weights.notes)


def test_qwen3_6_27b_has_one_mtp_draft_layer() -> None:
    """One full-attention layer with the output gate, its MLP, and the 2h -> h input projection."""
    weights = estimate(QWEN_MTP)
    hidden, q, kv = 5120, 24 * 256, 4 * 256
    layer = hidden * (2 * q + q + 2 * kv) + 3 * hidden * 17408
    assert weights.draft_layer == (layer + 2 * hidden * hidden) * 2
    assert weights.draft_layer / GB == pytest.approx(0.849, abs=0.001)
    assert weights.layers == 64 * layer * 2
    assert weights.kv_per_token == 2 * 64 * 4 * 256 * 2


def test_a_second_mtp_layer_is_loaded_not_read() -> None:
    raw = shipped(QWEN_MTP)
    one = weights_from_config(raw, source="one")
    two = weights_from_config({**raw, "text_config": {**raw["text_config"], "mtp_num_hidden_layers": 2}},
                              source="two")
    assert two.draft_layer == one.draft_layer
    assert two.other - one.other == pytest.approx(one.draft_layer)


def test_hybrid_attention_keeps_kv_in_full_attention_layers_only() -> None:
    raw = shipped(QWEN_MTP)
    hybrid = {**raw, "text_config": {**raw["text_config"], "full_attention_interval": 4}}
    weights = weights_from_config(hybrid, source="hybrid")
    assert weights.kv_per_token == 2 * 16 * 4 * 256 * 2
    assert any("KV cache in 16 of 64 layers" in note for note in weights.notes)
    assert any("linear-attention layers counted with full-attention weights" in note for note in weights.notes)


def test_linear_attention_layers_are_counted_from_their_own_sizes() -> None:
    raw = shipped(QWEN_MTP)
    sizes = {"full_attention_interval": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
             "linear_num_value_heads": 48, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}
    weights = weights_from_config({**raw, "text_config": {**raw["text_config"], **sizes}}, source="gdn")
    full = estimate(QWEN_MTP)
    hidden, key, value = 5120, 16 * 128, 48 * 128
    gdn = hidden * (2 * key + 2 * value) + hidden * 2 * 48 + (2 * key + value) * 4 + value * hidden
    attention = hidden * (2 * 6144 + 6144 + 2 * 1024)
    assert weights.layers - full.layers == 48 * (gdn - attention) * 2


def test_tied_embeddings_read_the_table_as_the_lm_head() -> None:
    weights = weights_from_config({**shipped("Qwen/Qwen3-8B"), "tie_word_embeddings": True}, source="tied")
    assert weights.lm_head == 151936 * 4096 * 2
    assert weights.embedding == 0
    assert any("tied embeddings" in note for note in weights.notes)


def test_deepseek_v3_gives_its_published_parameter_counts() -> None:
    """MLA attention, one shared expert, three dense layers first, the NEXTN layer: 671B + MTP, 37B activated."""
    weights = weights_from_config(DEEPSEEK_V3, source="deepseek")
    main = weights.total - weights.draft_layer - weights.other
    assert main / 2 / GB == pytest.approx(671, rel=0.005)
    assert read_per_token(weights) / 2 / GB == pytest.approx(37, rel=0.02)
    assert (weights.draft_layer + weights.other + weights.lm_head + weights.embedding) / 2 / GB == pytest.approx(
        14, rel=0.05)
    assert (weights.num_experts, weights.moe_layers, weights.kv_heads) == (256, 58, 1)
    assert weights.kv_per_token == 61 * (512 + 64) * 2


def test_an_fp8_config_halves_the_linear_layers_but_not_the_routers() -> None:
    """SGLang builds MoE routers unquantized (quant_config=None): they stay at the model dtype."""
    bf16 = weights_from_config(DEEPSEEK_V3, source="bf16")
    fp8 = weights_from_config({**DEEPSEEK_V3, "quantization_config": FP8_BLOCK}, source="fp8")
    routers = 58 * 256 * 7168 * 2
    assert fp8.dtype == "fp8_e4m3"
    assert fp8.layers == pytest.approx((bf16.layers - routers) / 2 * (1 + 4 / 128**2) + routers)
    assert fp8.expert == pytest.approx(bf16.expert / 2 * (1 + 4 / 128**2))
    assert fp8.lm_head == bf16.lm_head
    assert any("quantization 'fp8'" in note for note in fp8.notes)


@pytest.mark.parametrize(("quant", "label", "per_weight"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4 (awq)", 0.5 + 2.5 / 128),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "int8 (gptq)", 1.0),
    ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8_e4m3", 1.0),
    ({"quant_method": "mxfp4"}, "mxfp4", 0.5 + 1 / 32),
    ({"quant_method": "modelopt_fp4", "quant_algo": "NVFP4"}, "nvfp4", 0.5 + 1 / 16),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 32}}}},
     "int4 (compressed-tensors)", 0.5 + 2.5 / 32),
])
def test_quantized_formats_store_their_bits_and_scales(quant: dict[str, Any], label: str, per_weight: float) -> None:
    found = weight_format({"quantization_config": quant}, "bfloat16", 2)
    assert found.label == label
    assert found.linear_bytes == pytest.approx(per_weight)


def test_an_unknown_quantization_is_counted_at_the_model_dtype_and_said() -> None:
    found = weight_format({"text_config": {"quantization_config": {"quant_method": "magic"}}}, "bfloat16", 2)
    assert (found.label, found.linear_bytes) == ("magic (not modelled)", 2)
    assert "quantization 'magic' is not modelled" in found.note


def test_an_fp8_kv_cache_halves_the_kv_bytes() -> None:
    assert estimate(LLAMA, kv_dtype_bytes=1).kv_per_token == estimate(LLAMA).kv_per_token / 2
    assert not any("KV cache at the model dtype" in note for note in estimate(LLAMA, kv_dtype_bytes=1).notes)


def test_a_kv_cache_quantized_by_the_checkpoint_is_fp8() -> None:
    quant = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    weights = weights_from_config({**shipped(LLAMA), "quantization_config": quant}, source="fp8 kv")
    assert weights.kv_per_token == estimate(LLAMA).kv_per_token / 2
    assert "KV cache in fp8 (quantization_config's kv_cache_quant_algo), as SGLang's --kv-cache-dtype auto" in (
        weights.notes)


def test_the_record_round_trips_through_json() -> None:
    weights = estimate(QWEN_MOE)
    document = json.loads(json.dumps(weights.to_dict()))
    assert document["total"] == weights.total
    assert WeightBytes.from_dict(document) == weights


@pytest.mark.parametrize(("change", "message"), [
    ({"layers": None}, "WeightBytes field 'layers' must be int or float, not None"),
    ({"num_experts": 1.5}, "WeightBytes field 'num_experts' must be int, not 1.5"),
    ({"exact": "yes"}, "WeightBytes field 'exact' must be bool, not 'yes'"),
    ({"kv_heads": True}, "WeightBytes field 'kv_heads' must be int, not True"),
    ({"notes": [1]}, "WeightBytes field 'notes' must be a list of strings"),
])
def test_a_bad_record_names_the_field(change: dict[str, Any], message: str) -> None:
    document = {**estimate(LLAMA).to_dict(), **change}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        WeightBytes.from_dict(document)


def test_a_record_without_a_field_names_it() -> None:
    document = estimate(LLAMA).to_dict()
    del document["source"]
    with pytest.raises(ValueError, match=r"^WeightBytes field 'source' is missing$"):
        WeightBytes.from_dict(document)


LLAMA4_MAVERICK = {
    # Llama-4-Maverick-17B-128E's text_config sizes (huggingface.co/meta-llama); Meta: 400B parameters, 17B active.
    "architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "torch_dtype": "bfloat16",
    "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 128,
    "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "vocab_size": 202048, "tie_word_embeddings": False,
}
GPT_OSS = {
    # gpt-oss-120b's config.json sizes (huggingface.co/openai/gpt-oss-120b): alternating 128-token sliding-window and
    # full attention, MXFP4 experts.
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "torch_dtype": "bfloat16", "hidden_size": 2880,
    "intermediate_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 64, "num_local_experts": 128, "num_experts_per_tok": 4, "vocab_size": 201088, "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
}


def test_llama_4_maverick_interleaves_its_moe_layers() -> None:
    """interleave_moe_layer_step 2: every second layer holds the 128 experts and a shared one, the others a dense
    MLP of intermediate_size_mlp (llama4.py): 400B parameters, 17B active with the embedding."""
    weights = weights_from_config(LLAMA4_MAVERICK, source="maverick")
    assert weights.moe_layers == 24
    assert weights.total / 2 / GB == pytest.approx(400, rel=0.005)
    assert (read_per_token(weights) + weights.embedding) / 2 / GB == pytest.approx(17, rel=0.02)
    assert any("routed experts in 24 of 48 layers, the others dense" in note for note in weights.notes)


@pytest.mark.parametrize(("model_type", "moe_layers"), [("qwen3_moe", 48), ("xllm", 46)])
def test_mlp_only_layers_count_where_sglang_reads_them(model_type: str, moe_layers: int) -> None:
    """SGLang's Qwen MoE models make every layer sparse and read neither mlp_only_layers nor decoder_sparse_step;
    other models (xllm.py) do."""
    raw = {**shipped(QWEN_MOE), "model_type": model_type, "mlp_only_layers": [0, 1]}
    assert weights_from_config(raw, source=model_type).moe_layers == moe_layers


def test_deepseek_style_dense_layers_come_first() -> None:
    raw = {**shipped(QWEN_MOE), "model_type": "deepseek_v3", "first_k_dense_replace": 3, "moe_layer_freq": 2}
    assert weights_from_config(raw, source="dense first").moe_layers == len(range(4, 48, 2))


def test_mxfp4_quantizes_only_the_experts() -> None:
    """mxfp4.py quantizes the FusedMoE experts; attention, routers, embedding and LM head load at bf16."""
    weights = weights_from_config(GPT_OSS, source="gpt-oss")
    hidden, q, kv = 2880, 64 * 64, 8 * 64
    attention = hidden * (2 * q + 2 * kv)
    assert weights.attention == 36 * attention * 2
    assert weights.layers == weights.attention + 36 * 128 * hidden * 2
    assert weights.expert == pytest.approx(3 * hidden * 2880 * (0.5 + 1 / 32))
    assert weights.dtype == "mxfp4"
    assert any("routed experts at 0.531 bytes per weight" in note for note in weights.notes)


def test_sliding_window_layers_are_attention_with_a_bounded_kv_cache() -> None:
    weights = weights_from_config(GPT_OSS, source="gpt-oss")
    per_layer = 2 * 8 * 64 * 2
    assert (weights.kv_per_token, weights.kv_per_token_sliding, weights.sliding_window) == (
        18 * per_layer, 18 * per_layer, 128)
    assert "sliding-window attention: 18 of 36 layers read the KV cache of at most their last 128 tokens" in (
        weights.notes)
    assert not any("linear-attention" in note or "hybrid attention" in note for note in weights.notes)


def test_sliding_layers_without_a_window_count_as_full_attention() -> None:
    raw = {**GPT_OSS, "sliding_window": None}
    weights = weights_from_config(raw, source="no window")
    assert (weights.kv_per_token, weights.kv_per_token_sliding) == (36 * 2 * 8 * 64 * 2, 0)
    assert any("18 sliding-window layer(s) counted as full attention" in note for note in weights.notes)


@pytest.mark.parametrize(("quant", "unquantized"), [
    ({"quant_method": "fp8", "modules_to_not_convert": ["layers.0.self_attn"]}, {0}),
    ({"quant_method": "fp8", "ignored_layers": ["model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj",
                                                 "model.layers.1.self_attn.v_proj", "model.layers.1.self_attn.o_proj"]},
     {1}),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["self_attn"]}, {0, 1, 2, 3}),
    ({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:model[.]layers[.][23][.]self_attn.*"],
      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}, {2, 3}),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["model.layers.3.self_attn*"]}, {3}),
])
def test_modules_left_unquantized_count_at_the_model_dtype(quant: dict[str, Any], unquantized: set[int]) -> None:
    raw = {**shipped(LLAMA), "num_hidden_layers": 4}
    plain = weights_from_config(raw, source="bf16")
    quantized = weights_from_config({**raw, "quantization_config": quant}, source="quantized")
    per_weight = weight_format({"quantization_config": quant}, "bfloat16", 2).linear_bytes
    attention = plain.attention / 4
    expected = len(unquantized) * attention + (4 - len(unquantized)) * attention / 2 * per_weight
    assert quantized.attention == pytest.approx(expected)
    assert quantized.layers - quantized.attention == pytest.approx((plain.layers - plain.attention) / 2 * per_weight)
    assert any("the modules its config leaves unquantized" in note for note in quantized.notes)


@pytest.mark.parametrize(("matcher", "entry", "module", "skipped"), [
    ("substring", "mlp.gate", "model.layers.0.mlp.gate_proj", True),
    ("path", "mlp.gate", "model.layers.0.mlp.gate_proj", False),
    ("path", "mlp.gate", "model.layers.0.mlp.gate", True),
    ("path", "layers.0", "model.layers.0.self_attn.q_proj", True),
    ("path", "model.layers.1", "model.layers.10.self_attn.q_proj", False),
    ("suffix_or_regex", "self_attn.o_proj", "model.layers.0.self_attn.o_proj", True),
    ("suffix_or_regex", "model.layers.0", "model.layers.0.self_attn.o_proj", False),
    ("suffix_or_regex", "re:.*o_proj$", "model.layers.0.self_attn.o_proj", True),
    ("glob", "model.layers.*.self_attn", "model.layers.7.self_attn", True),
    ("glob", "mtp*", "model.mtp_block.fc", True),
    ("glob", "lm_head", "model.layers.0.mlp.down_proj", False),
    ("component", "mlp", "model.layers.0.mlp.down_proj", True),
    ("component", "model.layers.0", "model.layers.0.mlp.down_proj", True),
    ("component", "layers.0", "model.layers.0.mlp.down_proj", False),
])
def test_unquantized_modules_match_as_sglang_matches_them(matcher: str, entry: str, module: str,
                                                          skipped: bool) -> None:
    assert is_skipped(matcher, module, [entry]) is skipped


@pytest.mark.parametrize(("change", "field", "shown"), [
    ({"num_key_value_heads": "eight"}, "num_key_value_heads", '"eight"'),
    ({"head_dim": [128]}, "head_dim", "[128]"),
    ({"vision_config": "big"}, "vision_config", '"big"'),
    ({"vision_config": {"depth": 32, "hidden_size": "wide"}}, "vision_config.hidden_size", '"wide"'),
    ({"text_config": {"num_attention_heads": 0}}, "text_config.num_attention_heads", "0"),
    ({"layer_types": "sliding_attention"}, "layer_types", '"sliding_attention"'),
    ({"mlp_only_layers": ["0"]}, "mlp_only_layers", '["0"]'),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings", '"false"'),
    ({"quantization_config": {"quant_method": "awq", "bits": "four"}}, "quantization_config.bits", '"four"'),
    ({"quantization_config": {"quant_method": "fp8", "ignored_layers": "lm_head"}},
     "quantization_config.ignored_layers", '"lm_head"'),
])
def test_a_wrong_typed_field_is_named_not_raised_deep_inside(change: dict[str, Any], field: str, shown: str) -> None:
    with pytest.raises(ModelBytesError, match=f"^{re.escape(f'/m/config.json: field {field!r} must be')} .*, not "
                                              f"{re.escape(shown)}; correct it in config.json"):
        weights_from_config({**shipped(LLAMA), **change}, source="/m/config.json")


def test_a_record_written_before_the_newer_fields_reads_their_defaults() -> None:
    document = estimate(LLAMA).to_dict()
    for key in ("attention", "draft_lm_head", "kv_per_token_sliding", "sliding_window"):
        del document[key]
    old = WeightBytes.from_dict(document)
    assert (old.attention, old.draft_lm_head, old.kv_per_token_sliding, old.sliding_window) == (0.0, None, 0.0, 0)
    assert old == dataclasses.replace(estimate(LLAMA), attention=0.0)


def test_a_record_with_a_draft_lm_head_round_trips() -> None:
    weights = dataclasses.replace(estimate(LLAMA), draft_layer=1e9, draft_lm_head=2.5e8)
    document = json.loads(json.dumps(weights.to_dict()))
    assert document["total"] == estimate(LLAMA).total + 1.25e9
    assert WeightBytes.from_dict(document) == weights
    with pytest.raises(ValueError, match=r"^WeightBytes field 'draft_lm_head' must be int or float, not 'big'$"):
        WeightBytes.from_dict({**document, "draft_lm_head": "big"})
