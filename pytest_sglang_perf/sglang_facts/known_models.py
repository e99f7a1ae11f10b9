"""The model configs this project ships, so that a simulated run of a well-known Hugging Face model needs no local
config.json: `data/models/<org>--<name>.json` holds `<org>/<name>`'s config.json (docs/simulated-models.md says
where each number came from).

Where the config.json of a simulated model comes from, first found wins: a local folder holding a config.json (the
plugin's `[tool.sglang_perf.simulate] model_path` comes before this), then the shipped config of a known model id
(matched case-insensitively, as Hugging Face matches repository ids).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "data" / "models"
_SEPARATOR = "--"
"""`<org>--<name>.json`: Hugging Face ids never hold `--` (its cache names folders `models--<org>--<name>`)."""


@dataclass(frozen=True)
class KnownModel:
    model_id: str
    """The Hugging Face id, e.g. "Qwen/Qwen3-8B"."""
    config_file: Path


@functools.cache
def known_models() -> tuple[KnownModel, ...]:
    """Every shipped model config, sorted by id (case-insensitively)."""
    found = [KnownModel(path.stem.replace(_SEPARATOR, "/", 1), path) for path in MODELS_DIR.glob("*.json")]
    return tuple(sorted(found, key=lambda model: model.model_id.lower()))


def known_model_ids() -> tuple[str, ...]:
    return tuple(model.model_id for model in known_models())


def shipped_config(model_id: str) -> Path | None:
    """The shipped config.json of `model_id` (an exact Hugging Face id, any case); None for any other id."""
    wanted = model_id.strip().lower()
    return next((model.config_file for model in known_models() if model.model_id.lower() == wanted), None)


def model_config_file(model_path: str) -> Path | None:
    """The config.json the simulator reads for `--model-path model_path`: the local folder's own, else the shipped
    config of a known model id; None when there is neither."""
    local = Path(model_path) / "config.json"
    if local.is_file():
        return local
    return shipped_config(model_path)


def known_models_text() -> str:
    """The known ids, for an error message: "Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B-Instruct, ..."."""
    return ", ".join(known_model_ids())
