"""`sglang-perf baseline validate [PATH...]`: a CI check of baseline files (default: the project's baseline_dir).

Errors (exit 1): a file that does not parse (schema, fields, boots' sample counts, an environment_key other than its
file name: gate/baseline_parse.py says which), an entry that disagrees with itself (consistency.py: summaries vs
samples, unknown metrics, params vs identity, recorded_at). Warnings (exit 0): entries older than the configured
`baseline_max_age`, a file stored in an older schema. One line per problem, naming the file, the test, the variant
and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pytest_sglang_perf.cli.baseline.consistency import entry_problems
from pytest_sglang_perf.cli.baseline.project import ToolError, duration_text, is_old, plural
from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineFileError, age_seconds
from pytest_sglang_perf.gate.baseline_parse import BaselineFile, read_baseline_file
from pytest_sglang_perf.wrapping import wrap_lines

_REFRESH = "re-record it (pytest 'TEST' --sglang-update-baselines), accept fresh results, or restore it from git"


@dataclass(frozen=True)
class Finding:
    error: bool
    text: str

    def __str__(self) -> str:
        return f"{'error' if self.error else 'warning'}: {self.text}"


def baseline_paths(paths: Sequence[Path]) -> list[Path]:
    """The baseline files named, or found in the directories named; raises ToolError for a path that is neither."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            found.append(path)
        else:
            raise ToolError(f"{path}: no such file or directory; pass baseline files or their directory "
                            "(default: the configuration's baseline_dir)")
    return found


def validate_command(paths: Sequence[Path], max_age: float | None) -> int:
    findings: list[Finding] = []
    entries = 0
    files = baseline_paths(paths)
    for path in files:
        checked, count = validate_file(path, max_age)
        findings.extend(checked)
        entries += count
    errors = sum(f.error for f in findings)
    lines = [str(f) for f in findings]
    lines.append(f"sglang-perf baseline validate: {plural(len(files), 'file')}, {plural(entries, 'entry', 'entries')}: "
                 f"{plural(errors, 'error')}, {plural(len(findings) - errors, 'warning')}")
    print("\n".join(wrap_lines(lines)))
    return 1 if errors else 0


def validate_file(path: Path, max_age: float | None, now: datetime | None = None) -> tuple[list[Finding], int]:
    """The file's findings and how many entries it holds."""
    try:
        baseline = read_baseline_file(path, path.stem)
    except BaselineFileError as exc:
        return [Finding(True, str(exc))], 0
    if baseline is None:
        return [Finding(True, f"{path}: no such file")], 0
    return list(_findings(baseline, max_age, now or datetime.now(UTC))), len(baseline.entries)


def _findings(baseline: BaselineFile, max_age: float | None, now: datetime) -> Iterator[Finding]:
    path = baseline.path
    if baseline.stored_schema < SCHEMA_VERSION:
        yield Finding(False, f"{path}: stored in schema {baseline.stored_schema}, read by upgrading it; the next "
                             f"write stores it in schema {SCHEMA_VERSION} (commit that change when it comes)")
    for (test_id, variant), entry in sorted(baseline.entries.items()):
        where = f"{path}: {test_id} [{variant}]"
        fix = _REFRESH.replace("TEST", test_id)
        for problem in entry_problems(entry):
            yield Finding(True, f"{where}: {problem}; {fix}")
        if max_age is not None and is_old(entry, max_age, now):
            age = age_seconds(entry, now) or 0.0
            yield Finding(False, f"{where}: recorded {entry.recorded_at}, {duration_text(age)} ago, older than "
                                 f"baseline_max_age ({duration_text(max_age)}); {fix}")
