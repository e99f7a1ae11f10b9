"""How SGLang's command line changed from release to release, read from the flag tables of each version.

Each `data/sglang-<version>-flags.json` is one release's own parser, dumped by `tools/sglang_versions.py` from the
release's wheel. `diff_tables` says what changed between two of them (flags added and removed, defaults and
choices changed, deprecated aliases and the flag each names); `data/sglang-flag-history.json` keeps, for every flag
any covered release had, the releases that had it and what it last meant, so that a flag one version does not
know gets a hint written from the versions that did ("removed after 0.5.19, where it was an alias of
--cuda-graph-backend-prefill=tc_piecewise").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from pytest_sglang_perf.sglang_facts.flags import FlagSpec, FlagTable
from pytest_sglang_perf.sglang_facts.versions import version_key

DATA = Path(__file__).resolve().parent / "data"
HISTORY = DATA / "sglang-flag-history.json"


@dataclass(frozen=True)
class VersionDiff:
    """What changed in SGLang's command line from `old` to `new` (flag names as typed, `--x`)."""

    old: str
    new: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    defaults: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    """Flag -> (old default, new default), for a flag both have."""
    choices: Mapping[str, tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = field(default_factory=dict)
    deprecated: Mapping[str, str] = field(default_factory=dict)
    """Flags deprecated in `new` that were not in `old`, each with what it names instead (its `new_flag`)."""

    def lines(self) -> list[str]:
        """The diff as a reader scans it, one change a line."""
        out = [f"SGLang {self.old} -> {self.new}: {len(self.added)} flags added, {len(self.removed)} removed, "
               f"{len(self.defaults)} defaults and {len(self.choices)} choice lists changed, "
               f"{len(self.deprecated)} deprecated"]
        out += [f"  + {flag}" for flag in self.added]
        out += [f"  - {flag}" for flag in self.removed]
        out += [f"  ~ {flag}: default {old!r} -> {new!r}" for flag, (old, new) in self.defaults.items()]
        out += [f"  ~ {flag}: choices {_choices(old)} -> {_choices(new)}" for flag, (old, new) in self.choices.items()]
        out += [f"  ! {flag}: deprecated, use {new}" for flag, new in self.deprecated.items()]
        return out


def _same_choices(old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> bool:
    """The same values, in any order (SGLang builds some choice lists from sets)."""
    if old is None or new is None:
        return old is new
    return sorted(map(repr, old)) == sorted(map(repr, new))


def _choices(values: tuple[Any, ...] | None) -> str:
    return "any value" if values is None else "[" + ", ".join(map(str, values)) + "]"


def by_flag(table: FlagTable) -> dict[str, FlagSpec]:
    """Every long and short spelling of every option; `--x`/`--no-x` pairs under both."""
    return {flag: spec for spec in table.options for flag in spec.flags}


def diff_tables(old: FlagTable, new: FlagTable) -> VersionDiff:
    before, after = by_flag(old), by_flag(new)
    both = [flag for flag in after if flag in before]
    deprecated = {flag: spec.new_flag or "(no replacement named)" for flag, spec in after.items()
                  if spec.deprecated and not (flag in before and before[flag].deprecated)}
    return VersionDiff(
        old.sglang_version, new.sglang_version,
        added=tuple(sorted(set(after) - set(before))), removed=tuple(sorted(set(before) - set(after))),
        defaults={flag: (before[flag].default, after[flag].default) for flag in sorted(both)
                  if before[flag].default != after[flag].default},
        choices={flag: (before[flag].choices, after[flag].choices) for flag in sorted(both)
                 if not _same_choices(before[flag].choices, after[flag].choices)},
        deprecated=dict(sorted(deprecated.items())))


@dataclass(frozen=True)
class FlagSpan:
    """One flag across the covered releases: the first and last that had it, and what it was in the last one."""

    flag: str
    first: str
    last: str
    dest: str
    new_flag: str | None = None
    """The replacement the last release that had it named (a deprecated option's `new_flag`), if any."""
    absent: tuple[str, ...] = ()
    """Covered releases between `first` and `last` that did not have it (a flag that left and came back)."""

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "dest": self.dest,
                **({"new_flag": self.new_flag} if self.new_flag is not None else {}),
                **({"absent": list(self.absent)} if self.absent else {})}


@dataclass(frozen=True)
class FlagHistory:
    versions: tuple[str, ...]
    """The releases whose tables were read, oldest first."""
    flags: Mapping[str, FlagSpan]

    def to_dict(self) -> dict[str, Any]:
        return {"versions": list(self.versions),
                "flags": {flag: span.to_dict() for flag, span in sorted(self.flags.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlagHistory:
        flags = {flag: FlagSpan(flag, str(item["first"]), str(item["last"]), str(item["dest"]), item.get("new_flag"),
                                tuple(str(v) for v in item.get("absent", ()))) for flag, item in data["flags"].items()}
        return cls(tuple(str(v) for v in data["versions"]), flags)

    def hint(self, flag: str, version: str, known: Mapping[str, Sequence[Any] | None]) -> str | None:
        """What became of `flag`, which SGLang `version` does not know (`known`: its flags, each with its choices or
        None), from the covered releases that had it; None when none had it."""
        span = self.flags.get(flag)
        if span is None:
            return None
        if version_key(version) < version_key(span.first):
            return f"{flag} is new in SGLang {span.first} (this is {version})"
        if version_key(version) <= version_key(span.last):
            return self._inside(span, version)
        where = f"{flag} is gone after SGLang {span.last} (this is {version})"
        if span.new_flag is not None:
            return f"{where}; there it was deprecated for {span.new_flag}{_still(span.new_flag, version, known)}"
        same = sorted(other for other, item in self.flags.items()
                      if other in known and item.dest == span.dest and other != flag)
        return f"{where}; {version} sets the same field with {' / '.join(same)}" if same else where


    def _inside(self, span: FlagSpan, version: str) -> str:
        """The hint for a release inside the flag's span: one of its gaps, or a build that dropped it."""
        gap = [v for v in self.versions if v in span.absent and version_key(v) <= version_key(version)]
        later = [v for v in self.versions if version_key(v) > version_key(version) and v not in span.absent
                 and version_key(v) <= version_key(span.last)]
        if gap and later and version_key(version) < version_key(later[0]):
            before = [v for v in self.versions if version_key(v) < version_key(gap[0]) and v not in span.absent]
            left = f"it left after SGLang {before[-1]}" if before else "it was not there yet"
            return f"{span.flag} is not in SGLang {version}: {left} and came back in {later[0]}"
        return f"SGLang {span.first} to {span.last} have {span.flag}, but this build of {version} does not"


def _still(replacement: str, version: str, known: Mapping[str, Sequence[Any] | None]) -> str:
    """Whether `version` takes the replacement a deprecated flag named (`--x=value`, `--x value` or `--x`)."""
    name, _, value = replacement.replace(" ", "=", 1).partition("=")
    if "{" in name or "<" in value:  # `--cuda-graph-backend-{decode,prefill}=disabled`, `--attn-dp-size <dp-size>`
        return ""
    if name not in known:
        return f"; {version} has no {name} either"
    choices = known[name]
    if value and choices is not None and value not in map(str, choices):
        return f"; {version}'s {name} has no {value} (it takes {', '.join(map(str, choices))})"
    return ""


def history_of(tables: Sequence[FlagTable]) -> FlagHistory:
    """The spans of every flag over `tables` (any order); a flag's dest and replacement as its last release had."""
    ordered = sorted(tables, key=lambda table: version_key(table.sglang_version))
    spans: dict[str, FlagSpan] = {}
    for table in ordered:
        for flag, spec in by_flag(table).items():
            first = spans[flag].first if flag in spans else table.sglang_version
            spans[flag] = FlagSpan(flag, first, table.sglang_version, spec.dest, spec.new_flag)
    flags_of = [set(by_flag(table)) for table in ordered]
    for flag, span in spans.items():
        inside = [(table.sglang_version, flag in known) for table, known in zip(ordered, flags_of, strict=True)
                  if version_key(span.first) <= version_key(table.sglang_version) <= version_key(span.last)]
        absent = tuple(version for version, has in inside if not has)
        if absent:
            spans[flag] = replace(span, absent=absent)
    return FlagHistory(tuple(table.sglang_version for table in ordered), spans)


@cache
def load_history(path: Path = HISTORY) -> FlagHistory | None:
    """The generated history (tools/sglang_versions.py history); None when the package has none."""
    try:
        return FlagHistory.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
