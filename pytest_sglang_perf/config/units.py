"""Parsing of the human-friendly values users write in configuration: durations and percentages."""

from __future__ import annotations

import math
import re

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)d)?\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_LATENCY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string like '30m', '90s', '1h30m', '2.5m', '90d'; must be positive."""
    seconds = _seconds(value)
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {value!r}")
    return seconds


def parse_grace(value: object) -> float:
    """Seconds of a grace period, as parse_duration, zero allowed ('0s': no grace, SIGKILL at once)."""
    seconds = _seconds(value)
    if not 0 <= seconds < math.inf:
        raise ValueError(f"a grace period must be 0 or more seconds, got {value!r}; write e.g. '5s', or 0 for none")
    return seconds


def _seconds(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration like '30m' or a number of seconds, not true/false")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and (match := _DURATION.match(value)) and any(match.groups()):
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        return d * 86400 + h * 3600 + m * 60 + s
    raise ValueError(f"expected a duration like '30m', '90s', '1h30m' or '90d', got {value!r}")


def parse_percent(value: object) -> float:
    """A fraction from a percentage string: '5%' -> 0.05."""
    if not isinstance(value, str) or not (match := _PERCENT.match(value)):
        raise ValueError(f"write a percentage like '5%', got {value!r}")
    fraction = float(match.group(1)) / 100.0
    if fraction >= 10:
        raise ValueError(f"a tolerance of {value} would never fail; write something like '5%'")
    return fraction


def parse_latency(value: object) -> float:
    """Seconds from a latency objective: '200ms', '0.2s' or a number of seconds; must be positive."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _LATENCY.match(value)):
        seconds = float(match.group(1)) / (1000.0 if match.group(2) == "ms" else 1.0)
    else:
        raise ValueError(f"write a latency like '200ms' or '0.2s', got {value!r}")
    if not 0 < seconds < math.inf:
        raise ValueError(f"a latency objective must be positive, got {value!r}")
    return seconds
