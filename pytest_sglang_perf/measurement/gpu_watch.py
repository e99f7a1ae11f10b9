"""The server's GPUs while a cell is measured: `with GpuWatch(nvml, gpus) as watch:` samples each of them every
100 ms on a thread of its own (NVML calls release the GIL; a read of one GPU took 0.03 ms on an H200), and
`watch.conditions` holds one gpu_conditions.GpuCondition per GPU afterwards.

Which GPUs are the server's (`server_gpus`): those NVML lists one of the server's processes on. When none does (the
server's pids live in another pid namespace, as in a container), the GPUs it was given (its CUDA_VISIBLE_DEVICES),
and then no process on them can be called foreign.

Before the measurement's first request the server has none (the cell before it has ended, or none came yet), so a
GPU that keeps running kernels then is someone else's work: `settled_readings` confirms it (a kernel in every
reading over BUSY_READS readings BUSY_CONFIRM apart, so that the tail of the server's own warm-up or last cell does
not count) and the watch keeps its utilization as `busy_before`. Where NVML does not list the server's processes,
this is the only reading that sees another user of the GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType

from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition, GpuReading, condition
from pytest_sglang_perf.measurement.nvml import Nvml

SAMPLE_EVERY = 0.1
BUSY_CONFIRM = 0.6
BUSY_READS = 3
"""NVML's utilization is the share of its last sample period in which a kernel ran, a period of 1/6 s to 1 s by
product (nvml.h, nvmlDeviceGetUtilizationRates); on an H200 it fell from 100% to 0 within 0.35 s of the last kernel.
Three readings 0.6 s apart span 1.2 s, longer than any period: a GPU busy in all of them ran kernels after the
server's own last one had long left the reading."""


@dataclass(frozen=True)
class ServerGpus:
    indices: tuple[int, ...]
    """NVML's indices."""
    own_pids: frozenset[int]
    """The server's processes and the measuring one."""
    foreign_known: bool


def server_gpus(nvml: Nvml, server_pids: Sequence[int], measuring_pid: int, visible: str | None,
                default: Sequence[int] = ()) -> ServerGpus | None:
    """The GPUs the server runs on: those NVML lists a process of it on; else CUDA_VISIBLE_DEVICES's numbers; else
    `default`, the GPUs SGLang picks when nothing names them (NVML sees none of its processes: another pid
    namespace). None when it runs on none that can be told (a CPU server). The measuring process is never what makes
    a GPU the server's (a test that uses CUDA itself), but it is not foreign on one either."""
    own = frozenset([*server_pids, measuring_pid])
    found = tuple(index for index in range(nvml.count()) if nvml.pids(index) & set(server_pids))
    if found:
        return ServerGpus(found, own, True)
    given = [part.strip() for part in (visible or "").split(",") if part.strip()]
    if given and all(part.isdigit() for part in given):
        return ServerGpus(tuple(int(part) for part in given), own, False)
    if visible is None and default and max(default) < nvml.count():
        return ServerGpus(tuple(default), own, False)
    return None


def ran_kernels(reading: GpuReading) -> bool:
    """A kernel ran in NVML's last sample period, by its utilization (unknown utilization: not judged, since a CUDA
    context alone keeps NVML's `idle` reason off)."""
    return bool(reading.utilization)


def settled_readings(nvml: Nvml, indices: Iterable[int], every: float = BUSY_CONFIRM,
                     reads: int = BUSY_READS) -> dict[int, GpuReading]:
    """Each GPU's state while the server has no request: a GPU that ran kernels is read again `every` seconds later,
    up to `reads` readings in all, and keeps its last reading; it counts as busy (`ran_kernels`) only when every
    reading found it so. An idle GPU costs one reading."""
    found = {index: nvml.read(index) for index in indices}
    for _ in range(reads - 1):
        busy = [index for index, reading in found.items() if ran_kernels(reading)]
        if not busy:
            break
        time.sleep(every)
        found.update({index: nvml.read(index) for index in busy})
    return found


class GpuWatch:
    """`failed` hears why the GPUs could not be read (NVML broke off mid-measurement): then `conditions` stays None,
    and the measurement itself goes on."""

    def __init__(self, nvml: Nvml, gpus: ServerGpus, every: float = SAMPLE_EVERY,
                 failed: Callable[[str], None] = lambda why: None, confirm_every: float = BUSY_CONFIRM) -> None:
        self._nvml = nvml
        self._gpus = gpus
        self._every = every
        self._failed = failed
        self._confirm_every = confirm_every
        self._before: dict[int, int] = {}
        """Each GPU busy before the measurement, confirmed: its utilization."""
        self._error: str | None = None
        self._readings: dict[int, list[GpuReading]] = {index: [] for index in gpus.indices}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.conditions: tuple[GpuCondition, ...] | None = None

    def __enter__(self) -> GpuWatch:
        try:
            before = settled_readings(self._nvml, self._gpus.indices, self._confirm_every)
        except Exception as exc:  # said once, at the end
            self._error = f"{type(exc).__name__}: {exc}"
        else:
            self._before = {index: reading.utilization or 0 for index, reading in before.items()
                            if ran_kernels(reading)}
        self._thread = threading.Thread(target=self._sample, name="sglang-perf-gpu", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._read_all()  # the end of the measurement, even a short one, is seen
        try:
            conditions = tuple(condition(self._nvml.limits(index), readings, self._gpus.own_pids,
                                         self._gpus.foreign_known, self._before.get(index))
                               for index, readings in self._readings.items())
        except Exception as exc:  # whatever NVML raised, the measurement stands without it
            self._error = self._error or f"{type(exc).__name__}: {exc}"
        if self._error is not None:
            self._failed(f"the GPUs' conditions of this measurement are not recorded: NVML failed ({self._error})")
            return
        self.conditions = conditions

    def _sample(self) -> None:
        while self._error is None:
            self._read_all()
            if self._stop.wait(self._every):
                return

    def _read_all(self) -> None:
        if self._error is not None:
            return
        try:
            for index, readings in self._readings.items():
                readings.append(self._nvml.read(index))
        except Exception as exc:  # said once, at the end
            self._error = f"{type(exc).__name__}: {exc}"
