"""`sglang-perf plot RESULTS... -o DIR`: the files it prints, and its exits and messages on bad input."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from plot_docs import TEST, ab_doc, cell, png_size, results_doc, samples

from pytest_sglang_perf.cli.main import main
from pytest_sglang_perf.plots.render import slug

PROG = "sglang-perf plot"


def write(path: Path, doc: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def plot(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["plot", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_one_file_prints_each_png_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = write(tmp_path / "results.json", ab_doc())
    code, lines, err = plot(capsys, str(results), "-o", str(tmp_path / "out"))
    assert (code, err) == (0, "")
    assert lines == [str(tmp_path / "out" / f"ab__{slug(TEST)}.png"), str(tmp_path / "out" / "boot.png")]
    assert all(png_size(Path(line))[0] > 600 for line in lines)


@pytest.mark.slow
def test_several_files_add_the_history_whatever_their_order(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path / "old.json", results_doc([cell("default")], generated_at="2026-11-30T00:00:00+00:00"))
    new = write(tmp_path / "new.json", results_doc([cell("default", raw=samples(e2e=9.0))]))
    code, lines, err = plot(capsys, str(new), str(old), "--output", str(tmp_path), "--confidence", "0.9")
    assert (code, err) == (0, "")
    assert [Path(line).name for line in lines] == [f"ab__{slug(TEST)}.png", "boot.png",
                                                   f"history__{slug(TEST)}__default.png"]


def test_the_output_folder_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = write(tmp_path / "results.json", ab_doc())
    with pytest.raises(SystemExit) as exited:
        main(["plot", str(results)])
    assert exited.value.code == 2
    assert "the following arguments are required: -o/--output" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file; check the path, or write one with: pytest --sglang-results PATH"),
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ('{"schema_version": 1}', "not a pytest-sglang-perf results file (no 'cells' list)"),
    ('{"schema_version": 1, "cells": [{"test_id": "t", "variant": "v", "samples": [{"ttft": 1}]}]}',
     "cell 0 (t [v]) is malformed: sample 0 is malformed (KeyError: 'e2e')"),
])
def test_a_bad_results_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               content: str | None, problem: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, lines, err = plot(capsys, str(path), "-o", str(tmp_path / "out"))
    assert (code, lines) == (2, [])
    assert err.startswith(f"{PROG}: results file {path}: {problem}")
    assert not (tmp_path / "out").exists()


def test_a_file_without_cells_is_said_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write(tmp_path / "empty.json", results_doc([]))
    code, lines, err = plot(capsys, str(empty), "-o", str(tmp_path / "out"))
    assert (code, lines) == (1, [])
    assert err == f"{PROG}: results file {empty}: no cells (no test measured anything): nothing to plot from it\n"
    assert not (tmp_path / "out").exists()


def test_the_other_files_are_still_drawn_next_to_one_without_cells(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    empty = write(tmp_path / "empty.json", results_doc([]))
    good = write(tmp_path / "good.json", ab_doc())
    code, lines, err = plot(capsys, str(empty), str(good), "-o", str(tmp_path / "out"))
    assert code == 1 and len(lines) == 2 and all(Path(line).is_file() for line in lines)
    assert err == f"{PROG}: results file {empty}: no cells (no test measured anything): nothing to plot from it\n"


def test_cells_without_samples_and_servers_leave_nothing_to_plot(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    results = write(tmp_path / "results.json", results_doc([cell("default", raw=[])], servers={}))
    code, lines, err = plot(capsys, str(results), "-o", str(tmp_path / "out"))
    assert (code, lines) == (1, [])
    assert err == f"{PROG}: nothing to plot: no cell of these results files has samples\n"


def test_without_matplotlib_it_says_how_to_install_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    results = write(tmp_path / "results.json", ab_doc())
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, lines, err = plot(capsys, str(results), "-o", str(tmp_path / "out"))
    assert (code, lines) == (2, [])
    assert err == f"{PROG}: plots need matplotlib: pip install 'pytest-sglang-perf[plots]'\n"


def test_a_folder_that_cannot_be_made_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = write(tmp_path / "results.json", ab_doc())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, lines, err = plot(capsys, str(results), "-o", str(blocker / "out"))
    assert (code, lines) == (2, [])
    assert err.startswith(f"{PROG}: -o {blocker / 'out'}: cannot be written (")
    assert err.endswith("); choose a folder you can write to\n")


@pytest.mark.parametrize("level", ["0", "1", "95"])
def test_a_bad_confidence_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str) -> None:
    results = write(tmp_path / "results.json", ab_doc())
    code, lines, err = plot(capsys, str(results), "-o", str(tmp_path / "out"), "--confidence", level)
    assert (code, lines) == (2, [])
    assert err == f"{PROG}: --confidence must be between 0 and 1, e.g. 0.95; got {float(level):g}\n"
