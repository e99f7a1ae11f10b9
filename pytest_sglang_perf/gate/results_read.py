"""Reading a `--sglang-results` file back (results_file.py writes it): each cell's raw samples, for A/B answers
(`read_result_cells`), or the whole document once its cells were checked the same way, for the plots and
`sglang-perf baseline accept` (`read_results_document`).

The cells' checks read only the fields the A/B answers need (test_id, variant, simulated, samples, prompt_hash); any
other field is left to the reader that uses it, so a file with more fields still reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.ab import CellSamples
from pytest_sglang_perf.gate.results_file import SCHEMA_VERSION

REWRITE = "write it again with: pytest --sglang-results PATH"


class ResultsFileError(SGLangPerfError):
    """A results file that cannot be used: the message names the file, the problem and the fix."""

    def __init__(self, path: Path, problem: str, fix: str = REWRITE) -> None:
        super().__init__(f"results file {path}: {problem}; {fix}")
        self.path = path


def read_result_cells(path: Path) -> list[CellSamples]:
    """Every cell of the results file at `path`, in the file's order; raises ResultsFileError."""
    path = Path(path)
    doc = _document(path)
    return [_cell(path, i, cell) for i, cell in enumerate(doc["cells"])]


def read_results_document(path: Path) -> dict[str, Any]:
    """The whole results document at `path`, once its cells and samples were checked as read_result_cells does;
    raises ResultsFileError naming the file, the problem and the fix."""
    path = Path(path)
    doc = _document(path)
    for index, cell in enumerate(doc["cells"]):
        _cell(path, index, cell)
    return doc


def _document(path: Path) -> dict[str, Any]:
    doc = _load(path)
    if not isinstance(doc, dict) or "cells" not in doc:
        raise ResultsFileError(path, "not a pytest-sglang-perf results file (no 'cells' list)",
                               "pass a file written by: pytest --sglang-results PATH")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        problem = f"schema_version {version!r}, but this pytest-sglang-perf reads version {SCHEMA_VERSION}"
        raise ResultsFileError(path, problem, "write it again with this version: pytest --sglang-results PATH")
    if not isinstance(doc["cells"], list):
        raise ResultsFileError(path, f"'cells' is a {type(doc['cells']).__name__}, not a list")
    return doc


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fix = "check the path, or write one with: pytest --sglang-results PATH"
        raise ResultsFileError(path, "no such file", fix) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFileError(path, f"cannot read it ({exc})", "check that it is a readable text file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(path, f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def _cell(path: Path, index: int, data: Any) -> CellSamples:
    if not isinstance(data, dict):
        raise ResultsFileError(path, f"cell {index} is a {type(data).__name__}, not an object")
    try:
        return CellSamples.from_results_cell(data)
    except ValueError as exc:
        where = f"cell {index} ({data.get('test_id')} [{data.get('variant')}])"
        raise ResultsFileError(path, f"{where} is malformed: {exc}") from None
