"""Whether a baseline entry agrees with itself: its metric summaries are what its samples give (recomputed with the
recorder's own code: measurement/values.py per boot, then one Summary over every boot, as gate/recording.py
`summaries_over` does), its metrics are known ones, its request params match its identity, and `recorded_at` is a
time. `sglang-perf baseline validate` reports these problems; `accept` refuses an entry that has any.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from pytest_sglang_perf.gate.baseline import BaselineEntry, recorded_time
from pytest_sglang_perf.gate.formats import format_value
from pytest_sglang_perf.measurement.metrics import METRICS
from pytest_sglang_perf.measurement.prefix_cache import UNKNOWN
from pytest_sglang_perf.measurement.stats import Summary

_SUMMARY_FIELDS = ("median", "mean", "stdev", "min", "max", "mad")
_REL_TOL = 1e-9
"""Recomputed values are the same floats; the tolerance only absorbs a writer on another platform's libm."""


def entry_problems(entry: BaselineEntry) -> Iterator[str]:
    """Each way the entry disagrees with itself, in words (nothing when it is consistent)."""
    yield from _unknown_metrics(entry)
    yield from _summaries(entry)
    yield from _identity(entry)
    yield from _recorded_at(entry)


def _unknown_metrics(entry: BaselineEntry) -> Iterator[str]:
    for name in entry.summaries:
        if name not in METRICS:
            yield f"unknown metric {name!r} (known: {', '.join(METRICS)})"


def _summaries(entry: BaselineEntry) -> Iterator[str]:
    recomputed = {name: Summary.of(v for boot in boots for v in boot) for name, boots in entry.boot_values().items()}
    for name, summary in entry.summaries.items():
        if name not in METRICS:
            continue
        again = recomputed.get(name)
        if again is None:
            yield f"metric {name!r} has a summary, but none of its samples define it"
            continue
        if summary.n != again.n:
            yield f"metric {name!r}: n {summary.n} recorded, its samples give {again.n}"
            continue
        for field in _SUMMARY_FIELDS:
            stored, computed = getattr(summary, field), getattr(again, field)
            if not math.isclose(stored, computed, rel_tol=_REL_TOL, abs_tol=1e-12):
                yield (f"metric {name!r}: {field} {format_value(name, stored)} recorded, its samples give "
                       f"{format_value(name, computed)}")
                break
    for name in sorted(set(recomputed) - set(entry.summaries)):
        yield f"metric {name!r} is defined by its samples, but has no summary"


def _identity(entry: BaselineEntry) -> Iterator[str]:
    identity, params = entry.identity, entry.params
    if identity is None:
        return
    pairs: list[tuple[str, object, object]] = [("max_tokens", identity.max_tokens, params.max_tokens),
             ("temperature", identity.temperature, params.temperature),
             ("seed", identity.seed, params.seed), ("ignore_eos", identity.ignore_eos, params.ignore_eos)]
    if UNKNOWN not in (identity.prefix_cache, params.prefix_cache):
        pairs.append(("prefix_cache", identity.prefix_cache, params.prefix_cache))
    for name, measured, sent in pairs:
        if measured != sent:
            yield f"identity {name} {measured!r} differs from params {name} {sent!r}"
    model = entry.environment.get("model")
    if isinstance(model, str) and model != identity.model:
        yield f"identity model {identity.model!r} differs from its environment's model {model!r}"


def _recorded_at(entry: BaselineEntry) -> Iterator[str]:
    if recorded_time(entry) is None:
        yield f"recorded_at {entry.recorded_at!r} is not an ISO-8601 time (e.g. 2026-05-09T07:35:25+00:00)"
