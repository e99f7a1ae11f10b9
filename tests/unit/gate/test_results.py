from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.gate.compare import Cell, check_all
from pytest_sglang_perf.gate.results_file import records_of, results_document, write_results
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

ENV = {"key": "simulated-gpu-qwen", "sglang": "0.5.23", "simulated": True}


def result(variant: str, e2e: float = 10.0, simulated: bool = True) -> Result:
    samples = tuple(
        Sample(ttft=0.12 + i / 1000, e2e=e2e + i / 10, decode_time=e2e - 0.2, completion_tokens=512,
               prompt_tokens=33, chunks=171, spec_verify_ct=171, spec_accept_length=2.994152046783626)
        for i in range(3)
    )
    per_sample = [s.metrics() for s in samples]
    values = {name: tuple(m[name] for m in per_sample) for name in per_sample[0]}
    summaries = {name: Summary.of(v) for name, v in values.items()}
    params = RequestParams(prompt="Write a red-black tree.", max_tokens=512, temperature=0.6, seed=0,
                           repeats=3, warmup=1)
    return Result(variant=variant, params=params, prompt_hash="sha256:beef", samples=samples,
                  summaries=summaries, boot_seconds=3.5, simulated=simulated, itl_p50=0.02, itl_p99=0.05,
                  values=values)


def cell_for(test_id: str, res: Result, baseline: Result | None, updated: bool = False) -> Cell:
    reference = None if baseline is None else {name: [list(v)] for name, v in baseline.values.items()}
    checks = check_all(res.values, reference, {})
    return Cell(test_id, res.variant, checks, res.simulated, updated)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_results_round_trip(tmp_path: Path) -> None:
    fast, slow = result("default", e2e=10.0), result("default", e2e=12.0)
    new = result("prefill_graph")
    cells = [cell_for("test_a", slow, fast), cell_for("test_a", new, None)]
    results = {("test_a", "default"): slow, ("test_a", "prefill_graph"): new}
    path = tmp_path / "out" / "results.json"
    before = datetime.now(UTC)
    write_results(path, results_document(records_of(cells, results), ENV))

    doc = load(path)
    assert doc["schema_version"] == 1
    assert doc["simulated"] is True
    assert doc["environment"] == ENV
    assert before - timedelta(seconds=2) <= datetime.fromisoformat(doc["generated_at"]) <= datetime.now(UTC)
    first, second = doc["cells"]
    assert (first["test_id"], first["variant"], first["verdict"]) == ("test_a", "default", "regressed")
    assert (second["variant"], second["verdict"]) == ("prefill_graph", "new")
    for check in cells[0].checks:
        assert first["metrics"][check.metric] == {
            "baseline": check.baseline, "measured": check.measured, "change": check.change,
            "allowed": check.allowed, "verdict": check.verdict.value, "unit": check.unit,
            "p_value": check.p_value, "detectable": check.detectable, "method": check.method, "n": check.n,
            "note": check.note,
        }
    assert first["metrics"]["output_throughput"]["verdict"] == "regressed"
    assert {k: Summary.from_dict(v) for k, v in first["summaries"].items()} == dict(slow.summaries)
    assert tuple(Sample.from_dict(s) for s in first["samples"]) == slow.samples
    assert first["params"] == slow.params.to_dict()
    assert first["prompt_hash"] == "sha256:beef"
    assert (first["boot_seconds"], first["itl_p50"], first["itl_p99"]) == (3.5, 0.02, 0.05)
    assert second["metrics"]["ttft"]["baseline"] is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]


def test_updated_cells_and_real_runs(tmp_path: Path) -> None:
    fast, slow = result("default", simulated=False), result("default", e2e=12.0, simulated=False)
    path = tmp_path / "results.json"
    records = records_of([cell_for("t", slow, fast, updated=True)], {("t", "default"): slow})
    write_results(path, results_document(records, {}))
    doc = load(path)
    assert doc["simulated"] is False
    assert doc["cells"][0]["verdict"] == "updated"
    assert doc["cells"][0]["updated"] is True
    assert doc["cells"][0]["metrics"]["output_throughput"]["verdict"] == "regressed"


def test_a_cell_without_a_result_and_non_finite_values(tmp_path: Path) -> None:
    res = dataclasses.replace(result("default"), itl_p99=float("inf"))
    cells = [cell_for("t", res, None), Cell("lost", "default", (), simulated=True)]
    path = tmp_path / "results.json"
    write_results(path, results_document(records_of(cells, {("t", "default"): res}), ENV))
    first, second = load(path)["cells"]
    assert first["itl_p99"] is None
    assert (second["summaries"], second["samples"], second["params"], second["prompt_hash"]) == ({}, [], None, None)
    assert second["verdict"] == "ok"


def test_overwrites_an_existing_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("x" * 100_000)
    write_results(path, results_document(records_of([], {}), ENV))
    assert load(path)["cells"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_rejects_values_json_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with pytest.raises(TypeError, match="cannot write object"):
        write_results(path, results_document(records_of([], {}), {"bad": object()}))
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []
