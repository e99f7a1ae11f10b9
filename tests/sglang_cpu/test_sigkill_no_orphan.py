"""pytest killed by SIGKILL while a real SGLang server runs (a hard CI cancel, the OOM killer): the server's watchdog
stops the whole tree (main process, sglang::scheduler, sglang::detokenizer) and exits.

One boot of the tiny model (~20-30 s on 2 cores), then SIGKILL of the pytest that launched it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from releases import CPU_ARGS

BOOT_TIMEOUT = 300.0
"""Seconds for the inner pytest to boot the server and record its tree (a boot takes ~20-30 s here)."""
DEADLINE = 30.0
"""Seconds for everything to be gone after pytest died: the default 5 s grace, SIGKILL, a busy 2-core machine."""
WATCHDOG_MODULE = "pytest_sglang_perf.server.watchdog"

PYPROJECT = f"""
[tool.sglang_perf]
model = "tiny-llama"
args = {json.dumps(CPU_ARGS)}
startup_timeout = "5m"
[tool.sglang_perf.variants]
default = []
"""

HOLDING_TEST = """
import json, os, pathlib, time

import psutil


def test_hold(sglang_perf):
    root = psutil.Process(sglang_perf.server.pid)
    tree = [{"pid": p.pid, "created": p.create_time(), "title": " ".join(p.cmdline()).strip()}
            for p in (root, *root.children(recursive=True))]
    pathlib.Path("tree.json.tmp").write_text(json.dumps({"sid": os.getsid(root.pid), "tree": tree}))
    pathlib.Path("tree.json.tmp").rename("tree.json")
    time.sleep(3600)
"""


def _start_pytest(project: Path) -> subprocess.Popen[bytes]:
    # The plugin's own SGLANG_PERF_* settings (e.g. SGLANG_PERF_SIMULATE=1 in a developer's shell) stay outside.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_PERF_") and k != "PYTEST_ADDOPTS"}
    with (project / "pytest.out").open("wb") as out:
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--sglang-log-dir=logs"]
        return subprocess.Popen(argv, cwd=project, stdout=out, stderr=subprocess.STDOUT, env=env)


def _wait_for_tree(project: Path, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    deadline = time.monotonic() + BOOT_TIMEOUT
    record = project / "tree.json"
    while not record.exists():
        output = (project / "pytest.out").read_text(errors="replace")
        assert proc.poll() is None, f"inner pytest exited with {proc.returncode} before its server was up:\n{output}"
        assert time.monotonic() < deadline, f"no server after {BOOT_TIMEOUT:g} s:\n{output}"
        time.sleep(0.5)
    data: dict[str, Any] = json.loads(record.read_text())
    return data


def _same_process(pid: int, created: float) -> psutil.Process | None:
    """That process (not a later one with its pid), while it runs; a zombie awaiting its reaper is gone."""
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(pid)
        if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
            return process
    return None


def _left(sid: int, tree: list[dict[str, Any]], watchdog: dict[str, Any]) -> list[psutil.Process]:
    """What still runs of the server's session, of the tree the test saw, and the watchdog."""
    in_session = []
    for process in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                in_session.append(process)
    seen = [_same_process(entry["pid"], entry["created"]) for entry in (*tree, watchdog)]
    return [*in_session, *(p for p in seen if p is not None)]


def test_sigkill_of_pytest_leaves_no_sglang_process(tiny_model: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(tiny_model, project / "tiny-llama")
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "test_hold.py").write_text(HOLDING_TEST)
    inner = _start_pytest(project)
    try:
        record = _wait_for_tree(project, inner)
        (watchdog,) = (p for p in psutil.Process(inner.pid).children() if WATCHDOG_MODULE in " ".join(p.cmdline()))
        watched = {"pid": watchdog.pid, "created": watchdog.create_time()}
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()
    titles = {entry["title"] for entry in record["tree"]}
    assert {"sglang::scheduler", "sglang::detokenizer"} <= titles, titles
    deadline = time.monotonic() + DEADLINE
    while _left(record["sid"], record["tree"], watched) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _left(record["sid"], record["tree"], watched)
    for process in left:  # no leak into the next tests, whatever the outcome
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert left == [], (project / "pytest.out").read_text(errors="replace")
    assert "died without stopping the server" in (project / "logs" / "default.log").read_text(errors="replace")
