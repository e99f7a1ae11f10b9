"""The optional gate on the bandwidth ceiling (`tolerance.bandwidth_efficiency`; docs/roofline.md): a cell's decode
throughput over its memory-bandwidth ceiling, per request, against the same share in its baseline entry.

The share is the decode throughput divided by a constant of each side (the ceiling the cell and the entry were
measured against), so the statistics compare it like any other per-request metric: a drop is a regression only
when it holds, and a change of the ceiling (another bandwidth measured, another accept length) moves it where the
decode throughput alone would not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.gate.compare import BootValues
from pytest_sglang_perf.measurement.metrics import EFFICIENCY


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
