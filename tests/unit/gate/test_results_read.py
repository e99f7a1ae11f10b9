"""Reading a results file back (gate/results_read.py): the cells' samples as written, the whole document once its
cells were checked, and every file it cannot use refused with the file, the problem and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_results import cell_for, result

from pytest_sglang_perf.gate.results_file import SCHEMA_VERSION, records_of, results_document, write_results
from pytest_sglang_perf.gate.results_read import ResultsFileError, read_result_cells, read_results_document


def _written(tmp_path: Path) -> Path:
    measured = result("default", e2e=10.0)
    path = tmp_path / "results.json"
    write_results(path, results_document(records_of([cell_for("test_a", measured, None)],
                                                    {("test_a", "default"): measured}), {"key": "k"}))
    return path


def test_a_written_file_reads_back_with_its_samples(tmp_path: Path) -> None:
    [cell] = read_result_cells(_written(tmp_path))
    assert (cell.test_id, cell.variant, cell.simulated, cell.prompt_hash) == ("test_a", "default", True,
                                                                              "sha256:beef")
    assert sorted(cell.values["output_throughput"]) == pytest.approx(sorted(512 / (10.0 + i / 10) for i in range(3)))
    assert read_results_document(_written(tmp_path))["environment"] == {"key": "k"}


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file; check the path"),
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ({"schema_version": SCHEMA_VERSION}, "not a pytest-sglang-perf results file (no 'cells' list)"),
    ({"schema_version": 99, "cells": []}, f"schema_version 99, but this pytest-sglang-perf reads version "
                                          f"{SCHEMA_VERSION}; write it again with this version"),
    ({"schema_version": SCHEMA_VERSION, "cells": [3]}, "cell 0 is a int, not an object"),
    ({"schema_version": SCHEMA_VERSION, "cells": [{"test_id": "t", "variant": 1}]},
     "cell 0 (t [1]) is malformed: 'test_id' and 'variant' must be strings"),
])
def test_a_file_that_cannot_be_used_names_itself_the_problem_and_the_fix(tmp_path: Path, content: Any,
                                                                      problem: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ResultsFileError) as raised:
        read_results_document(path)
    assert str(raised.value).startswith(f"results file {path}: {problem}")
