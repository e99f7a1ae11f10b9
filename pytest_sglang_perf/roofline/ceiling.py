"""The memory-bandwidth ceiling of a decode cell, its efficiency and a one-line diagnosis (docs/roofline.md).

At batch 1 a decode step (one speculative round) reads every weight the step touches, the draft's and the KV
cache (step_bytes.py), so it cannot be faster than those bytes over the GPU's read bandwidth:

    ceiling steps/s = bandwidth / bytes per step        ceiling tok/s = steps/s x accept length
    efficiency      = measured decode tok/s / ceiling tok/s  (= ceiling step time / measured step time)

The bandwidth is the probe's measurement on this host's GPU (`measured`), else the GPU table's datasheet figure
times its read efficiency (`datasheet`), and on the simulator the simulated GPU's (`simulated`): its label travels
with every figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.roofline.step_bytes import StepBytes

BANDWIDTH_SOURCES = ("measured", "datasheet", "simulated")
BOUND = 0.7
"""At or above this share of the ceiling, decode is called bandwidth-bound: a flag that only trims overhead (CUDA
graphs, overlap scheduling) can remove at most the rest of the step."""
OVERHEAD_BOUND = 0.5
"""Below this share, something other than the weight read dominates the step."""
IMPLAUSIBLE = 1.05
"""Above the ceiling by more than this, the bytes or the bandwidth are wrong: said, never hidden."""


@dataclass(frozen=True)
class Bandwidth:
    """The read bandwidth a ceiling is computed with, and where it came from."""

    gb_s: float
    """10^9 bytes per second."""
    source: str
    """One of BANDWIDTH_SOURCES."""
    gpu: str
    detail: str = ""
    """How it was obtained, in words: "read of 1 GiB, best of 20" or "4800 GB/s x 0.90"."""

    def to_dict(self) -> dict[str, Any]:
        return {"gb_s": self.gb_s, "source": self.source, "gpu": self.gpu, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bandwidth:
        return cls(float(data["gb_s"]), str(data["source"]), str(data["gpu"]), str(data.get("detail", "")))


@dataclass(frozen=True)
class DecodeCeiling:
    """One decode cell against its bandwidth ceiling."""

    step: StepBytes
    bandwidth: Bandwidth
    accept_length: float
    """Decode tokens per decode step as measured: (completion tokens - 1) / verify steps, the median over the
    requests (1.0 without speculative decoding)."""
    measured_tok_s: float
    """The cell's median decode throughput."""
    bytes_exact: bool
    """True: the weights were summed from the checkpoint's headers; False: estimated from config.json."""
    bytes_source: str
    notes: tuple[str, ...] = ()
    """What the bytes assumed or could not count (roofline/weight_bytes.py `WeightBytes.notes`), for the reports."""

    @property
    def step_seconds(self) -> float:
        """The shortest decode step the bandwidth allows."""
        return self.step.total / (self.bandwidth.gb_s * 1e9)

    @property
    def tok_s(self) -> float:
        return self.accept_length / self.step_seconds

    @property
    def efficiency(self) -> float:
        return self.measured_tok_s / self.tok_s

    @property
    def label(self) -> str:
        """`bandwidth ceiling 60.1 tok/s (measured 650 GB/s; bytes exact)`."""
        how = "exact" if self.bytes_exact else "estimated"
        return (f"bandwidth ceiling {self.tok_s:.1f} tok/s ({self.bandwidth.source} {self.bandwidth.gb_s:.0f} GB/s "
                f"on {self.bandwidth.gpu}; {self.step.total / 1e9:.2f} GB per step, {how})")

    def diagnosis(self) -> str:
        """One line: where decode stands against the ceiling, and what that means for flags that trim overhead."""
        share = self.efficiency
        head = f"decode at {share:.0%} of the bandwidth ceiling"
        if share > IMPLAUSIBLE:
            return (f"{head}: faster than the weights can be read, so the bytes per step "
                    f"({'exact' if self.bytes_exact else 'estimated'}, {self.bytes_source}) or the "
                    f"{self.bandwidth.source} bandwidth is wrong")
        if share >= 1.0:
            return f"{head}: at the ceiling; flags that trim overhead have nothing left to gain"
        if share >= BOUND:
            rest = 1.0 - share
            return (f"{head}: memory-bandwidth bound; graph or overlap flags can gain at most ~{rest:.0%} of the "
                    f"step (+{1 / share - 1:.0%} tok/s)")
        if share < OVERHEAD_BOUND:
            return (f"{head}: not bound by the weight read; the rest of the step (launches, scheduling, "
                    "attention, communication) is where flags can gain")
        return head

    def to_dict(self) -> dict[str, Any]:
        return {
            "efficiency": self.efficiency, "ceiling_tok_s": self.tok_s, "measured_tok_s": self.measured_tok_s,
            "accept_length": self.accept_length, "step_bytes": self.step.to_dict(),
            "bandwidth": self.bandwidth.to_dict(), "bytes_exact": self.bytes_exact,
            "bytes_source": self.bytes_source, "notes": list(self.notes), "diagnosis": self.diagnosis(),
        }


def ceiling_record(value: DecodeCeiling | str | None) -> dict[str, Any] | None:
    """What results files and baseline entries keep of a cell's ceiling: its figures, {"unavailable": why}, or None
    (no decode)."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"unavailable": value}
    return value.to_dict()
