"""A short dense bf16 matrix-product measurement on one GPU: the rate a prefill's GEMMs can reach.

A prefill of N tokens multiplies an N x hidden activation by every weight matrix: at a few hundred tokens and more
those products are bound by the tensor cores, not by memory, so the prefill's ceiling is its FLOPs over the rate a
large bf16 matmul reaches on this GPU, not over the datasheet's peak, which no library GEMM reaches. The measurement
multiplies two random bf16 matrices, (m x k) @ (k x n), m = n = k = 8192 by default: 2 x m x n x k = 1.1 TFLOP per
product, ~1.4 ms on an H100 or H200, long enough that launch gaps do not count, and a shape every GEMM library tiles
perfectly. Random values, not zeros: a tensor core multiplying zeros draws less power and runs faster than any real
activation lets it. Each product is timed with CUDA events after warm-up runs (`bandwidth.time_ms`); the best and
the median of the repeats are kept. The three matrices (384 MiB at 8192) take at most 5% of the free memory: on a
GPU with less free, the size halves until they fit.

`torch` comes in as an argument (the caller imports it lazily); only torch's public API is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

from pytest_sglang_perf.hardware.bandwidth import FREE_FRACTION, time_ms

SIZE = 8192
MIN_SIZE = 1024
REPEATS = 20
WARMUP = 10
"""More than the bandwidth's 3 (~15 ms at 8192): the SM clock climbs from idle once tensor-core work starts."""
_BF16_BYTES = 2


@dataclass(frozen=True)
class GemmMeasurement:
    gpu_name: str
    tflops: float
    """The best of the repeats, 10^12 FLOP per second (2 x m x n x k per product)."""
    median_tflops: float
    m: int
    n: int
    k: int
    repeats: int
    method: str
    """In words, e.g. "bf16 matmul (8192x8192)@(8192x8192) of random values, best of 20 (CUDA events, ...)"."""


def square_size(free_bytes: int, size: int = SIZE) -> int:
    """m = n = k: `size`, halved until the three bf16 matrices fit in FREE_FRACTION of the free memory (MIN_SIZE at
    the least)."""
    while size > MIN_SIZE and matrices_bytes(size, size, size) > free_bytes * FREE_FRACTION:
        size //= 2
    return max(size, MIN_SIZE)


def matrices_bytes(m: int, n: int, k: int) -> int:
    """The bytes of A (m x k), B (k x n) and the product (m x n), in bf16."""
    return (m * k + k * n + m * n) * _BF16_BYTES


def flops(m: int, n: int, k: int) -> int:
    """One product's floating-point operations: a multiply and an add per (row, column, k) triple."""
    return 2 * m * n * k


def tflops(operations: int, milliseconds: float) -> float:
    """Operations over milliseconds, in 10^12 per second."""
    return operations / (milliseconds / 1e3) / 1e12


def measure(torch: Any, index: int, *, dims: tuple[int, int, int] | None = None, size: int = SIZE,
            repeats: int = REPEATS, warmup: int = WARMUP) -> GemmMeasurement:
    """The bf16 matmul rate of GPU `index`: (m x k) @ (k x n) with `dims` = (m, n, k) as given, else square at
    `size` or smaller (`square_size`); the matrices are freed before it returns."""
    with torch.cuda.device(index):
        if dims is None:
            side = square_size(int(torch.cuda.mem_get_info(index)[0]), size)
            dims = (side, side, side)
        times = _products(torch, index, dims, repeats, warmup)
        torch.cuda.empty_cache()  # the matrices died with _products' frame
    m, n, k = dims
    return GemmMeasurement(
        gpu_name=str(torch.cuda.get_device_name(index)), tflops=tflops(flops(m, n, k), min(times)),
        median_tflops=tflops(flops(m, n, k), median(times)), m=m, n=n, k=k, repeats=repeats,
        method=describe(dims, repeats, warmup),
    )


def _products(torch: Any, index: int, dims: tuple[int, int, int], repeats: int, warmup: int) -> list[float]:
    m, n, k = dims
    device = f"cuda:{index}"
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device)
    b = torch.randn(k, n, dtype=torch.bfloat16, device=device)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    return time_ms(torch, lambda: torch.matmul(a, b, out=out), repeats=repeats, warmup=warmup)


def describe(dims: tuple[int, int, int], repeats: int, warmup: int) -> str:
    m, n, k = dims
    return (f"bf16 matmul ({m}x{k})@({k}x{n}) of random values, best of {repeats} "
            f"(CUDA events, {warmup} warm-up runs)")


def summary(measurement: GemmMeasurement) -> str:
    """One line, e.g. "NVIDIA H200: bf16 matmul 790 TFLOP/s (median 781); bf16 matmul (8192x8192)@(8192x8192) ..."."""
    return (f"{measurement.gpu_name}: bf16 matmul {measurement.tflops:,.0f} TFLOP/s "
            f"(median {measurement.median_tflops:,.0f}); {measurement.method}")
