"""What each GPU is: name, SM version, memory, driver, CUDA, clocks, power limit.

Read through torch when it is installed (CUDA's own numbering, as SGLang sees the GPUs), with NVML (nvidia-ml-py's
`pynvml`) filling what torch does not say (the power limit; the clocks when torch is older than the properties that
carry them); through NVML alone when torch is absent. The modules come in as arguments: the caller imports them
lazily (probe.py), and the tests hand in fakes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

MIB = 1 << 20
DRIVER_FILE = Path("/proc/driver/nvidia/version")
_DRIVER_VERSION = re.compile(r"\s(\d+\.\d+(?:\.\d+)?)\s")


@dataclass(frozen=True)
class GpuFacts:
    index: int
    """CUDA's index (torch.cuda), or NVML's when torch is absent."""
    name: str
    """e.g. "NVIDIA H200", as torch and nvidia-smi name it."""
    sm: str
    """Compute capability, e.g. "9.0"."""
    memory_mib: int
    driver: str | None
    """The NVIDIA driver, e.g. "570.124.06"."""
    cuda: str | None
    """torch's CUDA runtime (torch.version.cuda), or the newest CUDA the driver supports when read through NVML."""
    sm_clock_mhz: int | None
    """The maximum SM clock."""
    mem_clock_mhz: int | None
    """The maximum memory clock."""
    power_limit_w: float | None


class NvmlUnavailable(Exception):
    """NVML could not start (no driver, no library): the message says what NVML answered."""


@dataclass(frozen=True)
class NvmlGpu:
    uuid: str
    """Normalised (lower case, no "GPU-" prefix), to match torch's."""
    facts: GpuFacts


def torch_facts(torch: Any) -> tuple[GpuFacts, ...]:
    """Every GPU torch can use, in CUDA's order."""
    driver = nvidia_driver_version()
    cuda = torch.version.cuda
    return tuple(_torch_gpu(torch.cuda.get_device_properties(index), index, driver, cuda)
                 for index in range(torch.cuda.device_count()))


def _torch_gpu(props: Any, index: int, driver: str | None, cuda: str | None) -> GpuFacts:
    return GpuFacts(
        index=index, name=str(props.name), sm=f"{props.major}.{props.minor}",
        memory_mib=int(props.total_memory) // MIB, driver=driver, cuda=None if cuda is None else str(cuda),
        sm_clock_mhz=_khz_to_mhz(getattr(props, "clock_rate", None)),
        mem_clock_mhz=_khz_to_mhz(getattr(props, "memory_clock_rate", None)), power_limit_w=None,
    )


def torch_uuids(torch: Any) -> tuple[str | None, ...]:
    """Each GPU's UUID as torch reports it (normalised), None where this torch does not say."""
    return tuple(_normal_uuid(getattr(torch.cuda.get_device_properties(index), "uuid", None))
                 for index in range(torch.cuda.device_count()))


def nvml_gpus(pynvml: Any) -> tuple[NvmlGpu, ...]:
    """Every GPU NVML lists, in NVML's order; raises NvmlUnavailable when NVML cannot start."""
    nvml = _Nvml(pynvml)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML could not start: {exc}") from exc
    try:
        driver = _text(nvml.ask("nvmlSystemGetDriverVersion")) or nvidia_driver_version()
        cuda = _cuda_version(nvml.ask("nvmlSystemGetCudaDriverVersion"))
        return tuple(_nvml_gpu(nvml, index, driver, cuda) for index in range(pynvml.nvmlDeviceGetCount()))
    finally:
        nvml.ask("nvmlShutdown")


class _Nvml:
    """NVML queries that answer None where this GPU, driver or nvidia-ml-py does not support one."""

    def __init__(self, pynvml: Any) -> None:
        self.module = pynvml

    def ask(self, function: str, *args: Any) -> Any:
        call: Callable[..., Any] | None = getattr(self.module, function, None)
        if call is None:
            return None
        try:
            return call(*args)
        except self.module.NVMLError:
            return None


def _nvml_gpu(nvml: _Nvml, index: int, driver: str | None, cuda: str | None) -> NvmlGpu:
    handle = nvml.module.nvmlDeviceGetHandleByIndex(index)
    major, minor = nvml.ask("nvmlDeviceGetCudaComputeCapability", handle) or ("?", "?")
    memory = nvml.ask("nvmlDeviceGetMemoryInfo", handle)
    power_mw = nvml.ask("nvmlDeviceGetPowerManagementLimit", handle)
    facts = GpuFacts(
        index=index, name=_text(nvml.ask("nvmlDeviceGetName", handle)) or "unknown GPU", sm=f"{major}.{minor}",
        memory_mib=0 if memory is None else int(memory.total) // MIB, driver=driver, cuda=cuda,
        sm_clock_mhz=_max_clock(nvml, handle, "NVML_CLOCK_SM"),
        mem_clock_mhz=_max_clock(nvml, handle, "NVML_CLOCK_MEM"),
        power_limit_w=None if power_mw is None else float(power_mw) / 1000,
    )
    return NvmlGpu(_normal_uuid(nvml.ask("nvmlDeviceGetUUID", handle)) or "", facts)


def _max_clock(nvml: _Nvml, handle: Any, clock: str) -> int | None:
    mhz = nvml.ask("nvmlDeviceGetMaxClockInfo", handle, getattr(nvml.module, clock, None))
    return None if mhz is None else int(mhz)


def fill_from_nvml(gpus: tuple[GpuFacts, ...], uuids: tuple[str | None, ...],
                   nvml: tuple[NvmlGpu, ...]) -> tuple[GpuFacts, ...]:
    """torch's facts, with each field torch left empty taken from the NVML GPU of the same UUID."""
    by_uuid: Mapping[str, GpuFacts] = {gpu.uuid: gpu.facts for gpu in nvml if gpu.uuid}
    return tuple(_fill(gpu, by_uuid.get(uuid or "")) for gpu, uuid in zip(gpus, uuids, strict=True))


def _fill(gpu: GpuFacts, other: GpuFacts | None) -> GpuFacts:
    if other is None:
        return gpu
    missing = {f.name: getattr(other, f.name) for f in fields(gpu) if getattr(gpu, f.name) is None}
    return replace(gpu, **missing)


def nvidia_driver_version(path: Path | None = None) -> str | None:
    """The loaded kernel module's version (Linux's /proc/driver/nvidia/version), e.g. "570.124.06"; None without an
    NVIDIA driver."""
    try:
        text = (path or DRIVER_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    line = next((line for line in text.splitlines() if line.startswith("NVRM version")), "")
    found = _DRIVER_VERSION.search(line)
    return found.group(1) if found else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cuda_version(value: Any) -> str | None:
    """NVML's 12080 -> "12.8"."""
    return None if value is None else f"{int(value) // 1000}.{int(value) % 1000 // 10}"


def _khz_to_mhz(value: Any) -> int | None:
    return int(value) // 1000 if isinstance(value, int) and value > 0 else None


def _normal_uuid(value: Any) -> str | None:
    text = _text(value)
    return text.lower().removeprefix("gpu-") if text else None
