"""Exact bytes from a checkpoint's safetensors headers (roofline/safetensors_format.py, tensor_names.py,
checkpoint_weights.py) and where a `--model-path`'s bytes come from (model_source.py).

Checkpoints are made with roofline/synthetic_checkpoint.py from the shipped configs: real tensor names and shapes,
zero-filled sparse data, so a 61 GB checkpoint costs no disk."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from test_roofline_weights import LLAMA, QWEN_MOE, QWEN_MTP, QWEN_VL, shipped

from pytest_sglang_perf.roofline.model_source import find_model_weights, hub_cache_dir, hub_snapshot
from pytest_sglang_perf.roofline.safetensors_format import CheckpointError, TensorInfo, read_header, write_safetensors
from pytest_sglang_perf.roofline.synthetic_checkpoint import checkpoint_layout, write_checkpoint
from pytest_sglang_perf.roofline.tensor_names import Part, Placement, place
from pytest_sglang_perf.roofline.weights import WeightBytes, weights_from_checkpoint, weights_from_config

GB = 1e9
FIELDS = ("layers", "attention", "expert", "lm_head", "embedding", "draft_layer", "total", "kv_per_token")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = {}
    for model_id in (LLAMA, QWEN_MOE, QWEN_VL, QWEN_MTP):
        folder = tmp_path_factory.mktemp(model_id.replace("/", "--"))
        write_checkpoint(folder, shipped(model_id))
        made[model_id] = folder
    return made


def test_a_file_written_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    tensors = {"a": ("BF16", (3, 5)), "b": ("F8_E4M3", (7,)), "c": ("F4", (2, 4)), "d": ("I64", ())}
    write_safetensors(path, tensors, lambda name, size: bytes(range(size)))
    assert read_header(path) == {name: TensorInfo(dtype, shape) for name, (dtype, shape) in tensors.items()}
    assert {name: info.nbytes for name, info in read_header(path).items()} == {"a": 30, "b": 7, "c": 4, "d": 8}
    length = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert length % 8 == 0 and path.stat().st_size == 8 + length + 49
    header = json.loads(path.read_bytes()[8:8 + length])
    assert header.pop("__metadata__") == {"format": "pt"}
    # widest first, as safetensors writes them: every tensor starts at a multiple of its element size
    assert {name: entry["data_offsets"] for name, entry in header.items()} == {
        "d": [0, 8], "a": [8, 38], "b": [38, 45], "c": [45, 49]}
    assert path.read_bytes()[8 + length + 8:8 + length + 38] == bytes(range(30))


def test_data_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    with pytest.raises(CheckpointError, match=r"the data given for tensor 'a' is 3 bytes; its dtype and shape need 4$"):
        write_safetensors(path, {"a": ("F16", (2,))}, lambda name, size: b"abc")


def test_a_zero_filled_file_takes_no_disk(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    write_safetensors(path, {"w": ("BF16", (50_000, 50_000))})
    assert path.stat().st_size > 5 * GB
    assert path.stat().st_blocks * 512 < 1_000_000
    assert read_header(path)["w"].nbytes == 5 * GB


@pytest.mark.parametrize(("model_id", "total"), [
    (LLAMA, 16_060_522_496),     # Llama-3.1-8B-Instruct's model.safetensors.index.json total_size
    (QWEN_MOE, 61_064_245_248),  # Qwen3-30B-A3B's
])
def test_a_checkpoint_sums_to_the_published_size(checkpoints: dict[str, Path], model_id: str, total: int) -> None:
    weights = weights_from_checkpoint(checkpoints[model_id])
    assert weights.total == total
    assert weights.exact and weights.dtype == "bf16"
    assert weights.source == f"{checkpoints[model_id] / 'model.safetensors.index.json'} (" + (
        "4 shards)" if model_id == LLAMA else "13 shards)")


@pytest.mark.parametrize("model_id", [LLAMA, QWEN_MOE, QWEN_VL, QWEN_MTP])
def test_a_checkpoint_agrees_with_its_config_estimate(checkpoints: dict[str, Path], model_id: str) -> None:
    exact = weights_from_checkpoint(checkpoints[model_id])
    estimated = weights_from_config(shipped(model_id), source=model_id)
    for field in FIELDS:
        assert getattr(exact, field) == pytest.approx(getattr(estimated, field), rel=0.02), field
    for field in ("num_experts", "experts_per_token", "moe_layers", "kv_heads"):
        assert getattr(exact, field) == getattr(estimated, field), field


def test_a_multimodal_checkpoints_tower_is_other(checkpoints: dict[str, Path]) -> None:
    weights = weights_from_checkpoint(checkpoints[QWEN_VL])
    layout = checkpoint_layout(shipped(QWEN_VL))
    assert weights.other == sum(TensorInfo(*spec).nbytes for name, spec in layout.items()
                                if name.startswith("visual."))
    assert any(note.startswith("vision / audio tower: 1.35 GB") for note in weights.notes)


def test_the_mtp_layer_is_the_draft(checkpoints: dict[str, Path]) -> None:
    weights = weights_from_checkpoint(checkpoints[QWEN_MTP])
    layout = checkpoint_layout(shipped(QWEN_MTP))
    assert weights.draft_layer == sum(TensorInfo(*spec).nbytes for name, spec in layout.items()
                                      if name.startswith("mtp."))
    assert weights.other == sum(TensorInfo(*spec).nbytes for name, spec in layout.items()
                                if name.startswith("model.visual."))


def test_fused_expert_tensors_count_like_per_expert_ones(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    raw = shipped(QWEN_MOE)
    write_checkpoint(tmp_path, raw, layout=checkpoint_layout(raw, fused_experts=True))
    fused, per_expert = weights_from_checkpoint(tmp_path), weights_from_checkpoint(checkpoints[QWEN_MOE])
    assert fused == dataclasses.replace(per_expert, source=fused.source)
    unnamed = {key: value for key, value in raw.items() if key != "num_experts"}
    assert weights_from_checkpoint(tmp_path, unnamed).num_experts == 128  # the fused tensors' leading size


def test_an_fp8_checkpoint(tmp_path: Path) -> None:
    raw = {**shipped(LLAMA), "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    write_checkpoint(tmp_path, raw, layout=checkpoint_layout(raw, fp8=True))
    exact = weights_from_checkpoint(tmp_path)
    assert exact.dtype == "fp8_e4m3"
    assert exact.layers / GB == pytest.approx(6.98, abs=0.01)
    assert exact.lm_head == 128256 * 4096 * 2
    estimated = weights_from_config(raw, source="fp8")
    assert exact.layers == pytest.approx(estimated.layers, rel=0.001)


def test_an_fp8_checkpoint_without_quantization_config_is_named_by_its_dtype(tmp_path: Path) -> None:
    raw = shipped(LLAMA)
    write_checkpoint(tmp_path, raw, layout=checkpoint_layout(raw, fp8=True))
    assert weights_from_checkpoint(tmp_path).dtype == "fp8_e4m3"


def test_a_nextn_layer_is_the_draft_and_its_copies_are_not_read(tmp_path: Path) -> None:
    """DeepSeek-style: layer `num_hidden_layers` holds the NEXTN layer with its own embedding and LM head copies;
    of its experts one draft token reads top-k."""
    raw = {**shipped(QWEN_MOE), "num_hidden_layers": 4, "num_nextn_predict_layers": 1}
    layout = checkpoint_layout(raw)
    write_checkpoint(tmp_path, raw)
    weights = weights_from_checkpoint(tmp_path)
    nextn = {name: TensorInfo(*spec).nbytes for name, spec in layout.items() if name.startswith("model.layers.4.")}
    copies = nextn["model.layers.4.embed_tokens.weight"] + nextn["model.layers.4.shared_head.head.weight"]
    experts = sum(size for name, size in nextn.items() if ".experts." in name)
    assert weights.draft_layer == sum(nextn.values()) - copies - experts + experts * 8 / 128
    assert weights.other == copies + experts * 120 / 128
    assert weights.moe_layers == 4
    assert any("copy of the LM head" in note for note in weights.notes)
    assert weights.draft_layer == pytest.approx(weights_from_config(raw, source="x").draft_layer, rel=0.001)


def test_a_tensor_of_unknown_role_is_counted_and_named(tmp_path: Path) -> None:
    raw = shipped(LLAMA)
    write_checkpoint(tmp_path, raw, layout={**checkpoint_layout(raw), "speech_adapter.proj.weight": ("BF16", (10,))})
    weights = weights_from_checkpoint(tmp_path)
    assert weights.other == 20
    assert any(note.startswith("1 tensor(s) of unknown role (speech_adapter.proj.weight)") for note in weights.notes)


def test_no_lm_head_tensor_means_tied_embeddings(tmp_path: Path) -> None:
    raw = {**shipped("Qwen/Qwen3-8B"), "tie_word_embeddings": True}
    write_checkpoint(tmp_path, raw)
    weights = weights_from_checkpoint(tmp_path)
    assert (weights.lm_head, weights.embedding) == (151936 * 4096 * 2, 0)


@pytest.mark.parametrize(("name", "placement"), [
    ("model.layers.3.mlp.shared_experts.gate_proj.weight", Placement(Part.LAYERS, 3)),
    ("model.layers.3.mlp.experts.7.down_proj.weight_scale_inv", Placement(Part.EXPERT, 3, 7)),
    ("model.layers.0.block_sparse_moe.experts.1.w1.weight", Placement(Part.EXPERT, 0, 1)),
    ("model.layers.2.mlp.experts.gate_up_proj_blocks", Placement(Part.EXPERT, 2)),
    ("model.layers.2.mlp.gate.e_score_correction_bias", Placement(Part.LAYERS, 2)),
    ("model.layers.61.eh_proj.weight", Placement(Part.DRAFT, 61)),
    ("model.layers.61.mlp.experts.3.up_proj.weight", Placement(Part.DRAFT_EXPERT, 61, 3)),
    ("model.layers.62.eh_proj.weight", Placement(Part.UNREAD, why="a second NEXTN layer (one draft forward runs "
                                                                  "the first)")),
    ("mtp.fc.weight", Placement(Part.DRAFT)),
    ("mtp.layers.0.mlp.experts.gate_up_proj", Placement(Part.DRAFT_EXPERT, 0)),
    ("model.language_model.layers.5.linear_attn.in_proj_qkv.weight", Placement(Part.ATTENTION, 5)),
    ("model.layers.5.self_attn.kv_b_proj.weight", Placement(Part.ATTENTION, 5)),
    ("model.layers.5.input_layernorm.weight", Placement(Part.LAYERS, 5)),
    ("language_model.model.embed_tokens.weight", Placement(Part.EMBEDDING)),
    ("language_model.lm_head.weight", Placement(Part.LM_HEAD)),
    ("model.visual.blocks.0.attn.qkv.weight", Placement(Part.TOWER)),
    ("vision_tower.encoder.layers.0.mlp.fc1.weight", Placement(Part.TOWER)),
    ("transformer.h.0.attn.c_attn.weight", Placement(Part.ATTENTION, 0)),
    ("transformer.wte.weight", Placement(Part.EMBEDDING)),
    ("model.norm.weight", Placement(Part.LAYERS)),
    ("speech_adapter.proj.weight", Placement(Part.UNKNOWN)),
])
def test_tensor_names_are_placed(name: str, placement: Placement) -> None:
    assert place(name, num_layers=61) == placement


def write_raw(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize(("content", "message"), [
    (b"\x01\x02", "it is 2 bytes long, shorter than the 8-byte header length"),
    (struct.pack("<Q", 10**12) + b"{}", "its first 8 bytes give a header of 1,000,000,000,000 bytes, but the file is "
                                        "10 bytes long"),
    (struct.pack("<Q", 3) + b"{x}", "its header is not JSON"),
    (struct.pack("<Q", 2) + b"[]", "its header is not a JSON object"),
])
def test_a_malformed_file_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        read_header(path)
    assert str(raised.value).startswith(f"{path} is not a valid safetensors file: {message}")
    assert str(raised.value).endswith("download the file again, or remove it from the model folder if it is not part "
                                      "of the checkpoint")


@pytest.mark.parametrize(("entry", "message"), [
    ({"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}, "tensor 'w' has dtype 'Q4_K', which safetensors does "
                                                              "not define"),
    ({"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 6]}, "tensor 'w' (BF16, shape [2, 3]) needs 12 bytes, "
                                                                 "but its data_offsets [0, 6] span 6"),
    ({"dtype": "BF16", "shape": [2]}, "tensor 'w' lacks a shape list or two data_offsets"),
    ({"shape": [2]}, "tensor 'w' has no dtype"),
])
def test_a_bad_tensor_entry_is_named(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    path = write_raw(tmp_path / "model.safetensors", json.dumps({"w": entry}).encode(), bytes(12))
    with pytest.raises(CheckpointError, match="is not a valid safetensors file") as raised:
        read_header(path)
    assert message in str(raised.value)


def test_a_truncated_file_says_to_download_it_again(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"w": ("BF16", (1000,))})
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size - 10)
    with pytest.raises(CheckpointError) as raised:
        read_header(path)
    assert str(raised.value) == (f"{path} is truncated: its header places tensor data up to byte 2,000 of the data "
                                 "section, but the file holds only 1,990 bytes of data; the download was probably "
                                 "interrupted: download the file again")


def test_a_missing_shard_is_named(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, shipped(LLAMA))
    (tmp_path / "model-00002-of-00004.safetensors").unlink()
    with pytest.raises(CheckpointError) as raised:
        weights_from_checkpoint(tmp_path)
    assert str(raised.value) == (f"{tmp_path / 'model.safetensors.index.json'} names 1 shard(s) the folder lacks "
                                 "(model-00002-of-00004.safetensors); the checkpoint is incomplete: download the "
                                 "missing files")


def test_a_shard_that_lacks_what_the_index_says_is_named(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, shipped(LLAMA))
    write_safetensors(tmp_path / "model-00004-of-00004.safetensors", {"lm_head.weight": ("BF16", (128256, 4096))})
    with pytest.raises(CheckpointError, match=r"places \d+ tensor\(s\) in model-00004-of-00004.safetensors that its "
                                              r"header lacks \(model\.layers\.31\."):
        weights_from_checkpoint(tmp_path)


def test_a_folder_without_config_json_is_an_error(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "model.safetensors", {"lm_head.weight": ("BF16", (4, 4))})
    with pytest.raises(CheckpointError, match=r"has no config\.json: the layer count, the experts per token"):
        weights_from_checkpoint(tmp_path)


def test_a_local_folder_gives_exact_bytes(checkpoints: dict[str, Path]) -> None:
    found = find_model_weights(str(checkpoints[LLAMA]))
    assert isinstance(found, WeightBytes) and found.exact and found.total == 16_060_522_496


def test_a_folder_with_only_config_json_gives_an_estimate(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(shipped(LLAMA)))
    found = find_model_weights(str(tmp_path))
    assert isinstance(found, WeightBytes) and not found.exact
    assert found.notes[0] == f"no *.safetensors in {tmp_path}: estimated from config.json"


def test_a_broken_checkpoint_falls_back_to_the_estimate_and_says_why(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, shipped(LLAMA))
    (tmp_path / "model-00003-of-00004.safetensors").unlink()
    found = find_model_weights(str(tmp_path))
    assert isinstance(found, WeightBytes) and not found.exact
    assert found.notes[0].startswith("the checkpoint can't be read (")
    assert "model-00003-of-00004.safetensors" in found.notes[0]


def test_a_cached_hugging_face_snapshot_is_read(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    repo = tmp_path / "models--meta-llama--Llama-3.1-8B-Instruct"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "old").mkdir(parents=True)
    (repo / "snapshots" / "abc123").symlink_to(checkpoints[LLAMA])
    assert hub_snapshot(LLAMA, tmp_path) == repo / "snapshots" / "abc123"
    found = find_model_weights(LLAMA, hf_cache=tmp_path)
    assert isinstance(found, WeightBytes) and found.exact
    assert found.source.startswith(str(repo / "snapshots" / "abc123"))


def test_without_refs_main_the_newest_snapshot_is_read(tmp_path: Path) -> None:
    snapshots = tmp_path / "models--org--name" / "snapshots"
    (snapshots / "first").mkdir(parents=True)
    (snapshots / "second").mkdir()
    os.utime(snapshots / "first", (1, 1))
    assert hub_snapshot("org/name", tmp_path) == snapshots / "second"
    assert hub_snapshot("org/other", tmp_path) is None


def test_an_uncached_known_model_uses_the_shipped_config(tmp_path: Path) -> None:
    found = find_model_weights(QWEN_MTP, hf_cache=tmp_path)
    assert isinstance(found, WeightBytes) and not found.exact
    assert found.source.endswith("Qwen--Qwen3.6-27B.json")
    assert found.notes[0] == (f"'{QWEN_MTP}' is not in the Hugging Face cache ({tmp_path}): from the config.json "
                              "this project ships for it: estimated from config.json")


def test_an_unknown_model_gives_a_reason(tmp_path: Path) -> None:
    found = find_model_weights("someone/unknown-model", hf_cache=tmp_path)
    assert isinstance(found, str)
    assert found.startswith(f"no config.json for 'someone/unknown-model': it is not a local folder, not in the "
                            f"Hugging Face cache ({tmp_path}) and not a model this project ships a config for (")
    assert found.endswith("or download the model")


def test_a_folder_without_config_gives_a_reason(tmp_path: Path) -> None:
    assert find_model_weights(str(tmp_path)) == (f"no config.json in {tmp_path}: the model's sizes come from it; "
                                                 "copy the model's config.json into the folder")


@pytest.mark.parametrize(("environ", "expected"), [
    ({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}, "/a"),
    ({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}, "/b/hub"),
    ({"XDG_CACHE_HOME": "/c"}, "/c/huggingface/hub"),
])
def test_the_hugging_face_cache_is_found_as_huggingface_hub_finds_it(environ: dict[str, str], expected: str) -> None:
    assert hub_cache_dir(environ) == Path(expected)


def test_the_default_hugging_face_cache() -> None:
    assert hub_cache_dir({}) == Path.home() / ".cache" / "huggingface" / "hub"



def test_a_config_with_a_wrong_typed_field_gives_a_reason_naming_it(tmp_path: Path) -> None:
    raw = {**shipped(LLAMA), "num_hidden_layers": 1}
    write_checkpoint(tmp_path, raw)
    (tmp_path / "config.json").write_text(json.dumps({**raw, "head_dim": [128]}), encoding="utf-8")
    reason = find_model_weights(str(tmp_path))
    assert isinstance(reason, str)
    assert reason.startswith(f"{tmp_path / 'config.json'}: field 'head_dim' must be a whole number, 0 or more, not "
                             "[128]; correct it in config.json")
    (tmp_path / "model.safetensors").unlink()
    assert find_model_weights(str(tmp_path)) == reason


def test_a_checkpoint_with_sliding_window_layers(tmp_path: Path) -> None:
    raw = {**shipped(LLAMA), "num_hidden_layers": 4, "sliding_window": 4096,
           "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    write_checkpoint(tmp_path, raw)
    weights = weights_from_checkpoint(tmp_path)
    assert (weights.kv_per_token, weights.kv_per_token_sliding, weights.sliding_window) == (
        4096, 3 * 4096, 4096)
    assert weights.attention == 4 * 4096 * (4096 + 1024 + 1024 + 4096) * 2
