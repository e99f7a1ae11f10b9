"""A separate draft model's bytes (`--speculative-draft-model-path`) as SGLang 0.5.23 loads and runs it: what one
draft forward reads, and whether its LM head is its own or the target's. The kind of draft comes from its config.json:

- EAGLE3 (an architecture named `...Eagle3`, llama_eagle3.py): its decoder layer (checkpoints name it `midlayer.`,
  which SGLang renames `layers.0.`; its q, k, v read the embedding and the hidden state side by side, 2h wide), `fc`
  (the target's aux hidden states, `num_aux_hidden_states` or 3 of them, to h) and the norms. Its LM head: with
  `tie_word_embeddings`, its embedding table (which SGLang swaps for the target's); else, when config.json gives
  `draft_vocab_size`, its own `lm_head` of draft_vocab_size rows (eagle_worker_v2.py `init_lm_head` keeps it);
  else (`draft_vocab_size` null) SGLang loads the target's LM head into it (`load_lm_head_from_target`). The
  `d2t` / `t2d` token maps are tiny and not read as weights.
- EAGLE (an architecture named `...Eagle`: llama_eagle.py, qwen2_eagle.py, mistral_eagle.py): `fc` (2h -> h) and
  its layers; its loader skips `lm_head` and SGLang gives it the target's embedding and LM head
  (`set_embed_and_head`).
- NEXTN / MTP (config.json gives `num_nextn_predict_layers` or `mtp_num_hidden_layers`; SGLang rewrites such a
  draft's architecture to its NextN / MTP class, configs/model_config.py `_config_draft_model`): the MTP layer and
  the target's LM head. An old-style NEXTN checkpoint (`num_hidden_layers` 1) holds it at `model.layers.0.`
  (deepseek_common/deepseek_weight_loader.py: the NEXTN layer is layer 0 when num_hidden_layers is 1, else layer
  num_hidden_layers; only the names under it load, its `shared_head.head` and `embed_tokens` copies skipped).
- STANDALONE (any other model): the whole model, its experts as one token reads them, its own LM head.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.roofline.checkpoint_weights import has_checkpoint, read_checkpoint, weights_from_checkpoint
from pytest_sglang_perf.roofline.config_fields import int_field, model_sizes
from pytest_sglang_perf.roofline.config_weights import weights_from_config
from pytest_sglang_perf.roofline.safetensors_format import CheckpointError
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes
from pytest_sglang_perf.roofline.weight_format import weight_format
from pytest_sglang_perf.sglang_facts.model_fields import language_config

_GB = 1e9
_EAGLE_LAYER = frozenset({"midlayer", "layers", "fc", "norm", "hidden_norm", "input_norm", "fc_norm", "aux_norm_low",
                          "aux_norm_mid", "aux_norm_high", "eagle_linear"})
"""Top-level names of an EAGLE / EAGLE3 draft's read weights (llama_eagle3.py's `legacy_name_map`, llama_eagle.py,
mistral_eagle.py's `eagle_linear`, its fc); `model.` is taken off first."""
_DEFAULT_AUX_STATES = 3


class DraftKind(enum.Enum):
    EAGLE3 = "EAGLE3"
    EAGLE = "EAGLE"
    MTP = "NEXTN / MTP"
    STANDALONE = "STANDALONE"


@dataclass(frozen=True)
class DraftBytes:
    kind: DraftKind
    layer: float
    """What one draft forward of one token reads of the draft's own weights, its LM head aside."""
    lm_head: float | None
    """Its own LM head; None: it reads the target's."""
    unread: float
    """The draft's tensors a draft forward does not read (embedding, token maps, unread experts, ...)."""
    exact: bool
    source: str
    notes: tuple[str, ...] = ()


