"""Baseline files: `<directory>/<environment-key>.json`, entries keyed by test id and variant.

A file holds `schema_version` (SCHEMA_VERSION), its `environment_key`, the last writer's `environment`
and `entries[test_id][variant]` with the metric summaries, the raw samples, the variant's args, the
prompt hash, the request params, when (`recorded_at`, ISO-8601 UTC) and from which `commit` it was
recorded, the software `environment` at that time, and (optional, null in older files) the server's
`startup` facts and what it `ran` (its effective configuration in words).

A bad file (invalid JSON, another schema, a malformed entry) raises BaselineFileError naming the file,
the problem and the fix; it is never rewritten. Writes hold a file lock (kept in the temporary
directory, so nothing but the JSON files lands in the baseline directory), re-read the file, merge the
new entries into it and replace it atomically, so parallel workers never lose each other's entries.

Output is stable: keys sorted, 2-space indent, a trailing newline, and floats written with Python's
repr, the shortest text that reads back as exactly the same float. Values are never rounded, so a
baseline read back compares equal to what was measured, and writing the same entries twice gives
identical bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

SCHEMA_VERSION = 1
LOCK_TIMEOUT = 120.0
"""Seconds a writer waits for another writer of the same baseline file."""

_RERECORD = "move the file away and re-record with --sglang-update-baselines"
_FIX_ENTRY = "fix or delete that entry, or " + _RERECORD
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_SLUG_MAX = 120

EntryKey = tuple[str, str]


@dataclass(frozen=True)
class BaselineEntry:
    """The recorded baseline of one test x variant cell."""

    test_id: str
    variant: str
    summaries: Mapping[str, Summary]
    samples: tuple[Sample, ...]
    args: tuple[str, ...]
    prompt_hash: str
    params: Mapping[str, Any]
    recorded_at: str
    commit: str | None
    environment: Mapping[str, Any]
    startup: Mapping[str, Any] | None = None
    """The server's startup facts when the baseline was recorded (logscan.StartupFacts.to_dict())."""
    ran: Mapping[str, str] | None = None
    """What the server ran (effective.EffectiveConfig.ran), e.g. {"prefill CUDA graph": "breakable (...)"}."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "startup": None if self.startup is None else dict(self.startup),
            "ran": None if self.ran is None else dict(self.ran),
            "metrics": {name: s.to_dict() for name, s in self.summaries.items()},
            "samples": [s.to_dict() for s in self.samples],
            "args": list(self.args),
            "prompt_hash": self.prompt_hash,
            "params": dict(self.params),
            "recorded_at": self.recorded_at,
            "commit": self.commit,
            "environment": dict(self.environment),
        }


class BaselineFileError(Exception):
    """A baseline file that cannot be used: the message names the file, the problem and the fix."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        super().__init__(f"baseline file {path}: {problem}; {fix}")
        self.path = path


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
            self._cache = MappingProxyType(_load_file(self.path, self.environment_key))
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
            merged = _load_file(self.path, self.environment_key)
            merged.update(new)
            atomic_write(self.path, render(self.environment_key, environment, merged.values()))
        self._cache = MappingProxyType(merged)
        return self.path


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


