"""Which files give a `--model-path`'s bytes, in the order SGLang itself finds a model: a local folder, else a
Hugging Face id's snapshot in the local Hugging Face cache, else the config.json this project ships for a known id.

A folder with `.safetensors` files gives exact bytes (their headers); a folder with only config.json (or whose
checkpoint can't be read: the reason goes into the notes) an estimate. The Hugging Face cache
(huggingface_hub's documented layout and environment variables): `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`; a model `org/name` lives in
`models--org--name/`, its revisions in `snapshots/<commit>/` and `refs/main` names the commit `main` points to.

A separate draft model (`--speculative-draft-model-path`) is found the same way; roofline/draft_weights.py says what
one draft forward reads of it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.roofline.checkpoint_weights import has_checkpoint, weights_from_checkpoint
from pytest_sglang_perf.roofline.config_weights import weights_from_config
from pytest_sglang_perf.roofline.draft_weights import draft_bytes, with_draft
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes
from pytest_sglang_perf.sglang_facts.known_models import known_models_text, shipped_config
from pytest_sglang_perf.sglang_facts.model_fields import read_model_config


def find_model_weights(model_path: str, *, hf_cache: Path | None = None,
                       kv_dtype_bytes: float | None = None) -> WeightBytes | str:
    """The bytes of the model at `model_path` (a folder or a Hugging Face id), exact where its safetensors are at
    hand; else a sentence saying why there is no estimate and how to get one. `hf_cache`: the Hugging Face hub
    cache (default: from the environment, as huggingface_hub finds it). A config.json whose fields can't be used
    gives the sentence naming the file and the field."""
    cache = hf_cache if hf_cache is not None else hub_cache_dir(os.environ)
    folder = _model_folder(model_path, cache)
    try:
        if folder is not None:
            return _from_folder(folder, kv_dtype_bytes)
        shipped = shipped_config(model_path)
        if shipped is not None:
            return _estimate(shipped, read_model_config(shipped), kv_dtype_bytes,
                             f"'{model_path}' is not in the Hugging Face cache ({cache}): from the config.json this "
                             "project ships for it")
    except SGLangPerfError as exc:
        return str(exc)
    return (f"no config.json for '{model_path}': it is not a local folder, not in the Hugging Face cache ({cache}) "
            f"and not a model this project ships a config for ({known_models_text()}); point --model-path at a "
            "folder holding the model's config.json (and its *.safetensors for exact bytes), or download the model")


def find_model_config(model_path: str, *, hf_cache: Path | None = None) -> Path | str:
    """The config.json of the model at `model_path`, found as find_model_weights finds the model (a local folder, its
    Hugging Face cache snapshot, the config this project ships for a known id); else a sentence saying why not."""
    cache = hf_cache if hf_cache is not None else hub_cache_dir(os.environ)
    folder = _model_folder(model_path, cache)
    found = folder / "config.json" if folder is not None else shipped_config(model_path)
    if found is None or not found.is_file():
        return (f"no config.json for '{model_path}': it is not a local folder with one, not in the Hugging Face cache "
                f"({cache}) and not a model this project ships a config for ({known_models_text()})")
    return found


def find_draft_weights(draft_path: str, target: WeightBytes, *, hf_cache: Path | None = None) -> WeightBytes | str:
    """`target` with the draft forwards of the separate draft model at `draft_path` (a folder or a Hugging Face id,
    found as find_model_weights finds a model): its `draft_layer`, its `draft_lm_head` (None when it reads the
    target's), its unread tensors added to `other`; else a sentence saying why there is no count and how to get
    one."""
    cache = hf_cache if hf_cache is not None else hub_cache_dir(os.environ)
    folder = _model_folder(draft_path, cache)
    config = folder / "config.json" if folder is not None else shipped_config(draft_path)
    if config is None or not config.is_file():
        where = f"{folder} has no config.json" if folder is not None else (
            f"it is not a local folder, not in the Hugging Face cache ({cache}) and not a model this project ships "
            "a config for")
        return (f"no config.json for the draft model '{draft_path}': {where}; point "
                "--speculative-draft-model-path at a folder holding the draft's config.json (and its *.safetensors "
                "for exact bytes), or download it")
    try:
        return with_draft(target, draft_bytes(folder, read_model_config(config), str(config)))
    except SGLangPerfError as exc:
        return f"the draft model '{draft_path}' can't be counted: {exc}"


def hub_cache_dir(environ: Mapping[str, str]) -> Path:
    """Where huggingface_hub caches models, from `environ` as it reads it."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]).expanduser() / "huggingface" / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def hub_snapshot(model_id: str, cache: Path) -> Path | None:
    """The cached snapshot of `model_id` that `main` points to (else the newest); None when it is not cached."""
    if not model_id or model_id.startswith(("/", ".", "~")) or model_id.count("/") > 1:
        return None
    repo = cache / ("models--" + model_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    try:
        pinned = snapshots / (repo / "refs" / "main").read_text(encoding="utf-8").strip()
        if pinned.is_dir() and pinned != snapshots:
            return pinned
    except OSError:
        pass
    found = [path for path in snapshots.iterdir() if path.is_dir()] if snapshots.is_dir() else []
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def _model_folder(model_path: str, cache: Path) -> Path | None:
    """The local folder `model_path` names, else its Hugging Face cache snapshot holding a config.json."""
    folder = Path(model_path).expanduser()
    if folder.is_dir():
        return folder
    snapshot = hub_snapshot(model_path, cache)
    return snapshot if snapshot is not None and (snapshot / "config.json").is_file() else None


def _from_folder(folder: Path, kv_dtype_bytes: float | None) -> WeightBytes | str:
    """SGLangPerfError (ModelBytesError) when the config.json can't be used."""
    config = folder / "config.json"
    if not config.is_file():
        return (f"no config.json in {folder}: the model's sizes come from it; copy the model's config.json into "
                "the folder")
    raw = read_model_config(config)
    if not has_checkpoint(folder):
        return _estimate(config, raw, kv_dtype_bytes, f"no *.safetensors in {folder}")
    try:
        return weights_from_checkpoint(folder, raw, kv_dtype_bytes=kv_dtype_bytes)
    except SGLangPerfError as exc:
        return _estimate(config, raw, kv_dtype_bytes, f"the checkpoint can't be read ({exc})")


def _estimate(config: Path, raw: Mapping[str, Any], kv_dtype_bytes: float | None, why: str) -> WeightBytes:
    found = weights_from_config(raw, source=str(config), kv_dtype_bytes=kv_dtype_bytes)
    return dataclasses.replace(found, notes=(f"{why}: estimated from config.json", *found.notes))
