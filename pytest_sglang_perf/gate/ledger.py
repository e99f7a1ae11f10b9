"""What a session did with the baseline files: the entries it created, updated or left unchanged, the entries of
the files it used that none of its tests measured (unused), and the baselines it gated on that are older than
the configured `baseline_max_age`.

The summary's baseline lines and the results document's `baselines` section come from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pytest_sglang_perf.gate.baseline import BaselineEntry, EntryKey, age_seconds
from pytest_sglang_perf.gate.cell_ids import collected_test

_DAY = 86400.0


@dataclass(frozen=True)
class OldEntry:
    test_id: str
    variant: str
    recorded_at: str
    age_days: float


@dataclass
class Ledger:
    mode: str | None
    """None: a gate run; "all": --sglang-update-baselines; "new": --sglang-update-baselines=new."""
    max_age: float | None = None
    """Seconds after which a baseline entry counts as old (the `baseline_max_age` setting); None: never."""
    created: list[EntryKey] = field(default_factory=list)
    updated: list[EntryKey] = field(default_factory=list)
    unchanged: list[EntryKey] = field(default_factory=list)
    """Cells measured but not recorded (--sglang-update-baselines=new: they already had an entry)."""
    old: list[OldEntry] = field(default_factory=list)
    files: dict[str, set[EntryKey]] = field(default_factory=dict)
    """Per baseline file key the session used: its entries' keys when first read."""

    def seen(self, key: str, entries: Iterable[EntryKey], cell: EntryKey, stored: BaselineEntry | None,
             now: datetime | None = None) -> None:
        """A cell was checked against baseline file `key` (whose entries are `entries`); `stored` is its entry."""
        if key not in self.files:
            self.files[key] = set(entries)
        age = None if stored is None else age_seconds(stored, now)
        if age is not None and self.max_age is not None and age > self.max_age and stored is not None:
            self.old.append(OldEntry(cell[0], cell[1], stored.recorded_at, age / _DAY))

    def recorded(self, cell: EntryKey, *, existed: bool) -> None:
        """The cell's entry was (re)recorded: counted once however often a test checked it, and no longer old."""
        if cell not in self.created and cell not in self.updated:
            (self.updated if existed else self.created).append(cell)
        self.old = [o for o in self.old if (o.test_id, o.variant) != cell]

    def kept(self, cell: EntryKey) -> None:
        self.unchanged.append(cell)

    def forget(self, variant: str) -> None:
        """The variant's recorded cells were discarded (a later boot failed): they are not counted."""
        self.created = [c for c in self.created if c[1] != variant]
        self.updated = [c for c in self.updated if c[1] != variant]

    def unused(self, collected: Set[EntryKey]) -> list[EntryKey]:
        """Entries of the files this session used that none of its collected tests (test id, variant) is for."""
        return sorted(cell for cells in self.files.values() for cell in cells
                      if (collected_test(cell[0]), cell[1]) not in collected)

    def to_dict(self, collected: Set[EntryKey]) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "created": [list(c) for c in self.created],
            "updated": [list(c) for c in self.updated],
            "unchanged": [list(c) for c in self.unchanged],
            "unused": [list(c) for c in self.unused(collected)],
            "old": [{"test_id": o.test_id, "variant": o.variant, "recorded_at": o.recorded_at,
                     "age_days": round(o.age_days, 1)} for o in self.old],
            "max_age_days": None if self.max_age is None else self.max_age / _DAY,
        }

    def lines(self, collected: Set[EntryKey]) -> list[str]:
        """The summary's lines about the baselines: counts when recording, old entries always."""
        lines = []
        if self.mode is not None:
            unused = self.unused(collected)
            kept = " (=new: they have an entry)" if self.mode == "new" and self.unchanged else ""
            prune = "; `sglang-perf baseline prune` removes those whose test or variant is gone" if unused else ""
            lines.append(f"baselines: {len(self.created)} created, {len(self.updated)} updated, "
                         f"{len(self.unchanged)} unchanged{kept}; {len(unused)} unused "
                         f"(entries of these files no test of this run measured{prune})")
        if self.old and self.max_age is not None:
            oldest = max(self.old, key=lambda o: o.age_days)
            lines.append(f"baselines: {len(self.old)} older than baseline_max_age ({self.max_age / _DAY:g} days); the "
                         f"oldest: {oldest.test_id} [{oldest.variant}], recorded {oldest.recorded_at} "
                         f"({oldest.age_days:.0f} days ago); re-record them with --sglang-update-baselines")
        return lines

