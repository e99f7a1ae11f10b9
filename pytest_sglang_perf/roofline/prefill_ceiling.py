"""The compute ceiling of a prefill cell, its share of it (MFU) and a one-line diagnosis (docs/prefill.md §4).

A prefill multiplies every prompt token with the weights (and, causally, with the tokens before it): a dense
matrix-matrix product, bound by the GPU's matmul rate, not by its memory. So a prompt of N tokens cannot be
prefilled faster than its FLOPs (prefill_flops.py) over the GPU's dense bf16 GEMM rate:

    ceiling seconds = FLOPs per GPU / GEMM rate          ceiling tok/s = N / ceiling seconds
    MFU             = measured prefill tok/s / ceiling tok/s  (= ceiling seconds / measured TTFT)

The rate is the probe's measurement on this host's GPU (`measured`, hardware/gemm.py), else the GPU table's dense
bf16 peak times GEMM_EFFICIENCY (`datasheet`), and on the simulator the simulated GPU's (`simulated`): its label
travels with every figure. The measured TTFT also holds the request's way in and out (HTTP, tokenizing, scheduling,
the first token's sampling): at a short prompt they are a large share of it, which the diagnosis says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.prefill_flops import PrefillFlops

RATE_SOURCES = ("measured", "datasheet", "simulated")
GEMM_EFFICIENCY = 0.80
"""The share of the datasheet dense bf16 peak a large bf16 GEMM reaches, for a GPU the probe did not measure
(docs/prefill-calibration.md: the probe's 790-799 TFLOP/s on an H100, of its 989; other GPUs assumed alike)."""
COMPUTE_BOUND = 0.5
"""At or above this share of the ceiling, prefill is called compute-bound: a prefill graph removes launches, which
are then a small part of the time."""
OVERHEAD_BOUND = 0.2
"""Below this share, launches and per-request overhead dominate: where a prefill CUDA graph can help."""
IMPLAUSIBLE = 1.05


@dataclass(frozen=True)
class ComputeRate:
    """The dense bf16 matmul rate a ceiling is computed with, and where it came from."""

    tflops: float
    """10^12 FLOP per second, one GPU."""
    source: str
    """One of RATE_SOURCES."""
    gpu: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"tflops": self.tflops, "source": self.source, "gpu": self.gpu, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComputeRate:
        return cls(float(data["tflops"]), str(data["source"]), str(data["gpu"]), str(data.get("detail", "")))


@dataclass(frozen=True)
class PrefillCeiling:
    """One prefill cell against its compute ceiling."""

    flops: PrefillFlops
    rate: ComputeRate
    measured_tok_s: float
    """The cell's median prefill throughput (prompt tokens computed / TTFT)."""
    flops_source: str
    """The config.json the FLOPs were counted from."""

    @property
    def seconds(self) -> float:
        """The shortest prefill the GEMM rate allows."""
        return self.flops.total / (self.rate.tflops * 1e12)

    @property
    def tok_s(self) -> float:
        return self.flops.prompt_tokens / self.seconds

    @property
    def mfu(self) -> float:
        return self.measured_tok_s / self.tok_s

    @property
    def label(self) -> str:
        """`compute ceiling 41,200 tok/s (measured 790 TFLOP/s on NVIDIA H200; 65.1 TFLOP per GPU, 12% attention)`."""
        share = self.flops.attention / self.flops.total
        return (f"compute ceiling {self.tok_s:,.0f} tok/s ({self.rate.source} {self.rate.tflops:.0f} TFLOP/s on "
                f"{self.rate.gpu}; {self.flops.total / 1e12:.2f} TFLOP per GPU, {share:.0%} attention)")

    def diagnosis(self) -> str:
        """One line: where the prefill stands against its ceiling, and what a prefill CUDA graph can do there."""
        share = self.mfu
        head = f"prefill at {share:.0%} of the compute ceiling (MFU {share:.2f})"
        if share > IMPLAUSIBLE:
            return (f"{head}: faster than the FLOPs allow, so the FLOP count ({self.flops_source}) or the "
                    f"{self.rate.source} GEMM rate is wrong")
        if share >= COMPUTE_BOUND:
            return f"{head}: compute-bound; a prefill graph can gain little here"
        if share < OVERHEAD_BOUND:
            return f"{head}: launch- or overhead-bound; a prefill graph may help"
        return f"{head}: partly compute-bound; launches and per-request overhead take the rest"

    def to_dict(self) -> dict[str, Any]:
        return {"mfu": self.mfu, "ceiling_tok_s": self.tok_s, "measured_tok_s": self.measured_tok_s,
                "ceiling_seconds": self.seconds, "flops": self.flops.to_dict(), "rate": self.rate.to_dict(),
                "flops_source": self.flops_source, "diagnosis": self.diagnosis()}


def prefill_ceiling_record(value: PrefillCeiling | str | None) -> dict[str, Any] | None:
    """What results files keep of a cell's prefill ceiling: its figures, {"unavailable": why}, or None (no
    prefill cell)."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"unavailable": value}
    return value.to_dict()
