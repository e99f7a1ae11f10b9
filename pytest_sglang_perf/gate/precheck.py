"""The pre-measurement check: before a variant's first measurement, say what already makes the host or the
server's GPUs unfit to measure on (other tasks taking the cores, another process on a server GPU, a GPU busy before
any request or slowed down by heat or a power brake), and with `wait_before_measuring` wait that long at most for it
to clear.

Plain Python (no pytest); the session calls it through session/conditions.py. A calm host costs one reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.conditions import runnable_over
from pytest_sglang_perf.measurement.gpu_conditions import SLOWDOWNS, GpuReading, reason_names
from pytest_sglang_perf.measurement.gpu_watch import BUSY_CONFIRM as WATCH_CONFIRM
from pytest_sglang_perf.measurement.gpu_watch import ServerGpus, ran_kernels, settled_readings
from pytest_sglang_perf.measurement.host_load import runnable_now, running_threads, usable_cores
from pytest_sglang_perf.measurement.nvml import Nvml

POLL_EVERY = 1.0
BUSY_CONFIRM = WATCH_CONFIRM
"""How far apart the readings that confirm a busy GPU are (gpu_watch.BUSY_CONFIRM says why)."""


def precheck(limits: ConditionLimits, say: Callable[[str], None], *, name: str, pids: Sequence[int],
             gpus: tuple[Nvml, ServerGpus] | None, sample: Callable[[], int | None] = runnable_now,
             when: str = "before the first measurement", host: bool = True) -> list[str]:
    """Say what is wrong before variant `name`'s first measurement (or `when`), waiting up to
    `wait_before_measuring` for it to clear; the problems still there at the end (empty: all clear). `host`: False
    checks the GPUs only."""
    sample = sample if host else (lambda: None)
    problems = current_problems(limits, pids, gpus, sample)
    if not problems:
        return []
    budget = limits.wait_before_measuring
    then = (f"waiting up to {budget:g} s for it to clear" if budget > 0 else
            "measuring anyway (conditions.wait_before_measuring waits a bounded time for it to clear)")
    say(f"[{name}] {when}: {'; '.join(problems)}; {then}")
    deadline = time.monotonic() + budget
    while problems and time.monotonic() < deadline:
        time.sleep(POLL_EVERY)
        problems = current_problems(limits, pids, gpus, sample)
    if budget > 0:
        say(f"[{name}] " + ("cleared: measuring" if not problems else
                             f"still after {budget:g} s: {'; '.join(problems)}; measuring anyway"))
    return problems


def current_problems(limits: ConditionLimits, pids: Sequence[int], gpus: tuple[Nvml, ServerGpus] | None,
                     sample: Callable[[], int | None] = runnable_now) -> list[str]:
    """What makes the host or the server's GPUs unfit right now; a busy-looking instant is confirmed over a second
    before it counts."""
    problems = []
    cores = usable_cores()
    limit = cores * limits.max_others_per_core

    def own() -> int:
        return running_threads(pids)

    now = sample()
    if now is not None and now - own() > limit:
        others = runnable_over(sample, own, every=0.25)
        if others > limit:
            problems.append(f"the host is busy ({others:.1f} other runnable tasks on {cores} cores, limit "
                            f"{limits.max_others_per_core:g} per core)")
    if gpus is not None:
        nvml, server = gpus
        try:
            readings = list(settled_readings(nvml, server.indices, BUSY_CONFIRM).values())
        except Exception:  # NVML refused: nothing to say here, the measurement's watch says it
            readings = []
        problems.extend(problem for reading in readings for problem in gpu_problems(reading, server, limits))
    return problems


def gpu_problems(reading: GpuReading, server: ServerGpus, limits: ConditionLimits) -> list[str]:
    """What is wrong with one idle server GPU before any request."""
    found = []
    others = [p for p in reading.processes if p.pid not in server.own_pids] if server.foreign_known else []
    if others and not limits.allow_foreign_gpu_processes:
        listed = ", ".join(f"pid {p.pid}" for p in others)
        found.append(f"GPU {reading.index} has {len(others)} other process(es) on it ({listed})")
    if ran_kernels(reading) and not limits.allow_foreign_gpu_processes:  # in every reading (settled_readings)
        found.append(f"GPU {reading.index} is busy before any request (utilization {reading.utilization}%)")
    slow = [reason for reason in reason_names(reading.reasons) if reason in SLOWDOWNS]
    if slow:
        found.append(f"GPU {reading.index} is slowed down: {', '.join(slow)} at {reading.temperature} °C")
    return found
