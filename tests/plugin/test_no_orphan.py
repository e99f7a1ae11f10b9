"""pytest killed by SIGKILL (a hard CI cancel, the OOM killer) while its server runs: the server's watchdog stops the
whole process group, and exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from perf_project import server_processes, write_project

from pytest_sglang_perf.server.process_tree import group_members

DEADLINE = 20.0
"""Seconds for the server's group and the watchdog to be gone after pytest died (a busy 2-core machine)."""
WATCHDOG_MODULE = "pytest_sglang_perf.server.watchdog"

HOLDING_TEST = """
import os, pathlib, time

def test_hold(sglang_perf):
    pid = sglang_perf.server.pid
    pathlib.Path("server.pid.tmp").write_text(f"{pid} {os.getpgid(pid)}")
    pathlib.Path("server.pid.tmp").rename("server.pid")
    time.sleep(600)
"""


def _start_pytest(cwd: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with (cwd / "pytest.out").open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate"],
                                cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)


def _wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        output = (path.parent / "pytest.out").read_text()
        assert proc.poll() is None, f"inner pytest exited with {proc.returncode} before its server was up:\n{output}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout:g} s:\n{output}"
        time.sleep(0.2)
    return path.read_text()


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _left(pgid: int, watchdogs: list[psutil.Process], project: Path) -> list[psutil.Process]:
    """What still runs (zombies awaiting their reaper are gone) of the server's group, the watchdog, and any process
    whose command line names the project (the simulator's model folder is there)."""
    return [p for p in (*group_members(pgid), *watchdogs, *server_processes(project)) if _running(p)]


def test_sigkill_of_pytest_leaves_no_server_and_no_watchdog(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_hold=HOLDING_TEST)
    inner = _start_pytest(pytester.path)
    try:
        server_pid, pgid = map(int, _wait_for_file(pytester.path / "server.pid", inner, timeout=120).split())
        watchdogs = [p for p in psutil.Process(inner.pid).children() if WATCHDOG_MODULE in " ".join(p.cmdline())]
        group = group_members(pgid)
        assert len(watchdogs) == 1 and server_pid == pgid and server_pid in {p.pid for p in group}
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()
    deadline = time.monotonic() + DEADLINE
    while _left(pgid, watchdogs, pytester.path) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _left(pgid, watchdogs, pytester.path)
    for process in left:  # no leak into the next tests, whatever the outcome
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert left == []
