"""Where the servers' log files go: one folder per run under a logs root, the oldest runs pruned.

Plain Python (no pytest). The plugin picks the root (pytest's cache dir, `.pytest_cache/d/sglang-perf/logs`, or
`fallback_root()` when the cache provider is disabled); a run's folder is named by its start time and pid, so
that names sort in run order and two runs started in the same second never share one. Only folders with such a
name are ever pruned: a logs root never loses anything the plugin did not write.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

KEEP_RUNS = 10
"""Run folders kept under a logs root (the new one included)."""
_RUN_NAME = re.compile(r"^\d{8}-\d{6}-\d+$")


def run_folder_name(now: float | None = None, pid: int | None = None) -> str:
    """`20250611-142233-8044`: the run's local start time and pytest's pid."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{stamp}-{os.getpid() if pid is None else pid}"


def fallback_root() -> Path:
    """The logs root without pytest's cache dir: one folder per user in the system's temp dir."""
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"pytest-sglang-perf-{user}" / "logs"


def prune_runs(root: Path, keep: int = KEEP_RUNS) -> list[Path]:
    """Remove all but the `keep` newest run folders under `root` (by name: start time, then pid); returns the
    removed ones. A folder that cannot be removed (another user's, in use) stays, silently."""
    if not root.is_dir():
        return []
    runs = sorted((p for p in root.iterdir() if p.is_dir() and _RUN_NAME.match(p.name)), key=_order)
    removed = runs[: max(len(runs) - keep, 0)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _order(path: Path) -> tuple[str, int]:
    stamp, _, pid = path.name.rpartition("-")
    return stamp, int(pid)


def shown_path(path: Path, cwd: Path) -> str:
    """`path` as a reader types it: relative to `cwd` when inside it, else absolute."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


class RunLogs:
    """This run's log folder: the configured one, or a new run folder under the logs root (created, and the
    oldest run folders pruned, when the first server boots)."""

    def __init__(self, configured: Path | None, root: Path | None, keep: int = KEEP_RUNS) -> None:
        self.managed = configured is None
        """Whether the folder is a run folder the plugin names and prunes (no log_dir was configured)."""
        self.path = configured if configured is not None else (root or fallback_root()) / run_folder_name()
        self._keep = keep

    def folder(self) -> Path:
        """The folder, created on first use."""
        if not self.path.is_dir():
            self.path.mkdir(parents=True, exist_ok=True)
            if self.managed:
                prune_runs(self.path.parent, self._keep)
        return self.path
