"""Metric values, changes and test statistics as every text report writes them (the terminal, Markdown, the baseline
tools)."""

from __future__ import annotations

from pytest_sglang_perf.gate.compare import MetricCheck
from pytest_sglang_perf.measurement.metrics import METRICS, Direction


def format_value(metric: str, value: float) -> str:
    """A value in its metric's unit: `52.31 tok/s`, `120.4 ms` (below 1 s), `2.50 s`, `3.00 tok/step`."""
    unit = METRICS[metric].unit if metric in METRICS else ""
    if unit == "s":
        return _seconds(value)
    if unit == "tok/s":
        return f"{value:.1f} tok/s" if abs(value) >= 100 else f"{value:.2f} tok/s"
    if unit == "tok/step":
        return f"{value:.2f} tok/step"
    if unit == "ratio":
        return f"{value:.1%}"
    return f"{value:.4g} {unit}".rstrip()


def _seconds(value: float) -> str:
    if abs(value) >= 1:
        return f"{value:.2f} s"
    if abs(value) >= 0.01:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1000:.2f} ms"


def format_change(change: float | None) -> str:
    return "n/a" if change is None else f"{change * 100:+.1f}%"


def format_allowed(check: MetricCheck) -> str:
    """The band in the worse direction, signed: `-5.0%` for throughput, `+10.0%` for latency."""
    spec = METRICS.get(check.metric)
    sign = "-" if spec is not None and spec.direction is Direction.HIGHER_IS_BETTER else "+"
    return f"{sign}{check.allowed * 100:.1f}%"


def format_p(check: MetricCheck) -> str:
    """The one-sided p-value of the worse direction; `-` when no test was possible."""
    if check.p_value is None:
        return "-"
    return "<0.001" if check.p_value < 0.001 else f"{check.p_value:.3f}"


def format_detectable(check: MetricCheck) -> str:
    return "-" if check.detectable is None else f"{check.detectable * 100:.1f}%"
