"""Reading a baseline file: the JSON document, its schema version (an older schema is upgraded by migrate.py), its
header, and each entry, checked field by field. A problem raises BaselineFileError naming the file, the problem and
the fix. `parse_entry` is the one entry parser: baseline files and the entries of a results file (`sglang-perf
baseline accept`) both go through it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.gate.baseline import SOURCE_KINDS, BaselineEntry, BaselineFileError, BootRecord, EntryKey
from pytest_sglang_perf.gate.identity import CellIdentity
from pytest_sglang_perf.gate.migrate import RERECORD, schema_of, upgrade
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

_FIX_ENTRY = "fix or delete that entry, or " + RERECORD


@dataclass(frozen=True)
class BaselineFile:
    """A baseline file as read: its header and entries (in the current schema, whatever schema it was stored in)."""

    path: Path
    environment_key: str
    environment: Mapping[str, Any]
    """The last writer's software facts (the file's header)."""
    entries: dict[EntryKey, BaselineEntry]
    stored_schema: int
    """The schema the file is stored in; older than SCHEMA_VERSION until the next write rewrites it."""


def load_entries(path: Path, environment_key: str) -> dict[EntryKey, BaselineEntry]:
    """The entries of the baseline file at `path` by (test id, variant); empty when there is no file."""
    found = read_baseline_file(path, environment_key)
    return {} if found is None else found.entries


def read_baseline_file(path: Path, environment_key: str | None) -> BaselineFile | None:
    """The baseline file at `path` (header and entries), None when there is none; raises BaselineFileError.
    `environment_key` is what the file's name says it holds; None: whatever it holds (a copy under another name,
    e.g. one written by `git show REV:baselines/KEY.json > old.json`)."""
    doc = _read_document(path)
    if doc is None:
        return None
    stored = schema_of(path, doc)
    doc = upgrade(path, doc)
    _check_header(path, doc, environment_key)
    return BaselineFile(path, doc["environment_key"], MappingProxyType(doc["environment"]),
                        _parse_entries(path, doc["entries"]), stored)


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
        raise BaselineFileError(path, f"is not UTF-8 text (byte {exc.start})", RERECORD) from None
    except ValueError as exc:
        fix = "repair it (an unresolved merge?) or " + RERECORD
        raise BaselineFileError(path, _invalid_json(exc), fix) from None
    if not isinstance(doc, dict):
        raise BaselineFileError(path, f"must hold a JSON object, found {_json_type(doc)}", RERECORD)
    return doc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _invalid_json(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    return f"is not valid JSON ({exc})"


def _check_header(path: Path, doc: Mapping[str, Any], environment_key: str | None) -> None:
    if "environment_key" not in doc:
        raise BaselineFileError(path, "has no environment_key", RERECORD)
    if not isinstance(doc["environment_key"], str):
        raise BaselineFileError(path, f"environment_key must be a string, found {_json_type(doc['environment_key'])}",
                                RERECORD)
    if environment_key is not None and doc["environment_key"] != environment_key:
        problem = f"holds environment_key {doc['environment_key']!r}, but its name says {environment_key!r}"
        fix = "rename the file to match its environment_key, or " + RERECORD
        raise BaselineFileError(path, problem, fix)
    for name in ("environment", "entries"):
        if not isinstance(doc.get(name), dict):
            found = _json_type(doc[name]) if name in doc else "nothing"
            raise BaselineFileError(path, f"{name!r} must be an object, found {found}", RERECORD)


def _parse_entries(path: Path, entries: Mapping[str, Any]) -> dict[EntryKey, BaselineEntry]:
    out: dict[EntryKey, BaselineEntry] = {}
    for test_id, variants in entries.items():
        if not isinstance(variants, dict):
            problem = f"entry {test_id!r} must map variant names to entries, found {_json_type(variants)}"
            raise BaselineFileError(path, problem, _FIX_ENTRY)
        for variant, data in variants.items():
            out[(test_id, variant)] = parse_entry(path, test_id, variant, data)
    return out


_ENTRY_FIELDS: Mapping[str, tuple[tuple[type, ...], str]] = MappingProxyType({
    "metrics": ((dict,), "an object"), "samples": ((list,), "a list"), "args": ((list,), "a list"),
    "prompt_hash": ((str,), "a string"), "params": ((dict,), "an object"),
    "recorded_at": ((str,), "a string"), "commit": ((str, type(None)), "a string or null"),
    "environment": ((dict,), "an object"),
})


def parse_entry(path: Path, test_id: str, variant: str, data: Any) -> BaselineEntry:
    """One entry (a baseline file's `entries[test_id][variant]`, or a results file cell's `entry`) in the current
    schema; raises BaselineFileError naming `path`, the entry and the problem."""
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
        params=_parse_params(path, where, data["params"]), recorded_at=data["recorded_at"],
        commit=data["commit"], environment=MappingProxyType(data["environment"]),
        startup=_optional_object(path, where, data, "startup"), ran=_optional_object(path, where, data, "ran"),
        identity=_parse_identity(path, where, data.get("identity")),
        boots=_parse_boots(path, where, data.get("boots"), len(data["samples"])),
        source=_parse_source(path, where, data.get("source")),
        roofline=_optional_object(path, where, data, "roofline"),
    )


_SOURCE_FIELDS: Mapping[str, tuple[type, ...]] = MappingProxyType({
    "dirty": (bool, type(None)), "host": (str, type(None)), "results_file": (str, type(None)),
    "generated_at": (str, type(None)),
})


def _parse_source(path: Path, where: str, data: Any) -> Mapping[str, Any] | None:
    """Absent or null (schema 1, or a writer that did not say), else {"how": "recorded" | "accepted", ...}."""
    if data is None:
        return None
    problem = None
    if not isinstance(data, dict):
        problem = f"must be an object or null, found {_json_type(data)}"
    elif data.get("how") not in SOURCE_KINDS:
        problem = f"'how' must be one of {', '.join(map(repr, SOURCE_KINDS))}, found {data.get('how')!r}"
    else:
        wrong = [key for key, kinds in _SOURCE_FIELDS.items() if not isinstance(data.get(key), kinds)]
        if wrong:
            problem = f"{wrong[0]!r} has the wrong type: {data[wrong[0]]!r}"
    if problem is not None:
        raise BaselineFileError(path, f"{where}: 'source' {problem}", _FIX_ENTRY)
    return MappingProxyType(dict(data))


def _parse_identity(path: Path, where: str, data: Any) -> CellIdentity | None:
    """Absent or null in entries recorded before the identity was kept (such a cell is compared as stale)."""
    if data is None:
        return None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, found {_json_type(data)}")
        return CellIdentity.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineFileError(path, f"{where}: 'identity' is malformed ({_why(exc)})", _FIX_ENTRY) from None


def _parse_boots(path: Path, where: str, data: Any, samples: int) -> tuple[BootRecord, ...]:
    """Absent (older entries: one boot) or a list of boots whose sample counts add up to the samples."""
    if data is None:
        return ()
    try:
        if not isinstance(data, list):
            raise TypeError(f"expected a list, found {_json_type(data)}")
        boots = tuple(_boot(item) for item in data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineFileError(path, f"{where}: 'boots' is malformed ({_why(exc)})", _FIX_ENTRY) from None
    if boots and sum(b.samples for b in boots) != samples:
        problem = f"{where}: 'boots' counts {sum(b.samples for b in boots)} samples, the entry holds {samples}"
        raise BaselineFileError(path, problem, _FIX_ENTRY)
    return boots


def _boot(item: Any) -> BootRecord:
    if not isinstance(item, dict):
        raise TypeError(f"expected an object per boot, found {_json_type(item)}")
    count = item["samples"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TypeError(f"a boot's 'samples' must be a count, found {count!r}")
    conditions = item.get("conditions")
    if conditions is not None and not isinstance(conditions, dict):
        raise TypeError(f"a boot's 'conditions' must be an object or null, found {_json_type(conditions)}")
    return BootRecord(count, _optional_number(item, "boot_seconds"), _optional_number(item, "graph_capture_seconds"),
                      conditions)


def _optional_number(item: dict[str, Any], key: str) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key!r} must be a number or null, found {value!r}")
    return float(value)


def _optional_object(path: Path, where: str, data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """An entry field added after schema 1 was fixed: absent or null in older files."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BaselineFileError(path, f"{where}: {key!r} must be an object or null, found {_json_type(value)}",
                                _FIX_ENTRY)
    return MappingProxyType(value)


def _parse_params(path: Path, where: str, params: Mapping[str, Any]) -> RequestSettings:
    try:
        return RequestSettings.from_dict(params)
    except (KeyError, TypeError) as exc:
        raise BaselineFileError(path, f"{where}: 'params' is malformed ({_why(exc)})", _FIX_ENTRY) from None


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
