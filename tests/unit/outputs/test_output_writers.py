"""outputs/writers.py: only what was asked for is written; the job summary is appended to, in a paragraph of its
own; an output that cannot be written is an error naming the option, the path and the fix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.outputs import writers


def _doc() -> dict[str, Any]:
    return {"simulated": True, "cells": [], "errored": [], "environment": {}, "servers": {}}


def test_nothing_asked_nothing_built() -> None:
    def never() -> dict[str, Any]:
        raise AssertionError("the document is built only when an output needs it")

    assert writers.write_outputs(never, RunOptions(), {}, measured=True) == writers.Outputs()
    summary_only = {"GITHUB_STEP_SUMMARY": "/x"}
    assert writers.write_outputs(never, RunOptions(), summary_only, measured=False) == writers.Outputs()


@pytest.mark.parametrize(("before", "joined"), [("", ""), ("earlier\n", "earlier\n\n"), ("earlier", "earlier\n\n"),
                                                ("earlier\n\n", "earlier\n\n")])
def test_the_summary_is_appended_as_a_paragraph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: str,
                                                joined: str) -> None:
    monkeypatch.setattr("pytest_sglang_perf.outputs.markdown.markdown_report", lambda doc: "# report\n")
    summary = tmp_path / "summary.md"
    if before:
        summary.write_text(before)
    outputs = writers.write_outputs(_doc, RunOptions(), {"GITHUB_STEP_SUMMARY": str(summary)}, measured=True)
    assert outputs == writers.Outputs(["the job summary ($GITHUB_STEP_SUMMARY)"], [])
    assert summary.read_text() == joined + "# report\n"


def test_an_unwritable_output_is_an_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    options = RunOptions(markdown_path=blocker / "report.md", results_path=tmp_path / "ok" / "r.json")
    outputs = writers.write_outputs(_doc, options, {}, measured=True)
    [error] = outputs.errors
    assert outputs.written == [f"results {tmp_path / 'ok' / 'r.json'}"]
    assert error.startswith(f"--sglang-markdown {blocker / 'report.md'}: cannot be written (")
    assert error.endswith("choose a path you can write to")
    assert (tmp_path / "ok" / "r.json").is_file()  # the other outputs are still written


def test_plots_say_when_there_was_nothing_to_draw(tmp_path: Path) -> None:
    outputs = writers.write_outputs(_doc, RunOptions(plots_dir=tmp_path / "plots"), {}, measured=True)
    assert outputs.written == [f"no plots in {tmp_path / 'plots'}: no cell was measured"]


def test_plots_without_matplotlib_are_refused_before_any_server_boots(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sglang_perf.config.settings import ConfigError, Settings
    from pytest_sglang_perf.session.facade import PerfSession

    assert writers.missing_requirement(RunOptions(plots_dir=tmp_path)) is None  # matplotlib is installed here
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError, match=r"--sglang-plots .*: plots need matplotlib: pip install "
                                          r"'pytest-sglang-perf\[plots\]'; or leave out --sglang-plots"):
        PerfSession(Settings(source="test", root=tmp_path, model="m"), RunOptions(plots_dir=tmp_path / "p"),
                    lambda message: None)
