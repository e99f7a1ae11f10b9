"""`sglang-perf baseline prune [PATHS...]`: baseline entries whose test or variant no longer exists.

A variant exists when the configuration names it (settings.variants); a test when pytest still collects it
(collect.py, in the project's root, for PATHS or pytest's default). The default is a dry run listing what would go;
`--apply` removes them, each file rewritten under the same lock as BaselineStore.write (a file left with no entry is
deleted). When collection fails nothing is pruned (exit 2, with pytest's output); when every entry would go, that
takes `--apply --all` (a wrong PATHS or a broken conftest looks just like that).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang_perf.cli.baseline.collect import collect_node_ids, collected_test_ids
from pytest_sglang_perf.cli.baseline.project import ToolError, plural, read_directory
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.gate.baseline import EntryKey
from pytest_sglang_perf.gate.baseline_parse import BaselineFile
from pytest_sglang_perf.gate.cell_ids import collected_test
from pytest_sglang_perf.gate.store import BaselineStore
from pytest_sglang_perf.wrapping import wrap_lines


@dataclass(frozen=True)
class Gone:
    """An entry that would go, and why."""

    file: BaselineFile
    key: EntryKey
    why: str


def prune_command(settings: Settings, directory: Path, paths: Sequence[str], *, apply: bool, everything: bool) -> int:
    """List (or with `apply` remove) the entries of tests or variants that no longer exist; 0 done, 1 refused
    (everything would go without --all), 2 on bad input or a failed collection."""
    found = read_directory(directory)
    if found.problems:
        raise ToolError("; ".join(found.problems))
    variants = [v.name for v in settings.variants]
    tests = collected_test_ids(collect_node_ids(settings.root, paths), variants)
    gone = list(stale_entries(found.files, tests, variants))
    total = sum(len(f.entries) for f in found.files)
    refused = bool(gone) and len(gone) == total and not everything
    verb = "removed" if apply and not refused else "would remove"
    lines = [f"{verb}  {g.key[0]} [{g.key[1]}] from {g.file.path}: {g.why}" for g in gone]
    if refused:
        lines.append(f"sglang-perf baseline prune: every entry ({total}) would go, which a wrong PATHS or a broken "
                     f"conftest also gives; nothing was removed. Check the tests collected in {settings.root}; to "
                     "prune them all, pass --apply --all")
        print("\n".join(wrap_lines(lines)))
        return 1
    if apply:
        removed = [line for f, keys in _by_file(gone) if (line := remove_entries(f, keys))]
        lines.extend(removed)
    done = "removed" if apply else "would be removed (a dry run: pass --apply to remove them)"
    lines.append(f"sglang-perf baseline prune: {plural(len(gone), 'entry', 'entries')} of {total} {done}"
                 if gone else f"sglang-perf baseline prune: nothing to prune ({plural(total, 'entry', 'entries')} "
                              "checked)")
    print("\n".join(wrap_lines(lines)))
    return 0


def stale_entries(files: Sequence[BaselineFile], tests: Collection[str], variants: Sequence[str]) -> Iterator[Gone]:
    """Each entry whose variant the configuration no longer names, or whose test pytest no longer collects."""
    for baseline in files:
        for (test_id, variant) in sorted(baseline.entries):
            if variant not in variants:
                why = f"variant {variant!r} is not in the configuration (variants: {', '.join(variants)})"
            elif collected_test(test_id) not in tests:
                why = "pytest no longer collects this test"
            else:
                continue
            yield Gone(baseline, (test_id, variant), why)


def _by_file(gone: Sequence[Gone]) -> list[tuple[BaselineFile, set[EntryKey]]]:
    grouped: dict[Path, tuple[BaselineFile, set[EntryKey]]] = {}
    for item in gone:
        grouped.setdefault(item.file.path, (item.file, set()))[1].add(item.key)
    return list(grouped.values())


def remove_entries(baseline: BaselineFile, keys: Collection[EntryKey]) -> str | None:
    """Remove `keys` from the baseline file (BaselineStore.remove: under the writers' lock, atomically); a line
    saying so, None when none of them was there any more."""
    left = BaselineStore(baseline.path.parent, baseline.environment_key).remove(keys)
    if left is None:
        return None
    if not left:
        return f"deleted {baseline.path}: no entry left"
    return f"rewrote {baseline.path}: {plural(left, 'entry', 'entries')} kept"
