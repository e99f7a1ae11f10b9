"""What the terminal shows while a server boots (server/progress.py), on a clock the test moves."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pytest_sglang_perf.server.logscan import ProgressEvent
from pytest_sglang_perf.server.progress import BootProgress

LOG = Path("/logs/default.log")
COMMAND = "python -m sglang.launch_server --model-path m --port 1234"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(verbosity: int, heartbeat: float = 15.0) -> tuple[BootProgress, list[str], Clock]:
    said: list[str] = []
    clock = Clock()
    return BootProgress("default", said.append, verbosity=verbosity, heartbeat=heartbeat, clock=clock), said, clock


def boot(progress: BootProgress, clock: Clock) -> None:
    """Launch, load weights for 40 s in silence, capture graphs."""
    progress.step(ProgressEvent("launched", "launched: pid 7, port 1234", 0.0), COMMAND, LOG)
    clock.now += 2
    progress.step(ProgressEvent("loading_weights", "loading weights (avail mem=79.11 GB)", 2.0), COMMAND, LOG)
    for _ in range(40):
        clock.now += 1
        progress.beat()
    progress.step(ProgressEvent("capturing_graphs", "capturing target decode CUDA graph", 42.0), COMMAND, LOG)


def test_default_verbosity_says_only_heartbeats_every_interval() -> None:
    boot_progress, said, clock = progress(verbosity=0)
    boot(boot_progress, clock)
    assert said == [
        "[default] still booting, 15 s in; 13 s since the last step: loading weights (avail mem=79.11 GB)",
        "[default] still booting, 30 s in; 28 s since the last step: loading weights (avail mem=79.11 GB)",
    ]


def test_verbose_says_every_step_and_beats_only_after_silence() -> None:
    boot_progress, said, clock = progress(verbosity=1)
    boot(boot_progress, clock)
    assert said == [
        f"[default] booting (launched: pid 7, port 1234): {COMMAND}",
        f"[default] log: {LOG}",
        "[default] loading weights (avail mem=79.11 GB) (2.0 s)",
        "[default] still booting, 17 s in; 15 s since the last step: loading weights (avail mem=79.11 GB)",
        "[default] still booting, 32 s in; 30 s since the last step: loading weights (avail mem=79.11 GB)",
        "[default] capturing target decode CUDA graph (42.0 s)",
    ]


def test_quiet_or_no_heartbeat_says_only_a_failure() -> None:
    for verbosity, heartbeat in ((-1, 15.0), (0, 0.0)):
        boot_progress, said, clock = progress(verbosity, heartbeat)
        boot(boot_progress, clock)
        boot_progress.failed("exited with code 1")
        assert said == ["[default] boot FAILED: exited with code 1"]
        assert not boot_progress.beating


def test_the_heartbeat_thread_beats_while_the_boot_waits_and_stops_with_it() -> None:
    said: list[str] = []
    with BootProgress("default", said.append, heartbeat=0.05):
        deadline = time.monotonic() + 10
        while len(said) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    count = len(said)
    assert count >= 2 and said[0].startswith("[default] still booting, 0 s in; 0 s since the last step: launching")
    time.sleep(0.2)
    assert len(said) == count  # stopped with the context
    assert not [t for t in threading.enumerate() if t.name.startswith("sglang-perf heartbeat")]
