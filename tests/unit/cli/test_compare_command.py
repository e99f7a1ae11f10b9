"""`sglang-perf compare`: A/B of one results file, before/after of two, and its exits on bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_sglang_perf.cli.main import main
from pytest_sglang_perf.gate.ab import BEFORE_AFTER_FOOTNOTE
from pytest_sglang_perf.gate.compare import Cell
from pytest_sglang_perf.gate.results_file import records_of, results_document, write_results
from pytest_sglang_perf.gate.results_read import ResultsFileError, read_result_cells
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

TEST = "tests/perf/test_prompts.py::test_red_black_tree"
E2E = (10.0, 10.2, 9.9, 10.1, 9.8, 10.3)
"""Request times of about 50 tok/s for 512 tokens, with ~2% spread."""


def result(variant: str, slowdown: float = 1.0, simulated: bool = True) -> Result:
    samples = tuple(Sample(ttft=0.12, e2e=e2e * slowdown, decode_time=e2e * slowdown - 0.12, completion_tokens=512,
                           prompt_tokens=33, chunks=512) for e2e in E2E)
    per_sample = [s.metrics() for s in samples]
    summaries = {name: Summary.of(m[name] for m in per_sample) for name in per_sample[0]}
    params = RequestParams(prompt="Write a red-black tree.", max_tokens=512, temperature=0.6, seed=0,
                           repeats=len(E2E), warmup=1)
    return Result(variant=variant, params=params, prompt_hash="sha256:beef", samples=samples,
                  summaries=summaries, boot_seconds=3.5, simulated=simulated)


def write(path: Path, runs: Sequence[tuple[str, Result]]) -> Path:
    cells = [Cell(test_id, res.variant, (), res.simulated) for test_id, res in runs]
    results = {(test_id, res.variant): res for test_id, res in runs}
    write_results(path, results_document(records_of(cells, results), {"key": "sim"}))
    return path


def compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_one_file_compares_every_variant_with_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default")), (TEST, result("prefill_graph", 0.8)),
                                             (TEST, result("single_batch_overlap"))])
    code, lines, err = compare(capsys, str(path))
    assert (code, err) == (0, "")
    assert lines[0] == ("sglang-perf A/B against variant 'default': change of the geometric mean, "
                        "95% confidence interval (SIMULATED)")
    assert lines[1] == TEST
    assert lines[2].startswith("  prefill_graph vs default: output_throughput +25.0% [+")
    assert lines[2].endswith("] significant: better")
    assert ("  prefill_graph vs default: ttft +0.0% [+0.0%, +0.0%] not significant (no spread: identical values "
            "measure no noise)") in lines
    sbo = [line for line in lines if line.startswith("  single_batch_overlap vs default: output_throughput")]
    assert len(sbo) == 1 and sbo[0].endswith("not significant") and "+0.0% [-" in sbo[0]
    assert lines[-1].startswith("note: one server boot a variant: these intervals hold the requests' spread")


def test_reference_and_confidence_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default")), (TEST, result("prefill_graph", 0.8))])
    code, lines, err = compare(capsys, str(path), "--reference", "prefill_graph", "--confidence", "0.99")
    assert (code, err) == (0, "")
    assert lines[0].startswith("sglang-perf A/B against variant 'prefill_graph': change of the geometric mean, "
                               "99% confidence interval")
    assert lines[2].startswith("  default vs prefill_graph: output_throughput -20.0% [-")
    assert lines[2].endswith("significant: worse")


def test_an_unknown_reference_exits_2_naming_the_variants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default")), (TEST, result("sbo"))])
    code, lines, err = compare(capsys, str(path), "--reference", "nope")
    assert (code, lines) == (2, [])
    assert err == (f"sglang-perf compare: {path}: no results of the reference variant 'nope'; variants present: "
                   "default, sbo (choose one with --reference NAME)\n")


def test_two_files_compare_after_with_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = write(tmp_path / "before.json", [(TEST, result("default", simulated=False)),
                                              ("test_gone", result("default", simulated=False))])
    after = write(tmp_path / "after.json", [(TEST, result("default", 1.25, simulated=False)),
                                            (TEST, result("sbo", simulated=False))])
    code, lines, err = compare(capsys, str(before), str(after))
    assert (code, err) == (0, "")
    assert lines[0] == (f"sglang-perf before/after: {before} (before) -> {after} (after): change of the geometric "
                        "mean, 95% confidence interval")
    assert lines[1] == TEST
    assert lines[2].startswith("  default: output_throughput -20.0% [-")
    assert lines[2].endswith("significant: worse")
    assert f"  sbo: n/a (no result in {before})" in lines
    assert lines[-3:] == ["test_gone", f"  default: n/a (no result in {after})", BEFORE_AFTER_FOOTNOTE]


def test_two_files_say_that_reference_does_not_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default"))])
    code, lines, err = compare(capsys, str(path), str(path), "--reference", "sbo")
    assert code == 0
    assert "--reference does not apply to two files" in err
    assert lines[0].endswith("(SIMULATED)") and lines[2].startswith("  default: output_throughput +0.0%")


def test_unknown_fields_in_the_results_file_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default"))])
    doc = json.loads(path.read_text())
    doc["new_top_level"] = {"x": 1}
    doc["cells"][0]["new_cell_field"] = [1, 2]
    path.write_text(json.dumps(doc))
    [cell] = read_result_cells(path)
    assert (cell.test_id, cell.variant, cell.simulated, cell.prompt_hash) == (TEST, "default", True, "sha256:beef")
    assert cell.values["output_throughput"] == tuple(512 / e2e for e2e in E2E)


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file; check the path, or write one with: pytest --sglang-results PATH"),
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ('{"schema_version": 1, "entries": {}}', "not a pytest-sglang-perf results file (no 'cells' list); "
                                             "pass a file written by: pytest --sglang-results PATH"),
    ('[1, 2]', "not a pytest-sglang-perf results file (no 'cells' list)"),
    ('{"schema_version": 99, "cells": []}', "schema_version 99, but this pytest-sglang-perf reads version 1; "
                                            "write it again with this version: pytest --sglang-results PATH"),
    ('{"schema_version": 1, "cells": {}}', "'cells' is a dict, not a list"),
    ('{"schema_version": 1, "cells": [{"test_id": "t", "variant": "v", "simulated": false, '
     '"samples": [{"ttft": 1}]}]}', "cell 0 (t [v]) is malformed: sample 0 is malformed (KeyError: 'e2e')"),
])
def test_a_bad_file_exits_2_with_the_file_problem_and_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, problem: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    code, lines, err = compare(capsys, str(path))
    assert (code, lines) == (2, [])
    assert err.startswith(f"sglang-perf compare: results file {path}: {problem}")
    with pytest.raises(ResultsFileError, match="results file"):
        read_result_cells(path)


def test_a_bad_second_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "results.json", [(TEST, result("default"))])
    code, lines, err = compare(capsys, str(good), str(tmp_path / "missing.json"))
    assert (code, lines) == (2, [])
    assert "missing.json: no such file" in err


@pytest.mark.parametrize("confidence", ["1.5", "0", "95"])
def test_a_confidence_outside_0_1_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], confidence: str) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default")), (TEST, result("sbo"))])
    code, lines, err = compare(capsys, str(path), "--confidence", confidence)
    assert (code, lines) == (2, [])
    assert err == f"sglang-perf compare: --confidence must be between 0 and 1, e.g. 0.95; got {confidence}\n"


def test_a_file_of_only_the_reference_variant_prints_that_there_is_nothing_to_compare(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "results.json", [(TEST, result("default"))])
    code, lines, err = compare(capsys, str(path))
    assert (code, lines, err) == (0, ["sglang-perf A/B: only the reference variant 'default' was measured: nothing "
                                      "to compare"], "")
