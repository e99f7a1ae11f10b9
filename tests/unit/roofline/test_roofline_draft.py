"""A separate draft model's bytes (roofline/draft_weights.py, model_source.find_draft_weights): what one draft
forward reads of an EAGLE3, EAGLE, old-style NEXTN or standalone draft checkpoint, and which LM head it reads.

Checkpoints are synthetic (zero-filled, sparse) with the tensor names those drafts' checkpoints hold and SGLang
0.5.23's loaders read (llama_eagle3.py, llama_eagle.py, deepseek_weight_loader.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_roofline_weights import LLAMA, QWEN_MOE, estimate, shipped

from pytest_sglang_perf.roofline.draft_weights import DraftKind, draft_kind
from pytest_sglang_perf.roofline.model_source import find_draft_weights
from pytest_sglang_perf.roofline.safetensors_format import TensorInfo
from pytest_sglang_perf.roofline.step_bytes import DecodeShape, decode_step_bytes
from pytest_sglang_perf.roofline.synthetic_checkpoint import Layout, checkpoint_layout, write_checkpoint
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes

HIDDEN, Q, KV, MLP, VOCAB, DRAFT_VOCAB = 4096, 4096, 1024, 14336, 128256, 32000
EAGLE3 = {
    # yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config.json (the draft SGLang's EAGLE3 docs use for Llama-3.1-8B)
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "torch_dtype": "bfloat16",
    "hidden_size": HIDDEN, "intermediate_size": MLP, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB, "tie_word_embeddings": False,
}
EAGLE = {**EAGLE3, "architectures": ["LlamaForCausalLMEagle"], "draft_vocab_size": None}


def layer(prefix: str, q_in: int) -> Layout:
    """A Llama decoder layer whose q, k, v read `q_in` wide inputs."""
    shapes = {"self_attn.q_proj": (Q, q_in), "self_attn.k_proj": (KV, q_in), "self_attn.v_proj": (KV, q_in),
              "self_attn.o_proj": (HIDDEN, Q), "mlp.gate_proj": (MLP, HIDDEN), "mlp.up_proj": (MLP, HIDDEN),
              "mlp.down_proj": (HIDDEN, MLP), "post_attention_layernorm": (HIDDEN,)}
    return {f"{prefix}{name}.weight": ("BF16", shape) for name, shape in shapes.items()}


def eagle3_layout(*, head_rows: int = DRAFT_VOCAB) -> Layout:
    return {**layer("midlayer.", 2 * HIDDEN), "midlayer.input_layernorm.weight": ("BF16", (HIDDEN,)),
            "midlayer.hidden_norm.weight": ("BF16", (HIDDEN,)), "fc.weight": ("BF16", (HIDDEN, 3 * HIDDEN)),
            "norm.weight": ("BF16", (HIDDEN,)), "lm_head.weight": ("BF16", (head_rows, HIDDEN)),
            "d2t": ("I64", (DRAFT_VOCAB,)), "t2d": ("BOOL", (VOCAB,))}


def nbytes(layout: Layout, *, where: Any = lambda name: True) -> int:
    return sum(TensorInfo(*spec).nbytes for name, spec in layout.items() if where(name))


def draft_of(folder: Path, target: WeightBytes | None = None) -> WeightBytes:
    found = find_draft_weights(str(folder), target or estimate(LLAMA))
    assert isinstance(found, WeightBytes), found
    return found


def test_an_eagle3_draft_reads_its_layer_fc_and_its_own_small_lm_head(tmp_path: Path) -> None:
    layout = eagle3_layout()
    write_checkpoint(tmp_path, EAGLE3, layout=layout)
    target = estimate(LLAMA)
    weights = draft_of(tmp_path, target)
    own = nbytes(layout, where=lambda name: name.startswith(("midlayer.", "fc.", "norm.")))
    assert weights.draft_layer == own
    assert weights.draft_lm_head == DRAFT_VOCAB * HIDDEN * 2
    assert weights.other == target.other + nbytes(layout, where=lambda name: name in ("d2t", "t2d"))
    assert (weights.layers, weights.lm_head, weights.exact) == (target.layers, target.lm_head, False)
    assert weights.notes[:len(target.notes)] == target.notes
    assert any(note.startswith("draft model (EAGLE3): ") and "its own LM head" in note for note in weights.notes)
    step = decode_step_bytes(weights, DecodeShape(draft_steps=3, verify_tokens=4))
    assert step.draft == 3 * (own + DRAFT_VOCAB * HIDDEN * 2)


def test_an_eagle3_draft_estimated_from_its_config_agrees(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, EAGLE3, layout=eagle3_layout())
    exact = draft_of(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    estimated = draft_of(tmp_path)
    assert estimated.draft_layer == pytest.approx(exact.draft_layer, rel=1e-3)
    assert estimated.draft_lm_head == exact.draft_lm_head
    assert any("draft estimated from config.json" in note for note in estimated.notes)


def test_an_eagle3_draft_without_draft_vocab_size_reads_the_targets_lm_head(tmp_path: Path) -> None:
    """llama_eagle3.py: draft_vocab_size null -> load_lm_head_from_target; SGLang gives it the target's head."""
    write_checkpoint(tmp_path, {**EAGLE3, "draft_vocab_size": None}, layout=eagle3_layout(head_rows=VOCAB))
    weights = draft_of(tmp_path)
    assert weights.draft_lm_head is None
    step = decode_step_bytes(weights, DecodeShape(draft_steps=2))
    assert step.draft == 2 * (weights.draft_layer + weights.lm_head)


