"""Older baseline schemas, upgraded in one place: a baseline file's document, as read from disk, is brought to the
current SCHEMA_VERSION here, step by step, before any entry is parsed. Nothing is written: the next write of the
file (--sglang-update-baselines, `sglang-perf baseline accept` or `prune --apply`) stores it in the current schema.

- schema 1 -> 2: each entry gains `source` (how it came to be), null for the entries recorded before it was kept.

A schema older than the oldest one known, or newer than this version writes, raises BaselineFileError naming the
file, the problem and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineFileError

OLDEST_SCHEMA = 1
"""The oldest schema this version still reads (by upgrading it)."""

RERECORD = "move the file away and re-record with --sglang-update-baselines"
"""The fix for a baseline file that cannot be read (baseline_parse.py says it too)."""


def _entries_gain_a_source(doc: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: `source` null in each entry (a malformed entry is left as it is, for the parser to report)."""
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        return doc
    upgraded: dict[str, Any] = {}
    for test_id, variants in entries.items():
        if isinstance(variants, dict):
            variants = {name: ({**data, "source": None} if isinstance(data, dict) else data)
                        for name, data in variants.items()}
        upgraded[test_id] = variants
    return {**doc, "entries": upgraded}


_STEPS: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] = MappingProxyType({
    1: _entries_gain_a_source,
})
"""The step from each older schema to the next one."""


def schema_of(path: Path, doc: Mapping[str, Any]) -> int:
    """The document's schema version, checked to be one this version reads; raises BaselineFileError."""
    if "schema_version" not in doc:
        raise BaselineFileError(path, "has no schema_version (not a pytest-sglang-perf baseline?)", RERECORD)
    version = doc["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise BaselineFileError(path, f"schema_version must be an integer, found {version!r}", RERECORD)
    if version < OLDEST_SCHEMA:
        problem = f"was recorded with schema {version}; this plugin reads schemas {OLDEST_SCHEMA} to {SCHEMA_VERSION}"
        raise BaselineFileError(path, problem, f"to re-record, {RERECORD}")
    if version > SCHEMA_VERSION:
        problem = (f"was written with schema {version} by a newer pytest-sglang-perf; "
                   f"this one reads schema {SCHEMA_VERSION}")
        raise BaselineFileError(path, problem, "upgrade pytest-sglang-perf (pip install -U pytest-sglang-perf)")
    return version


def upgrade(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The document in the current schema (the same object when it already is); raises BaselineFileError for a
    schema this version cannot read."""
    version = schema_of(path, doc)
    while version < SCHEMA_VERSION:
        doc = _STEPS[version](doc)
        version += 1
        doc["schema_version"] = version
    return doc
