"""The result of one measurement: the request it sent, its raw samples and a summary per metric (plain data)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.concurrency import Level
from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition
from pytest_sglang_perf.measurement.host_load import HostLoad
from pytest_sglang_perf.measurement.request import RequestParams, RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.server_view import ServerView
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import Coverage
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling
from pytest_sglang_perf.roofline.prefill_ceiling import PrefillCeiling


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
    server: ServerView | None = None
    """What the server's own decode lines said while this was measured (session/server_view.py), with the findings
    where it disagrees with the client; None for a remote server or a log without them."""
    reused: str | None = None
    """How the server was reused, when it was a kept one booted by an earlier run (--sglang-reuse,
    session/kept.py: `reused kept server <key> (booted 4 min ago; run 3 on it)`); None for a fresh boot. Its boot
    metrics are not measured then."""
    prefill_roofline: PrefillCeiling | str | None = None
    """A cold cell of exact prompt length against its compute ceiling (session/prefill_roofline.py), or why it
    has none; None for any other cell or one not looked at."""
    coverage: Mapping[str, Coverage] | None = field(default=None, compare=False)
    """Each request metric that not every sample defined, and why (values.result_coverage), for the checks' notes:
    measure.build_result works it out with the values. None: a result made elsewhere (a test's), whose reader
    works it out from the samples."""

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
