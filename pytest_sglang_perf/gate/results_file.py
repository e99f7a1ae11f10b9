"""The `--sglang-results PATH` file: every cell's metrics, verdicts, raw samples and the environment.

The file is written atomically (temporary file + rename) with the same stable JSON as the baselines.
A cell's `verdict` is its most severe one: regressed > inconclusive > stale > new > improved > updated > ok,
except that a cell recorded with --sglang-update-baselines is `updated` and a cell whose baseline is not comparable
is `stale` (see compare.Cell.verdict); `stale` lists what changed, `confirmation` holds the re-measure of a cell
whose regression was re-measured (`on`: fresh-boot or same-server; its checks and samples). `entry` is the baseline
entry the cell offers `sglang-perf baseline accept`, and `withheld` why a measured cell offers none (measured under
disturbed conditions, a later boot failed, a later check replaced it: session/baselines.py
SessionBaselines.offered). `errored` lists the variants whose tests measured nothing because their server never ran
(pre-flight or boot failure, see errored.py).
Values that are not finite numbers (NaN, infinity) are written as null, since JSON has no such numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.compare import FRESH_BOOT, Cell, MetricCheck
from pytest_sglang_perf.gate.errored import ErroredVariant
from pytest_sglang_perf.gate.jsonfile import atomic_write, dump_json
from pytest_sglang_perf.gate.judge import CellPlace
from pytest_sglang_perf.gate.recording import RecordedRun
from pytest_sglang_perf.measurement.concurrency import load_record
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.ceiling import ceiling_record
from pytest_sglang_perf.roofline.prefill_ceiling import prefill_ceiling_record

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CellRecord:
    """One checked cell with what it was judged on: its measurement, the re-measure of a regression, its place (the
    baseline file key and identity) and its server's recorded args; and the baseline entry it offers `sglang-perf
    baseline accept` (filled in when the document is made: session/baselines.py SessionBaselines.offered)."""

    cell: Cell
    result: Result | None = None
    confirmation: Result | None = None
    place: CellPlace | None = None
    run: RecordedRun | None = None
    entry: Mapping[str, Any] | None = None
    withheld: str | None = None
    """Why a measured cell offers no entry; None when it offers one or measured nothing."""


def measured_cells(records: Sequence[CellRecord]) -> dict[tuple[str, str], Result]:
    """Each checked cell's measurement by (test id, variant): a test's last check with a result."""
    return {(r.cell.test_id, r.cell.variant): r.result for r in records if r.result is not None}


def records_of(cells: Sequence[Cell], results: Mapping[tuple[str, str], Result]) -> list[CellRecord]:
    """Records of cells measured once each (a cell's result looked up by test id and variant)."""
    return [CellRecord(cell, results.get((cell.test_id, cell.variant))) for cell in cells]


def results_document(
    records: Sequence[CellRecord],
    environment: Mapping[str, Any],
    servers: Mapping[str, Mapping[str, Any]] | None = None,
    errored: Sequence[ErroredVariant] = (),
    *,
    simulated: bool | None = None,
    machine: Mapping[str, Any] | None = None,
    baselines: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The session's results as a JSON-ready document (the results file, the Markdown report and the plots read it).

    `servers` holds, per variant, what its server really ran and what its boot cost (see session.server_records);
    `machine` the machine that ran the session and its commit (outputs/machine.py); `baselines` what recording
    did to the baseline files (gate/ledger.py). `simulated` defaults to whether any cell is.
    """
    doc = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "simulated": any(r.cell.simulated for r in records) if simulated is None else simulated,
        "environment": dict(environment),
        "machine": None if machine is None else dict(machine),
        "servers": {name: dict(record) for name, record in (servers or {}).items()},
        "cells": [_record(record) for record in records],
        "errored": [e.to_dict() for e in errored],
        "baselines": None if baselines is None else dict(baselines),
    }
    finite: dict[str, Any] = _finite(doc)
    return finite


def write_results(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a results document (results_document) to `path`, atomically; its directory is created if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_json(doc))


def _cell(cell: Cell, result: Result | None, again: Result | None) -> dict[str, Any]:
    confirmation = None
    if cell.confirmation is not None:
        confirmation = {"on": "fresh-boot" if cell.confirmed_on == FRESH_BOOT else "same-server",
                        "metrics": {c.metric: _check(c) for c in cell.confirmation},
                        "samples": [] if again is None else [s.to_dict() for s in again.samples],
                        "client": None if again is None or again.client is None else again.client.to_dict(),
                        "host": None if again is None or again.host is None else again.host.to_dict(),
                        "gpu": _gpu(again)}
    return {
        "test_id": cell.test_id,
        "variant": cell.variant,
        "verdict": cell.verdict.value,
        "simulated": cell.simulated,
        "updated": cell.updated,
        "stale": list(cell.stale),
        "disturbed": cell.disturbed,
        "reused": cell.reused,
        "metrics": {c.metric: _check(c) for c in cell.checks},
        "confirmation": confirmation,
        **_result(result),
    }


def _record(record: CellRecord) -> dict[str, Any]:
    return {**_cell(record.cell, record.result, record.confirmation),
            "environment_key": None if record.place is None else record.place.key,
            "entry": None if record.entry is None else dict(record.entry), "withheld": record.withheld}


def _check(check: MetricCheck) -> dict[str, Any]:
    return {
        "baseline": check.baseline, "measured": check.measured, "change": check.change,
        "allowed": check.allowed, "verdict": check.verdict.value, "unit": check.unit,
        "p_value": check.p_value, "detectable": check.detectable, "method": check.method, "n": check.n,
        "note": check.note,
    }


def _result(result: Result | None) -> dict[str, Any]:
    """The measurement behind a cell; empty fields when the cell has none (e.g. it failed to measure)."""
    if result is None:
        return {"summaries": {}, "samples": [], "params": None, "prompt_hash": None,
                "boot_seconds": None, "startup": None, "itl_p50": None, "itl_p99": None, "roofline": None,
                "prefill_roofline": None, "load": None, "client": None, "host": None, "gpu": None, "server_view": None}
    return {
        "summaries": {name: s.to_dict() for name, s in result.summaries.items()},
        "samples": [s.to_dict() for s in result.samples],
        "params": result.params.to_dict(),
        "prompt_hash": result.prompt_hash,
        "boot_seconds": result.boot_seconds,
        "startup": None if result.startup is None else dict(result.startup.facts),
        "itl_p50": result.itl_p50,
        "itl_p99": result.itl_p99,
        "roofline": ceiling_record(result.roofline),
        "prefill_roofline": prefill_ceiling_record(result.prefill_roofline),
        "load": load_record(result.samples, result.params.slo, result.params.level, result.params.concurrency,
                            result.percentiles),
        "client": None if result.client is None else result.client.to_dict(),
        "host": None if result.host is None else result.host.to_dict(),
        "gpu": _gpu(result),
        "server_view": None if result.server is None else result.server.to_dict(),
    }


def _gpu(result: Result | None) -> list[dict[str, Any]] | None:
    return None if result is None or result.gpu is None else [gpu.to_dict() for gpu in result.gpu]


def _finite(value: Any) -> Any:
    """The same JSON-like value with NaN and infinities replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
