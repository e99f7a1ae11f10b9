"""A launched server's process tree: remembering its descendants, signalling them, waiting until they are gone.

Plain Python (no pytest). The server runs in its own session, so its process group id is its pid; a descendant
that left the group (a wrapper script's child calling setsid) is still reached through the tree seen so far.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable

import psutil

log = logging.getLogger(__name__)

KILL_WAIT = 10.0
"""Seconds to wait for processes to disappear after SIGKILL."""
TREE_SCAN_EVERY = 1.0
"""Seconds between scans of the process tree while booting (a scan reads every process's stat file)."""


class ProcessTree:
    """The root process of one launch and every descendant seen so far."""

    def __init__(self) -> None:
        self._root: psutil.Process | None = None
        self._seen: dict[int, psutil.Process] = {}
        self._next_scan = 0.0

    def attach(self, pid: int) -> None:
        """Follow the process `pid` (the launched server); nothing to follow when it is already gone."""
        try:
            self._root = psutil.Process(pid)
        except psutil.Error:
            self._root = None

    def scan_due(self) -> bool:
        """Whether TREE_SCAN_EVERY seconds have passed since the last track()."""
        return time.monotonic() >= self._next_scan

    def track(self) -> None:
        """Remember every descendant seen, so stop() reaches one that left the process group."""
        self._next_scan = time.monotonic() + TREE_SCAN_EVERY
        if self._root is None:
            return
        try:
            children = self._root.children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            self._seen.setdefault(child.pid, child)

    def descendants(self) -> list[psutil.Process]:
        """Every descendant seen so far (some may have exited since)."""
        return list(self._seen.values())

    def processes(self) -> list[psutil.Process]:
        """The root (when known) and every descendant seen so far."""
        return [p for p in (self._root, *self._seen.values()) if p is not None]


def exit_reason(code: int) -> str:
    """How a process that exited during boot ended: "exited with code 1 during boot", "killed by SIGKILL ..."."""
    if code >= 0:
        return f"exited with code {code} during boot"
    try:
        return f"killed by {signal.Signals(-code).name} during boot"
    except ValueError:
        return f"killed by signal {-code} during boot"


def alive(process: psutil.Process) -> bool:
    """Whether the process runs (a zombie does not)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(processes: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until none of `processes` runs (zombies count as gone); return those still running."""
    deadline = time.monotonic() + timeout
    running = [p for p in processes if alive(p)]
    while running and time.monotonic() < deadline:
        time.sleep(0.02)
        running = [p for p in running if alive(p)]
    return running


def signal_group(pgid: int, signum: signal.Signals) -> None:
    """Signal a process group; nothing happens when it is gone or not ours."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def signal_each(processes: Iterable[psutil.Process], signum: signal.Signals) -> None:
    """Signal each process; one that is gone (or whose pid was reused) is skipped."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signum)  # psutil refuses a pid that was reused by another process


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` seconds for the process to exit; whether it did."""
    try:
        proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def terminate(proc: subprocess.Popen[bytes], tree: list[psutil.Process], grace: float) -> None:
    """SIGTERM the main process (SGLang drains and stops its own children); once it is gone, SIGTERM
    what is left of its group and tree (e.g. a server behind a wrapper script); wait up to `grace`."""
    deadline = time.monotonic() + grace
    proc.send_signal(signal.SIGTERM)  # no-op when already reaped
    if wait_exit(proc, deadline - time.monotonic()):
        signal_group(proc.pid, signal.SIGTERM)
        signal_each(tree, signal.SIGTERM)
        wait_gone(tree, deadline - time.monotonic())


def kill(proc: subprocess.Popen[bytes], tree: list[psutil.Process]) -> None:
    """SIGKILL the group and every known descendant (also one that left the group); wait until all are gone."""
    signal_group(proc.pid, signal.SIGKILL)
    proc.kill()  # no-op when already reaped
    signal_each([p for p in tree if alive(p)], signal.SIGKILL)
    wait_exit(proc, KILL_WAIT)
    for process in wait_gone([*tree, *group_members(proc.pid)], KILL_WAIT):
        log.warning("process %d survived SIGKILL for %.0f s", process.pid, KILL_WAIT)


def group_members(pgid: int) -> list[psutil.Process]:
    """The running processes whose process group is `pgid`."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid:
                members.append(process)
        except (OSError, psutil.Error):
            continue
    return members


def marked_processes(variable: str, value: str) -> list[psutil.Process]:
    """The running processes whose environment has `variable` set to `value` (only our own processes' environments
    are readable; a process that overwrote its environment area, as setproctitle may, is not found)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(variable) == value:
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found
