"""The `--sglang-results PATH` file: every cell's metrics, verdicts, raw samples and the environment.

The file is written atomically (temporary file + rename) with the same stable JSON as the baselines.
A cell's `verdict` is its most severe one: regressed > inconclusive > stale > new > improved > updated > ok,
except that a cell recorded with --sglang-update-baselines is `updated` and a cell whose baseline is not comparable
is `stale` (see compare.Cell.verdict); `stale` lists what changed, `confirmation` holds the re-measure of a cell
whose regression was re-measured (its checks and samples). `errored` lists the variants whose tests measured
nothing because their server never ran (pre-flight or boot failure, see errored.py). Values that are
not finite numbers (NaN, infinity) are written as null, since JSON has no such numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.compare import Cell, MetricCheck
from pytest_sglang_perf.gate.errored import ErroredVariant
from pytest_sglang_perf.gate.jsonfile import atomic_write, dump_json
from pytest_sglang_perf.measurement.result import Result

SCHEMA_VERSION = 1


def write_results(
    path: Path,
    cells: Sequence[Cell],
    results: Mapping[tuple[str, str], Result],
    environment: Mapping[str, Any],
    servers: Mapping[str, Mapping[str, Any]] | None = None,
    confirmations: Mapping[tuple[str, str], Result] | None = None,
    errored: Sequence[ErroredVariant] = (),
) -> None:
    """Write the session's results to `path` (its directory is created if needed).

    `servers` holds, per variant, what its server really ran and what its boot cost (see session.server_records).
    """
    doc = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "simulated": any(c.simulated for c in cells),
        "environment": dict(environment),
        "servers": {name: dict(record) for name, record in (servers or {}).items()},
        "cells": [_cell(c, results.get((c.test_id, c.variant)), (confirmations or {}).get((c.test_id, c.variant)))
                  for c in cells],
        "errored": [e.to_dict() for e in errored],
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_json(_finite(doc)))


def _cell(cell: Cell, result: Result | None, again: Result | None) -> dict[str, Any]:
    confirmation = None
    if cell.confirmation is not None:
        confirmation = {"metrics": {c.metric: _check(c) for c in cell.confirmation},
                        "samples": [] if again is None else [s.to_dict() for s in again.samples]}
    return {
        "test_id": cell.test_id,
        "variant": cell.variant,
        "verdict": cell.verdict.value,
        "simulated": cell.simulated,
        "updated": cell.updated,
        "stale": list(cell.stale),
        "metrics": {c.metric: _check(c) for c in cell.checks},
        "confirmation": confirmation,
        **_result(result),
    }


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
                "boot_seconds": None, "startup": None, "itl_p50": None, "itl_p99": None}
    return {
        "summaries": {name: s.to_dict() for name, s in result.summaries.items()},
        "samples": [s.to_dict() for s in result.samples],
        "params": result.params.to_dict(),
        "prompt_hash": result.prompt_hash,
        "boot_seconds": result.boot_seconds,
        "startup": None if result.startup is None else result.startup.to_dict(),
        "itl_p50": result.itl_p50,
        "itl_p99": result.itl_p99,
    }


def _finite(value: Any) -> Any:
    """The same JSON-like value with NaN and infinities replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
