"""Baseline entries and results documents for the `sglang-perf baseline` tests, built with the recorder's own code
(measurement/values.py, Summary.of), so that they are consistent as a real run's are."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.baseline import BaselineEntry, BootRecord
from pytest_sglang_perf.gate.identity import CellIdentity
from pytest_sglang_perf.gate.jsonfile import dump_json
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import metric_values

KEY = "simulated-h100-x1__tiny-model"
REAL_KEY = "h100-x1__tiny-model"
ENV = {"model": "tiny/model", "simulated": True, "sglang": None, "torch": None, "python": "3.11.7",
       "pytest_sglang_perf": "0.1.0", "gpus": [], "driver": None}
PARAMS = RequestSettings(max_tokens=64, temperature=0.0, seed=0, repeats=8, warmup=1)
RECENT = "2026-11-30T10:00:00+00:00"


def make_entry(test_id: str = "tests/test_x.py::test_a", variant: str = "default", *, slower: float = 1.0,
               recorded_at: str = RECENT, commit: str | None = "abc123def456", max_tokens: int = 64,
               requests: int = 8) -> BaselineEntry:
    """A consistent entry of `requests` samples on one boot; `slower` scales every time (1.3: 30% slower)."""
    samples = tuple(
        Sample(ttft=0.05 * slower * (1 + i / 100), e2e=1.0 * slower * (1 + i / 100),
               decode_time=0.95 * slower * (1 + i / 100), completion_tokens=64, prompt_tokens=20, chunks=64)
        for i in range(requests)
    )
    boot = 1.5
    values = metric_values(samples, boot, None)
    identity = CellIdentity(prompt_hash="p123", max_tokens=max_tokens, temperature=0.0, seed=0, ignore_eos=True,
                            model="tiny/model", model_config=None, gpus="1x H100", args={"--tp-size": "1"})
    return BaselineEntry(
        test_id=test_id, variant=variant, summaries={name: Summary.of(v) for name, v in values.items()},
        samples=samples, args=("--tp-size", "1"), prompt_hash="r123",
        params=RequestSettings(max_tokens=max_tokens, temperature=0.0, seed=0, repeats=requests, warmup=1),
        recorded_at=recorded_at, commit=commit, environment=ENV, identity=identity,
        boots=(BootRecord(requests, boot),),
    )


def result_cell(entry: BaselineEntry | None, *, test_id: str | None = None, variant: str | None = None,
                verdict: str = "ok", key: str | None = KEY, stale: Sequence[str] = ()) -> dict[str, Any]:
    """A cell as the results file has it (only the fields accept reads are filled in with care)."""
    return {
        "test_id": test_id or (entry.test_id if entry else "tests/test_x.py::test_a"),
        "variant": variant or (entry.variant if entry else "default"),
        "verdict": verdict, "simulated": key is not None and key.startswith("simulated-"), "updated": False,
        "stale": list(stale), "metrics": {}, "confirmation": None, "summaries": {}, "samples": [],
        "params": None, "prompt_hash": None, "boot_seconds": None, "startup": None, "itl_p50": None,
        "itl_p99": None, "environment_key": key, "entry": None if entry is None else entry.to_dict(),
    }


def results_doc(cells: Sequence[dict[str, Any]], *, generated_at: str = "2026-12-01T08:00:00+00:00",
                host: str = "gpu-runner-1", dirty: bool = False) -> dict[str, Any]:
    return {
        "schema_version": 1, "generated_at": generated_at, "simulated": True, "environment": ENV,
        "machine": {"label": "x", "host": host, "cpu": "cpu", "cpu_count": 8, "gpus": [], "driver": None,
                    "python": "3.11.7", "platform": "Linux", "commit": "fedcba987654", "dirty": dirty},
        "servers": {}, "cells": list(cells), "errored": [], "baselines": None,
    }


def write_doc(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(dump_json(doc), encoding="utf-8")
    return path


def entries_of(path: Path) -> dict[str, Any]:
    """The file's entries as JSON: {test_id: {variant: entry}}."""
    entries: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["entries"]
    return entries
