"""A stand-in for nvidia-ml-py's `pynvml`, for the GPU conditions' tests: the functions the plugin calls, with
pynvml's names and units (MHz, milliwatts, bytes; names as bytes, as older nvidia-ml-py answers them), reading
the GPUs' state on every call from the JSON file named by FAKE_NVML_STATE, so that a test can change a GPU while it
is watched:

    {"gpus": [{"name": "NVIDIA H200", "sm": 1980, "sm_max": 1980, "memory": 3201, "memory_max": 3201,
               "reasons": 0, "temperature": 40, "power_mw": 300000, "power_limit_mw": 700000,
               "utilization": 0, "processes": [{"pid": 4242, "memory": 2147483648}],
               "processes_from_env": false}],
     "starts": true, "old": false}

`processes_from_env`: the GPU's processes are every process of this host whose CUDA_VISIBLE_DEVICES names the
GPU's index (how a simulated server "runs" on a claimed GPU). A GPU without "power_mw" does not support power
readings (NVMLError: not supported), one with "lost": true answers nothing (NVMLError: GPU is lost), one without
"utilization" no utilization (then busy means: no `idle` reason). `old`: no
nvmlDeviceGetCurrentClocksEventReasons (nvidia-ml-py before 12.535).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0


NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
_TEXT = {NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
         NVML_ERROR_GPU_IS_LOST: "GPU is lost"}


class NVMLError(Exception):
    """As pynvml's: `value` is nvml.h's error code, str() its text."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"error {self.value}")


def _state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads(Path(os.environ["FAKE_NVML_STATE"]).read_text())
    return state


def _gpu(handle: int) -> dict[str, Any]:
    gpu: dict[str, Any] = _state()["gpus"][handle]
    if gpu.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return gpu


def nvmlInit() -> None:
    if not _state().get("starts", True):
        raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return len(_state()["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetName(handle: int) -> bytes:
    return str(_gpu(handle)["name"]).encode()


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    return int(_gpu(handle)["sm" if clock == NVML_CLOCK_SM else "memory"])


def nvmlDeviceGetMaxClockInfo(handle: int, clock: int) -> int:
    return int(_gpu(handle)["sm_max" if clock == NVML_CLOCK_SM else "memory_max"])


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: int) -> int:
    return int(_gpu(handle)["reasons"])


def __getattr__(name: str) -> Any:
    if name == "nvmlDeviceGetCurrentClocksEventReasons" and not _state().get("old", False):
        return nvmlDeviceGetCurrentClocksThrottleReasons
    raise AttributeError(name)


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:
    gpu = _gpu(handle)
    if "utilization" not in gpu:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return SimpleNamespace(gpu=int(gpu["utilization"]), memory=0)


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return int(_gpu(handle)["temperature"])


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    gpu = _gpu(handle)
    if "power_mw" not in gpu:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return int(gpu["power_mw"])


def nvmlDeviceGetEnforcedPowerLimit(handle: int) -> int:
    gpu = _gpu(handle)
    if "power_limit_mw" not in gpu:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return int(gpu["power_limit_mw"])


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[SimpleNamespace]:
    gpu = _gpu(handle)
    listed = [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("memory")) for p in gpu.get("processes", [])]
    if gpu.get("processes_from_env"):
        listed += [SimpleNamespace(pid=pid, usedGpuMemory=None) for pid in _on_gpu(handle)]
    return listed


def _on_gpu(index: int) -> list[int]:
    """The processes whose CUDA_VISIBLE_DEVICES names this GPU."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            name, _, value = item.partition(b"=")
            if name == b"CUDA_VISIBLE_DEVICES" and str(index).encode() in value.split(b","):
                found.append(int(entry.name))
    return found
