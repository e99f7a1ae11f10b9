"""Concurrent measurements: rounds of N streams sent at once, their aggregate metrics, and SLO goodput.

A concurrent measurement sends `repeats` rounds (after `warmup` rounds), each of N identical-length streams started
together. Every request keeps its own sample (TTFT, TPOT, ITL); each round also gives one value of the aggregate
metrics, computed from its samples alone (so a baseline's stored samples define them again):

- `output_throughput`: the round's completion tokens / its wall time (first send -> last token of any stream);
- `request_throughput`: N / the round's wall time;
- `goodput` (only with an SLO): the round's requests that met every SLO / its wall time;
- `ttft`, `tpot`, `decode_throughput`, `accept_length`: the median of the round's requests. The streams of a round
  share their batches, so the round is the independent unit the gate's statistics need; the requests' own
  distribution is reported as percentiles (`latency_percentiles`).

A one-stream measurement has no rounds: its `output_throughput` stays per request, and with an SLO each request is a
round of one for `goodput`. See docs/concurrency.md.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import percentile

MAX: Literal["max"] = "max"
"""`concurrency="max"`: the server's effective max running requests (from /server_info)."""
Level = int | Literal["max"]
MAX_STREAMS = 1024
"""The most streams one round opens (a level above it, or a "max" that resolves above it, is refused)."""


def parse_level(value: object) -> Level:
    """One concurrency level: a whole number >= 1 or "max"."""
    if value == MAX:
        return MAX
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STREAMS:
        raise ValueError(f'a concurrency level is a whole number from 1 to {MAX_STREAMS} or "max", got {value!r}')
    return value


def parse_levels(value: object) -> tuple[Level, ...]:
    """`16`, `"max"` or a list of them (a sweep); each level at most once."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items:
        raise ValueError('a concurrency sweep needs at least one level, e.g. [1, 4, 16, 64] or "max"')
    levels = tuple(parse_level(item) for item in items)
    if len(set(levels)) != len(levels):
        raise ValueError(f"a concurrency sweep lists each level once, got {list(levels)!r}")
    return levels


def level_suffix(level: Level) -> str:
    """What a level adds to its cell's test id: nothing for one stream, `@c16`, `@cmax`."""
    return "" if level == 1 else f"@c{level}"


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must meet to count for goodput: `ttft <= 200 ms`, `tpot <= 50 ms`."""

    ttft: float | None = None
    """Seconds; None: not an objective."""
    tpot: float | None = None
    """Seconds; None: not an objective."""

    def met_by(self, sample: Sample) -> bool:
        """Whether the request met every objective (a TPOT objective needs a sample that defines TPOT)."""
        if self.ttft is not None and sample.ttft > self.ttft:
            return False
        if self.tpot is None:
            return True
        tpot = sample.metrics().get("tpot")
        return tpot is not None and tpot <= self.tpot

    def describe(self) -> str:
        """`ttft <= 200 ms, tpot <= 50 ms`."""
        parts = [f"{name} <= {value * 1000:g} ms" for name, value in (("ttft", self.ttft), ("tpot", self.tpot))
                 if value is not None]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, float]:
        return {name: value for name, value in (("ttft", self.ttft), ("tpot", self.tpot)) if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Slo:
        """Raises TypeError for a value that is not a number of seconds."""
        for name, value in data.items():
            if name not in ("ttft", "tpot") or isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"an SLO maps ttft/tpot to seconds, found {name!r}: {value!r}")
        return cls(ttft=_seconds(data.get("ttft")), tpot=_seconds(data.get("tpot")))


def _seconds(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def concurrent(samples: Sequence[Sample]) -> bool:
    return any(sample.round is not None for sample in samples)


def rounds_of(samples: Sequence[Sample]) -> list[list[Sample]]:
    """The samples grouped by round, in round order (a one-stream measurement: each request alone)."""
    if not concurrent(samples):
        return [[sample] for sample in samples]
    grouped: dict[int, list[Sample]] = defaultdict(list)
    for sample in samples:
        grouped[-1 if sample.round is None else sample.round].append(sample)
    return [grouped[key] for key in sorted(grouped)]


def round_wall(streams: Sequence[Sample]) -> float:
    """First send -> last token of any stream of the round."""
    return max(s.end for s in streams) - min(s.start for s in streams)


def round_values(samples: Sequence[Sample], slo: Slo | None) -> dict[str, tuple[float, ...]]:
    """The per-round metrics: for a concurrent measurement, output and request throughput, and each per-request
    metric as the median of the round's requests (the streams of a round share their batch, so the round, not the
    request, is the independent unit the statistics compare); goodput with an SLO."""
    rounds = rounds_of(samples)
    out: dict[str, tuple[float, ...]] = {}
    if concurrent(samples):
        out["output_throughput"] = tuple(sum(s.completion_tokens for s in r) / round_wall(r) for r in rounds)
        out["request_throughput"] = tuple(len(r) / round_wall(r) for r in rounds)
        out.update(_round_medians(rounds))
    if slo is not None:
        out["goodput"] = tuple(sum(slo.met_by(s) for s in r) / round_wall(r) for r in rounds)
    return out


def _round_medians(rounds: Sequence[Sequence[Sample]]) -> dict[str, tuple[float, ...]]:
    """Each per-request metric's median per round, over the round's requests that define it (a round where none
    does has no value)."""
    per_round = [[s.metrics() for s in r] for r in rounds]
    names = {name for metrics in per_round for m in metrics for name in m if name != "output_throughput"}
    out: dict[str, tuple[float, ...]] = {}
    for name in sorted(names):
        found = [[m[name] for m in metrics if name in m] for metrics in per_round]
        out[name] = tuple(statistics.median(values) for values in found if values)
    return out


def slo_attainment(samples: Sequence[Sample], slo: Slo) -> float:
    """The share of requests that met every objective."""
    return sum(slo.met_by(s) for s in samples) / len(samples)


PERCENTILES = (50, 90, 99)


def latency_percentiles(samples: Sequence[Sample], gaps: Sequence[float]) -> dict[str, dict[str, float]]:
    """p50/p90/p99 over every request (TTFT, TPOT) and every gap between content chunks (ITL), seconds."""
    series = {"ttft": [s.ttft for s in samples],
              "tpot": [m["tpot"] for m in (s.metrics() for s in samples) if "tpot" in m],
              "itl": list(gaps)}
    return {name: {f"p{q}": percentile(values, q) for q in PERCENTILES} for name, values in series.items() if values}


def load_record(samples: Sequence[Sample], params_slo: Slo | None, level: Level, streams: int,
                percentiles: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """What the results file keeps of a cell's load: level, streams, rounds, percentiles, SLO attainment."""
    return {"concurrency": level, "streams": streams, "rounds": len(rounds_of(samples)) if streams > 1 else None,
            "latency_percentiles": {name: dict(q) for name, q in percentiles.items()},
            "slo": None if params_slo is None else params_slo.to_dict(),
            "slo_attainment": None if params_slo is None or not samples else slo_attainment(samples, params_slo)}
