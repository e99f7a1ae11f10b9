"""Bad configuration and a corrupt baseline file: clear errors naming the file; nothing overwritten."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from perf_project import server_processes, write_project


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[tool.sglang_perf.tolerance]\noutput_throughput = "5"',
         "*pyproject.toml [[]tool.sglang_perf[]]: tolerance.output_throughput: write a percentage like '5%'*"),
        ('[tool.sglang_perf.tolerance]\nthroughput = "5%"',
         "*tolerance.throughput: unknown key; known keys here: accept_length, bandwidth_efficiency, boot_seconds*"),
        ("baseline_dir = 5", "*baseline_dir: expected a non-empty string, got 5*"),
        ('server_command = "python -m sglang.launch_server"', "*server_command: expected a list of strings*"),
        ('modle = "x"', "*modle: unknown key; known keys here:*model*"),
    ],
)
def test_bad_config_value(pytester: pytest.Pytester, extra: str, message: str) -> None:
    write_project(pytester, {"a": []}, extra=extra)
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest("--sglang-simulate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_variant_args(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": ["--port", "30000"]})
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest("--sglang-simulate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*variants.a: remove --port: the plugin picks a free port for every server*"])


def test_explicit_config_file_missing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(sglang_perf): pass")
    result = pytester.runpytest("--sglang-config", "nowhere.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sglang-config *nowhere.toml: no such file*"])


def _record_one_baseline(pytester: pytest.Pytester) -> Path:
    write_project(pytester, {"a": []}, request="max_tokens = 50\nrepeats = 2\nwarmup = 0\n")
    pytester.makepyfile(test_x="""
        def test_x(sglang_perf):
            sglang_perf.check(sglang_perf.measure("hello"))
    """)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    [path] = (pytester.path / "baselines").glob("*.json")
    return path


RERECORD = "move the file away and re-record with --sglang-update-baselines"


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda text: text[:-40], "is not valid JSON (*); repair it (an unresolved merge?) or " + RERECORD),
    (lambda text: text.replace('"schema_version": 2', '"schema_version": 7'),
     "was written with schema 7 by a newer pytest-sglang-perf; this one reads schema 2; upgrade pytest-sglang-perf "
     "(pip install -U pytest-sglang-perf)"),
], ids=["corrupt", "newer-schema"])
def test_a_broken_baseline_stops_the_session_before_any_boot(pytester: pytest.Pytester,
                                                             damage: Callable[[str], str], problem: str) -> None:
    """Found when the session starts, reported once as a usage error (exit 4): no server boots and measures only
    to fail against a store it cannot read, and the file is never rewritten."""
    path = _record_one_baseline(pytester)
    broken = damage(path.read_text())
    path.write_text(broken)

    for extra in ([], ["--sglang-update-baselines"]):
        result = pytester.runpytest("--sglang-simulate", "--sglang-log-dir", "logs", *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: sglang-perf: baseline file {path}: {problem}. No server was started."])
        assert (result.stdout.str() + result.stderr.str()).count(path.name) == 1
        assert not (pytester.path / "logs" / "a.log").exists()  # the variant's server never started
        assert path.read_text() == broken
    assert server_processes(pytester.path) == []