def dump_json(doc: Any) -> str:
    """Stable JSON text: sorted keys, indent 2, trailing newline, exact floats, no NaN."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False,
                      default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot write {type(value).__name__} value {value!r} as JSON")


def _check_serialisable(entry: BaselineEntry) -> None:
    try:
        dump_json(entry.to_dict())
    except ValueError:
        raise ValueError(
            f"cannot record the baseline of {entry.test_id} [{entry.variant}]: it holds NaN or an "
            "infinite value, which a baseline cannot compare against; check the measurement"
        ) from None


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


@contextmanager
def _locked(path: Path) -> Iterator[None]:
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


# Reading -------------------------------------------------------------------------------------------


def _load_file(path: Path, environment_key: str) -> dict[EntryKey, BaselineEntry]:
    doc = _read_document(path)
    if doc is None:
        return {}
    _check_schema(path, doc)
    _check_header(path, doc, environment_key)
    return _parse_entries(path, doc["entries"])


def _read_document(path: Path) -> dict[str, Any] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineFileError(
            path, f"cannot be read ({exc.strerror})", "check the path and its permissions"
        ) from None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise BaselineFileError(path, f"is not UTF-8 text (byte {exc.start})", _RERECORD) from None
    except ValueError as exc:
        fix = "repair it (an unresolved merge?) or " + _RERECORD
        raise BaselineFileError(path, _invalid_json(exc), fix) from None
    if not isinstance(doc, dict):
        raise BaselineFileError(path, f"must hold a JSON object, found {_json_type(doc)}", _RERECORD)
    return doc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _invalid_json(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    return f"is not valid JSON ({exc})"


def _check_schema(path: Path, doc: Mapping[str, Any]) -> None:
    if "schema_version" not in doc:
        raise BaselineFileError(path, "has no schema_version (not a pytest-sglang-perf baseline?)", _RERECORD)
    version = doc["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise BaselineFileError(path, f"schema_version must be an integer, found {version!r}", _RERECORD)
    if version < SCHEMA_VERSION:
        problem = f"was recorded with schema {version}; this plugin reads schema {SCHEMA_VERSION}"
        raise BaselineFileError(path, problem, f"to re-record, {_RERECORD}")
    if version > SCHEMA_VERSION:
        problem = (f"was written with schema {version} by a newer pytest-sglang-perf; "
                   f"this one reads schema {SCHEMA_VERSION}")
        fix = "upgrade pytest-sglang-perf (pip install -U pytest-sglang-perf)"
        raise BaselineFileError(path, problem, fix)


def _check_header(path: Path, doc: Mapping[str, Any], environment_key: str) -> None:
    if "environment_key" not in doc:
        raise BaselineFileError(path, "has no environment_key", _RERECORD)
    if doc["environment_key"] != environment_key:
        problem = f"holds environment_key {doc['environment_key']!r}, but its name says {environment_key!r}"
        fix = "rename the file to match its environment_key, or " + _RERECORD
        raise BaselineFileError(path, problem, fix)
    for name in ("environment", "entries"):
        if not isinstance(doc.get(name), dict):
            found = _json_type(doc[name]) if name in doc else "nothing"
            raise BaselineFileError(path, f"{name!r} must be an object, found {found}", _RERECORD)


def _parse_entries(path: Path, entries: Mapping[str, Any]) -> dict[EntryKey, BaselineEntry]:
    out: dict[EntryKey, BaselineEntry] = {}
    for test_id, variants in entries.items():
        if not isinstance(variants, dict):
            problem = f"entry {test_id!r} must map variant names to entries, found {_json_type(variants)}"
            raise BaselineFileError(path, problem, _FIX_ENTRY)
        for variant, data in variants.items():
            out[(test_id, variant)] = _parse_entry(path, test_id, variant, data)
    return out


_ENTRY_FIELDS: Mapping[str, tuple[tuple[type, ...], str]] = MappingProxyType({
    "metrics": ((dict,), "an object"), "samples": ((list,), "a list"), "args": ((list,), "a list"),
    "prompt_hash": ((str,), "a string"), "params": ((dict,), "an object"),
    "recorded_at": ((str,), "a string"), "commit": ((str, type(None)), "a string or null"),
    "environment": ((dict,), "an object"),
})


def _parse_entry(path: Path, test_id: str, variant: str, data: Any) -> BaselineEntry:
    where = f"entry {test_id!r} variant {variant!r}"
    if not isinstance(data, dict):
        raise BaselineFileError(path, f"{where} must be an object, found {_json_type(data)}", _FIX_ENTRY)
    for key, (kinds, expected) in _ENTRY_FIELDS.items():
        if key not in data:
            raise BaselineFileError(path, f"{where} has no {key!r}", _FIX_ENTRY)
        if not isinstance(data[key], kinds):
            problem = f"{where}: {key!r} must be {expected}, found {_json_type(data[key])}"
            raise BaselineFileError(path, problem, _FIX_ENTRY)
    if not all(isinstance(a, str) for a in data["args"]):
        raise BaselineFileError(path, f"{where}: 'args' must be a list of strings", _FIX_ENTRY)
    return BaselineEntry(
        test_id=test_id, variant=variant,
        summaries=MappingProxyType(_parse_summaries(path, where, data["metrics"])),
        samples=_parse_samples(path, where, data["samples"]),
        args=tuple(data["args"]), prompt_hash=data["prompt_hash"],
        params=MappingProxyType(data["params"]), recorded_at=data["recorded_at"],
        commit=data["commit"], environment=MappingProxyType(data["environment"]),
        startup=_optional_object(path, where, data, "startup"), ran=_optional_object(path, where, data, "ran"),
    )


def _optional_object(path: Path, where: str, data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """An entry field added after schema 1 was fixed: absent or null in older files."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BaselineFileError(path, f"{where}: {key!r} must be an object or null, found {_json_type(value)}",
                                _FIX_ENTRY)
    return MappingProxyType(value)


def _parse_summaries(path: Path, where: str, metrics: Mapping[str, Any]) -> dict[str, Summary]:
    out: dict[str, Summary] = {}
    for name, data in metrics.items():
        try:
            if not isinstance(data, dict):
                raise TypeError(f"expected an object, found {_json_type(data)}")
            out[name] = Summary.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"{where}: metric {name!r} is malformed ({_why(exc)})"
            raise BaselineFileError(path, problem, _FIX_ENTRY) from None
    return out


def _parse_samples(path: Path, where: str, samples: list[Any]) -> tuple[Sample, ...]:
    out: list[Sample] = []
    for index, data in enumerate(samples):
        try:
            if not isinstance(data, dict):
                raise TypeError(f"expected an object, found {_json_type(data)}")
            out.append(Sample.from_dict(data))
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"{where}: sample {index} is malformed ({_why(exc)})"
            raise BaselineFileError(path, problem, _FIX_ENTRY) from None
    return tuple(out)


def _why(exc: Exception) -> str:
    return f"missing key {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    names = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
