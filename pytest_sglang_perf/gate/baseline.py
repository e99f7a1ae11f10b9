"""One recorded baseline (BaselineEntry), the error a bad baseline file raises, and the file schema's version.

The file format is described in store.py; baseline_parse.py reads a file's entries (an older schema is first
upgraded by migrate.py, the one place that knows the older schemas), store.py writes them, always in the current
schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.identity import CellIdentity
from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import measures_prefill, metric_values

SCHEMA_VERSION = 2
"""The schema this version writes. 2 added each entry's `source` (how it came to be: recorded or accepted)."""

SOURCE_RECORDED = "recorded"
"""An entry `--sglang-update-baselines` wrote from this machine's own measurement."""
SOURCE_ACCEPTED = "accepted"
"""An entry `sglang-perf baseline accept` took from a results file (a CI run on a GPU runner)."""
SOURCE_KINDS = (SOURCE_RECORDED, SOURCE_ACCEPTED)

EntryKey = tuple[str, str]
"""(test id, variant)."""


@dataclass(frozen=True)
class BootRecord:
    """One server boot of a baseline: how many of the entry's samples it measured, in order, and its boot costs."""

    samples: int
    boot_seconds: float | None
    graph_capture_seconds: float | None = None
    conditions: Mapping[str, Any] | None = None
    """The conditions its samples were measured under (measurement/result.py `conditions_record`: client, host,
    gpu), as recorded: shown, not judged; None in entries recorded before they were kept (then absent)."""

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "boot_seconds": self.boot_seconds,
                "graph_capture_seconds": self.graph_capture_seconds,
                **({} if self.conditions is None else {"conditions": dict(self.conditions)})}


@dataclass(frozen=True)
class BaselineEntry:
    """The recorded baseline of one test x variant cell."""

    test_id: str
    variant: str
    summaries: Mapping[str, Summary]
    samples: tuple[Sample, ...]
    args: tuple[str, ...]
    prompt_hash: str
    params: RequestSettings
    recorded_at: str
    commit: str | None
    environment: Mapping[str, Any]
    """The software facts when it was recorded (gate/environment.py), as recorded: shown, never interpreted."""
    startup: Mapping[str, Any] | None = None
    """The server's startup facts when the baseline was recorded (server.startup.StartupFacts.to_dict())."""
    ran: Mapping[str, str] | None = None
    """What the server ran (effective.EffectiveConfig.ran), e.g. {"prefill CUDA graph": "breakable (...)"}."""
    identity: CellIdentity | None = None
    """What was measured (request, resolved args, model, GPUs); None in entries recorded before it was kept."""
    boots: tuple[BootRecord, ...] = ()
    """The boots the samples came from, in order; empty in older entries (one boot: all samples)."""
    source: Mapping[str, Any] | None = None
    """How the entry came to be: {"how": "recorded" | "accepted", "dirty": bool | None, "host": str | None,
    "results_file": str | None (accepted: the results file's name), "generated_at": str | None (accepted: when the
    results file was written)}; None in entries written before schema 2 or by a writer that did not say."""
    roofline: Mapping[str, Any] | None = None
    """The cell's memory-bandwidth ceiling when it was recorded (roofline/ceiling.py `DecodeCeiling.to_dict()`:
    efficiency, ceiling, the bandwidth and where it came from, bytes per step), or {"unavailable": why}; None for a
    cell without decode and in entries recorded before it was kept (then absent from the file: an older entry is
    rewritten as it was)."""

    def boot_records(self) -> tuple[BootRecord, ...]:
        """The entry's boots; an older entry's samples all come from one boot, with the summaries' boot costs."""
        if self.boots:
            return self.boots
        return (BootRecord(len(self.samples), self._median("boot_seconds"), self._median("graph_capture_seconds")),)

    def _median(self, name: str) -> float | None:
        summary = self.summaries.get(name)
        return None if summary is None else summary.median

    def boot_values(self, slo: Slo | Literal["recorded"] | None = "recorded") -> dict[str, list[list[float]]]:
        """Each metric's values grouped by boot (the statistics' reference); a metric every boot has. Goodput is
        judged by `slo` ("recorded": the SLO the entry was recorded with; None: no goodput)."""
        objectives = self.params.slo if slo == "recorded" else slo
        grouped: dict[str, list[list[float]]] = {}
        start = 0
        for boot in self.boot_records():
            values = metric_values(self.samples[start:start + boot.samples], boot.boot_seconds,
                                   boot.graph_capture_seconds, objectives,
                                   prefill=measures_prefill(self.params.prompt_tokens, self.params.prefix_cache))
            start += boot.samples
            for name, found in values.items():
                grouped.setdefault(name, []).append(list(found))
        count = len(self.boot_records())
        return {name: boots for name, boots in grouped.items() if len(boots) == count}

    def to_dict(self) -> dict[str, Any]:
        return {
            "identity": None if self.identity is None else self.identity.to_dict(),
            "boots": [boot.to_dict() for boot in self.boots],
            "startup": None if self.startup is None else dict(self.startup),
            "ran": None if self.ran is None else dict(self.ran),
            "metrics": {name: s.to_dict() for name, s in self.summaries.items()},
            "samples": [s.to_dict() for s in self.samples],
            "args": list(self.args),
            "prompt_hash": self.prompt_hash,
            "params": self.params.to_dict(),
            "recorded_at": self.recorded_at,
            "commit": self.commit,
            "environment": dict(self.environment),
            "source": None if self.source is None else dict(self.source),
            **({} if self.roofline is None else {"roofline": dict(self.roofline)}),
        }


def recorded_time(entry: BaselineEntry) -> datetime | None:
    """When the entry was recorded (UTC; a time without a zone is UTC), None when `recorded_at` is not ISO-8601."""
    try:
        found = datetime.fromisoformat(entry.recorded_at)
    except (TypeError, ValueError):
        return None
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found


def age_seconds(entry: BaselineEntry, now: datetime | None = None) -> float | None:
    """Seconds since the entry was recorded; None when that time cannot be read."""
    recorded = recorded_time(entry)
    return None if recorded is None else ((now or datetime.now(UTC)) - recorded).total_seconds()


class BaselineFileError(SGLangPerfError):
    """A baseline file that cannot be used: the message names the file, the problem and the fix."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        super().__init__(f"baseline file {path}: {problem}; {fix}")
        self.path = path
        self.problem = problem
        self.fix = fix
