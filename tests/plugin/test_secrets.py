"""The API key is used for every request but never written to reports, results, baselines, commands or (once the
server stopped) its log."""

from __future__ import annotations

import pytest
from perf_project import write_project

SECRET = "sekret-4f9a2c"


def test_api_key_appears_in_no_output(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": ["--api-key", SECRET]}, request="max_tokens = 40\nrepeats = 2\nwarmup = 0\n")
    pytester.makepyfile(test_k="""
        def test_k(sglang_perf):
            sglang_perf.check(sglang_perf.measure("hi"))
            assert sglang_perf.openai.models.list().data
    """)
    result = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-results", "out.json",
                                "--sglang-log-dir", "logs", "-v")  # -v: the exact command is echoed
    result.assert_outcomes(passed=1)
    assert "--api-key '***'" in result.stdout.str()
    outputs = {
        "terminal": result.stdout.str() + result.stderr.str(),
        "results": (pytester.path / "out.json").read_text(),
        **{p.name: p.read_text() for p in (pytester.path / "baselines").glob("*.json")},
        **{p.name: p.read_text() for p in (pytester.path / "logs").iterdir()},
    }
    assert len(outputs) == 4
    # the server's log once it stopped: SGLang's own `server_args=` line printed the key, now masked
    assert "'api_key': '***'" in outputs["a.log"]
    for name, text in outputs.items():
        assert SECRET not in text, f"the API key leaked into {name}"
    baseline = next(iter((pytester.path / "baselines").glob("*.json"))).read_text()
    assert '"***"' in baseline


def test_requests_without_the_key_are_refused_by_the_server(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": ["--api-key", SECRET]})
    pytester.makepyfile(test_k="""
        import urllib.request, urllib.error, pytest

        def test_k(sglang_perf):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(sglang_perf.base_url + "/v1/models", timeout=5)
            info.value.close()
            assert info.value.code == 401
    """)
    pytester.runpytest("--sglang-simulate").assert_outcomes(passed=1)
