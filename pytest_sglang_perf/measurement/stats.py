"""Summaries of repeated measurements: median, spread and a robust noise estimate."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    mad: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        data = [float(v) for v in values]
        if not data:
            raise ValueError("cannot summarise an empty list of samples")
        med = statistics.median(data)
        return cls(
            n=len(data),
            median=med,
            mean=statistics.fmean(data),
            stdev=statistics.stdev(data) if len(data) > 1 else 0.0,
            min=min(data),
            max=max(data),
            mad=statistics.median(abs(v - med) for v in data),
        )

    def relative_noise(self) -> float:
        """Robust relative standard deviation (MAD-based); 0 for a single sample."""
        if self.median == 0 or self.n < 2:
            return 0.0
        return _MAD_TO_SIGMA * self.mad / abs(self.median)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n, "median": self.median, "mean": self.mean, "stdev": self.stdev,
            "min": self.min, "max": self.max, "mad": self.mad,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        values = {k: data[k] for k in ("n", "median", "mean", "stdev", "min", "max", "mad")}
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in values.values()):
            raise ValueError(f"summary values must be finite numbers, got {values}")
        return cls(n=int(values["n"]), **{k: float(v) for k, v in values.items() if k != "n"})


def percentile(values: Iterable[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    data = sorted(values)
    if not data:
        raise ValueError("cannot take a percentile of no values")
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)