def test_a_tied_eagle3_draft_reads_its_embedding_table_as_its_head(tmp_path: Path) -> None:
    layout = {**eagle3_layout(), "embed_tokens.weight": ("BF16", (VOCAB, HIDDEN))}
    del layout["lm_head.weight"]
    write_checkpoint(tmp_path, {**EAGLE3, "tie_word_embeddings": True}, layout=layout)
    weights = draft_of(tmp_path)
    assert weights.draft_lm_head == VOCAB * HIDDEN * 2
    assert weights.other == estimate(LLAMA).other + nbytes(layout, where=lambda name: name in ("d2t", "t2d"))


def test_an_eagle_draft_reads_fc_and_its_layers_with_the_targets_lm_head(tmp_path: Path) -> None:
    """llama_eagle.py: fc (2h -> h, with a bias), layer 0 without its input norm; the loader skips lm_head."""
    layout = {**layer("layers.0.", HIDDEN), "fc.weight": ("BF16", (HIDDEN, 2 * HIDDEN)), "fc.bias": ("BF16", (HIDDEN,)),
              "embed_tokens.weight": ("BF16", (VOCAB, HIDDEN))}
    write_checkpoint(tmp_path, EAGLE, layout=layout)
    weights = draft_of(tmp_path)
    assert weights.draft_layer == nbytes(layout, where=lambda name: not name.startswith("embed_tokens"))
    assert weights.draft_lm_head is None
    assert weights.other == estimate(LLAMA).other + VOCAB * HIDDEN * 2


def test_an_old_style_nextn_checkpoint_is_a_draft_layer_not_target_layers(tmp_path: Path) -> None:
    """num_hidden_layers 1 with num_nextn_predict_layers: the NEXTN layer sits at model.layers.0
    (deepseek_weight_loader.py); of its experts one token reads top-k, its head and embedding copies are skipped."""
    raw = {**shipped(QWEN_MOE), "num_hidden_layers": 1, "num_nextn_predict_layers": 1}
    layout = checkpoint_layout({**raw, "num_hidden_layers": 0})
    write_checkpoint(tmp_path, raw, layout=layout)
    target = estimate(QWEN_MOE)
    weights = draft_of(tmp_path, target)
    nextn = {name: TensorInfo(*spec).nbytes for name, spec in layout.items() if name.startswith("model.layers.0.")}
    copies = nextn["model.layers.0.embed_tokens.weight"] + nextn["model.layers.0.shared_head.head.weight"]
    experts = sum(size for name, size in nextn.items() if ".experts." in name)
    assert weights.draft_layer == sum(nextn.values()) - copies - experts + experts * 8 / 128
    assert weights.draft_lm_head is None
    assert (weights.layers, weights.moe_layers, weights.other) == (target.layers, 48, target.other)
    assert draft_kind(raw) is DraftKind.MTP


