"""What a CI job gets from a run: the Markdown report appended to GitHub's job summary and written to
--sglang-markdown, the numbers and verdicts as JUnit properties in junit.xml, and the results file's machine
section (commit, dirty, host, CPU, GPUs, driver), labelled as the host's in a simulated run."""

from __future__ import annotations

import json
import socket
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from perf_project import LOOSE, write_project

from pytest_sglang_perf.gate.environment import detect_gpus
from pytest_sglang_perf.gate.formats import format_value
from pytest_sglang_perf.outputs.machine import SIMULATED_HOST, cpu_model

TEST_FILE = """
def test_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"
EARLIER = "## An earlier step's summary\n"


def _git(root: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=CI", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _dirty_checkout(root: Path) -> str:
    """A git checkout of the project with a commit, then a change to a tracked file; returns the short HEAD."""
    (root / "NOTES.txt").write_text("first\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "the project")
    (root / "NOTES.txt").write_text("changed, not committed\n")
    return _git(root, "rev-parse", "--short=12", "HEAD")


def _properties(junit: Path) -> dict[str, dict[str, str]]:
    """Per test case name, its JUnit properties."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        found[case.get("name", "")] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return found


@pytest.mark.slow
@pytest.mark.calm
def test_job_summary_markdown_junit_and_machine(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"default": []}, request=STEADY, extra=LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    head = _dirty_checkout(pytester.path)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)

    summary = pytester.path / "summary.md"
    summary.write_text(EARLIER)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--sglang-simulate", "--sglang-results", "results.json", "--sglang-markdown",
                                "out/report.md", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    assert "PytestWarning" not in result.stdout.str()  # junit_family xunit2 (the default) keeps the properties
    doc: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    [cell] = doc["cells"]
    check = cell["metrics"]["output_throughput"]

    # the job summary: the earlier step's line stays, the report follows as a paragraph of its own; --sglang-markdown
    # holds the same report
    report = (pytester.path / "out" / "report.md").read_text()
    assert summary.read_text() == EARLIER + "\n" + report
    assert report.splitlines()[0] == "# sglang-perf: SIMULATED results"
    baseline, measured = (format_value("output_throughput", check[field]) for field in ("baseline", "measured"))
    assert f"| `test_perf.py::test_tree` | `output_throughput` | {baseline} | {measured} |" in report

    # junit.xml: each number and verdict of the cell, as the results file has them
    props = _properties(pytester.path / "junit.xml")["test_tree[default]"]
    assert props["sglang_perf.variant"] == "default"
    assert props["sglang_perf.verdict"] == cell["verdict"] == "ok"
    assert props["sglang_perf.simulated"] == "True"
    for field in ("measured", "baseline", "change", "allowed"):
        assert float(props[f"sglang_perf.output_throughput.{field}"]) == check[field]
    assert props["sglang_perf.output_throughput.unit"] == "tok/s"
    assert props["sglang_perf.output_throughput.verdict"] == check["verdict"]
    assert {name.split(".")[1] for name in props if name.endswith(".verdict")} >= {"output_throughput", "ttft"}

    # the machine: the host's facts, labelled, and the checkout's commit with its uncommitted change
    machine = doc["machine"]
    assert (machine["commit"], machine["dirty"]) == (head, True)
    assert machine["label"] == SIMULATED_HOST
    assert machine["host"] == socket.gethostname()
    assert machine["cpu"] == cpu_model()
    assert (machine["gpus"], machine["driver"]) == (list(detect_gpus().names), detect_gpus().driver)


def test_a_run_without_perf_tests_writes_no_job_summary(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    summary = pytester.path / "summary.md"
    summary.write_text(EARLIER)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest("--sglang-simulate").assert_outcomes(passed=1)
    assert summary.read_text() == EARLIER
