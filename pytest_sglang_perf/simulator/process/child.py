"""A stand-in for SGLang's scheduler subprocess: it idles, and dies with its parent.

`python -m pytest_sglang_perf.simulator.process.child scheduler --parent-pid PID`. Like SGLang's
`kill_itself_when_parent_died()` it asks Linux for SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG),
and it also polls the parent pid, for platforms without prctl. It exists so that a launcher's
process-tree teardown has a real child to find and stop.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
POLL_SECONDS = 0.2
PROCESS_NAME = b"sglang::schedul"  # /proc comm holds 15 bytes


def die_with_parent() -> None:
    """Linux only; elsewhere the parent poll below does the job."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(PROCESS_NAME))
    except (OSError, AttributeError):
        pass


def parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid


def run(parent_pid: int, poll_seconds: float = POLL_SECONDS) -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    while parent_alive(parent_pid):
        time.sleep(poll_seconds)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest_sglang_perf.simulator.process.child")
    parser.add_argument("role", choices=["scheduler"])
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    return run(args.parent_pid)


if __name__ == "__main__":
    raise SystemExit(main())
