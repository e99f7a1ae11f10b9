"""A short HBM read-bandwidth measurement on one GPU: how fast a kernel can stream memory it only reads.

A decode step at small batch is mostly matrix-vector products: each reads every weight once and does two flops
per weight, so its speed is the speed of a read, not of a copy (which writes as much as it reads) nor of the
datasheet figure (which no kernel reaches). The measurement reads a large bf16 tensor with one reduction kernel
(`sum`), times it with CUDA events after a warm-up, and keeps the best and the median of the repeats. A plain
device-to-device copy of the same tensor is timed too (2 x bytes moved per copy), for comparison with what other
tools report. The tensor is 1 GiB, or 5% of the free memory when that is smaller: far larger than any L2 cache, and
small enough to fit beside whatever else the GPU holds. It takes well under a second once CUDA is up.

`torch` comes in as an argument (the caller imports it lazily); only torch.cuda's public API is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Any

GIB = 1 << 30
MAX_BYTES = GIB
FREE_FRACTION = 0.05
REPEATS = 20
WARMUP = 3
_BF16_BYTES = 2


@dataclass(frozen=True)
class BandwidthMeasurement:
    gpu_name: str
    read_gb_s: float
    """The best of the repeats, 10^9 bytes per second."""
    median_gb_s: float
    size_bytes: int
    repeats: int
    method: str
    """In words, e.g. "sum of a 1 GiB bf16 tensor, best of 20 (CUDA events, 3 warm-up runs)"."""
    copy_gb_s: float | None = None
    """A device-to-device copy of the same tensor, best of the repeats, counting 2 x bytes (read + write)."""


def buffer_bytes(free_bytes: int, max_bytes: int = MAX_BYTES) -> int:
    """The tensor's size: max_bytes or FREE_FRACTION of the free memory, whichever is smaller, in whole bf16
    elements."""
    size = min(max_bytes, int(free_bytes * FREE_FRACTION))
    return size - size % _BF16_BYTES


def gb_s(bytes_moved: int, milliseconds: float) -> float:
    """Bytes over milliseconds, in 10^9 bytes per second."""
    return bytes_moved / (milliseconds / 1e3) / 1e9


def time_ms(torch: Any, operation: Callable[[], object], *, repeats: int = REPEATS,
            warmup: int = WARMUP) -> list[float]:
    """Each run's time in milliseconds, one pair of CUDA events around each, on the current device's stream."""
    for _ in range(warmup):
        operation()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        operation()
        end.record()
    torch.cuda.synchronize()
    return [float(start.elapsed_time(end)) for start, end in pairs]


def measure(torch: Any, index: int, *, max_bytes: int = MAX_BYTES, repeats: int = REPEATS,
            warmup: int = WARMUP) -> BandwidthMeasurement:
    """Read (and copy) bandwidth of GPU `index`; the tensors are freed before it returns."""
    with torch.cuda.device(index):
        size = buffer_bytes(int(torch.cuda.mem_get_info(index)[0]), max_bytes)
        reads, copies = _read_and_copy(torch, index, size, repeats, warmup)
        torch.cuda.empty_cache()  # the tensors died with _read_and_copy's frame
    return BandwidthMeasurement(
        gpu_name=str(torch.cuda.get_device_name(index)), read_gb_s=gb_s(size, min(reads)),
        median_gb_s=gb_s(size, median(reads)), size_bytes=size, repeats=repeats,
        method=describe(size, repeats, warmup), copy_gb_s=gb_s(2 * size, min(copies)),
    )


def _read_and_copy(torch: Any, index: int, size: int, repeats: int, warmup: int) -> tuple[list[float], list[float]]:
    source = torch.ones(size // _BF16_BYTES, dtype=torch.bfloat16, device=f"cuda:{index}")
    target = torch.empty_like(source)
    reads = time_ms(torch, source.sum, repeats=repeats, warmup=warmup)
    return reads, time_ms(torch, lambda: target.copy_(source), repeats=repeats, warmup=warmup)


def describe(size: int, repeats: int, warmup: int) -> str:
    return f"sum of a {size_text(size)} bf16 tensor, best of {repeats} (CUDA events, {warmup} warm-up runs)"


def size_text(size: int) -> str:
    """1073741824 -> "1 GiB"; 52428800 -> "50 MiB"."""
    if size >= GIB:
        return f"{size / GIB:.3g} GiB"
    return f"{size / (1 << 20):.3g} MiB"


def summary(measurement: BandwidthMeasurement) -> str:
    """One line, e.g. "NVIDIA H200: read 4,520 GB/s (median 4,498), copy 4,310 GB/s; sum of a 1 GiB ..."."""
    copy = "" if measurement.copy_gb_s is None else f", copy {measurement.copy_gb_s:,.0f} GB/s"
    return (f"{measurement.gpu_name}: read {measurement.read_gb_s:,.0f} GB/s "
            f"(median {measurement.median_gb_s:,.0f}){copy}; {measurement.method}")
