"""A model's bytes summed exactly from its checkpoint: every tensor of its `.safetensors` files, from their headers
(no weight is read), placed by name (roofline/tensor_names.py).

The files: the shards `model.safetensors.index.json` maps tensors to (its `weight_map`, as transformers writes a
sharded checkpoint and SGLang's loader reads it), else every `*.safetensors` in the folder. config.json still gives
what no tensor says: the layer count (a layer index at or past it is a NEXTN layer), the experts each token is
routed to, the KV cache's shape and `quantization_config`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sglang_perf.roofline.config_fields import model_sizes
from pytest_sglang_perf.roofline.kv_cache import kv_notes, kv_shape
from pytest_sglang_perf.roofline.layer_plan import LayerPlan, layer_plan
from pytest_sglang_perf.roofline.safetensors_format import CheckpointError, TensorInfo, read_header
from pytest_sglang_perf.roofline.tensor_names import Part, place
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes
from pytest_sglang_perf.roofline.weight_format import quantization_config, safetensors_label, weight_format
from pytest_sglang_perf.sglang_facts.model_fields import MOE_TOPK_KEYS, first_given, language_config, read_model_config
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig

INDEX_FILE = "model.safetensors.index.json"
_GB = 1e9
_NAMED_UNKNOWN = 3


@dataclass
class _Sums:
    """Bytes per part, as the tensors are placed."""

    parts: Counter[Part] = field(default_factory=Counter)
    expert_layers: set[int] = field(default_factory=set)
    expert_ids: set[int] = field(default_factory=set)
    fused_experts: int = 0
    """The leading size of fused expert tensors: the expert count."""
    unread: Counter[str] = field(default_factory=Counter)
    unknown: list[str] = field(default_factory=list)
    weight_dtypes: Counter[str] = field(default_factory=Counter)

    def add(self, name: str, info: TensorInfo, num_layers: int) -> None:
        where = place(name, num_layers)
        self.parts[where.part] += info.nbytes
        if where.part is Part.UNREAD:
            self.unread[where.why] += info.nbytes
        elif where.part is Part.UNKNOWN:
            self.unknown.append(name)
        elif where.part in (Part.LAYERS, Part.ATTENTION, Part.EXPERT) and len(info.shape) >= 2:
            self.weight_dtypes[info.dtype] += info.nbytes
        if where.part is Part.EXPERT and where.layer is not None:
            self.expert_layers.add(where.layer)
            if where.expert is None:
                self.fused_experts = max(self.fused_experts, info.shape[0] if info.shape else 0)
            else:
                self.expert_ids.add(where.expert)


def has_checkpoint(folder: Path) -> bool:
    """Whether `folder` holds a safetensors checkpoint (an index or `*.safetensors` files)."""
    return (folder / INDEX_FILE).is_file() or any(folder.glob("*.safetensors"))


def checkpoint_files(folder: Path) -> tuple[list[Path], dict[str, str]]:
    """The `.safetensors` files of the checkpoint in `folder` and, when it has an index, its weight_map (tensor ->
    shard file); CheckpointError naming the folder or the index when a file is missing."""
    index = folder / INDEX_FILE
    if index.is_file():
        weight_map = _weight_map(index)
        shards = sorted({folder / shard for shard in weight_map.values()})
        missing = [shard.name for shard in shards if not shard.is_file()]
        if missing:
            raise CheckpointError(
                f"{index} names {len(missing)} shard(s) the folder lacks ({', '.join(missing[:3])}); the checkpoint "
                "is incomplete: download the missing files")
        return shards, weight_map
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder} holds no *.safetensors file and no {INDEX_FILE}")
    return files, {}


def read_checkpoint(folder: Path) -> tuple[dict[str, TensorInfo], str]:
    """Every tensor of the checkpoint in `folder` and where they came from, in words."""
    files, weight_map = checkpoint_files(folder)
    listed: defaultdict[str, list[str]] = defaultdict(list)
    for name, shard in weight_map.items():
        listed[shard].append(name)
    tensors: dict[str, TensorInfo] = {}
    for path in files:
        header = read_header(path)
        _check_index(path, header, listed[path.name])
        for name, info in header.items():
            tensors.setdefault(name, info)
    if weight_map:
        return tensors, f"{folder / INDEX_FILE} ({len(files)} shards)"
    return tensors, ", ".join(str(path) for path in files)


def weights_from_checkpoint(folder: Path, raw_config: Mapping[str, Any] | None = None, *,
                            kv_dtype_bytes: float | None = None) -> WeightBytes:
    """The exact bytes of the checkpoint in `folder`, placed by tensor name; `raw_config` (default: the folder's
    config.json) gives the layer count, the experts per token and the KV cache. A tensor no rule places is counted
    in `other` and named in `notes`. CheckpointError / ModelBytesError (config_fields.py) naming the file."""
    raw = raw_config if raw_config is not None else _folder_config(folder)
    model = model_sizes(raw, str(folder / "config.json"))
    tensors, source = read_checkpoint(folder)
    sums = _Sums()
    for name, info in tensors.items():
        sums.add(name, info, model.num_layers)
    return _weights(model, raw, sums, source, kv_dtype_bytes)


def _weights(model: ModelConfig, raw: Mapping[str, Any], sums: _Sums, source: str,
             kv_dtype_bytes: float | None) -> WeightBytes:
    parts = sums.parts
    num_experts = (model.num_experts if model.num_experts > 1 else len(sums.expert_ids) or sums.fused_experts)
    moe_layers = len(sums.expert_layers) if num_experts else 0
    top_k = min(model.experts_per_token, num_experts) if moe_layers else 0
    lm_head, embedding = float(parts[Part.LM_HEAD]), float(parts[Part.EMBEDDING])
    if not lm_head:
        lm_head, embedding = embedding, 0.0
    plan = layer_plan(model, language_config(raw))
    kv = kv_shape(model, language_config(raw), plan, kv_dtype_bytes)
    draft_share = _draft_expert_share(model, top_k, num_experts)
    other = (parts[Part.TOWER] + parts[Part.UNREAD] + parts[Part.UNKNOWN]
             + parts[Part.DRAFT_EXPERT] * (1 - draft_share))
    return WeightBytes(
        layers=float(parts[Part.LAYERS] + parts[Part.ATTENTION] + (0 if moe_layers else parts[Part.EXPERT])),
        expert=parts[Part.EXPERT] / (moe_layers * num_experts) if moe_layers else 0.0,
        num_experts=num_experts if moe_layers else 0,
        experts_per_token=top_k,
        moe_layers=moe_layers,
        lm_head=lm_head,
        embedding=embedding,
        draft_layer=parts[Part.DRAFT] + parts[Part.DRAFT_EXPERT] * draft_share,
        other=float(other),
        kv_per_token=kv.per_token,
        kv_heads=kv.heads,
        dtype=_dtype(model, raw, sums),
        exact=True,
        source=source,
        notes=_notes(model, raw, sums, plan, kv_dtype_bytes, tied=not parts[Part.LM_HEAD], moe=bool(moe_layers)),
        attention=float(parts[Part.ATTENTION]),
        kv_per_token_sliding=kv.per_token_sliding,
        sliding_window=kv.sliding_window,
    )


def _draft_expert_share(model: ModelConfig, top_k: int, num_experts: int) -> float:
    """The share of an MoE draft layer's experts one draft token reads: top-k of the experts config.json counts
    (else of those the target's layers hold)."""
    if model.num_experts > 1:
        return min(model.experts_per_token, model.num_experts) / model.num_experts
    return top_k / num_experts if top_k else 1.0


def _dtype(model: ModelConfig, raw: Mapping[str, Any], sums: _Sums) -> str:
    """quantization_config's format when config.json has one, else the dtype holding most of the layers' bytes."""
    if quantization_config(raw) is None and sums.weight_dtypes:
        return safetensors_label(sums.weight_dtypes.most_common(1)[0][0])
    return weight_format(raw, model.dtype, model.dtype_bytes).label


def _notes(model: ModelConfig, raw: Mapping[str, Any], sums: _Sums, plan: LayerPlan, kv_dtype_bytes: float | None,
           *, tied: bool, moe: bool) -> tuple[str, ...]:
    notes = ["summed from the checkpoint's safetensors headers"]
    if tied:
        notes.append("no lm_head tensor (tied embeddings): the embedding table is read as the LM head")
    if sums.parts[Part.EXPERT] and not moe:
        notes.append("expert tensors without an expert count in config.json or their names: counted as read")
    if moe and first_given(language_config(raw), MOE_TOPK_KEYS) is None:
        notes.append(f"config.json gives no experts per token: {model.experts_per_token} assumed")
    if sums.parts[Part.DRAFT_EXPERT]:
        notes.append("MoE draft layer: one draft forward counted with the experts one token reads")
    if sums.parts[Part.TOWER]:
        notes.append(f"vision / audio tower: {sums.parts[Part.TOWER] / _GB:.2f} GB, loaded, not read while decoding")
    notes.extend(f"{why}: {size / _GB:.2f} GB, not read" for why, size in sums.unread.items())
    if sums.unknown:
        named = ", ".join(sums.unknown[:_NAMED_UNKNOWN]) + (", ..." if len(sums.unknown) > _NAMED_UNKNOWN else "")
        notes.append(f"{len(sums.unknown)} tensor(s) of unknown role ({named}): "
                     f"{sums.parts[Part.UNKNOWN] / _GB:.2f} GB counted as loaded, not read")
    notes.extend(kv_notes(model, language_config(raw), plan, kv_dtype_bytes))
    return tuple(notes)


def _folder_config(folder: Path) -> dict[str, Any]:
    config = folder / "config.json"
    try:
        return read_model_config(config)
    except FileNotFoundError:
        raise CheckpointError(
            f"{folder} has no config.json: the layer count, the experts per token and the KV cache's shape come "
            "from it; copy the model's config.json into the folder") from None


def _weight_map(index: Path) -> dict[str, str]:
    try:
        raw = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{index}: can't read it as JSON ({exc}); download it again") from None
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index} has no weight_map of tensor name -> shard file; download it again")
    return weight_map


def _check_index(path: Path, header: Mapping[str, TensorInfo], listed: list[str]) -> None:
    """Every tensor the index places in `path` (`listed`) is in its header."""
    lacking = [name for name in listed if name not in header]
    if lacking:
        raise CheckpointError(
            f"{path.parent / INDEX_FILE} places {len(lacking)} tensor(s) in {path.name} that its header lacks "
            f"({', '.join(lacking[:3])}); the shard and the index come from different downloads: download both "
            "again")
