"""Reading the GPUs through NVML (the `pynvml` module of the `nvidia-ml-py` package, imported only when a GPU
server is measured): clocks, clock event reasons, temperature, power and compute processes.

The functions used, as nvidia-ml-py 13 names them (pynvml.py): nvmlInit, nvmlDeviceGetCount,
nvmlDeviceGetHandleByIndex, nvmlDeviceGetName, nvmlDeviceGetClockInfo / nvmlDeviceGetMaxClockInfo with
NVML_CLOCK_SM and NVML_CLOCK_MEM, nvmlDeviceGetCurrentClocksEventReasons (nvmlDeviceGetCurrentClocksThrottleReasons
in older packages), nvmlDeviceGetTemperature with NVML_TEMPERATURE_GPU, nvmlDeviceGetPowerUsage and
nvmlDeviceGetEnforcedPowerLimit (milliwatts), nvmlDeviceGetComputeRunningProcesses (`.pid`, `.usedGpuMemory`
bytes or None), nvmlDeviceGetUtilizationRates (`.gpu`, percent). A reading NVML refuses on this GPU (NVMLError:
not supported) is left out (0 or None), never guessed; any other NVML error is raised (gpu_watch.py says it).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from pytest_sglang_perf.measurement.gpu_conditions import GpuLimits, GpuProcess, GpuReading

UNSUPPORTED = (3, 13)
"""NVML_ERROR_NOT_SUPPORTED and NVML_ERROR_FUNCTION_NOT_FOUND (nvml.h): the query does not exist here."""


class Nvml:
    """An initialised NVML (`open_nvml()`); `module` is pynvml or a stand-in with the same names (tests)."""

    def __init__(self, module: Any) -> None:
        self._nvml = module
        self._handles: dict[int, Any] = {}

    def _ask(self, function: str, *args: Any) -> Any:
        """The answer; None where this GPU, driver or nvidia-ml-py does not support the query. Any other NVML error
        (a GPU lost, an unknown error) is raised: a failed reading is not a reading of zero."""
        call = getattr(self._nvml, function, None)
        if call is None:
            return None
        try:
            return call(*args)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) in UNSUPPORTED:
                return None
            raise

    def count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def limits(self, index: int) -> GpuLimits:
        nvml, handle = self._nvml, self._handle(index)
        power = self._ask("nvmlDeviceGetEnforcedPowerLimit", handle)
        return GpuLimits(index=index, name=_text(self._ask("nvmlDeviceGetName", handle)) or "unknown GPU",
                         sm_max_mhz=int(self._ask("nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM) or 0),
                         memory_max_mhz=int(self._ask("nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_MEM) or 0),
                         power_limit_w=None if power is None else power / 1000)

    def read(self, index: int) -> GpuReading:
        nvml, handle = self._nvml, self._handle(index)
        power = self._ask("nvmlDeviceGetPowerUsage", handle)
        reasons = self._ask("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None:  # nvidia-ml-py before 12.535, or a driver that does not say
            reasons = self._ask("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        processes = self._ask("nvmlDeviceGetComputeRunningProcesses", handle) or []
        utilization = self._ask("nvmlDeviceGetUtilizationRates", handle)
        return GpuReading(
            index=index, sm_mhz=int(self._ask("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM) or 0),
            memory_mhz=int(self._ask("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_MEM) or 0),
            reasons=int(reasons or 0),
            temperature=int(self._ask("nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU) or 0),
            power_w=None if power is None else power / 1000,
            processes=tuple(GpuProcess(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                            for p in processes),
            utilization=None if utilization is None else int(utilization.gpu))

    def pids(self, index: int) -> set[int]:
        """The GPU's compute processes."""
        return {int(p.pid) for p in self._ask("nvmlDeviceGetComputeRunningProcesses", self._handle(index)) or []}

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]


def _text(value: Any) -> str | None:
    """A string NVML returned (bytes in older nvidia-ml-py), as text."""
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def open_nvml(module_name: str = "pynvml") -> tuple[Nvml | None, str | None]:
    """NVML, initialised; or None and why not (the package is missing, or there is no NVIDIA driver)."""
    try:
        module: ModuleType = importlib.import_module(module_name)
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'pytest-sglang-perf[gpu]')"
    try:
        module.nvmlInit()
    except module.NVMLError as exc:
        return None, f"NVML did not start: {exc}"
    return Nvml(module), None
