"""Cold and warm prefill against the simulator process, as a user meets them: by default every request prefills its
whole prompt (the plugin flushes SGLang's prefix cache before each), `prefix_cache="warm"` measures cache hits on
purpose, the mode is part of a baseline's identity, and a warm run that never hits the cache is warned about."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from perf_project import LOOSE, write_project

_PREFILL = re.compile(r"Prefill batch, #new-seq: 1, #new-token: (\d+), #cached-token: (\d+),")


def _cells(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    return {f"{cell['test_id'].split('::')[-1]}[{cell['variant']}]": cell for cell in data["cells"]}


def _prefills(log: Path) -> list[tuple[int, int]]:
    """(#new-token, #cached-token) of every `Prefill batch` line after the server's own warmup."""
    found = [(int(new), int(cached)) for new, cached in _PREFILL.findall(log.read_text())]
    return found[1:]


def test_cold_by_default_warm_on_request(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_cache_modes="""
        PROMPT = "Write a red-black tree in C, with insert and delete, and explain every rotation it makes."

        def test_cold(sglang_perf):
            result = sglang_perf.measure(PROMPT, max_tokens=32)
            assert result.params.prefix_cache == "cold"
            sglang_perf.check(result)

        def test_warm(sglang_perf):
            result = sglang_perf.measure(PROMPT, max_tokens=32, prefix_cache="warm")
            assert result.params.prefix_cache == "warm"
            sglang_perf.check(result)
    """)
    pytester.runpytest("--sglang-simulate", "--sglang-log-dir=logs", "--sglang-results=results.json",
                       "-W", "error::pytest_sglang_perf.SGLangPrefixCacheWarning").assert_outcomes(passed=2)
    cells = _cells(pytester.path / "results.json")
    cold, warm = cells["test_cold[default]"], cells["test_warm[default]"]
    prompt = cold["samples"][0]["prompt_tokens"]
    assert [s["cached_tokens"] for s in cold["samples"]] == [0, 0, 0]
    assert [s["cached_tokens"] for s in warm["samples"]] == [prompt - 1] * 3
    assert (cold["params"]["prefix_cache"], warm["params"]["prefix_cache"]) == ("cold", "warm")
    # The server saw the same: test_cold's warmup and 3 requests prefilled the whole prompt, after a flush each;
    # test_warm's warmup found the prompt test_cold left cached, and so did its 3 requests.
    log = pytester.path / "logs" / "default.log"
    assert _prefills(log) == [(prompt, 0)] * 4 + [(1, prompt - 1)] * 4
    assert log.read_text().count("Cache flushed successfully!") == 4


@pytest.mark.slow
def test_the_mode_is_part_of_the_baseline_and_a_warm_miss_is_warned(pytester: pytest.Pytester) -> None:
    config = write_project(pytester, {"default": [], "no_radix": ["--disable-radix-cache"]}, extra=LOOSE)
    pytester.makepyfile(test_cache_modes="""
        def test_tree(sglang_perf):
            sglang_perf.check(sglang_perf.measure("Write a red-black tree.", max_tokens=32))
    """)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=2)
    config.write_text(config.read_text().replace("[tool.sglang_perf.request]\n",
                                                 '[tool.sglang_perf.request]\nprefix_cache = "warm"\n'))
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json",
                                "-W", "default::pytest_sglang_perf.SGLangPrefixCacheWarning")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*SGLangPrefixCacheWarning: [[]no_radix[]] prefix_cache is \"warm\", yet none of the 3 measured requests hit "
        "the prefix cache (cached_tokens 0): the server does not cache prefixes (--disable-radix-cache?)*",
    ])
    words = " ".join(result.stdout.str().split())  # report lines wrap at 120 characters
    assert "test_tree: the baseline is not comparable (recorded for something else): prefix_cache cold -> warm" in words
    assert "[default] prefix_cache is" not in result.stdout.str()
    cells = _cells(pytester.path / "results.json")
    assert cells["test_tree[default]"]["verdict"] == "stale"
    assert all(s["cached_tokens"] > 0 for s in cells["test_tree[default]"]["samples"])
    assert all(s["cached_tokens"] == 0 for s in cells["test_tree[no_radix]"]["samples"])
