"""JSON files written safely and stably: stable text (sorted keys, indent 2, exact floats, no NaN), atomic
replacement (temporary file, fsync, rename, fsync of the directory) and where the lock file serialising writers lies.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def dump_json(doc: Any) -> str:
    """Stable JSON text: sorted keys, indent 2, trailing newline, exact floats, no NaN."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False,
                      default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot write {type(value).__name__} value {value!r} as JSON")


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to a temporary file next to `path`, fsync it and rename it over `path`."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms that cannot open a directory (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def lock_path(path: Path) -> Path:
    """The lock file serialising writers of `path`: in the temporary directory, named by a hash of it."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pytest-sglang-perf-{digest}.lock"
