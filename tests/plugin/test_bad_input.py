"""Bad configuration and a corrupt baseline file: clear errors naming the file; nothing overwritten."""

from __future__ import annotations

import pytest
from perf_project import server_processes, write_project


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[tool.sglang_perf.tolerance]\noutput_throughput = "5"',
         "*pyproject.toml [[]tool.sglang_perf[]]: tolerance.output_throughput: write a percentage like '5%'*"),
        ('[tool.sglang_perf.tolerance]\nthroughput = "5%"',
         "*tolerance.throughput: unknown key; known keys here: accept_length, boot_seconds*"),
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


def test_corrupt_baseline_is_reported_and_left_alone(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []}, request="max_tokens = 50\nrepeats = 2\nwarmup = 0\n")
    pytester.makepyfile(test_x="""
        def test_x(sglang_perf):
            sglang_perf.check(sglang_perf.measure("hello"))
    """)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    [path] = (pytester.path / "baselines").glob("*.json")
    corrupt = path.read_bytes()[:-40]
    path.write_bytes(corrupt)

    for extra in ([], ["--sglang-update-baselines"]):
        result = pytester.runpytest("--sglang-simulate", *extra)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*{path.name}*"])
        assert path.read_bytes() == corrupt
    assert server_processes(pytester.path) == []