def test_a_standalone_draft_reads_its_whole_model_and_its_own_lm_head(tmp_path: Path) -> None:
    raw = {**shipped(LLAMA), "hidden_size": 2048, "num_hidden_layers": 2, "intermediate_size": 8192,
           "tie_word_embeddings": True}
    write_checkpoint(tmp_path, raw)
    weights = draft_of(tmp_path)
    layout = checkpoint_layout(raw)
    assert weights.draft_layer == nbytes(layout, where=lambda name: ".layers." in name or name == "model.norm.weight")
    assert weights.draft_lm_head == VOCAB * 2048 * 2
    assert weights.other == estimate(LLAMA).other
    assert any("standalone draft: its own KV cache is not counted" in note for note in weights.notes)


def test_a_standalone_moe_draft_reads_its_top_k_experts(tmp_path: Path) -> None:
    raw = {**shipped(QWEN_MOE), "num_hidden_layers": 2}
    write_checkpoint(tmp_path, raw)
    weights = draft_of(tmp_path)
    expert = 3 * 2048 * 768 * 2
    layout = checkpoint_layout(raw)
    dense = nbytes(layout, where=lambda name: (".layers." in name and ".experts." not in name)
                   or name == "model.norm.weight")
    assert weights.draft_layer == dense + 2 * 8 * expert
    assert weights.other == estimate(LLAMA).other + 2 * 120 * expert + 151936 * 2048 * 2


def test_a_target_with_its_own_mtp_layer_and_a_separate_draft(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, EAGLE3, layout=eagle3_layout())
    target = WeightBytes.from_dict({**estimate(LLAMA).to_dict(), "draft_layer": 5e8})
    weights = draft_of(tmp_path, target)
    assert weights.other == pytest.approx(target.other + 5e8 + nbytes(eagle3_layout(),
                                                                      where=lambda name: name in ("d2t", "t2d")))
    assert any("the target's own MTP layer (0.500 GB) is not run" in note for note in weights.notes)


def test_a_draft_in_the_hugging_face_cache_is_found(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--org--draft" / "snapshots" / "abc"
    write_checkpoint(snapshot, EAGLE3, layout=eagle3_layout())
    (tmp_path / "models--org--draft" / "refs").mkdir()
    (tmp_path / "models--org--draft" / "refs" / "main").write_text("abc", encoding="utf-8")
    found = find_draft_weights("org/draft", estimate(LLAMA), hf_cache=tmp_path)
    assert isinstance(found, WeightBytes) and found.draft_lm_head == DRAFT_VOCAB * HIDDEN * 2


def test_an_unknown_draft_gives_a_reason(tmp_path: Path) -> None:
    reason = find_draft_weights("org/missing", estimate(LLAMA), hf_cache=tmp_path)
    assert reason == (f"no config.json for the draft model 'org/missing': it is not a local folder, not in the "
                      f"Hugging Face cache ({tmp_path}) and not a model this project ships a config for; point "
                      "--speculative-draft-model-path at a folder holding the draft's config.json (and its "
                      "*.safetensors for exact bytes), or download it")


def test_a_draft_with_a_wrong_typed_field_gives_a_reason_naming_it(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, EAGLE3, layout=eagle3_layout())
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, '
                                          '"intermediate_size": 14336, "num_attention_heads": 32, "vocab_size": 128256,'
                                          ' "num_hidden_layers": 1, "draft_vocab_size": "small"}', encoding="utf-8")
    reason = find_draft_weights(str(tmp_path), estimate(LLAMA))
    assert reason == (f"the draft model '{tmp_path}' can't be counted: {tmp_path / 'config.json'}: field "
                      "'draft_vocab_size' must be a whole number, 0 or more, not \"small\"; correct it in config.json "
                      "(the model's own config.json from its Hugging Face repository has it right), or remove the "
                      "field to use its default")


@pytest.mark.parametrize(("raw", "kind"), [
    (EAGLE3, DraftKind.EAGLE3), (EAGLE, DraftKind.EAGLE),
    ({"architectures": ["Qwen2ForCausalLMEagle"]}, DraftKind.EAGLE),
    ({"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}, DraftKind.MTP),
    ({"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {"mtp_num_hidden_layers": 1}},
     DraftKind.MTP),
    ({"architectures": ["LlamaForCausalLM"]}, DraftKind.STANDALONE),
])
def test_the_draft_kind_comes_from_its_config(raw: dict[str, Any], kind: DraftKind) -> None:
    assert draft_kind(raw) is kind
