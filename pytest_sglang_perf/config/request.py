"""The `request` and `gate` tables: how a fixed prompt is measured by default, and how sure a verdict must be."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_sglang_perf.config.reader import (
    Reader,
    expect_table,
    non_negative_int,
    positive_int,
    temperature,
    whole_number,
)
from pytest_sglang_perf.config.units import parse_duration, parse_latency
from pytest_sglang_perf.measurement.concurrency import Level, Slo
from pytest_sglang_perf.measurement.prefix_cache import prefix_cache_mode
from pytest_sglang_perf.measurement.request import SETTINGS_FIELDS, RequestParams, RequestSettings

AUTO = "auto"
"""`request.repeats = "auto"` (and `measure(repeats="auto")`): the adaptive plan."""
AUTO_FIRST_ROUND = 3
"""The adaptive plan's first round of requests, before it decides whether it needs more."""


@dataclass(frozen=True, kw_only=True)
class RequestDefaults(RequestSettings):
    """The `request` table: the settings a test's measurement sends unless it passes its own (RequestSettings'
    fields; `concurrency` is always the test's), plus what only the configuration sets."""

    timeout: float = 600.0
    adaptive: bool = False
    """`repeats = "auto"`: keep measuring until the verdict is decided, up to `max_repeats` requests."""
    max_repeats: int = 15

    def params(self, prompt: str, given: Mapping[str, object], *, concurrency: int = 1,
               level: Level = 1) -> RequestParams:
        """The request a measurement sends: each setting the test gave (`given`, by RequestSettings' field names;
        None: not given), else these defaults. Raises ValueError for a `repeats` that is neither a whole number
        >= 1 nor "auto"."""
        asked = {name: value for name, value in given.items() if value is not None}
        repeats = asked.pop("repeats", None)
        adaptive = repeats == AUTO or (repeats is None and self.adaptive)
        if repeats is not None and repeats != AUTO and (isinstance(repeats, bool) or not isinstance(repeats, int)
                                                         or repeats < 1):
            raise ValueError(f'repeats must be a whole number >= 1 or "auto", got {repeats!r}')
        count = AUTO_FIRST_ROUND if adaptive else repeats if isinstance(repeats, int) else self.repeats
        base = {name: getattr(self, name) for name in SETTINGS_FIELDS}
        return RequestParams(**{**base, **asked, "repeats": count, "concurrency": concurrency}, prompt=prompt,
                             max_repeats=max(self.max_repeats, count) if adaptive else None, level=level)


CONFIRM_AUTO = "auto"
CONFIRM_REBOOT = "reboot"
CONFIRM_SAME_SERVER = "same-server"
CONFIRM_MODES = (CONFIRM_AUTO, CONFIRM_REBOOT, CONFIRM_SAME_SERVER)
"""`[gate] confirm`: where a regression is re-measured before it fails (session/confirmation.py)."""


@dataclass(frozen=True)
class GateSettings:
    """How sure a verdict must be (see gate/compare.py GatePolicy): `[gate] confidence = 0.95`, `power = 0.8`; and
    where a regression is confirmed: `confirm = "auto"` (docs/verdicts.md)."""

    confidence: float = 0.95
    power: float = 0.80
    confirm: str = CONFIRM_AUTO


def parse_request(reader: Reader, value: object) -> RequestDefaults:
    if value is None:
        return RequestDefaults()
    table = expect_table(value, reader.source, "request")
    keys = {"max_tokens", "temperature", "repeats", "warmup", "seed", "timeout", "max_repeats", "ignore_eos",
            "prefix_cache", "slo"}
    reader.check_keys(table, keys, "request.")
    base = RequestDefaults()
    p = "request."
    first_round: int | str = base.repeats
    repeats = reader.get(table, "repeats", _repeats, default=first_round, prefix=p)
    return RequestDefaults(
        max_tokens=reader.get(table, "max_tokens", positive_int, default=base.max_tokens, prefix=p),
        temperature=reader.get(table, "temperature", temperature, default=base.temperature, prefix=p),
        repeats=repeats if isinstance(repeats, int) else AUTO_FIRST_ROUND,
        warmup=reader.get(table, "warmup", non_negative_int, default=base.warmup, prefix=p),
        seed=reader.get(table, "seed", whole_number, default=base.seed, prefix=p),
        timeout=reader.get(table, "timeout", parse_duration, default=base.timeout, prefix=p),
        adaptive=not isinstance(repeats, int),
        max_repeats=reader.get(table, "max_repeats", _max_repeats, default=base.max_repeats, prefix=p),
        ignore_eos=reader.get(table, "ignore_eos", _bool, default=base.ignore_eos, prefix=p),
        prefix_cache=reader.get(table, "prefix_cache", prefix_cache_mode, default=base.prefix_cache, prefix=p),
        slo=reader.get(table, "slo", parse_slo, default=None, prefix=p),
    )


def parse_slo(value: object) -> Slo:
    """`{ttft = "200ms", tpot = "50ms"}` (either or both; numbers are seconds)."""
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f'write the objectives as a table like {{ttft = "200ms", tpot = "50ms"}}, got {value!r}')
    unknown = sorted(set(value) - {"ttft", "tpot"})
    if unknown:
        raise ValueError(f"an SLO sets ttft and/or tpot, not {', '.join(map(repr, unknown))}")
    ttft, tpot = (None if value.get(name) is None else parse_latency(value[name]) for name in ("ttft", "tpot"))
    return Slo(ttft=ttft, tpot=tpot)


def _repeats(value: object) -> int | str:
    if value == AUTO:
        return AUTO
    try:
        return positive_int(value)
    except ValueError:
        raise ValueError(f'expected a whole number >= 1 or "auto", got {value!r}') from None


def _max_repeats(value: object) -> int:
    count = positive_int(value)
    if count < AUTO_FIRST_ROUND:
        raise ValueError(f"expected at least {AUTO_FIRST_ROUND} (the adaptive plan's first round), got {value!r}")
    return count


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _probability(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.5 <= value < 1:
        raise ValueError(f"expected a number from 0.5 to below 1 (e.g. 0.95), got {value!r}")
    return float(value)


def parse_gate(reader: Reader, value: object) -> GateSettings:
    if value is None:
        return GateSettings()
    table = expect_table(value, reader.source, "gate")
    reader.check_keys(table, {"confidence", "power", "confirm"}, "gate.")
    base = GateSettings()
    return GateSettings(
        confidence=reader.get(table, "confidence", _probability, default=base.confidence, prefix="gate."),
        power=reader.get(table, "power", _probability, default=base.power, prefix="gate."),
        confirm=reader.get(table, "confirm", _confirm_mode, default=base.confirm, prefix="gate."),
    )


def _confirm_mode(value: object) -> str:
    if value not in CONFIRM_MODES:
        raise ValueError(f"expected one of {', '.join(repr(m) for m in CONFIRM_MODES)}, got {value!r}")
    return str(value)
