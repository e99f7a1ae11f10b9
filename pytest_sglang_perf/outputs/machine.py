"""The machine and the commit a session ran on, for the results file, the Markdown report and baseline entries.

Recorded in simulated runs too: they are the host's facts, labelled as such, since the numbers come from the
simulator and not from this machine's GPUs (if it has any).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.environment import Gpus

_CPUINFO = Path("/proc/cpuinfo")
MEASURED = "the machine that measured these numbers"
SIMULATED_HOST = "the host that ran the simulator: its CPU and GPUs did not produce these (SIMULATED) numbers"


@dataclass(frozen=True)
class Commit:
    """The checkout's commit (short hash) and whether tracked files differ from it; None when not a git checkout."""

    id: str | None
    dirty: bool | None


def git_commit(root: Path) -> Commit:
    """HEAD of the git checkout at `root`, and whether its tracked files have changes."""
    head = _git(root, "rev-parse", "--short=12", "HEAD")
    if head is None:
        return Commit(None, None)
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return Commit(head or None, None if status is None else bool(status))


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def cpu_model() -> str | None:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` says; None when nothing does."""
    try:
        text = _CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or None


def machine_facts(commit: Commit, gpus: Gpus, *, simulated: bool) -> dict[str, Any]:
    """The `machine` section of a results document."""
    return {
        "label": SIMULATED_HOST if simulated else MEASURED,
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": list(gpus.names),
        "driver": gpus.driver,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "commit": commit.id,
        "dirty": commit.dirty,
    }
