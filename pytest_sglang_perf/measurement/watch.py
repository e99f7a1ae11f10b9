"""Everything watched around one measurement: the host (host_load.HostWatch) and, where they can be read, the
server's GPUs (gpu_watch.GpuWatch). `with ConditionsWatch(server_pids, gpus) as watch:`, then `watch.host` and
`watch.gpu`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from types import TracebackType

from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition
from pytest_sglang_perf.measurement.gpu_watch import GpuWatch, ServerGpus
from pytest_sglang_perf.measurement.host_load import HostLoad, HostWatch
from pytest_sglang_perf.measurement.nvml import Nvml


class ConditionsWatch:
    def __init__(self, server_pids: Sequence[int], gpus: tuple[Nvml, ServerGpus] | None,
                 failed: Callable[[str], None] = lambda why: None) -> None:
        self._host = HostWatch(server_pids)
        self._gpus = None if gpus is None else GpuWatch(*gpus, failed=failed)
        self._stack = ExitStack()

    def __enter__(self) -> ConditionsWatch:
        self._stack.enter_context(self._host)
        if self._gpus is not None:
            self._stack.enter_context(self._gpus)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stack.__exit__(kind, error, trace)

    @property
    def host(self) -> HostLoad | None:
        return self._host.load

    @property
    def gpu(self) -> tuple[GpuCondition, ...] | None:
        return None if self._gpus is None else self._gpus.conditions
