"""A checkpoint made up from a config.json: the tensors a real Hugging Face checkpoint of that config holds, by the
same names, shapes and dtypes, with zero (sparse: free) or given weights. The unit tests read it back; the GPU
validation (benchmarks/) fills it with random weights and measures a decode over it.

Names as the real checkpoints hold them (and SGLang 0.5.23's loaders read them, sglang/srt/models/): Llama / Qwen
layers `model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}`
(llama.py), Qwen2 q/k/v biases (qwen2.py), Qwen3 `q_norm` / `k_norm` (qwen3.py), Qwen3-MoE `mlp.gate` and
`mlp.experts.E.*` (qwen3_moe.py), or fused `mlp.experts.gate_up_proj` / `down_proj` (3-D); Qwen2.5-VL's tower under
`visual.` (qwen2_5_vl.py); Qwen3.5's language model under `model.language_model.`, tower under `model.visual.`,
MTP under `mtp.` (qwen3_5.py, qwen3_5_mtp.py); DeepSeek-style NEXTN as layer `num_hidden_layers` with `eh_proj`,
`enorm`, `hnorm`, `shared_head.{norm,head}` and `embed_tokens` (deepseek_nextn.py); FP8 as `F8_E4M3` weights with a
float32 `weight_scale_inv` per 128 x 128 block (DeepSeek-V3 / Qwen3-FP8). Linear-attention layers and MLA are not
generated (every layer gets full attention).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_sglang_perf.roofline.checkpoint_weights import INDEX_FILE
from pytest_sglang_perf.roofline.safetensors_format import TensorInfo, write_safetensors
from pytest_sglang_perf.sglang_facts.model_fields import language_config
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig, model_config_from_dict

Layout = dict[str, tuple[str, tuple[int, ...]]]
_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
_NESTED = frozenset({"qwen3_5", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_moe"})
"""Multimodal model types whose checkpoints nest the language model under `model.language_model.`."""
_FP8_BLOCK = 128


class _Builder:
    def __init__(self, raw: Mapping[str, Any], *, fp8: bool, fused_experts: bool) -> None:
        self.raw, self.text, self.fp8, self.fused = raw, language_config(raw), fp8, fused_experts
        self.model: ModelConfig = model_config_from_dict("synthetic", raw)
        self.dtype = _DTYPES.get(self.model.dtype, "BF16")
        self.layout: Layout = {}

    def add(self, name: str, *shape: int, dtype: str | None = None) -> None:
        self.layout[name] = (dtype or self.dtype, shape)

    def linear(self, name: str, out: int, inp: int) -> None:
        """A linear layer's weight `name` (out x in), FP8 with its block scales when asked."""
        if not self.fp8:
            self.add(name, out, inp)
            return
        self.add(name, out, inp, dtype="F8_E4M3")
        self.add(name + "_scale_inv", -(-out // _FP8_BLOCK), -(-inp // _FP8_BLOCK), dtype="F32")

    def decoder_layer(self, prefix: str) -> None:
        model, hidden = self.model, self.model.hidden_size
        q_out, kv_out = model.num_attention_heads * model.head_dim, model.num_kv_heads * model.head_dim
        self.add(prefix + "input_layernorm.weight", hidden)
        self.add(prefix + "post_attention_layernorm.weight", hidden)
        attn = prefix + "self_attn."
        self.linear(attn + "q_proj.weight", q_out * (2 if model.attn_output_gate else 1), hidden)
        self.linear(attn + "k_proj.weight", kv_out, hidden)
        self.linear(attn + "v_proj.weight", kv_out, hidden)
        self.linear(attn + "o_proj.weight", hidden, q_out)
        model_type = str(self.text.get("model_type") or self.raw.get("model_type") or "")
        if model_type.startswith("qwen2"):
            for name, size in (("q_proj", q_out), ("k_proj", kv_out), ("v_proj", kv_out)):
                self.add(f"{attn}{name}.bias", size)
        if model_type.startswith("qwen3"):
            self.add(attn + "q_norm.weight", model.head_dim)
            self.add(attn + "k_norm.weight", model.head_dim)
        if model.num_experts > 1:
            self.experts(prefix + "mlp.")
        else:
            self.mlp(prefix + "mlp.", model.intermediate_size)

    def mlp(self, prefix: str, width: int) -> None:
        hidden = self.model.hidden_size
        self.linear(prefix + "gate_proj.weight", width, hidden)
        self.linear(prefix + "up_proj.weight", width, hidden)
        self.linear(prefix + "down_proj.weight", hidden, width)

    def experts(self, prefix: str) -> None:
        experts, hidden, width = self.model.num_experts, self.model.hidden_size, self.model.moe_intermediate_size
        self.add(prefix + "gate.weight", experts, hidden)
        if self.fused:
            self.add(prefix + "experts.gate_up_proj", experts, 2 * width, hidden)
            self.add(prefix + "experts.down_proj", experts, hidden, width)
            return
        for expert in range(experts):
            self.mlp(f"{prefix}experts.{expert}.", width)


def checkpoint_layout(raw: Mapping[str, Any], *, fp8: bool = False, fused_experts: bool = False) -> Layout:
    """Every tensor (name -> (safetensors dtype, shape)) of a checkpoint of the model config.json `raw` gives."""
    build = _Builder(raw, fp8=fp8, fused_experts=fused_experts)
    model, hidden = build.model, build.model.hidden_size
    nested = str(raw.get("model_type")) in _NESTED
    body = "model.language_model." if nested else "model."
    build.add(body + "embed_tokens.weight", model.vocab_size, hidden)
    for index in range(model.num_layers):
        build.decoder_layer(f"{body}layers.{index}.")
    build.add(body + "norm.weight", hidden)
    if not model.tie_word_embeddings:
        build.add("lm_head.weight", model.vocab_size, hidden)
    _mtp(build)
    _vision(build, "model.visual." if nested else "visual.")
    return build.layout


def _mtp(build: _Builder) -> None:
    hidden, model = build.model.hidden_size, build.model
    if _int(build.text, "num_nextn_predict_layers"):
        prefix = f"model.layers.{model.num_layers}."
        build.decoder_layer(prefix)
        build.linear(prefix + "eh_proj.weight", hidden, 2 * hidden)
        for name in ("enorm.weight", "hnorm.weight", "shared_head.norm.weight"):
            build.add(prefix + name, hidden)
        build.add(prefix + "shared_head.head.weight", model.vocab_size, hidden)
        build.add(prefix + "embed_tokens.weight", model.vocab_size, hidden)
    elif _int(build.text, "mtp_num_hidden_layers"):
        build.linear("mtp.fc.weight", hidden, 2 * hidden)
        for name in ("mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"):
            build.add(name, hidden)
        for index in range(_int(build.text, "mtp_num_hidden_layers")):
            build.decoder_layer(f"mtp.layers.{index}.")


def _vision(build: _Builder, prefix: str) -> None:
    """A ViT: Qwen2.5-VL's blocks have a gated MLP and an RMS-normed merger; Qwen3-VL / Qwen3.5's a plain MLP,
    LayerNorms and a learned position table."""
    vision = build.raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return
    width, depth = _int(vision, "hidden_size"), _int(vision, "depth") or _int(vision, "num_hidden_layers")
    inner, out = _int(vision, "intermediate_size") or 4 * width, _int(vision, "out_hidden_size") or width
    gated = str(build.raw.get("model_type")).startswith("qwen2")
    patch = _int(vision, "patch_size") or (14 if gated else 16)
    build.add(prefix + "patch_embed.proj.weight", width, 3, 2, patch, patch)
    if not gated:
        build.add(prefix + "pos_embed.weight", _int(vision, "num_position_embeddings") or 2304, width)
    for index in range(depth):
        block = f"{prefix}blocks.{index}."
        for name, rows, cols in (("attn.qkv", 3 * width, width), ("attn.proj", width, width)):
            _biased(build, block + name, rows, cols)
        mlp = (("gate_proj", inner, width), ("up_proj", inner, width), ("down_proj", width, inner)) if gated else (
            ("linear_fc1", inner, width), ("linear_fc2", width, inner))
        for name, rows, cols in mlp:
            _biased(build, f"{block}mlp.{name}", rows, cols)
        for norm in ("norm1", "norm2"):
            build.add(f"{block}{norm}.weight", width)
    merged = 4 * width
    build.add(prefix + ("merger.ln_q.weight" if gated else "merger.norm.weight"), width)
    _biased(build, prefix + ("merger.mlp.0" if gated else "merger.linear_fc1"), merged, merged)
    _biased(build, prefix + ("merger.mlp.2" if gated else "merger.linear_fc2"), out, merged)


def _biased(build: _Builder, name: str, rows: int, cols: int) -> None:
    build.add(name + ".weight", rows, cols)
    build.add(name + ".bias", rows)


def write_checkpoint(folder: Path, raw: Mapping[str, Any], *, layout: Layout | None = None,
                     shard_bytes: int = 5 * 10**9, data: Callable[[str, int], bytes] | None = None) -> list[Path]:
    """Write config.json and the checkpoint (`layout`, default checkpoint_layout(raw)) into `folder`, sharded as
    transformers shards (`model-0000i-of-0000n.safetensors` and model.safetensors.index.json; one file
    `model.safetensors` when it fits one shard); `data` as write_safetensors takes it. The files written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")
    shards = _shards(layout if layout is not None else checkpoint_layout(raw), shard_bytes)
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)])
    for name, shard in zip(names, shards, strict=True):
        write_safetensors(folder / name, shard, data)
    if len(shards) > 1:
        weight_map = {tensor: name for name, shard in zip(names, shards, strict=True) for tensor in shard}
        total = sum(TensorInfo(*spec).nbytes for shard in shards for spec in shard.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / INDEX_FILE).write_text(json.dumps(index, indent=2), encoding="utf-8")
    return [folder / name for name in names]


def _shards(layout: Layout, shard_bytes: int) -> list[Layout]:
    shards: list[Layout] = [{}]
    size = 0
    for name, (dtype, shape) in layout.items():
        nbytes = TensorInfo(dtype, shape).nbytes
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = (dtype, shape)
        size += nbytes
    return shards


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
