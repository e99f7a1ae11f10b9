"""`sglang-perf baseline diff OLD NEW`: what changed between two baseline files or folders, per cell and metric.

Each metric of a cell on both sides: the old and the new median, the relative change, and the verdict the gate would
give NEW measured against OLD (gate/compare.py `check_metric` on the entries' per-boot values, with the project's
tolerances and gate policy when a configuration is found, the metrics' defaults otherwise): `ok` is within the noise
band. Cells whose identity differs (another request, args, model or GPUs) are not comparable, as for the gate.
Files and cells on one side only are added or removed. diff_render.py prints it; gitfiles.py takes OLD from git.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang_perf.cli.baseline.project import ToolError
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.gate.baseline import BaselineEntry, BaselineFileError, EntryKey
from pytest_sglang_perf.gate.baseline_parse import BaselineFile, read_baseline_file
from pytest_sglang_perf.gate.compare import GatePolicy, MetricCheck, check_metric
from pytest_sglang_perf.gate.identity import differences
from pytest_sglang_perf.measurement.metrics import GATED_ORDER, METRICS

ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Side:
    """One side of the diff: baseline files by name, and how to call that side (a folder, a git revision)."""

    label: str
    files: Mapping[str, BaselineFile]
    single: bool = False
    """A baseline file was named (not a folder): two such sides are compared whatever their files' names."""


@dataclass(frozen=True)
class MetricChange:
    metric: str
    old: float | None
    new: float | None
    check: MetricCheck | None
    """The gate's verdict of NEW against OLD; None when one side lacks the metric or the cell is not comparable."""


@dataclass(frozen=True)
class CellChange:
    test_id: str
    variant: str
    status: str
    metrics: tuple[MetricChange, ...] = ()
    not_comparable: tuple[str, ...] = ()
    """What differs between the two entries' identities (the gate would call the new one stale)."""


@dataclass(frozen=True)
class FileChange:
    name: str
    status: str
    cells: tuple[CellChange, ...]


@dataclass(frozen=True)
class Judging:
    """The tolerances and policy the gate would use."""

    tolerances: Mapping[str, float]
    policy: GatePolicy

    @classmethod
    def of(cls, settings: Settings | None) -> Judging:
        if settings is None:
            return cls({name: m.default_tolerance for name, m in METRICS.items()}, GatePolicy())
        return cls({name: settings.tolerance(name) for name in METRICS},
                   GatePolicy(settings.gate.confidence, settings.gate.power))


def read_side(path: Path, label: str | None = None) -> Side:
    """A baseline file or a folder of them; raises ToolError for a path that is neither or a file that cannot be
    used."""
    if path.is_dir():
        paths = sorted(path.glob("*.json"))
    elif path.is_file():
        paths = [path]
    else:
        raise ToolError(f"{path}: no such file or directory; pass two baseline files or folders (or --git REV NEW)")
    files: dict[str, BaselineFile] = {}
    for found in paths:
        try:  # a single file may be a copy under another name (git show REV:PATH > old.json)
            baseline = read_baseline_file(found, None if path.is_file() else found.stem)
        except BaselineFileError as exc:
            raise ToolError(str(exc)) from None
        if baseline is not None:
            files[found.name] = baseline
    return Side(label or str(path), files, single=path.is_file())


def diff_sides(old: Side, new: Side, judging: Judging) -> list[FileChange]:
    """Per file name (two files named: compared whatever their names), what changed."""
    if old.single and new.single and len(old.files) == len(new.files) == 1 and set(old.files) != set(new.files):
        [(_, old_file)], [(name, new_file)] = old.files.items(), new.files.items()
        return [FileChange(name, CHANGED, diff_entries(old_file.entries, new_file.entries, judging))]
    out = []
    for name in sorted(set(old.files) | set(new.files)):
        before = old.files[name].entries if name in old.files else {}
        after = new.files[name].entries if name in new.files else {}
        status = ADDED if name not in old.files else REMOVED if name not in new.files else CHANGED
        out.append(FileChange(name, status, diff_entries(before, after, judging)))
    return out


def diff_entries(old: Mapping[EntryKey, BaselineEntry], new: Mapping[EntryKey, BaselineEntry],
                 judging: Judging) -> tuple[CellChange, ...]:
    cells = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            cells.append(CellChange(*key, ADDED))
        elif key not in new:
            cells.append(CellChange(*key, REMOVED))
        elif old[key].to_dict() == new[key].to_dict():
            cells.append(CellChange(*key, UNCHANGED))
        else:
            cells.append(cell_change(old[key], new[key], judging))
    return tuple(cells)


def cell_change(old: BaselineEntry, new: BaselineEntry, judging: Judging) -> CellChange:
    """Each metric of either entry, judged as the gate would judge NEW measured against OLD."""
    stale = _not_comparable(old, new)
    old_values, new_values = old.boot_values(), new.boot_values()
    names = [n for n in GATED_ORDER if n in old.summaries or n in new.summaries]
    metrics = []
    for name in names:
        before, after = old.summaries.get(name), new.summaries.get(name)
        check = None
        if not stale and name in old_values and name in new_values:
            measured = [v for boot in new_values[name] for v in boot]
            check = check_metric(name, old_values[name], measured, judging.tolerances[name], judging.policy)
        metrics.append(MetricChange(name, None if before is None else before.median,
                                    None if after is None else after.median, check))
    return CellChange(old.test_id, old.variant, CHANGED, tuple(metrics), tuple(stale))


def _not_comparable(old: BaselineEntry, new: BaselineEntry) -> Sequence[str]:
    if old.identity is None or new.identity is None:
        side = "old" if old.identity is None else "new"
        return [f"the {side} entry has no identity (recorded before it was kept)"]
    return differences(old.identity, new.identity)
