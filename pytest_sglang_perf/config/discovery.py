"""Which configuration a command run anywhere in a project uses (`sglang-perf check`, `sglang-perf baselines`).

pytest reads the configuration from its rootdir (config/settings.py `find_config`); a command run from a
subdirectory finds it the way pytest finds its inifile: the nearest directory, from the current one up, that holds
a `sglang-perf.toml` or a `pyproject.toml` with a `[tool.sglang_perf]` table (in one directory, the same order as
`find_config`: `sglang-perf.toml` first).
"""

from __future__ import annotations

from pathlib import Path

from pytest_sglang_perf.config.settings import Settings, find_config, load_settings


def find_config_dir(start: Path) -> Path | None:
    """The nearest directory from `start` up holding the project's perf configuration, or None."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if find_config(directory, None) is not None:
            return directory
    return None


def load_project_settings(start: Path, explicit: Path | None = None) -> Settings | None:
    """The settings of `explicit` when given, else of the nearest configuration from `start` up (None: none found).
    Raises ConfigError naming the file on a bad value."""
    if explicit is not None:
        return load_settings(start, explicit)
    directory = find_config_dir(start)
    return None if directory is None else load_settings(directory)
