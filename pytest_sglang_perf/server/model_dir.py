"""The model folder a variant's server reads and the hash of its config.json: what makes "the same model" for the
cells' identities (session/identity.py) and where the roofline finds the model's bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

_HASH_CHARS = 16


def config_hash(model_dir: Path | None) -> str | None:
    """sha256 of `<model_dir>/config.json` (first 16 hex digits); None when there is no such file."""
    return None if model_dir is None else config_file_hash(model_dir / "config.json")


def config_file_hash(config_file: Path) -> str | None:
    """sha256 of a config.json (first 16 hex digits); None when it cannot be read."""
    try:
        data = config_file.read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


def local_model_dir(model_path: str, root: Path) -> Path | None:
    """The folder `--model-path` names when it is a local one with a config.json (relative to the rootdir, or
    as given); None for a hub id."""
    for candidate in (root / model_path, Path(model_path)):
        if (candidate / "config.json").is_file():
            return candidate
    return None

