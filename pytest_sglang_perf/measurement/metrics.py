"""The metrics the plugin measures and gates on: names, units, direction and default tolerance."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

PREFILL = "prefill_throughput"
"""Prompt tokens computed per second of TTFT: a cold cell of exact prompt length (docs/prefill.md)."""
EFFICIENCY = "bandwidth_efficiency"
"""The optional gate on the bandwidth ceiling: a cell's decode throughput over its ceiling, per request."""


class Direction(enum.Enum):
    HIGHER_IS_BETTER = "higher"
    LOWER_IS_BETTER = "lower"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    default_tolerance: float
    """Relative change allowed in the worse direction before a cell regresses (0.05 = 5%)."""
    abs_floor: float
    """Changes smaller than this, in the metric's unit, never count (timer and scheduler noise)."""
    description: str
    zero_is_a_value: bool = False
    """A sample of 0 is an ordinary value (goodput of a round where no request met the SLO), not a broken one: with
    zeros among several samples there is no log-scale test, and a change is never a verdict on its median alone."""

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER_IS_BETTER

    def worse(self, change: float) -> float:
        """How much worse a relative change is (positive = worse), whatever the direction."""
        return -change if self.direction is Direction.HIGHER_IS_BETTER else change


def _m(name: str, unit: str, higher: bool, tol: float, floor: float, text: str, *, zero: bool = False) -> Metric:
    direction = Direction.HIGHER_IS_BETTER if higher else Direction.LOWER_IS_BETTER
    return Metric(name, unit, direction, tol, floor, text, zero)


METRICS: Mapping[str, Metric] = MappingProxyType(
    {
        m.name: m
        for m in (
            _m("output_throughput", "tok/s", True, 0.05, 0.0,
               "completion tokens / end-to-end request time, one stream; at concurrency N, a round's completion "
               "tokens / its wall time (measurement/concurrency.py)"),
            _m("request_throughput", "req/s", True, 0.05, 0.0,
               "concurrency N only: N / a round's wall time (first send -> last token)"),
            _m("goodput", "req/s", True, 0.10, 0.0,
               "with an SLO only: a round's requests that met every objective / its wall time", zero=True),
            _m("decode_throughput", "tok/s", True, 0.05, 0.0,
               "tokens after the first / (last token time - first token time)"),
            _m("ttft", "s", False, 0.10, 0.002, "request sent -> first content token received"),
            _m(PREFILL, "tok/s", True, 0.10, 0.0,
               "prompt tokens not read from the prefix cache / TTFT; cold cells of measure(prompt_tokens=N) only "
               "(docs/prefill.md)"),
            _m("tpot", "s", False, 0.10, 0.0002, "(end-to-end - ttft) / (completion tokens - 1)"),
            _m("accept_length", "tok/step", True, 0.03, 0.0,
               "completion tokens / spec_verify_ct (speculative decoding only)"),
            _m("boot_seconds", "s", False, 0.25, 2.0, "server launch -> ready"),
            _m("graph_capture_seconds", "s", False, 0.50, 0.5,
               "CUDA-graph capture, all graphs (SGLang's Engine startup timings, else its capture lines)"),
            _m(EFFICIENCY, "ratio", True, 0.05, 0.0,
               "decode tok/s / the cell's memory-bandwidth ceiling (docs/roofline.md); measured and gated only when "
               "tolerance.bandwidth_efficiency is set"),
        )
    }
)

GATED_ORDER: tuple[str, ...] = tuple(METRICS)


def metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        known = ", ".join(METRICS)
        raise KeyError(f"unknown metric {name!r}; known metrics: {known}") from None
