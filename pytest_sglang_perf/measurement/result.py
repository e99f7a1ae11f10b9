"""The result of one measurement: the request it sent, its raw samples and a summary per metric (plain data)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_sglang_perf.measurement.prefix_cache import COLD, UNKNOWN
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling
from pytest_sglang_perf.server.startup import StartupFacts


@dataclass(frozen=True)
class RequestSettings:
    """How a fixed prompt is sent: what a baseline records of the request beside the prompt's hash."""

    max_tokens: int
    temperature: float
    seed: int
    repeats: int
    warmup: int
    ignore_eos: bool = True
    """SGLang's `ignore_eos`: every request yields exactly max_tokens tokens."""
    prefix_cache: str = COLD
    """"cold" or "warm" (measurement/prefix_cache.py); "unknown" in files written before it was kept."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
            "repeats": self.repeats, "warmup": self.warmup, "ignore_eos": self.ignore_eos,
            "prefix_cache": self.prefix_cache,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestSettings:
        """Raises KeyError for a missing field, TypeError for a value of the wrong type. A missing `ignore_eos`
        (files written before it was recorded) is true: every earlier version sent it."""
        ignore_eos = data.get("ignore_eos", True)
        if not isinstance(ignore_eos, bool):
            raise TypeError(f"expected true or false for ignore_eos, found {ignore_eos!r}")
        prefix_cache = data.get("prefix_cache", UNKNOWN)
        if not isinstance(prefix_cache, str):
            raise TypeError(f"expected a text for prefix_cache, found {prefix_cache!r}")
        return cls(max_tokens=_int(data["max_tokens"]), temperature=_number(data["temperature"]),
                   seed=_int(data["seed"]), repeats=_int(data["repeats"]), warmup=_int(data["warmup"]),
                   ignore_eos=ignore_eos, prefix_cache=prefix_cache)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, found {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, found {value!r}")
    return float(value)


@dataclass(frozen=True)
class RequestParams:
    """The fixed request a measurement sends; its hash identifies the prompt in baselines."""

    prompt: str
    max_tokens: int
    temperature: float
    seed: int
    repeats: int
    """Requests to measure (after the warmup); with `max_repeats`, the first round of the adaptive plan."""
    warmup: int
    ignore_eos: bool = True
    max_repeats: int | None = None
    """The adaptive plan (`repeats="auto"`): keep measuring, up to this many requests, until the verdict is
    decided; None for a fixed plan."""
    prefix_cache: str = COLD
    """"cold": /flush_cache before every request; "warm": none, the warmup fills the cache (prefix_cache.py)."""

    @property
    def settings(self) -> RequestSettings:
        return RequestSettings(self.max_tokens, self.temperature, self.seed, self.repeats, self.warmup,
                               self.ignore_eos, self.prefix_cache)

    def to_dict(self) -> dict[str, Any]:
        return self.settings.to_dict()


@dataclass(frozen=True)
class Result:
    """One `sglang_perf.measure(...)` call: raw samples plus a Summary per metric."""

    variant: str
    params: RequestParams
    prompt_hash: str
    samples: tuple[Sample, ...]
    summaries: Mapping[str, Summary]
    boot_seconds: float
    simulated: bool
    itl_p50: float | None = None
    itl_p99: float | None = None
    startup: StartupFacts | None = None
    """The server's startup facts as SGLang logged them."""
    values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Each metric's measured values (per request; one value for the boot costs): what the statistics use."""
    roofline: DecodeCeiling | str | None = None
    """The cell's memory-bandwidth ceiling (session_roofline.py), or why it has none; None for a cell without
    decode or one not looked at."""

    @property
    def cached_tokens(self) -> float | None:
        """The median of the prompt tokens the server read from its prefix cache; None when no sample says."""
        found = [s.cached_tokens for s in self.samples if s.cached_tokens is not None]
        return float(statistics.median(found)) if found else None

    @property
    def settings(self) -> RequestSettings:
        """The request as sent: `repeats` is how many requests were measured (the adaptive plan decides it)."""
        return replace(self.params.settings, repeats=len(self.samples))

    def again(self) -> RequestParams:
        """The same request as a fixed plan of this measurement's size: a confirmation re-measure, or the same cell
        on another boot (an adaptive re-measure would stop at its first chance to repeat a result: biased)."""
        return replace(self.params, repeats=len(self.samples), max_repeats=None)
