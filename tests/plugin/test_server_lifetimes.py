"""Each variant's server boots once per session and is gone after its last test."""

from __future__ import annotations

import pytest
from perf_project import server_processes, write_project

TEST_FILE = """
import os, pathlib, psutil

RECORD = pathlib.Path(os.environ["PIDS_FILE"])

def _check_and_record(sglang_perf):
    for line in RECORD.read_text().splitlines() if RECORD.exists() else []:
        variant, pid = line.split()
        if variant != sglang_perf.variant.name:
            assert not psutil.pid_exists(int(pid)), f"server of {variant} still running"
    with RECORD.open("a") as fh:
        fh.write(f"{sglang_perf.variant.name} {sglang_perf.server.pid}\\n")

def test_one(sglang_perf):
    _check_and_record(sglang_perf)

def test_two(sglang_perf):
    _check_and_record(sglang_perf)
    assert sglang_perf.openai.models.list().data[0].id

def test_three(sglang_perf):
    _check_and_record(sglang_perf)
"""


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_two_variants_three_tests_boot_twice(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"a": [], "b": ["--max-running-requests", "8"]})
    pytester.makepyfile(test_life=TEST_FILE)
    pids_file = pytester.path / "pids.txt"
    monkeypatch.setenv("PIDS_FILE", str(pids_file))

    result = pytester.runpytest("--sglang-simulate", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        "*test_one[[]a[]]*", "*test_two[[]a[]]*", "*test_three[[]a[]]*",
        "*test_one[[]b[]]*", "*test_two[[]b[]]*", "*test_three[[]b[]]*",
    ])
    assert result.stdout.str().count("] booting (") == 2
    lines = pids_file.read_text().split("\n")
    pids = {line.split()[1] for line in lines if line}
    assert len(pids) == 2
    assert server_processes(pytester.path) == []


def test_variants_option_selects(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"a": [], "b": ["--max-running-requests", "8"]})
    pytester.makepyfile(test_life=TEST_FILE)
    monkeypatch.setenv("PIDS_FILE", str(pytester.path / "pids.txt"))
    result = pytester.runpytest("--sglang-simulate", "--sglang-variants", "b")
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("] ready in ") == 1
    assert "[b] ready in " in result.stdout.str()


def test_unknown_variant_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_life="def test_x(sglang_perf): pass")
    result = pytester.runpytest("--sglang-simulate", "--sglang-variants", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sglang-variants: unknown variant 'nope'; variants in pyproject.toml*: a*"])
