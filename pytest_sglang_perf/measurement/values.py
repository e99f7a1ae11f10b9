"""Each metric's values from one boot's samples: per request for the request metrics, one value each for the boot
costs. The statistics compare these values; the summaries describe them."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang_perf.measurement.metrics import GATED_ORDER
from pytest_sglang_perf.measurement.samples import Sample

BOOT_METRICS = ("boot_seconds", "graph_capture_seconds")
"""Metrics measured once per server boot: a re-measure on the same server cannot sample them again."""


def metric_values(samples: Sequence[Sample], boot_seconds: float | None,
                  graph_capture_seconds: float | None) -> dict[str, tuple[float, ...]]:
    """The request metrics every sample has (in GATED_ORDER), then the boot costs that are known."""
    per_sample = [sample.metrics() for sample in samples]
    names = [n for n in GATED_ORDER if n not in BOOT_METRICS and per_sample and all(n in m for m in per_sample)]
    values = {name: tuple(metrics[name] for metrics in per_sample) for name in names}
    if boot_seconds is not None:
        values["boot_seconds"] = (boot_seconds,)
    if graph_capture_seconds is not None:
        values["graph_capture_seconds"] = (graph_capture_seconds,)
    return values