def draft_kind(raw: Mapping[str, Any]) -> DraftKind:
    """The kind of draft the config.json `raw` describes (module docstring)."""
    names = [str(name) for name in raw.get("architectures") or ()]
    if any("Eagle3" in name for name in names):
        return DraftKind.EAGLE3
    if any(name.endswith("Eagle") for name in names):
        return DraftKind.EAGLE
    text = language_config(raw)
    if int_field(text, "num_nextn_predict_layers") or int_field(text, "mtp_num_hidden_layers"):
        return DraftKind.MTP
    return DraftKind.STANDALONE


def draft_bytes(folder: Path | None, raw: Mapping[str, Any], source: str) -> DraftBytes:
    """The draft whose config.json is `raw` (`source`: that file): exact from the safetensors in `folder` when they
    can be read, else estimated from `raw` (the reason in `notes`). CheckpointError / ModelBytesError for a config
    the count cannot use."""
    kind = draft_kind(raw)
    if folder is None or not has_checkpoint(folder):
        return _estimate(kind, raw, source, "")
    try:
        return _exact(kind, folder, raw)
    except CheckpointError as exc:
        return _estimate(kind, raw, source, f"the draft's checkpoint can't be read ({exc}): ")


def with_draft(target: WeightBytes, draft: DraftBytes) -> WeightBytes:
    """`target` whose draft forwards read `draft`: the target's own MTP layer, not run, joins `other`."""
    head = "its own LM head" if draft.lm_head is not None else "the target's LM head"
    notes = [f"draft model ({draft.kind.value}): {draft.source}; a draft forward reads {draft.layer / _GB:.3f} GB of "
             f"its weights and {head}", *draft.notes]
    if target.draft_layer:
        notes.append(f"the target's own MTP layer ({target.draft_layer / _GB:.3f} GB) is not run: the draft model "
                     "replaces it")
    return dataclasses.replace(target, draft_layer=draft.layer, draft_lm_head=draft.lm_head,
                               other=target.other + target.draft_layer + draft.unread,
                               exact=target.exact and draft.exact, notes=(*target.notes, *notes))


def _exact(kind: DraftKind, folder: Path, raw: Mapping[str, Any]) -> DraftBytes:
    if kind in (DraftKind.EAGLE3, DraftKind.EAGLE):
        return _eagle_exact(kind, folder, raw)
    found = weights_from_checkpoint(folder, _nextn_at_layer_0(raw) if kind is DraftKind.MTP else raw)
    return _from_weights(kind, found)


def _estimate(kind: DraftKind, raw: Mapping[str, Any], source: str, why: str) -> DraftBytes:
    if kind in (DraftKind.EAGLE3, DraftKind.EAGLE):
        return _eagle_estimate(kind, raw, source, why)
    found = weights_from_config(_nextn_at_layer_0(raw) if kind is DraftKind.MTP else raw, source=source)
    estimated = _from_weights(kind, found)
    return dataclasses.replace(estimated, notes=(f"{why}draft estimated from config.json", *estimated.notes))


def _from_weights(kind: DraftKind, found: WeightBytes) -> DraftBytes:
    """An MTP draft: its MTP layer; a standalone draft: the whole model as one token reads it."""
    if kind is DraftKind.MTP:
        notes = () if found.draft_layer else ("the draft model's checkpoint holds no MTP / NEXTN layer: 0 bytes",)
        return DraftBytes(kind, found.draft_layer, None, 0.0, found.exact, found.source, notes)
    read = found.layers + found.moe_layers * found.experts_per_token * found.expert
    unread = found.total - read - found.lm_head
    return DraftBytes(kind, read, found.lm_head, unread, found.exact, found.source,
                      ("standalone draft: its own KV cache is not counted",))


