"""Recording baselines (--sglang-update-baselines): a variant's measured cells become baseline entries, written to
the file of their environment key. With --sglang-boots N the cells wait until the variant's N boots are measured,
and each entry keeps its samples per boot, so that the gate later knows the boot-to-boot spread.

Nothing is half-written: a variant whose extra boots fail records none of its cells (`discard`), and every file
write is atomic and merged under a lock (store.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.baseline import SOURCE_RECORDED, BaselineEntry, BootRecord
from pytest_sglang_perf.gate.judge import CellPlace, Judge
from pytest_sglang_perf.measurement.metrics import EFFICIENCY
from pytest_sglang_perf.measurement.result import Result, conditions_record
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.roofline.ceiling import ceiling_record


@dataclass(frozen=True)
class RecordedRun:
    """What a baseline entry keeps of the variant's server: its args (secrets redacted) and what it ran."""

    args: tuple[str, ...]
    ran: Mapping[str, str] | None


@dataclass
class PendingCell:
    test_id: str
    place: CellPlace
    run: RecordedRun
    results: list[Result] = field(default_factory=list)
    """One result per boot, in boot order."""

    @property
    def first(self) -> Result:
        return self.results[0]


class Recorder:
    def __init__(self, judge: Judge, facts: Mapping[str, Any], commit: str | None,
                 source: Mapping[str, Any] | None = None) -> None:
        self._judge = judge
        self._facts = facts
        self._commit = commit
        self._source = source
        self._pending: dict[str, list[PendingCell]] = {}
        self.written: dict[tuple[str, str], BaselineEntry] = {}
        """Every entry written so far, by (test id, variant): what the results file offers `baseline accept`."""

    def add(self, test_id: str, result: Result, place: CellPlace, run: RecordedRun) -> None:
        """A cell measured on the variant's first boot."""
        self._pending.setdefault(result.variant, []).append(PendingCell(test_id, place, run, [result]))

    def pending(self, variant: str) -> list[PendingCell]:
        return list(self._pending.get(variant, []))

    def discard(self, variant: str) -> list[PendingCell]:
        """Forget the variant's cells without writing them (a later boot failed)."""
        return self._pending.pop(variant, [])

    def write(self, variant: str) -> list[Path]:
        """Write the variant's cells (every boot measured so far) to their baseline files; returns the files."""
        by_key: dict[str, list[BaselineEntry]] = {}
        for cell in self._pending.pop(variant, []):
            by_key.setdefault(cell.place.key, []).append(self._entry(cell))
        paths = [self._judge.store(key).write(entries, self._facts) for key, entries in by_key.items()]
        self.written.update({(e.test_id, e.variant): e for entries in by_key.values() for e in entries})
        return paths

    def _entry(self, cell: PendingCell) -> BaselineEntry:
        return build_entry(cell.test_id, cell.results, cell.place, cell.run, self._facts, self._commit, self._source)


def build_entry(test_id: str, results: Sequence[Result], place: CellPlace, run: RecordedRun,
                facts: Mapping[str, Any], commit: str | None, source: Mapping[str, Any] | None = None) -> BaselineEntry:
    """The baseline entry of a cell measured on one or more boots (`results`, in boot order): what
    --sglang-update-baselines records, and what a results file offers to `sglang-perf baseline accept`."""
    first = results[0]
    return BaselineEntry(
        test_id=test_id,
        variant=first.variant,
        summaries=summaries_over(results),
        samples=tuple(sample for result in results for sample in result.samples),
        args=run.args,
        prompt_hash=first.prompt_hash,
        params=first.settings,
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        commit=commit,
        environment=facts,
        startup=None if first.startup is None else dict(first.startup.facts),
        ran=run.ran,
        identity=place.identity,
        boots=tuple(_boot(result) for result in results),
        source=source,
        roofline=ceiling_record(first.roofline),
    )


def _boot(result: Result) -> BootRecord:
    capture = result.values.get("graph_capture_seconds")
    return BootRecord(len(result.samples), result.boot_seconds, None if not capture else capture[0],
                      conditions_record(result))


def recorded_source(host: str | None, dirty: bool | None) -> dict[str, Any]:
    """The `source` of an entry this session records: the host that measured it and whether its checkout was dirty."""
    return {"how": SOURCE_RECORDED, "dirty": dirty, "host": host, "results_file": None, "generated_at": None}


def summaries_over(results: Sequence[Result]) -> dict[str, Summary]:
    """A summary per metric over every boot's values (a metric every boot has). Not the share of the bandwidth
    ceiling: it is derived from the entry's samples and the ceiling the entry keeps (gate/efficiency.py), so that
    every summary of an entry is one its samples define (cli/baseline/consistency.py)."""
    names = [name for name in results[0].values if name != EFFICIENCY and all(name in r.values for r in results)]
    return {name: Summary.of([v for r in results for v in r.values[name]]) for name in names}
