"""Ctrl-C (SIGINT) or SIGTERM to pytest during a boot or a measurement leaves no server process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from perf_project import server_processes, write_project


def _start_pytest(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """pytest as a user starts it: with SIGINT at its default, even when this suite runs as a background job
    (a non-interactive shell starts those with SIGINT ignored, and the child would inherit that)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if needle in line:
            return "".join(seen)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"never saw {needle!r}; output:\n{''.join(seen)}")


def _finish(proc: subprocess.Popen[str], sig: int) -> float:
    """Signal the run; the seconds it took to end."""
    proc.send_signal(sig)
    sent = time.monotonic()
    try:
        proc.wait(timeout=30)
        return time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# SIGTERM takes the same path as Ctrl-C once the plugin's handler turned it into KeyboardInterrupt: slow lane.
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, id="ctrl-c"),
                                 pytest.param(signal.SIGTERM, id="sigterm", marks=pytest.mark.slow)])
@pytest.mark.parametrize(("when", "needle"), [("boot", "] booting ("), ("measurement", "] ready in")])
def test_interrupt_leaves_no_process(pytester: pytest.Pytester, sig: int, when: str, needle: str) -> None:
    sim = ["--sim-boot-seconds", "20"] if when == "boot" else ["--sim-boot-seconds", "0.3", "--sim-decode-tok-s", "20"]
    write_project(pytester, {"a": []}, request="max_tokens = 400\nrepeats = 1\nwarmup = 0\n", sim=sim)
    pytester.makepyfile(test_slow="""
        def test_slow(sglang_perf):
            sglang_perf.measure("hello")
    """)
    proc = _start_pytest(pytester.path, "--sglang-simulate", "-v")  # -v: the boot's first line comes at launch
    _wait_for(proc, needle, timeout=60)
    time.sleep(0.5)
    # the boot or the measurement had ~20 s to go: the run ends at the signal (the server's stop grace is 5 s)
    assert _finish(proc, sig) < 15
    deadline = time.monotonic() + 10
    while server_processes(pytester.path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server_processes(pytester.path) == []