def _nextn_at_layer_0(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An old-style NEXTN checkpoint (num_hidden_layers 1) as one whose NEXTN layer follows 0 decoder layers."""
    if int_field(language_config(raw), "num_hidden_layers") != 1:
        return dict(raw)
    text = raw.get("text_config")
    nested = {"text_config": {**text, "num_hidden_layers": 0}} if isinstance(text, Mapping) else {}
    return {**raw, "num_hidden_layers": 0, **nested}


def _eagle_exact(kind: DraftKind, folder: Path, raw: Mapping[str, Any]) -> DraftBytes:
    tensors, source = read_checkpoint(folder)
    sums: Counter[str] = Counter()
    unknown = []
    for name, info in tensors.items():
        part = _eagle_part(name)
        sums[part] += info.nbytes
        if part == "unknown":
            unknown.append(name)
    dtype_bytes = model_sizes(raw, str(folder / "config.json")).dtype_bytes
    head = _eagle_head(kind, raw, dtype_bytes, own=float(sums["head"]), embedding=float(sums["embedding"]))
    embedding_read = kind is DraftKind.EAGLE3 and _tied(raw)
    unread = (0 if embedding_read else sums["embedding"]) + sums["map"] + sums["unknown"]
    notes = [f"{len(unknown)} draft tensor(s) of unknown role ({', '.join(unknown[:3])}) counted as not read"] if (
        unknown) else []
    return DraftBytes(kind, float(sums["layer"]), head, float(unread), True, source, tuple(notes))


def _eagle_part(name: str) -> str:
    top = name.removeprefix("model.").split(".", 1)[0]
    if top in _EAGLE_LAYER:
        return "layer"
    if top in ("lm_head", "output"):
        return "head"
    if top in ("embed_tokens", "tok_embeddings"):
        return "embedding"
    return "map" if top in ("d2t", "t2d") else "unknown"


def _eagle_head(kind: DraftKind, raw: Mapping[str, Any], dtype_bytes: int, *, own: float,
                embedding: float) -> float | None:
    """The LM head an EAGLE3 draft reads when it is not the target's (module docstring); measured bytes where the
    checkpoint has the tensor, else from the config's sizes."""
    if kind is not DraftKind.EAGLE3:
        return None
    text = language_config(raw)
    hidden = int_field(text, "hidden_size")
    if _tied(raw):
        return embedding or float(int_field(text, "vocab_size") * hidden * dtype_bytes)
    if not int_field(text, "draft_vocab_size"):
        return None
    return own or float(int_field(text, "draft_vocab_size") * hidden * dtype_bytes)


def _eagle_estimate(kind: DraftKind, raw: Mapping[str, Any], source: str, why: str) -> DraftBytes:
    """One layer of `num_hidden_layers` (Llama-4 drafts: a dense MLP of `intermediate_size_mlp`), EAGLE3's wider
    first q, k, v and its fc from the aux hidden states, EAGLE's 2h -> h fc."""
    model, text = model_sizes(raw, source), language_config(raw)
    hidden = model.hidden_size
    dense_width = int_field(text, "intermediate_size_mlp") if str(text.get("model_type")).startswith("llama4") else 0
    mlp_change = 3 * hidden * (dense_width - model.intermediate_size) if dense_width else 0
    layer = model.num_layers * (model.layer_params() + mlp_change)
    if kind is DraftKind.EAGLE3:
        aux = int_field(text, "num_aux_hidden_states") or _aux_layers(text) or _DEFAULT_AUX_STATES
        fc = (int_field(text, "target_hidden_size") or hidden) * aux * hidden
        layer += hidden * (model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim
    else:
        fc = 2 * hidden * hidden
    fmt = weight_format(raw, model.dtype, model.dtype_bytes)
    head = _eagle_head(kind, raw, model.dtype_bytes, own=0.0, embedding=0.0)
    return DraftBytes(kind, (layer + fc) * fmt.linear_bytes, head, 0.0, False, source,
                      (f"{why}draft estimated from config.json (no safetensors read)",))


def _aux_layers(text: Mapping[str, Any]) -> int:
    eagle = text.get("eagle_config")
    listed = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    return len(listed) if isinstance(listed, list) else 0


def _tied(raw: Mapping[str, Any]) -> bool:
    return bool(language_config(raw).get("tie_word_embeddings"))
