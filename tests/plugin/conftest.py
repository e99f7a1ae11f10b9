"""Every plugin test runs a user's project: the calling shell's plugin and simulator settings stay out of it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The plugin's and the simulator's environment variables of the calling shell do not reach the runs, nor a
GitHub job's summary file (each run would append its report to it), nor the developer's kept servers (a run's GPU
claim stops idle kept servers: docs/reuse.md): each test has a state folder of its own."""
    for name in os.environ:
        if name.startswith(("SGLANG_PERF_", "SGLANG_SIM_")) or name == "GITHUB_STEP_SUMMARY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("SGLANG_PERF_IGNORE_CONDITIONS", "1")  # as the root conftest.py says
    monkeypatch.setenv("SGLANG_PERF_STATE_DIR", str(tmp_path / "sglang-perf-state"))
    yield
