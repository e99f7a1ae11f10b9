"""The GPU the simulator pretends to run on (one per tensor-parallel rank)."""

from __future__ import annotations

from dataclasses import dataclass

_GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int
    """Total memory as `nvidia-smi --query-gpu=memory.total` reports it."""
    reserved_gib: float
    """Taken before SGLang starts (CUDA context, driver)."""
    hbm_tb_s: float
    """Memory bandwidth, for the roofline model of a later issue."""

    @property
    def total_gib(self) -> float:
        return self.memory_mib / 1024

    @property
    def free_gib(self) -> float:
        """What SGLang's `avail mem=` shows before loading anything."""
        return self.total_gib - self.reserved_gib


H100_80GB = Gpu(name="NVIDIA H100 80GB HBM3", memory_mib=81559, reserved_gib=0.54, hbm_tb_s=3.35)


def gib(num_bytes: float) -> float:
    return num_bytes / _GIB
