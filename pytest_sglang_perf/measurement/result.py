"""The result of one measurement: the request it sent, its raw samples and a summary per metric (plain data)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.concurrency import Level, Slo, level_suffix
from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition
from pytest_sglang_perf.measurement.host_load import HostLoad
from pytest_sglang_perf.measurement.prefix_cache import COLD, UNKNOWN
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling


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
    concurrency: int = 1
    """Streams sent at once per round (measurement/concurrency.py); 1: one stream, requests one after another.
    With concurrency > 1, `repeats` and `warmup` count rounds."""
    slo: Slo | None = None
    """The objectives a request must meet to count for goodput; None: no goodput."""

    def to_dict(self) -> dict[str, Any]:
        """Concurrency and SLO are written only when set: a one-stream entry reads as before they existed."""
        return {
            "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
            "repeats": self.repeats, "warmup": self.warmup, "ignore_eos": self.ignore_eos,
            "prefix_cache": self.prefix_cache,
            **({"concurrency": self.concurrency} if self.concurrency != 1 else {}),
            **({"slo": self.slo.to_dict()} if self.slo is not None else {}),
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
        slo = data.get("slo")
        if slo is not None and not isinstance(slo, Mapping):
            raise TypeError(f"expected a table of objectives for slo, found {slo!r}")
        return cls(max_tokens=_int(data["max_tokens"]), temperature=_number(data["temperature"]),
                   seed=_int(data["seed"]), repeats=_int(data["repeats"]), warmup=_int(data["warmup"]),
                   ignore_eos=ignore_eos, prefix_cache=prefix_cache, concurrency=_int(data.get("concurrency", 1)),
                   slo=None if slo is None else Slo.from_dict(slo))


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
    concurrency: int = 1
    """Streams per round, resolved ("max": the server's max running requests); 1: one stream."""
    level: Level = 1
    """The level as the test asked for it (16 or "max"): it names the cell (`@c16`, `@cmax`)."""
    slo: Slo | None = None

    @property
    def settings(self) -> RequestSettings:
        """The part of the request a baseline records: every field of RequestSettings, taken by name (a request's
        fields are RequestSettings' plus the prompt, the adaptive plan's limit and the level as asked)."""
        return RequestSettings(**{name: getattr(self, name) for name in _SETTINGS_FIELDS})

    @property
    def cell_suffix(self) -> str:
        """What this request adds to its cell's test id (concurrency.level_suffix)."""
        return level_suffix(self.level)

    def to_dict(self) -> dict[str, Any]:
        return self.settings.to_dict()


_SETTINGS_FIELDS = tuple(f.name for f in fields(RequestSettings))


@dataclass(frozen=True)
class BootFacts:
    """What the measured server logged about its boot, as a result carries it (the session hands it over from
    server/startup.py's StartupFacts): the graph capture's seconds, a metric, and every fact as recorded."""

    graph_capture_seconds: float | None
    facts: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """StartupFacts.to_dict(): what baselines and results files keep."""


@dataclass(frozen=True)
class Result:
    """One `sglang_perf.measure(...)` call: raw samples plus a Summary per metric."""

    variant: str
    params: RequestParams
    prompt_hash: str
    samples: tuple[Sample, ...]
    summaries: Mapping[str, Summary]
    boot_seconds: float | None
    """Launch -> ready of the server measured; None for a remote server (not booted by this run)."""
    simulated: bool
    itl_p50: float | None = None
    itl_p99: float | None = None
    startup: BootFacts | None = None
    """The server's startup facts as SGLang logged them."""
    values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Each metric's measured values (per request; one value for the boot costs): what the statistics use."""
    roofline: DecodeCeiling | str | None = None
    """The cell's memory-bandwidth ceiling (session/roofline.py), or why it has none; None for a cell without
    decode or one not looked at."""
    percentiles: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """p50/p90/p99 of TTFT and TPOT over every request and of ITL over every chunk gap (concurrency.py)."""
    client: ClientLoad | None = None
    """The client's own event-loop lag and CPU use while it measured (measurement/loop_lag.py)."""
    host: HostLoad | None = None
    """How busy the host was meanwhile (host_load.py); None off Linux."""
    gpu: tuple[GpuCondition, ...] | None = None
    """The server's GPUs meanwhile (gpu_watch.py); None when not read (no NVML, a CPU, simulated or remote
    server)."""
    boot: int | None = None
    """Which boot of its variant's server measured it (the session's count, 1 for the first); None outside one."""

    @property
    def cached_tokens(self) -> float | None:
        """The median of the prompt tokens the server read from its prefix cache; None when no sample says."""
        found = [s.cached_tokens for s in self.samples if s.cached_tokens is not None]
        return float(statistics.median(found)) if found else None

    @property
    def measured(self) -> int:
        """Requests measured, one stream; rounds measured at concurrency N (each of N requests)."""
        return len(self.samples) // self.params.concurrency

    @property
    def settings(self) -> RequestSettings:
        """The request as sent: `repeats` is how many requests (rounds) were measured (the adaptive plan decides
        it)."""
        return replace(self.params.settings, repeats=self.measured)

    def again(self) -> RequestParams:
        """The same request as a fixed plan of this measurement's size: a confirmation re-measure, or the same cell
        on another boot (an adaptive re-measure would stop at its first chance to repeat a result: biased)."""
        return replace(self.params, repeats=self.measured, max_repeats=None)


@dataclass(frozen=True)
class Sweep:
    """`sglang_perf.measure(prompt, concurrency=[1, 4, 16])`: one Result per level, in the order asked; each level
    is a cell of its own (`sglang_perf.check(sweep)` gates them all)."""

    results: tuple[Result, ...]

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, level: Level) -> Result:
        """The result of one level as it was asked (`sweep[16]`, `sweep["max"]`)."""
        for result in self.results:
            if result.params.level == level:
                return result
        raise KeyError(f"this sweep measured concurrency {[r.params.level for r in self.results]}, not {level!r}")


def conditions_record(result: Result) -> dict[str, Any] | None:
    """What a measurement's conditions were, for a baseline's boot: `{"client": ..., "host": ..., "gpu": [...]}`
    (each part None when not read); None when none was."""
    record = {"client": None if result.client is None else result.client.to_dict(),
              "host": None if result.host is None else result.host.to_dict(),
              "gpu": None if result.gpu is None else [gpu.to_dict() for gpu in result.gpu]}
    return record if any(value is not None for value in record.values()) else None
