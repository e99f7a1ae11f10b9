"""Where the servers' logs go (server/logdirs.py): a folder per run, the oldest pruned, nothing else touched."""

from __future__ import annotations

import re
import time
from pathlib import Path

from pytest_sglang_perf.server.logdirs import RunLogs, prune_runs, run_folder_name, shown_path


def test_run_folder_names_sort_in_run_order() -> None:
    first = run_folder_name(time.mktime((2025, 6, 11, 9, 5, 3, 0, 0, -1)), pid=812)
    assert first == "20250611-090503-812"
    assert re.fullmatch(r"\d{8}-\d{6}-\d+", run_folder_name())
    assert run_folder_name(time.mktime((2025, 6, 11, 10, 0, 0, 0, 0, -1)), pid=9) > first


def test_pruning_keeps_the_newest_runs_and_never_touches_other_folders(tmp_path: Path) -> None:
    runs = [tmp_path / f"20250101-0000{i:02d}-7" for i in range(12)]
    for run in runs:
        run.mkdir()
        (run / "default.log").write_text("log")
    mine = tmp_path / "notes"
    mine.mkdir()
    (tmp_path / "20250101-000099-1.txt").write_text("a file, not a run folder")
    removed = prune_runs(tmp_path, keep=10)
    assert removed == runs[:2]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [r.name for r in runs[2:]] + ["notes", "20250101-000099-1.txt"])
    assert prune_runs(tmp_path / "missing") == []


def test_run_logs_make_and_prune_a_run_folder_or_use_the_configured_one(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for i in range(10):
        (root / f"20000101-0000{i:02d}-1").mkdir(parents=True)
    logs = RunLogs(None, root, keep=10)
    assert logs.managed and logs.path.parent == root and not logs.path.exists()
    assert logs.folder() == logs.path and logs.path.is_dir()
    assert len(list(root.iterdir())) == 10 and not (root / "20000101-000000-1").exists()
    configured = RunLogs(tmp_path / "mine", root)
    assert not configured.managed and configured.folder() == tmp_path / "mine"
    assert len(list(root.iterdir())) == 10


def test_shown_path_is_relative_inside_the_working_directory(tmp_path: Path) -> None:
    assert shown_path(tmp_path / "a" / "b.log", tmp_path) == "a/b.log"
    assert shown_path(Path("/elsewhere/b.log"), tmp_path) == "/elsewhere/b.log"
