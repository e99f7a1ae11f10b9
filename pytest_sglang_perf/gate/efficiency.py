"""The optional gate on the bandwidth ceiling (`tolerance.bandwidth_efficiency`; docs/roofline.md): a cell's decode
throughput over its memory-bandwidth ceiling, per request, against the same share in its baseline entry.

The share is the decode throughput divided by a constant of each side (the ceiling the cell and the entry were
measured against), so the statistics compare it like any other per-request metric: a drop is a regression only
when it holds, and a change of the ceiling (another bandwidth measured, another accept length) moves it where the
decode throughput alone would not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_sglang_perf.gate.compare import BootValues, MetricCheck, Verdict
from pytest_sglang_perf.measurement.metrics import EFFICIENCY
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling, ceiling_record

WEIGHTS_DRIFT = 0.005
"""Weight bytes per step that differ by more than this share make two ceilings incomparable."""


def efficiency_values(decode: Sequence[float], ceiling_tok_s: float) -> tuple[float, ...]:
    """Each request's decode tok/s as a share of the ceiling."""
    return tuple(value / ceiling_tok_s for value in decode) if ceiling_tok_s > 0 else ()


def with_efficiency(values: Mapping[str, BootValues], roofline: Mapping[str, Any] | None) -> dict[str, BootValues]:
    """A baseline entry's values per boot, with its share of the ceiling it was recorded against; unchanged when the
    entry kept no ceiling (recorded before it was kept, or without one): the metric is then new, never guessed."""
    ceiling = None if roofline is None else roofline.get("ceiling_tok_s")
    decode = values.get("decode_throughput")
    out = dict(values)
    if isinstance(ceiling, int | float) and not isinstance(ceiling, bool) and ceiling > 0 and decode:
        out[EFFICIENCY] = [list(efficiency_values(boot, float(ceiling))) for boot in decode]
    return out


def judged_efficiency(checks: Sequence[MetricCheck], baseline: Mapping[str, Any] | None, *, has_entry: bool,
                      current: DecodeCeiling | str | None) -> tuple[MetricCheck, ...]:
    """The checks, with the share of the ceiling explained where it cannot be judged as measured: a baseline entry
    that kept no ceiling (new), a run without one (not measured, and why), or two ceilings computed on different
    grounds (inconclusive: another bandwidth source or GPU, exact against estimated bytes, other weights)."""
    return tuple(_explained(check, baseline, has_entry, current) if check.metric == EFFICIENCY else check
                 for check in checks)


def _explained(check: MetricCheck, baseline: Mapping[str, Any] | None, has_entry: bool,
               current: DecodeCeiling | str | None) -> MetricCheck:
    if check.verdict is Verdict.NEW:
        if not has_entry:
            return check
        return replace(check, note=f"{EFFICIENCY}: the baseline entry kept no bandwidth ceiling; re-record it "
                                   "(--sglang-update-baselines) to gate this metric")
    if check.measured is None:
        why = current if isinstance(current, str) else "no decode ceiling"
        return replace(check, note=f"{EFFICIENCY}: not measured in this run ({why})")
    differs = basis_difference(baseline, ceiling_record(current))
    if differs is None:
        return check
    return replace(check, verdict=Verdict.INCONCLUSIVE, note=f"{EFFICIENCY}: not comparable: {differs}")


def basis_difference(baseline: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> str | None:
    """Why two ceiling records were computed on different grounds, or None when they compare."""
    if baseline is None or current is None or "unavailable" in baseline or "unavailable" in current:
        return None
    then, now = baseline.get("bandwidth") or {}, current.get("bandwidth") or {}
    for field in ("source", "gpu"):
        if then.get(field) != now.get(field):
            return f"the ceiling's bandwidth {field} was {then.get(field)!r}, now {now.get(field)!r}"
    if baseline.get("bytes_exact") != current.get("bytes_exact"):
        return f"the model's bytes were {_how(baseline)}, now {_how(current)}"
    old, new = _weights(baseline), _weights(current)
    if old > 0 and abs(new - old) / old > WEIGHTS_DRIFT:
        return f"the weights read per step were {old / 1e9:.2f} GB, now {new / 1e9:.2f} GB"
    return None


def _weights(record: Mapping[str, Any]) -> float:
    step = record.get("step_bytes") or {}
    return float(step.get("target") or 0.0) + float(step.get("draft") or 0.0)


def _how(record: Mapping[str, Any]) -> str:
    return "exact" if record.get("bytes_exact") is True else "estimated"
