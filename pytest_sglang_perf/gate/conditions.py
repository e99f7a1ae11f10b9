"""Whether a measurement's conditions let its numbers stand for the code: a regression measured on a host too busy
for it is `inconclusive (host busy: ...)`, not red, and a baseline recorded there is refused.

Plain Python (no pytest). The readings are the client's (measurement/client_load.py: event-loop lag), the host's
(measurement/host_load.py: run-queue waits, runnable tasks, steal) and the server GPUs' (measurement/gpu_conditions.py:
clocks, slowdown reasons, other processes). The limits are configurable under
`[tool.sglang_perf.conditions]`; `--sglang-ignore-conditions` records the readings but uses none of them (a
disturbed regression fails, a disturbed baseline is recorded). docs/conditions.md says why each limit is where it
is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.measurement.gpu_conditions import SLOWDOWNS, GpuCondition
from pytest_sglang_perf.measurement.gpu_watch import BUSY_CONFIRM, BUSY_READS
from pytest_sglang_perf.measurement.host_load import HostLoad, runnable_now
from pytest_sglang_perf.measurement.result import Result


class DisturbedRecording(SGLangPerfError):
    """A baseline measured under disturbed conditions is not recorded."""


def withheld_text(why: str) -> str:
    """Why a measurement does not become a baseline entry, with the way out (`why`: disturbance's text)."""
    return (f"measured under disturbed conditions ({why}); re-run when the host is calm, or add "
            "--sglang-ignore-conditions to record it anyway")


def disturbance(result: Result, limits: ConditionLimits) -> str | None:
    """Why the conditions of `result` make its numbers doubtful (`host busy: ...`), or None when they were fine or
    not recorded. The client's lag counts only where it could have moved a timing: not when every read carried the
    kernel's receive stamp and no chunk came in one read with the one before it (ClientLoad.untouched)."""
    host, client = result.host, result.client
    for gpu in result.gpu or ():  # the server's GPUs first: the most direct cause of a slower GPU server
        why = gpu_disturbance(gpu, limits)
        if why is not None:
            return why
    if host is not None:
        if host.runnable > host.cores * limits.max_others_per_core:
            return (f"host busy: {host.runnable:.1f} other runnable tasks on {host.cores} cores (limit "
                    f"{limits.max_others_per_core:g} per core){_waits(host)}")
        if host.steal > limits.max_steal:
            return f"CPU stolen by the hypervisor: {host.steal:.0%} of the time (limit {limits.max_steal:.0%})"
        stalled = host_stall(host, limits)
        if stalled is not None:
            return stalled
    if client is not None and client.lag_p99 > limits.max_client_lag and not client.untouched:  # else no timing moved
        return (f"the client fell behind: event-loop lag p99 {client.lag_p99 * 1000:.1f} ms (limit "
                f"{limits.max_client_lag * 1000:g} ms)")
    return None


def host_stall(host: HostLoad, limits: ConditionLimits) -> str | None:
    """Tasks that waited for I/O or for memory during more than `max_stall` of the measurement (PSI `some`): the
    time a task in uninterruptible sleep loses, which no count of runnable tasks shows (docs/conditions.md). The
    CPU's stall decides nothing: the measurement's own tasks wait behind each other in it."""
    for what, share in ((what, share) for what, share in host.stalls().items() if what != "cpu"):
        if share > limits.max_stall:
            return (f"host stalled: tasks waited for {what} during {share:.0%} of the measurement "
                    f"(/proc/pressure/{what}, limit {limits.max_stall:.0%}); load {host.load1:.2f} beside "
                    f"{host.runnable:.1f} other runnable tasks on {host.cores} cores")
    return None


def gpu_disturbance(gpu: GpuCondition, limits: ConditionLimits) -> str | None:
    """Why one server GPU's state makes the numbers doubtful: slowed down (heat, a power brake), clocks below the
    limits while it worked, another process on it, or kernels running on it before the measurement while the server
    had no request (someone else's work, whether NVML could name the process or not)."""
    slow = [reason for reason in gpu.reasons if reason in SLOWDOWNS]
    if slow:
        return f"GPU {gpu.index} slowed down: {', '.join(slow)} ({gpu.temperature_max} °C max)"
    clocks = (("SM", gpu.sm_mhz, gpu.sm_max_mhz, limits.min_sm_clock),
              ("memory", gpu.memory_mhz, gpu.memory_max_mhz, limits.min_memory_clock))
    for which, mhz, top, floor in clocks:
        if gpu.busy_samples and mhz and top and mhz / top < floor:
            why = f"; reasons: {', '.join(gpu.reasons)}" if gpu.reasons else ""
            return (f"GPU {gpu.index} {which} clock low: {mhz:.0f} of {top} MHz while working ({mhz / top:.0%}, "
                    f"limit {floor:.0%}){why}")
    if gpu.foreign and not limits.allow_foreign_gpu_processes:
        listed = ", ".join(f"pid {p.pid}" + ("" if p.memory is None else f" ({p.memory / 2**30:.1f} GiB)")
                           for p in gpu.foreign)
        return f"another process on GPU {gpu.index}: {listed}"
    if gpu.busy_before and not limits.allow_foreign_gpu_processes:
        return _busy_before(gpu)
    return None


def _busy_before(gpu: GpuCondition) -> str:
    """A GPU that ran kernels while the server had no request, and which reading said so."""
    head = (f"GPU {gpu.index} busy before the measurement while the server had no request: utilization "
            f"{gpu.busy_before}% in {BUSY_READS} readings over {BUSY_CONFIRM * (BUSY_READS - 1):g} s")
    if gpu.foreign_known:
        return f"{head} (NVML lists no other process on it)"
    return (f"{head}; NVML lists none of the server's processes (another pid namespace), so this utilization stands "
            "in for another process on it")


def _waits(host: HostLoad) -> str:
    """What the other tasks cost the measurement, for the reason's text."""
    waits = [f"the {who} waited for a CPU {wait:.0%} of the time"
             for who, wait in (("server", host.server_wait), ("client", host.client_wait)) if wait is not None]
    return f"; {' and '.join(waits)}" if waits else ""


def wait_for_calm(limits: ConditionLimits, say: Callable[[str], None], *, cores: int,
                  sample: Callable[[], int | None] = runnable_now, own: Callable[[], int] = lambda: 0,
                  every: float = 0.25) -> bool:
    """Before a re-measure: wait up to `settle_timeout` until other tasks want at most `max_others_per_core` of the
    host's cores (their runnable count averaged over a second, `own()` - the measurement's own running threads, the
    sampling one and a real SGLang scheduler spinning while idle included - left out); True when they did."""
    deadline = time.monotonic() + limits.settle_timeout
    said = False
    while True:
        runnable = runnable_over(sample, own, every)
        if runnable <= cores * limits.max_others_per_core:
            return True
        if not said:
            say(f"the host is busy ({runnable:.1f} other runnable tasks on {cores} cores): "
                f"waiting up to {limits.settle_timeout:g} s for it to settle before the re-measure")
            said = True
        if time.monotonic() >= deadline:
            say(f"the host did not settle within {limits.settle_timeout:g} s: re-measuring anyway")
            return False


def runnable_over(sample: Callable[[], int | None], own: Callable[[], int], every: float, count: int = 4) -> float:
    """Mean runnable tasks over `count` samples `every` seconds apart, the measurement's own running threads (the
    sampling one included) left out."""
    counts = []
    for _ in range(count):
        found = sample()
        if found is not None:
            counts.append(max(0, found - own()))
        time.sleep(every)
    return sum(counts) / len(counts) if counts else 0.0
