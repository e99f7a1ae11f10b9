"""A user's project folder with the tiny model, and pytest run inside it as a user types it: what the real-SGLang
tests of this folder share (test_real_sglang.py, test_real_prefix_cache.py, test_older_release.py). No tests here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

MAX_TOTAL_TOKENS = 32768
"""A small KV cache: SGLang on CPU otherwise sizes it to most of RAM (15 GB, 30 s to allocate)."""
RUN_TIMEOUT = 600.0
"""Seconds for one inner pytest run (at most two boots of ~20 s, a failed one and measurements: wide margin)."""
RECORD_VAR = "SGLANG_PERF_CPU_TEST_RECORD"
"""Where the inner test files record what they saw of the server (a JSON line each)."""


@dataclass(frozen=True)
class Project:
    """A user's project folder: the tiny model, pyproject.toml with the matrix, a test file."""

    path: Path

    @property
    def record_file(self) -> Path:
        return self.path / "record.jsonl"

    def records(self, kind: str) -> list[dict[str, Any]]:
        lines = self.record_file.read_text().splitlines() if self.record_file.exists() else []
        return [entry for entry in map(json.loads, lines) if entry["kind"] == kind]


@dataclass(frozen=True)
class Run:
    """One inner pytest run: its output, the files it wrote, and what was left of its servers after it."""

    project: Project
    name: str
    result: pytest.RunResult
    sessions: frozenset[int]
    """The session ids of the servers it launched (the launcher starts each in a session of its own)."""
    leftovers: tuple[str, ...]

    @property
    def out(self) -> str:
        return self.result.stdout.str()

    @property
    def log_dir(self) -> Path:
        return self.project.path / f"logs-{self.name}"

    def log(self, variant: str) -> str:
        return (self.log_dir / f"{variant}.log").read_text(encoding="utf-8", errors="replace")

    def cells(self) -> dict[str, dict[str, Any]]:
        data = json.loads((self.project.path / f"results-{self.name}.json").read_text())
        return {cell["variant"]: cell for cell in data["cells"] if cell["test_id"].endswith("test_red_black_tree")}


def launched_sessions(out: str) -> frozenset[int]:
    """The pids the plugin reported launching (`[name] booting (launched: pid N, port P)`): each server is the
    leader of its own session, and SGLang's schedulers and detokenizer stay in it even when orphaned (their
    environment is unreadable: setproctitle writes the `sglang::` title over it)."""
    return frozenset(int(pid) for pid in re.findall(r"\] booting \(.*?pid (\d+), port \d+\)", out))


def session_processes(sessions: frozenset[int]) -> list[psutil.Process]:
    """Live (non-zombie) processes in any of these sessions."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def _describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())}"
    except psutil.Error:
        return f"{proc.pid} (gone)"


def _kill_sessions(sessions: frozenset[int]) -> None:
    procs = session_processes(sessions)
    for proc in procs:
        proc.kill()
    psutil.wait_procs(procs, timeout=10)


def _interrupt(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM the inner pytest (the plugin stops its servers), then SIGKILL; return what it printed."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate(timeout=10)


def run_pytest(project: Project, name: str, *args: str, state_dir: Path | None = None) -> Run:
    """`pytest` in the project folder, as a user types it, bounded by RUN_TIMEOUT. With `state_dir` (the kept
    servers' folder of a run with --sglang-reuse) its servers are left running: the caller stops them.

    The measurement's conditions are recorded but not used (`--sglang-ignore-conditions`), as everywhere in this
    suite but the tests about them (conftest.py): on a busy 2-core CI a real cell is now and then measured under
    "disturbed" conditions (once, the client's event-loop lag p99 over 5 ms or other tasks on the cores), and its
    results file then rightly offers `baseline accept` no entry: the cycle these tests follow would lose a baseline
    for a reason that is the CI host's, not the plugin's. The project's tolerances (_pyproject) are wide for the same
    host, so that an unchanged server is not red without them."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", f"--sglang-log-dir=logs-{name}",
            f"--sglang-results=results-{name}.json", "--sglang-ignore-conditions", *args]
    # The plugin's own SGLANG_PERF_* settings (e.g. SGLANG_PERF_SIMULATE=1 in a developer's shell) stay outside.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_PERF_") and k != "PYTEST_ADDOPTS"}
    env[RECORD_VAR] = str(project.record_file)
    if state_dir is not None:
        env["SGLANG_PERF_STATE_DIR"] = str(state_dir)
    with subprocess.Popen(argv, cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            out, err = _interrupt(proc)
            pytest.fail(f"inner pytest run {name!r} exceeded {RUN_TIMEOUT:g} s:\n{out}\n{err}")
    sessions = launched_sessions(out)
    leftovers = tuple(_describe(p) for p in session_processes(sessions))
    if state_dir is None:
        _kill_sessions(sessions)  # a failing run must not leave servers behind either
    result = pytest.RunResult(proc.returncode, out.splitlines(), err.splitlines(), 0.0)
    return Run(project, name, result, sessions, leftovers)
