"""gate/ledger.py: what a session did with the baseline files, and which baselines are old."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from pytest_sglang_perf.gate.baseline import BaselineEntry
from pytest_sglang_perf.gate.ledger import Ledger

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _entry(recorded_at: str) -> BaselineEntry:
    return cast(BaselineEntry, SimpleNamespace(recorded_at=recorded_at))


def test_counts_and_unused_entries() -> None:
    ledger = Ledger("all")
    file_entries = [("t::a", "default"), ("t::b", "default"), ("t::gone", "default")]
    ledger.seen("key", file_entries, ("t::a", "default"), _entry("2026-11-30T00:00:00+00:00"), NOW)
    ledger.recorded(("t::a", "default"), existed=True)
    ledger.recorded(("t::c", "default"), existed=False)
    collected = {("t::a", "default"), ("t::b", "default"), ("t::c", "default")}
    assert ledger.unused(collected) == [("t::gone", "default")]
    doc: dict[str, Any] = ledger.to_dict(collected)
    assert doc["created"] == [["t::c", "default"]] and doc["updated"] == [["t::a", "default"]]
    assert ledger.lines(collected)[0].startswith("baselines: 1 created, 1 updated, 0 unchanged; 1 unused")


def test_a_forgotten_variant_is_not_counted() -> None:
    ledger = Ledger("all")
    ledger.recorded(("t::a", "fast"), existed=False)
    ledger.recorded(("t::a", "slow"), existed=True)
    ledger.forget("fast")
    assert ledger.created == [] and ledger.updated == [("t::a", "slow")]


def test_old_entries_only_beyond_the_max_age() -> None:
    ledger = Ledger(None, max_age=30 * 86400.0)
    ledger.seen("k", [], ("t::new", "v"), _entry("2026-11-20T00:00:00+00:00"), NOW)
    ledger.seen("k", [], ("t::old", "v"), _entry("2026-10-01T00:00:00"), NOW)  # no zone: UTC
    ledger.seen("k", [], ("t::odd", "v"), _entry("yesterday"), NOW)  # unreadable: never old
    assert [(o.test_id, round(o.age_days)) for o in ledger.old] == [("t::old", 61)]
    [line] = ledger.lines(set())
    assert line.startswith("baselines: 1 older than baseline_max_age (30 days); the oldest: t::old [v]")


def test_a_gate_run_without_max_age_says_nothing() -> None:
    ledger = Ledger(None)
    ledger.seen("k", [("t::x", "v")], ("t::x", "v"), _entry("2000-01-01T00:00:00+00:00"), NOW)
    assert ledger.old == [] and ledger.lines({("t::x", "v")}) == []


def test_a_recorded_cell_is_counted_once_and_is_no_longer_old() -> None:
    ledger = Ledger("all", max_age=86400.0)
    cell = ("t::a", "v")
    ledger.seen("k", [cell], cell, _entry("2020-01-01T00:00:00+00:00"), NOW)
    assert len(ledger.old) == 1
    ledger.recorded(cell, existed=True)
    ledger.recorded(cell, existed=True)  # a test that checked the same cell twice
    assert ledger.updated == [cell] and ledger.old == []
