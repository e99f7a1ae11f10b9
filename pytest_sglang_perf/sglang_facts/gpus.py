"""The GPU table (`sglang_facts/data/gpus.json`): name, memory, bandwidth, SM version, peaks of each known GPU, and
the share of the datasheet bandwidth a read (the probe's sum over a large tensor) and a decode GEMV reach on it.

`--sim-gpu NAME` picks an entry by its nvidia-smi name or an alias, case-insensitively. The table is plain JSON so
that other code (e.g. a pre-flight check that needs a GPU's SM version) can read it without importing the simulator.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError

_GIB = 1024**3
GPU_TABLE = Path(__file__).resolve().parent / "data" / "gpus.json"


class GpuTableError(SGLangPerfError, ValueError):
    """The table is missing or malformed, or a name matches no GPU; the message names the file or the choices."""


@dataclass(frozen=True)
class Gpu:
    name: str
    """As `nvidia-smi --query-gpu=name` reports it."""
    memory_mib: int
    """Total memory as `nvidia-smi --query-gpu=memory.total` reports it."""
    reserved_gib: float
    """Taken before SGLang starts (CUDA context, driver)."""
    bandwidth_gb_s: float
    """Peak memory bandwidth, GB/s (10^9 bytes)."""
    sm: int
    """Compute capability as an integer: 86 for SM 8.6."""
    bf16_tflops: float
    """Dense bf16 tensor-core peak, TFLOPS."""
    link_gb_s: float
    """GPU-to-GPU bandwidth per direction for tensor-parallel all-reduces, GB/s."""
    link_latency_us: float
    """Latency of one small all-reduce between two GPUs, microseconds."""
    read_efficiency: float
    """Share of `bandwidth_gb_s` the plugin's read-bandwidth probe reaches (a sum over a large tensor,
    hardware/bandwidth.py)."""
    gemv_efficiency: float
    """Share of `bandwidth_gb_s` the matrix-vector products of a batch-1 decode step reach."""
    aliases: tuple[str, ...] = ()

    @property
    def total_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def free_gib(self) -> float:
        """What SGLang's `avail mem=` shows before loading anything."""
        return self.total_gib - self.reserved_gib

    @property
    def read_bandwidth_gb_s(self) -> float:
        """What a read-bandwidth probe measures on this GPU: the simulated GPU's ceiling bandwidth."""
        return self.bandwidth_gb_s * self.read_efficiency

    @property
    def gemv_bandwidth_gb_s(self) -> float:
        """What a decode step's weight read moves per second (the simulator's bandwidth term)."""
        return self.bandwidth_gb_s * self.gemv_efficiency

    @property
    def sm_major(self) -> int:
        """`torch.cuda.get_device_capability()[0]`."""
        return self.sm // 10

    def matches(self, name: str) -> bool:
        wanted = _normalise(name)
        return any(_normalise(known) == wanted for known in (self.name, *self.aliases))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Gpu:
        return cls(
            name=str(data["name"]), memory_mib=int(data["memory_mib"]), reserved_gib=float(data["reserved_gib"]),
            bandwidth_gb_s=float(data["bandwidth_gb_s"]), sm=int(data["sm"]), bf16_tflops=float(data["bf16_tflops"]),
            link_gb_s=float(data["link_gb_s"]), link_latency_us=float(data["link_latency_us"]),
            read_efficiency=_share(data, "read_efficiency"), gemv_efficiency=_share(data, "gemv_efficiency"),
            aliases=tuple(str(alias) for alias in data.get("aliases", ())),
        )


@dataclass(frozen=True)
class GpuTable:
    default: str
    gpus: tuple[Gpu, ...]

    def find(self, name: str) -> Gpu:
        for gpu in self.gpus:
            if gpu.matches(name):
                return gpu
        raise GpuTableError(f"unknown GPU {name!r}; known GPUs (from {GPU_TABLE.name}): {', '.join(self.names())}")

    def names(self) -> list[str]:
        """One short name per GPU (its first alias), for messages and help."""
        return [gpu.aliases[0] if gpu.aliases else gpu.name for gpu in self.gpus]


@functools.cache
def load_gpu_table(path: Path = GPU_TABLE) -> GpuTable:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return GpuTable(str(data["default"]), tuple(Gpu.from_dict(item) for item in data["gpus"]))
    except FileNotFoundError:
        raise GpuTableError(f"GPU table not found: {path}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise GpuTableError(f"malformed GPU table {path}: {exc!r}") from None


def find_gpu(name: str | None = None) -> Gpu:
    """The GPU called `name`, or the table's default (H100 SXM)."""
    table = load_gpu_table()
    return table.find(name or table.default)


def _share(data: Mapping[str, Any], key: str) -> float:
    value = float(data[key])
    if not 0 < value <= 1:
        raise ValueError(f"{data.get('name')}: {key} {value} is not a share of the datasheet bandwidth (0 < x <= 1)")
    return value


def _normalise(name: str) -> str:
    return " ".join(name.replace("-", " ").replace("_", " ").lower().split())


def gib(num_bytes: float) -> float:
    return num_bytes / _GIB


H100_80GB = find_gpu("H100 SXM")
"""The default GPU (kept for callers that want the default without a lookup)."""
