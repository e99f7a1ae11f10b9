"""`[tool.sglang_perf.conditions]`: the limits beyond which a measurement's conditions make a regression
inconclusive and a recording refused (gate/conditions.py applies them; docs/conditions.md says why each default is
where it is).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConditionLimits:
    max_others_per_core: float = 0.5
    """Tasks other than the measurement's own (the server's processes and the measuring one) wanted a CPU: more
    than this many per core, on average over the measurement."""
    max_steal: float = 0.30
    """The hypervisor took more than this share of the host's CPU time."""
    max_client_lag: float = 0.005
    """The client's event-loop lag p99 (seconds)."""
    settle_timeout: float = 30.0
    """How long a re-measure waits for the host to calm down (seconds)."""

    def to_dict(self) -> dict[str, Any]:
        return {"max_others_per_core": self.max_others_per_core, "max_steal": self.max_steal,
                "max_client_lag": self.max_client_lag, "settle_timeout": self.settle_timeout}


def parse_limits(table: Mapping[str, Any], parse_percent: Callable[[object], float],
                 parse_duration: Callable[[object], float], parse_latency: Callable[[object], float],
                 get: Callable[..., Any]) -> ConditionLimits:
    """`[tool.sglang_perf.conditions]` (config/settings.py reads it with these parsers)."""
    defaults = ConditionLimits()
    return ConditionLimits(
        max_others_per_core=get(table, "max_others_per_core", _positive, default=defaults.max_others_per_core),
        max_steal=get(table, "max_steal", parse_percent, default=defaults.max_steal),
        max_client_lag=get(table, "max_client_lag", parse_latency, default=defaults.max_client_lag),
        settle_timeout=get(table, "settle_timeout", parse_duration, default=defaults.settle_timeout),
    )


def _positive(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"expected a positive number, e.g. 1.5, got {value!r}")
    return float(value)
