"""Baseline files: `<directory>/<environment-key>.json`, entries keyed by test id and variant.

A file holds `schema_version` (SCHEMA_VERSION, now 2), its `environment_key`, the last writer's `environment`
and `entries[test_id][variant]` with the metric summaries, the raw samples, the variant's args, the
prompt hash, the request params, when (`recorded_at`, ISO-8601 UTC) and from which `commit` it was
recorded, the software `environment` at that time, and (optional, null in older files) the server's
`startup` facts, what it `ran` (its effective configuration in words), the cell's `identity` (gate/identity.py:
what makes a later cell comparable), its `boots` (samples per server boot, with each boot's costs) and its
`source` (schema 2: how it came to be, `{"how": "recorded" | "accepted", "dirty", "host", "results_file",
"generated_at"}`; `accepted` entries came from a results file through `sglang-perf baseline accept`).

A file of an older schema (1) is upgraded when read, in one place (migrate.py), and stored in the current schema
by the next write. A bad file (invalid JSON, a schema older than the oldest one known or newer than this version's,
a malformed entry) raises BaselineFileError naming the file, the problem and the fix; it is never rewritten. A
session reads every file of its directory before any server starts (`check_baseline_dir`), so a broken store stops
it there, once, not after each cell was measured.

Writes hold a file lock (kept in the temporary directory, so nothing but the JSON files lands in the baseline
directory), re-read the file, merge the new entries into it and replace it atomically, so parallel workers never
lose each other's entries.

Output is stable: keys sorted, 2-space indent, a trailing newline, and floats written with Python's
repr, the shortest text that reads back as exactly the same float. Values are never rounded, so a
baseline read back compares equal to what was measured, and writing the same entries twice gives
identical bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineEntry, BaselineFileError, EntryKey
from pytest_sglang_perf.gate.baseline_parse import load_entries, read_baseline_file
from pytest_sglang_perf.gate.jsonfile import atomic_write, dump_json, lock_path

LOCK_TIMEOUT = 120.0
"""Seconds a writer waits for another writer of the same baseline file."""

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_SLUG_MAX = 120


class BaselineStore:
    """The baseline file of one environment key inside a baseline directory."""

    def __init__(self, directory: Path, environment_key: str) -> None:
        if not _SAFE_NAME.match(environment_key):
            raise ValueError(
                f"environment key {environment_key!r} is not a safe file name: "
                "build it with pytest_sglang_perf.gate.store.environment_key_slug()"
            )
        self.directory = Path(directory)
        self.environment_key = environment_key
        self._cache: Mapping[EntryKey, BaselineEntry] | None = None

    @property
    def path(self) -> Path:
        return self.directory / f"{self.environment_key}.json"

    def load(self) -> Mapping[EntryKey, BaselineEntry]:
        """All entries by (test id, variant); empty when there is no file. Read once, then cached."""
        if self._cache is None:
            self._cache = MappingProxyType(load_entries(self.path, self.environment_key))
        return self._cache

    def lookup(self, test_id: str, variant: str) -> BaselineEntry | None:
        return self.load().get((test_id, variant))

    def write(self, entries: Iterable[BaselineEntry], environment: Mapping[str, Any]) -> Path:
        """Merge `entries` into the file on disk (same cell: replaced, others: kept) and replace it."""
        new = {(e.test_id, e.variant): e for e in entries}
        for entry in new.values():
            _check_serialisable(entry)
        self.directory.mkdir(parents=True, exist_ok=True)
        with _locked(self.path):
            merged = load_entries(self.path, self.environment_key)
            merged.update(new)
            atomic_write(self.path, render(self.environment_key, environment, merged.values()))
        self._cache = MappingProxyType(merged)
        return self.path


    def remove(self, keys: Iterable[EntryKey]) -> int | None:
        """Remove these cells from the file as it is on disk now (re-read under the writers' lock, replaced
        atomically; deleted when no entry is left). The entries left, or None when none of the cells was there."""
        gone = set(keys)
        with _locked(self.path):
            current = read_baseline_file(self.path, self.environment_key)
            entries = {} if current is None else current.entries
            kept = {key: entry for key, entry in entries.items() if key not in gone}
            if current is None or len(kept) == len(entries):
                return None
            if kept:
                atomic_write(self.path, render(self.environment_key, current.environment, kept.values()))
            else:
                self.path.unlink()
        self._cache = MappingProxyType(kept)
        return len(kept)


class BrokenBaselines(SGLangPerfError):
    """Baseline files a session cannot gate against: the message names each file, its problem and the fix."""


def check_baseline_dir(directory: Path) -> None:
    """Read every baseline file in `directory` (all of them: a cell of another GPU count reads its siblings); raises
    BrokenBaselines naming each file that cannot be used."""
    problems = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            load_entries(path, path.stem)
        except BaselineFileError as exc:
            problems.append(str(exc))
    if len(problems) == 1:
        raise BrokenBaselines(f"sglang-perf: {problems[0]}. No server was started.")
    if problems:
        raise BrokenBaselines(f"sglang-perf: {len(problems)} baseline files cannot be used; no server was started:\n  "
                              + "\n  ".join(problems))


def environment_key_slug(parts: Iterable[str]) -> str:
    """A safe, lower-case file name from parts.

    `["NVIDIA H100 x2", "Qwen/Qwen3-8B"]` -> `nvidia-h100-x2__qwen-qwen3-8b`; a very long key is
    shortened and ends with a hash of the full one, so distinct keys stay distinct.
    """
    slugs = [_slug_part(p) for p in parts]
    slug = "__".join(s for s in slugs if s)
    if not slug:
        raise ValueError(f"cannot build an environment key from {list(parts)!r}: no letters or digits")
    if len(slug) > _SLUG_MAX:
        digest = hashlib.sha256(slug.encode()).hexdigest()[:12]
        slug = f"{slug[: _SLUG_MAX - 14].rstrip('-._')}--{digest}"
    return slug


def _slug_part(part: str) -> str:
    text = re.sub(r"[^a-z0-9.]+", "-", part.lower())
    return re.sub(r"\.{2,}", ".", text).strip("-.")


def render(environment_key: str, environment: Mapping[str, Any], entries: Iterable[BaselineEntry]) -> str:
    """The file's text for these entries (stable: sorted keys, indent 2, trailing newline)."""
    grouped: dict[str, dict[str, Any]] = {}
    for entry in entries:
        grouped.setdefault(entry.test_id, {})[entry.variant] = entry.to_dict()
    doc = {
        "schema_version": SCHEMA_VERSION,
        "environment_key": environment_key,
        "environment": dict(environment),
        "entries": grouped,
    }
    return dump_json(doc)


def _check_serialisable(entry: BaselineEntry) -> None:
    try:
        dump_json(entry.to_dict())
    except ValueError:
        raise ValueError(
            f"cannot record the baseline of {entry.test_id} [{entry.variant}]: it holds NaN or an "
            "infinite value, which a baseline cannot compare against; check the measurement"
        ) from None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the writers' lock of baseline file `path` (every change to a baseline file happens under it)."""
    import filelock  # lazily: importing the plugin stays cheap

    lock = filelock.FileLock(str(lock_path(path)), timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise BaselineFileError(
            path, f"another process has held its lock {lock.lock_file} for over {LOCK_TIMEOUT:.0f} s",
            "wait for the other pytest run to finish; if none is running, delete the lock file",
        ) from None
    try:
        yield
    finally:
        lock.release()
