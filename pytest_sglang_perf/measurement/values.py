"""Each metric's values from one boot's samples: per request for the request metrics, one value each for the boot
costs. The statistics compare these values; the summaries describe them.

A sample that cannot define a metric is kept, never dropped: its other metrics count, and `metric_coverage` says
how many samples defined each metric and why the others did not (a stream whose content arrived in one read has
no decode time, so no `tpot` or `decode_throughput`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_sglang_perf.measurement.concurrency import Slo, round_values
from pytest_sglang_perf.measurement.metrics import GATED_ORDER, PREFILL
from pytest_sglang_perf.measurement.prefix_cache import COLD
from pytest_sglang_perf.measurement.samples import Sample

BOOT_METRICS = ("boot_seconds", "graph_capture_seconds")
"""Metrics measured once per server boot: a re-measure on the same server cannot sample them again."""


@dataclass(frozen=True)
class Coverage:
    """How many of a measurement's samples defined one request metric, and why the others did not."""

    defined: int
    total: int
    reasons: tuple[str, ...]
    """"1 arrived in one read", "2 had one token", ..., one entry per reason, counts included."""

    def describe(self, name: str) -> str:
        """`tpot: 4/5 samples (1 arrived in one read)`."""
        why = f" ({', '.join(self.reasons)})" if self.reasons else ""
        return f"{name}: {self.defined}/{self.total} samples{why}"


def metric_values(samples: Sequence[Sample], boot_seconds: float | None,
                  graph_capture_seconds: float | None, slo: Slo | None = None,
                  prefill: bool = False) -> dict[str, tuple[float, ...]]:
    """Each request metric (in GATED_ORDER) over the samples that define it, then the boot costs that are known.
    A concurrent measurement's throughputs are one value per round, and an SLO adds goodput (concurrency.py);
    `prefill` (a cold measurement of exact prompt length) adds prefill_throughput."""
    per_sample = sample_metrics(samples, prefill)
    by_round = round_values(samples, slo)
    values = {name: by_round[name] if name in by_round else tuple(m[name] for m in per_sample if name in m)
              for name in GATED_ORDER if name not in BOOT_METRICS}
    values = {name: found for name, found in values.items() if found}
    if boot_seconds is not None:
        values["boot_seconds"] = (boot_seconds,)
    if graph_capture_seconds is not None:
        values["graph_capture_seconds"] = (graph_capture_seconds,)
    return values


def sample_metrics(samples: Sequence[Sample], prefill: bool = False) -> list[dict[str, float]]:
    """Each sample's request metrics (Sample.metrics), with its prefill_throughput when `prefill`."""
    per_sample = [sample.metrics() for sample in samples]
    if not prefill:
        return per_sample
    return [{**found, PREFILL: rate} if (rate := prefill_rate(sample)) is not None else found
            for sample, found in zip(samples, per_sample, strict=True)]


def measures_prefill(prompt_tokens: int | None, prefix_cache: str) -> bool:
    """Whether a measurement's samples define prefill_throughput: a cold measurement of exact prompt length (every
    reader of samples, the gate's and the plots' included, decides it from the request's settings alike)."""
    return prompt_tokens is not None and prefix_cache == COLD


def prefill_rate(sample: Sample) -> float | None:
    """Prompt tokens the request computed (not read from the prefix cache) per second of its TTFT."""
    computed = sample.prompt_tokens - (sample.cached_tokens or 0)
    return computed / sample.ttft if sample.ttft > 0 and computed > 0 else None


def metric_coverage(samples: Sequence[Sample], prefill: bool = False) -> dict[str, Coverage]:
    """The request metrics that some samples could not define (empty when every sample defined every metric that
    any sample defined). A metric that no sample defines, such as accept_length without speculative decoding,
    is not listed: it was not measured at all, which the comparison with a baseline reports."""
    per_sample = sample_metrics(samples, prefill)
    out: dict[str, Coverage] = {}
    for name in GATED_ORDER:
        having = [name in m for m in per_sample]
        if any(having) and not all(having):
            reasons = Counter(why_undefined(s, name) for s, has in zip(samples, having, strict=True) if not has)
            out[name] = Coverage(sum(having), len(samples), tuple(f"{n} {why}" for why, n in reasons.items()))
    return out


def missing_coverage(samples: Sequence[Sample], name: str) -> Coverage:
    """The coverage of a metric no sample defined (0 of n), with the reasons."""
    reasons = Counter(why_undefined(sample, name) for sample in samples)
    return Coverage(0, len(samples), tuple(f"{n} {why}" for why, n in reasons.items()))


def result_coverage(samples: Sequence[Sample], prefill: bool = False) -> dict[str, Coverage]:
    """What a result carries for its checks' notes: metric_coverage's partly defined metrics, and every other
    request metric that no sample defined (missing_coverage), for a check that finds it not measured."""
    partial = metric_coverage(samples, prefill)
    defined = {name for found in sample_metrics(samples, prefill) for name in found}
    return {name: partial[name] if name in partial else missing_coverage(samples, name)
            for name in GATED_ORDER if name not in BOOT_METRICS and (name in partial or name not in defined)}


def why_undefined(sample: Sample, name: str) -> str:
    """Why `sample` has no value for `name` (see Sample.metrics)."""
    if name in ("decode_throughput", "tpot"):
        if sample.completion_tokens <= 1:
            return "had one token"
        return "arrived in one read"
    if name == "accept_length":
        return "had no speculative stats"
    if name == PREFILL:
        return "computed no prompt token, or are not a cold measurement of measure(prompt_tokens=N)"
    return "could not define it"
