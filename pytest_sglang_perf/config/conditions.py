"""`[tool.sglang_perf.conditions]`: the limits beyond which a measurement's conditions make a regression
inconclusive and a recording refused (gate/conditions.py applies them; docs/conditions.md says why each default is
where it is).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.config.units import parse_grace


@dataclass(frozen=True)
class ConditionLimits:
    max_others_per_core: float = 0.5
    """Tasks other than the measurement's own (the server's processes and the measuring one) wanted a CPU: more
    than this many per core, on average over the measurement."""
    max_steal: float = 0.30
    """The hypervisor took more than this share of the host's CPU time."""
    max_stall: float = 0.20
    """Some task waited for I/O, or for memory, during more than this share of the measurement (the kernel's
    pressure stall information, /proc/pressure/io and /proc/pressure/memory `some`)."""
    max_client_lag: float = 0.005
    """The client's event-loop lag p99 (seconds)."""
    settle_timeout: float = 30.0
    """How long a re-measure waits for the host to calm down (seconds)."""
    min_sm_clock: float = 0.5
    """A server GPU's mean SM clock while it worked, as a share of its maximum: below it, disturbed."""
    min_memory_clock: float = 0.9
    """The same for the memory clock (decode reads the weights at the memory clock's pace)."""
    allow_foreign_gpu_processes: bool = False
    """True: a process other than the server's on a server GPU does not disturb."""
    wait_before_measuring: float = 0.0
    """The pre-measurement check's bounded wait for a busy host or GPU to clear (seconds; 0: say it, do not
    wait)."""

    def to_dict(self) -> dict[str, Any]:
        return {"max_others_per_core": self.max_others_per_core, "max_steal": self.max_steal,
                "max_stall": self.max_stall,
                "max_client_lag": self.max_client_lag, "settle_timeout": self.settle_timeout,
                "min_sm_clock": self.min_sm_clock, "min_memory_clock": self.min_memory_clock,
                "allow_foreign_gpu_processes": self.allow_foreign_gpu_processes,
                "wait_before_measuring": self.wait_before_measuring}


def parse_limits(table: Mapping[str, Any], parse_percent: Callable[[object], float],
                 parse_duration: Callable[[object], float], parse_latency: Callable[[object], float],
                 get: Callable[..., Any]) -> ConditionLimits:
    """`[tool.sglang_perf.conditions]` (config/settings.py reads it with these parsers)."""
    defaults = ConditionLimits()
    return ConditionLimits(
        max_others_per_core=get(table, "max_others_per_core", _positive, default=defaults.max_others_per_core),
        max_steal=get(table, "max_steal", parse_percent, default=defaults.max_steal),
        max_stall=get(table, "max_stall", parse_percent, default=defaults.max_stall),
        max_client_lag=get(table, "max_client_lag", parse_latency, default=defaults.max_client_lag),
        settle_timeout=get(table, "settle_timeout", parse_duration, default=defaults.settle_timeout),
        min_sm_clock=get(table, "min_sm_clock", _share(parse_percent), default=defaults.min_sm_clock),
        min_memory_clock=get(table, "min_memory_clock", _share(parse_percent), default=defaults.min_memory_clock),
        allow_foreign_gpu_processes=get(table, "allow_foreign_gpu_processes", _boolean,
                                        default=defaults.allow_foreign_gpu_processes),
        wait_before_measuring=get(table, "wait_before_measuring", _wait, default=defaults.wait_before_measuring),
    )


def _positive(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"expected a positive number, e.g. 1.5, got {value!r}")
    return float(value)


def _wait(value: object) -> float:
    """Seconds to wait, 0 allowed ('0s': say it and measure)."""
    try:
        return parse_grace(value)
    except ValueError:
        raise ValueError(f"expected 0 or more seconds, e.g. '30s' (0: do not wait), got {value!r}") from None


def _share(parse_percent: Callable[[object], float]) -> Callable[[object], float]:
    """A share of a maximum: a percentage up to 100%."""
    def parse(value: object) -> float:
        share = parse_percent(value)
        if not 0 < share <= 1:
            raise ValueError(f"expected a share of the maximum between 0% and 100%, e.g. '50%', got {value!r}")
        return share
    return parse


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value
