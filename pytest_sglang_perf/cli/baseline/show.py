"""`sglang-perf baseline show` (and its alias `sglang-perf baselines`): a table per baseline file.

Each file gets a header (environment key, model, software versions, GPUs) and, per test, a table whose columns are
the variants and whose rows are the metrics' medians in their units, then how many requests and boots, when the
entry was recorded (with its age; `OLD` past the configured `baseline_max_age`), the commit and the entry's source.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_sglang_perf.cli.baseline.project import (
    ToolError,
    baseline_dir,
    duration_text,
    is_old,
    plural,
    project_settings,
    read_directory,
    source_text,
)
from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineEntry, age_seconds, recorded_time
from pytest_sglang_perf.gate.baseline_parse import BaselineFile
from pytest_sglang_perf.gate.environment import SIMULATED_PREFIX
from pytest_sglang_perf.gate.formats import format_value
from pytest_sglang_perf.measurement.metrics import GATED_ORDER
from pytest_sglang_perf.wrapping import WIDTH, wrap_lines

_GAP = "  "
_INDENT = "    "
_VERSIONS = (("sglang", "sglang"), ("torch", "torch"), ("python", "python"),
             ("pytest_sglang_perf", "pytest-sglang-perf"))


def show_command(directory: Path | None, config: Path | None, *, command: str = "baseline show") -> int:
    """Print every baseline file's table; 1 when a file cannot be used, 2 on a bad configuration."""
    try:
        settings = project_settings(config)
    except ToolError as exc:
        print(f"sglang-perf {command}: {exc}", file=sys.stderr)
        return 2
    folder = baseline_dir(directory, settings)
    found = read_directory(folder)
    max_age = None if settings is None else settings.baseline_max_age
    if not found.files and not found.problems:
        print(f"no baselines in {folder}/ (record some with: pytest --sglang-update-baselines)")
    now = datetime.now(UTC)
    for number, baseline in enumerate(found.files):
        if number:
            print()
        for line in file_table(baseline, max_age, now):
            print(line)
    old = sum(is_old(e, max_age, now) for f in found.files for e in f.entries.values())
    if old and max_age is not None:
        line = (f"{plural(old, 'entry', 'entries')} older than baseline_max_age ({duration_text(max_age)}): refresh "
                f"{'it' if old == 1 else 'them'} (pytest --sglang-update-baselines, or sglang-perf baseline accept "
                "RESULTS.json)")
        print("\n" + "\n".join(wrap_lines([line])))
    for problem in found.problems:
        print(f"sglang-perf {command}: {problem}", file=sys.stderr)
    return 1 if found.problems else 0


def file_table(baseline: BaselineFile, max_age: float | None, now: datetime | None = None) -> Iterator[str]:
    """The header and the per-test tables of one baseline file."""
    yield from file_header(baseline)
    by_test: dict[str, dict[str, BaselineEntry]] = {}
    for (test_id, variant), entry in sorted(baseline.entries.items()):
        by_test.setdefault(test_id, {})[variant] = entry
    for test_id, entries in by_test.items():
        yield ""
        yield f"  {test_id}"
        yield from cells_table(entries, max_age, now or datetime.now(UTC))


def file_header(baseline: BaselineFile) -> Iterator[str]:
    env = baseline.environment
    simulated = bool(env.get("simulated")) or baseline.environment_key.startswith(SIMULATED_PREFIX)
    yield (f"{baseline.path}: {plural(len(baseline.entries), 'cell')}"
           f"{', SIMULATED (numbers from the simulator, not a GPU)' if simulated else ''}")
    yield f"  environment key: {baseline.environment_key}"
    yield f"  model: {_text(env.get('model'))}"
    versions = ", ".join(f"{label} {_text(env.get(key))}" for key, label in _VERSIONS)
    yield f"  versions: {versions}"
    yield f"  GPUs: {_gpus(env.get('gpus'))}; driver {_text(env.get('driver'))}"
    if baseline.stored_schema < SCHEMA_VERSION:
        yield (f"  stored in schema {baseline.stored_schema}: read by upgrading it; the next write stores it in "
               f"schema {SCHEMA_VERSION}")


def cells_table(entries: Mapping[str, BaselineEntry], max_age: float | None, now: datetime) -> Iterator[str]:
    """Rows: metrics, then n, recorded, commit, source; columns: the variants (split to stay within 120)."""
    variants = list(entries)
    names = _metric_names(entries.values())
    rows: list[tuple[str, list[str]]] = [("metric", variants)]
    for name in names:
        rows.append((name, [_median(entries[v], name) for v in variants]))
    rows.append(("n", [_count(entries[v]) for v in variants]))
    rows.append(("recorded", [_recorded(entries[v], max_age, now) for v in variants]))
    rows.append(("commit", [entries[v].commit or "-" for v in variants]))
    rows.append(("source", [source_text(entries[v]) for v in variants]))
    yield from render_columns(rows)


def render_columns(rows: Sequence[tuple[str, list[str]]]) -> Iterator[str]:
    """Aligned columns: a label, then one column per value; columns beyond the width go to a further block."""
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(values[i]) for _, values in rows) for i in range(len(rows[0][1]))]
    blocks: list[list[int]] = [[]]
    used = len(_INDENT) + label_width
    for index, width in enumerate(widths):
        if blocks[-1] and used + len(_GAP) + width > WIDTH:
            blocks.append([])
            used = len(_INDENT) + label_width
        blocks[-1].append(index)
        used += len(_GAP) + width
    for number, block in enumerate(blocks):
        if number:
            yield ""
        for label, values in rows:
            cells = _GAP.join(values[i].ljust(widths[i]) for i in block)
            yield f"{_INDENT}{label.ljust(label_width)}{_GAP}{cells}".rstrip()


def _metric_names(entries: Iterable[BaselineEntry]) -> list[str]:
    present = {name for entry in entries for name in entry.summaries}
    known = [name for name in GATED_ORDER if name in present]
    return known + sorted(present - set(known))


def _median(entry: BaselineEntry, name: str) -> str:
    summary = entry.summaries.get(name)
    return "-" if summary is None else format_value(name, summary.median)


def _count(entry: BaselineEntry) -> str:
    boots = len(entry.boot_records())
    return f"{len(entry.samples)} in {plural(boots, 'boot')}"


def _recorded(entry: BaselineEntry, max_age: float | None, now: datetime) -> str:
    recorded = recorded_time(entry)
    age = age_seconds(entry, now)
    if recorded is None or age is None:
        return entry.recorded_at
    old = ", OLD" if is_old(entry, max_age, now) else ""
    return f"{recorded.date().isoformat()} ({duration_text(age)}{old})"


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _gpus(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return _text(value)
