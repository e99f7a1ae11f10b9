"""What every `sglang-perf baseline` command shares: the project's settings and baseline directory (found as
`sglang-perf check` finds them), the baseline files of a directory, and an entry's age."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.baseline import BaselineEntry, BaselineFileError, age_seconds
from pytest_sglang_perf.gate.baseline_parse import BaselineFile, read_baseline_file

DEFAULT_DIR = Path("baselines")


class ToolError(SGLangPerfError):
    """Bad input to a baseline command (exit 2): the message names the file or flag and the fix."""


def project_settings(config: Path | None, *, required: bool = False) -> Settings | None:
    """The settings of --config, else of the nearest configuration from the current directory up; None when there
    is none (a ToolError when `required`); raises ToolError naming the file on a bad value."""
    from pytest_sglang_perf.config.discovery import load_project_settings
    from pytest_sglang_perf.config.settings import ConfigError

    try:
        settings = load_project_settings(Path.cwd(), config)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None
    if settings is None and required:
        raise ToolError("no configuration found (sglang-perf.toml, or [tool.sglang_perf] in pyproject.toml, in this "
                        "directory or one above it; or pass --config PATH)")
    return settings


def baseline_dir(directory: Path | None, settings: Settings | None) -> Path:
    """--dir, else the configuration's baseline_dir, else ./baselines."""
    if directory is not None:
        return directory
    return DEFAULT_DIR if settings is None else settings.baseline_dir


@dataclass(frozen=True)
class DirectoryFiles:
    files: list[BaselineFile]
    problems: list[str]
    """One message per file that cannot be used (BaselineFileError's text: the file, the problem, the fix)."""


def read_directory(directory: Path) -> DirectoryFiles:
    """Every baseline file (`*.json`) of `directory`, in name order; a missing directory has none."""
    files: list[BaselineFile] = []
    problems: list[str] = []
    for path in sorted(directory.glob("*.json")):
        try:
            found = read_baseline_file(path, path.stem)
        except BaselineFileError as exc:
            problems.append(str(exc))
            continue
        if found is not None:
            files.append(found)
    return DirectoryFiles(files, problems)


def is_old(entry: BaselineEntry, max_age: float | None, now: datetime | None = None) -> bool:
    """Older than the configured baseline_max_age (never, without one)."""
    age = age_seconds(entry, now)
    return max_age is not None and age is not None and age > max_age


def duration_text(seconds: float) -> str:
    """`3d`, `5h`, `12m`, `40s`: the largest whole unit (a time in the future reads `0s`)."""
    seconds = max(seconds, 0.0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


def source_text(entry: BaselineEntry) -> str:
    """`recorded`, `accepted: run1.json (ci-gpu-3, dirty)`, `unknown` (written before schema 2 kept it)."""
    source = entry.source
    if source is None:
        return "unknown"
    text = str(source.get("how"))
    if source.get("results_file"):
        text += f": {source['results_file']}"
    where = [str(source["host"])] if source.get("host") else []
    if source.get("dirty"):
        where.append("dirty")
    return text + (f" ({', '.join(where)})" if where else "")


def keys_text(keys: Sequence[str]) -> str:
    return ", ".join(repr(k) for k in keys) if keys else "none"
