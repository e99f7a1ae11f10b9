"""A session split over pytest-xdist workers (report/workers.py): what a worker hands over, how the controller reads
it, the sections it shows and the results file it writes from the merged documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from report_records import booted, cell, result, run_record, variant_run

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.outputs.machine import Commit
from pytest_sglang_perf.report.workers import (
    AB_TITLE,
    WorkerPart,
    finish_controller,
    read_part,
    worker_output,
    worker_sections,
)
from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord

TEST = "t.py::a"
THROUGHPUT = re.compile(r"  fast vs default: output_throughput \+100\.0% "
                        r"\[\+9\d\.\d%, \+10\d\.\d%\] significant: better")
"""e2e 1.0 s -> 0.5 s, each with a spread of +-1.5% over 4 requests (report_records.samples)."""
"""65 tokens in 1.0 s on `default`, in 0.5 s on `fast`."""


def worker_doc(tmp_path: Path, variant: str, e2e: float, *, verbosity: int = 0) -> DocumentRecord:
    """What one worker that ran one variant's test hands over, as a record."""
    records = (CellRecord(cell(TEST, variant, Verdict.NEW), result(variant, e2e=e2e, spread=0.01)),)
    run = run_record(records, [booted(variant_run(variant), tmp_path / f"{variant}.log")], logs_path=tmp_path,
                     variants=("default", "fast"), verbosity=verbosity)
    return DocumentRecord(run, records, {"model": "org/m"}, Commit("abc", False), {})


def part(tmp_path: Path, worker: str, variant: str, e2e: float) -> WorkerPart:
    found = read_part(worker, json.loads(json.dumps(worker_output(worker_doc(tmp_path, variant, e2e), None, []))))
    assert found is not None
    return found


def controller(tmp_path: Path, verbosity: int) -> RunRecord:
    return run_record([], logs_path=tmp_path, variants=("default", "fast"), verbosity=verbosity)


def test_a_workers_output_is_its_sections_errors_and_document(tmp_path: Path) -> None:
    """JSON-ready; a run that measured nothing says so in a last `sglang-perf` section."""
    output = worker_output(worker_doc(tmp_path, "default", 1.0), "sglang-perf: no perf test ran", ["boom"])
    assert json.loads(json.dumps(output)) == output
    assert output["sections"][-1] == ["sglang-perf", ["sglang-perf: no perf test ran"]]
    assert [title for title, _ in output["sections"][:-1]] == ["sglang-perf servers", "sglang-perf"]
    assert output["errors"] == ["boom"]
    assert [(c["test_id"], c["variant"]) for c in output["document"]["cells"]] == [(TEST, "default")]


def test_a_worker_that_used_no_variant_hands_over_no_document(tmp_path: Path) -> None:
    """No variant run: no results document."""
    doc = DocumentRecord(controller(tmp_path, 0), (), {}, Commit(None, None), {})
    assert worker_output(doc, None, [])["document"] is None


@pytest.mark.parametrize("output", [None, "text", ["sections"]])
def test_a_worker_without_the_plugins_session_sent_no_part(output: object) -> None:
    """Anything but a dict is no part."""
    assert read_part("gw0", output) is None


def test_a_part_is_read_leniently(tmp_path: Path) -> None:
    """Missing keys are empty, values become text, a document that is not a dict is none."""
    assert read_part("gw0", {}) == WorkerPart("gw0", [], [], None)
    found = read_part("gw1", {"sections": [["t", ["a", 2]]], "errors": [3], "document": ["not", "a", "dict"]})
    assert found == WorkerPart("gw1", [("t", ["a", "2"])], ["3"], None)


def test_the_controller_shows_each_workers_sections_and_one_ab_over_all(tmp_path: Path) -> None:
    """Sections are titled with their worker; the A/B compares cells measured on different workers."""
    parts = [part(tmp_path, "gw0", "default", 1.0), part(tmp_path, "gw1", "fast", 0.5)]
    sections = worker_sections(controller(tmp_path, 0), parts)
    titles = [title for title, _ in sections]
    assert titles == ["sglang-perf servers [gw0]", "sglang-perf [gw0]", "sglang-perf servers [gw1]",
                      "sglang-perf [gw1]", AB_TITLE]
    ab = sections[-1][1]
    assert ab[0].startswith("sglang-perf A/B against variant 'default'")
    assert ab[1] == TEST and THROUGHPUT.fullmatch(ab[2]) is not None
    assert "(1 comparison(s) not significant; -v shows every comparison)" in ab  # ttft, the same on both


def test_a_workers_own_ab_section_is_replaced_and_q_shows_none(tmp_path: Path) -> None:
    """A worker's A/B (of its variants only) is never shown; with -q there is no A/B section at all."""
    parts = [WorkerPart("gw0", [(AB_TITLE, ["stale"]), ("sglang-perf", ["x"])], [], None)]
    assert worker_sections(controller(tmp_path, -1), parts) == [("sglang-perf [gw0]", ["x"])]


def test_the_controller_writes_the_merged_results_and_collects_the_errors(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One results file with every worker's cells and servers, naming the workers; their errors tagged."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    first, second = part(tmp_path, "gw0", "default", 1.0), part(tmp_path, "gw1", "fast", 0.5)
    failing = WorkerPart("gw2", [], ["could not stop"], None)
    path = tmp_path / "results.json"
    outputs = finish_controller(RunOptions(results_path=path), [first, second, failing])
    assert outputs.written == [f"results {path}"] and outputs.errors == ["[gw2] could not stop"]
    merged: dict[str, Any] = json.loads(path.read_text())
    assert [(c["variant"], c["verdict"]) for c in merged["cells"]] == [("default", "new"), ("fast", "new")]
    assert sorted(merged["servers"]) == ["default", "fast"]
    assert merged["workers"] == ["gw0", "gw1"]


def test_without_any_document_nothing_is_written(tmp_path: Path) -> None:
    """Workers that measured nothing: no file, only their errors."""
    path = tmp_path / "results.json"
    outputs = finish_controller(RunOptions(results_path=path), [WorkerPart("gw0", [], ["e"], None)])
    assert (outputs.written, outputs.errors, path.exists()) == ([], ["[gw0] e"], False)
