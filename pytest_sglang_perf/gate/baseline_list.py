"""The `sglang-perf baselines` listing: each baseline file of a directory, its cells and their medians, each in
its metric's unit (gate/terminal.py `format_value`). A file that cannot be used is named with its problem and fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang_perf.gate.baseline import BaselineEntry, BaselineFileError, EntryKey
from pytest_sglang_perf.gate.baseline_parse import load_entries
from pytest_sglang_perf.gate.terminal import format_value
from pytest_sglang_perf.measurement.metrics import GATED_ORDER


@dataclass(frozen=True)
class Listing:
    lines: list[str] = field(default_factory=list)
    """What to print, file by file."""
    problems: list[str] = field(default_factory=list)
    """One message per file that cannot be used."""


def list_baselines(directory: Path) -> Listing:
    listing = Listing()
    for path in sorted(directory.glob("*.json")):
        try:
            entries = load_entries(path, path.stem)
        except BaselineFileError as exc:
            listing.problems.append(str(exc))
            continue
        listing.lines.extend(file_lines(path, entries))
    return listing


def file_lines(path: Path, entries: Mapping[EntryKey, BaselineEntry]) -> Iterator[str]:
    yield f"{path}: {len(entries)} cell{'' if len(entries) == 1 else 's'} (medians)"
    for (test_id, variant), entry in sorted(entries.items()):
        yield f"  {test_id} [{variant}]: {_provenance(entry)}"
        yield f"    {medians_text(entry)}"


def medians_text(entry: BaselineEntry) -> str:
    """`output_throughput 52.31 tok/s, ttft 120.4 ms, ...` in the gate's metric order."""
    names = sorted(entry.summaries, key=lambda n: GATED_ORDER.index(n) if n in GATED_ORDER else len(GATED_ORDER))
    return ", ".join(f"{name} {format_value(name, entry.summaries[name].median)}" for name in names)


def _provenance(entry: BaselineEntry) -> str:
    boots = len(entry.boot_records())
    commit = f" at commit {entry.commit}" if entry.commit else ""
    return (f"{len(entry.samples)} requests over {boots} boot{'' if boots == 1 else 's'}, "
            f"recorded {entry.recorded_at}{commit}")
