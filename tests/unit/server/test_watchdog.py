"""watchdog: a process that launched a server and dies by SIGKILL (its whole process group with it) leaves nothing
running; a normal stop leaves no watchdog. Real processes: the fake SGLang server of test_launcher.py."""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from test_launcher import Fake, _alive

from pytest_sglang_perf.server.launcher import BootError, LaunchSpec, ServerProcess
from pytest_sglang_perf.server.watchdog import TOKEN_VAR

DEADLINE = 20.0
"""Seconds for everything to be gone after the launching process died (a busy 2-core machine)."""
WATCHDOG_MODULE = "pytest_sglang_perf.server.watchdog"

LAUNCHING = """
import pickle, sys, time
from pytest_sglang_perf.server.launcher import BootError, LaunchSpec, ServerProcess

with open(sys.argv[1], "rb") as spec_file:
    spec = pickle.load(spec_file)
server = ServerProcess(spec)
server.start()
print("ready", flush=True)
time.sleep(600)
"""

DIES_BEFORE_SAYING_THE_PID = """
import os, signal, subprocess, sys
from pytest_sglang_perf.server.watchdog import Watchdog

watchdog = Watchdog("v", grace=0.5)
with open(sys.argv[1], "ab") as log:
    watchdog.start(log)
stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
            "time.sleep(600)")
server = subprocess.Popen([sys.executable, "-c", stubborn], env={**os.environ, **watchdog.env}, start_new_session=True,
                          stdout=subprocess.PIPE, text=True)
server.stdout.readline()
print(server.pid, watchdog.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _watchdogs(parent: int) -> list[int]:
    """The watchdog processes started by `parent`."""
    return [child.pid for child in psutil.Process(parent).children() if WATCHDOG_MODULE in child.cmdline()]


def _gone_within(deadline: float, *checks: Callable[[], bool]) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if not any(check() for check in checks):
            return True
        time.sleep(0.2)
    return False


def _launch_in_own_group(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_sigkill_of_the_launching_group_stops_the_server_tree(fake: Fake, tmp_path: Path) -> None:
    """The launching process and its whole process group die by SIGKILL (a hard CI cancel): the watchdog, in a
    session of its own, SIGTERMs the server, and after the grace SIGKILLs its child that ignores SIGTERM and left
    the server's process group; then it exits."""
    spec = fake.spec(FAKE_CHILD="stubborn-new-session", FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05")
    (tmp_path / "spec.pickle").write_bytes(pickle.dumps(dataclasses.replace(spec, stop_grace=0.5)))
    launching = _launch_in_own_group(LAUNCHING, str(tmp_path / "spec.pickle"))
    watchdogs: list[int] = []
    try:
        assert launching.stdout is not None and launching.stdout.readline() == "ready\n"
        watchdogs = _watchdogs(launching.pid)
        assert len(watchdogs) == 1 and os.getsid(watchdogs[0]) != launching.pid
        server, child = fake.pid("main"), fake.pid("child")
        assert os.getpgid(child) != os.getpgid(server)
    finally:
        _kill_group(launching)
    assert _gone_within(DEADLINE, lambda: _alive(server), lambda: _alive(child), lambda: _alive(watchdogs[0]))
    log = fake.log_path.read_text()
    assert f"died without stopping the server (pid {server}): SIGTERM, SIGKILL after 0.5 s" in log
    assert "process(es) left after 0.5 s: SIGKILL" in log


def test_a_server_launched_as_the_launcher_died_is_found_by_its_token(tmp_path: Path) -> None:
    """The launcher died before it told the watchdog the server's pid: the token in the server's environment
    finds it, and a server that ignores SIGTERM is killed after the grace."""
    log = tmp_path / "v.log"
    launching = _launch_in_own_group(DIES_BEFORE_SAYING_THE_PID, str(log))
    assert launching.stdout is not None
    server, watchdog = (int(pid) for pid in launching.stdout.readline().split())
    launching.wait()
    launching.stdout.close()
    try:
        assert psutil.Process(server).environ()[TOKEN_VAR]
        assert _gone_within(DEADLINE, lambda: _alive(server), lambda: _alive(watchdog))
    finally:
        for pid in (server, watchdog):
            if _alive(pid):
                psutil.Process(pid).kill()
    assert f"died without stopping the server (pid {server})" in log.read_text()


def test_a_normal_stop_leaves_no_watchdog(fake: Fake) -> None:
    server = ServerProcess(fake.spec(FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05"))
    with server:
        (watchdog,) = _watchdogs(os.getpid())
        assert os.getsid(watchdog) == watchdog != os.getsid(0)  # out of reach of a Ctrl-C or a group kill
        assert psutil.Process(server.pid or 0).environ()[TOKEN_VAR] in psutil.Process(watchdog).cmdline()
    assert not _alive(watchdog)
    assert _watchdogs(os.getpid()) == []
    assert "watchdog" not in server.log_text()


def test_a_failed_launch_leaves_no_watchdog(tmp_path: Path) -> None:
    spec = LaunchSpec(name="v", command=(str(tmp_path / "no-such-server"),), log_path=tmp_path / "v.log",
                      startup_timeout=5)
    with pytest.raises(BootError, match="could not launch"):
        ServerProcess(spec).start()
    assert _watchdogs(os.getpid()) == []


def test_stop_waits_the_specs_grace_before_sigkill(fake: Fake) -> None:
    """stop() without a grace uses the spec's stop_grace (the `stop_grace` setting): a child that ignores SIGTERM
    is SIGKILLed after it, not after a fixed 30 s."""
    spec = fake.spec(FAKE_CHILD="stubborn", FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05")
    server = ServerProcess(dataclasses.replace(spec, stop_grace=1.0))
    server.start()
    began = time.monotonic()
    server.stop()
    assert 1.0 <= time.monotonic() - began < 8
    assert not _alive(fake.pid("child"))
