"""The session's baselines: the judge that reads them, the recorder that writes them (--sglang-update-baselines,
`=new` only for cells without an entry), the ledger of what the run did with them, and the commit and host that
recorded entries name. Plain Python (no pytest); session/facade.py holds one.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.gate.baseline import BaselineEntry, EntryKey
from pytest_sglang_perf.gate.compare import GatePolicy
from pytest_sglang_perf.gate.conditions import withheld_text
from pytest_sglang_perf.gate.judge import CellPlace, Judge
from pytest_sglang_perf.gate.ledger import Ledger
from pytest_sglang_perf.gate.recording import RecordedRun, Recorder, build_entry, recorded_source
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.gate.statistics import BootSpread, boot_spread
from pytest_sglang_perf.measurement.metrics import EFFICIENCY
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.values import BOOT_METRICS
from pytest_sglang_perf.outputs.machine import Commit, git_commit

REPLACED = "a later check of the same test and variant in this run replaced it; its entry is offered there"
NOT_WRITTEN = ("recorded, but not written: a later boot of its variant failed, and --sglang-boots records all of a "
               "variant's cells or none")


class SessionBaselines:
    def __init__(self, settings: Settings, options: RunOptions, facts: Mapping[str, Any],
                 defaults: Callable[[], Mapping[str, Any]]) -> None:
        self._settings = settings
        self._options = options
        self._facts = facts
        self._defaults = defaults
        """SGLang's option defaults (what a cell's identity resolves unset flags to), read when first needed."""

    @cached_property
    def judge(self) -> Judge:
        policy = GatePolicy(self._settings.gate.confidence, self._settings.gate.power)
        return Judge(self._settings.baseline_dir, policy, self._settings.tolerance, self._defaults().get,
                     efficiency_gate=EFFICIENCY in self._settings.tolerances)

    @cached_property
    def commit(self) -> Commit:
        return git_commit(self._settings.root)

    @cached_property
    def source(self) -> dict[str, Any]:
        return recorded_source(socket.gethostname(), self.commit.dirty)

    @cached_property
    def recorder(self) -> Recorder:
        return Recorder(self.judge, self._facts, self.commit.id, self.source)

    @cached_property
    def ledger(self) -> Ledger:
        options = self._options
        mode = None if not options.update_baselines else "new" if options.update_new_only else "all"
        return Ledger(mode, self._settings.baseline_max_age)

    def stored(self, place: CellPlace, cell: EntryKey) -> BaselineEntry | None:
        """The cell's stored entry (comparable or not), noted in the ledger with its file's entries."""
        entries = self.judge.store(place.key).load()
        self.ledger.seen(place.key, entries, cell, entries.get(cell))
        return entries.get(cell)

    def records(self, stored: BaselineEntry | None) -> bool:
        """Whether this run records a cell: --sglang-update-baselines, and =new only for a cell without entry."""
        return self._options.update_baselines and not (self._options.update_new_only and stored is not None)

    def record(self, test_id: str, result: Result, place: CellPlace, run: RecordedRun, *, existed: bool) -> None:
        """Record a measured cell (written at once, or after the variant's last boot with --sglang-boots N)."""
        self.recorder.add(test_id, result, place, run)
        self.ledger.recorded((test_id, result.variant), existed=existed)
        if self._options.boots == 1:
            self.recorder.write(result.variant)

    def discard(self, variant: str) -> None:
        """A later boot of the variant failed: none of its cells is recorded or counted."""
        self.recorder.discard(variant)
        self.ledger.forget(variant)

    def offered(self, records: Sequence[CellRecord],
                disturbed: Callable[[Result], str | None] = lambda result: None) -> list[CellRecord]:
        """Each cell with the entry it offers `sglang-perf baseline accept` in the results file, or why it offers
        none although it was measured (`withheld`): a recorded cell the very entry it wrote (every boot of
        --sglang-boots N; none when a later boot failed and nothing was written, or when a later check of the same
        test x variant replaced it); a gated cell the entry recording it would have written, none when it was
        measured under disturbed conditions (`disturbed` says why; recording it would have been refused)."""
        offered: list[CellRecord] = []
        seen: set[EntryKey] = set()
        for record in reversed(records):
            key = (record.cell.test_id, record.cell.variant)
            entry, withheld = self._written(key, seen) if record.cell.updated else self._gated(record, disturbed)
            seen.add(key)
            offered.append(replace(record, entry=None if entry is None else entry.to_dict(), withheld=withheld))
        return offered[::-1]

    def _written(self, key: EntryKey, seen: set[EntryKey]) -> tuple[BaselineEntry | None, str | None]:
        if key in seen:
            return None, REPLACED
        entry = self.recorder.written.get(key)
        return entry, NOT_WRITTEN if entry is None else None

    def _gated(self, record: CellRecord,
               disturbed: Callable[[Result], str | None]) -> tuple[BaselineEntry | None, str | None]:
        if record.result is None:
            return None, None  # nothing measured
        why = disturbed(record.result)
        return (None, withheld_text(why)) if why is not None else (self._would_write(record), None)

    def _would_write(self, record: CellRecord) -> BaselineEntry | None:
        if record.result is None or record.place is None or record.run is None:
            return None
        return build_entry(record.cell.test_id, [record.result], record.place, record.run, self._facts,
                           self.commit.id, self.source)

    def files(self, variant: str) -> list[Path]:
        """Write the variant's recorded cells (every boot measured); the files written."""
        return self.recorder.write(variant)

    def recorded_spreads(self, records: Sequence[CellRecord]) -> dict[tuple[str, str], dict[str, BootSpread]]:
        """By (test id, variant): each request metric's boot spread in the cell's comparable baseline, where it was
        recorded over several boots (the A/B within one boot each puts it in the interval: gate/ab.py)."""
        spreads: dict[tuple[str, str], dict[str, BootSpread]] = {}
        for record in records:
            if record.place is None or record.result is None:
                continue
            entry = self.judge.comparable(record.cell.test_id, record.cell.variant, record.place).entry
            if entry is None or len(entry.boot_records()) < 2:
                continue
            found = {name: spread for name, groups in entry.boot_values(record.result.params.slo).items()
                     if name not in BOOT_METRICS and (spread := boot_spread(groups)) is not None}
            if found:
                spreads[(record.cell.test_id, record.cell.variant)] = found
        return spreads
