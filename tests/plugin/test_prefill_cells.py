"""Prefill cells as a user meets them, on the simulator: prompts of exact length (by the server's own count), the
prefill throughput and TTFT percentiles of each length, the chunks the server logged, the compute-ceiling line, cold
and warm prefill kept apart, and the prefill CUDA graph's effect: a gain at a short prompt, none to speak of at a
long one (docs/prefill.md)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

PROJECT = """[tool.sglang_perf]
model = "meta-llama/Llama-3.1-8B-Instruct"
startup_timeout = "60s"
[tool.sglang_perf.simulate]
args = ["--sim-gpu", "H200", "--sim-boot-seconds", "0.3", "--sim-noise", "0"{sim}]
[tool.sglang_perf.request]
max_tokens = 4
repeats = {repeats}
warmup = 1
[tool.sglang_perf.tolerance]
ttft = "500%"
prefill_throughput = "90%"
output_throughput = "90%"
decode_throughput = "90%"
tpot = "500%"
[tool.sglang_perf.variants]
{variants}
"""
"""The shipped Llama-3.1-8B config on the simulated H200, the simulator's own timing model: a few tokens a request,
so that each cell's time is its prefill."""
GRAPH_VARIANTS = ('prefill_graph = ["--cuda-graph-backend-prefill", "breakable"]\n'
                  'no_prefill_graph = ["--cuda-graph-backend-prefill", "disabled"]')


def _project(pytester: pytest.Pytester, variants: str, *, repeats: int = 3, sim: str = "") -> None:
    pytester.makefile(".toml", pyproject=PROJECT.format(variants=variants, repeats=repeats, sim=sim))


def _cells(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    return {f"{cell['test_id'].split('::')[-1]}[{cell['variant']}]": cell for cell in data["cells"]}


def test_prefill_cells_at_three_lengths_cold_and_warm(pytester: pytest.Pytester) -> None:
    _project(pytester, 'default = ["--chunked-prefill-size", "4096"]')
    pytester.makepyfile(test_lengths="""
        import pytest

        @pytest.mark.parametrize("tokens", [512, 2048, 8192])
        def test_cold(sglang_perf, tokens):
            result = sglang_perf.measure(prompt_tokens=tokens)
            assert [s.prompt_tokens for s in result.samples] == [tokens] * 3
            sglang_perf.check(result)

        def test_warm(sglang_perf):
            sglang_perf.check(sglang_perf.measure(prompt_tokens=2048, prefix_cache="warm"))
    """)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json", "--sglang-log-dir=logs",
                                "--sglang-markdown=report.md")
    result.assert_outcomes(passed=4)
    text = " ".join(result.stdout.str().split())  # report lines wrap at 120 characters
    assert ("sglang-perf prefill: prompts of exact length, cold and warm, against the compute ceiling "
            "(SIMULATED)") in text
    assert ("variant default: ceilings from simulated 791 TFLOP/s on NVIDIA H200 (989 TFLOP/s dense bf16 datasheet x "
            "0.80 GEMM efficiency)") in text
    for tokens, chunks in ((512, "1 chunk"), (2048, "1 chunk"), (8192, "2 chunks")):
        line = text.split(f"test_cold[{tokens}] [default]: {tokens} tokens, cold: ")[1].split(" test_")[0]
        assert " tok/s, TTFT p50 " in line and f"{chunks} per request" in line
        assert "of the compute ceiling (MFU 0." in line
    warm = text.split("test_warm [default]: 2048 tokens, warm: ")[1]
    assert "2047 of 2048 tokens from the prefix cache (no prefill throughput: not a cold prefill)" in warm
    cells = _cells(pytester.path / "results.json")
    cold, hot = cells["test_cold[2048][default]"], cells["test_warm[default]"]
    assert "prefill_throughput" in cold["summaries"] and "prefill_throughput" not in hot["summaries"]
    assert cold["params"]["prompt_tokens"] == hot["params"]["prompt_tokens"] == 2048
    assert cold["prompt_hash"] != hot["prompt_hash"]
    assert hot["summaries"]["ttft"]["median"] < cold["summaries"]["ttft"]["median"] / 3
    rate = cold["summaries"]["prefill_throughput"]["median"]
    assert rate == pytest.approx(2048 / cold["summaries"]["ttft"]["median"], rel=1e-9)  # per request, 3 of them
    ceiling = cold["prefill_roofline"]
    assert ceiling["rate"]["source"] == "simulated" and 0 < ceiling["mfu"] <= 1
    assert ceiling["flops"]["chunks"] == 1 and cells["test_cold[8192][default]"]["prefill_roofline"]["flops"][
        "chunks"] == 2
    assert cells["test_cold[8192][default]"]["server_view"]["prefill"]["chunks_per_request"] == 2
    report = (pytester.path / "report.md").read_text()
    assert "## Prefill (SIMULATED GPU)" in report
    assert "| `test_lengths.py::test_cold[8192]` | `default` | 8192 | cold | " in report
    assert "| `test_lengths.py::test_warm` | `default` | 2048 | warm | - |" in report


@pytest.mark.slow
@pytest.mark.calm
def test_the_prefill_graph_helps_a_short_prompt_and_not_a_long_one(pytester: pytest.Pytester) -> None:
    _project(pytester, GRAPH_VARIANTS, repeats=5)
    pytester.makepyfile(test_lengths="""
        import pytest

        @pytest.mark.parametrize("tokens", [512, 8192])
        def test_cold(sglang_perf, tokens):
            sglang_perf.check(sglang_perf.measure(prompt_tokens=tokens))
    """)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json")
    result.assert_outcomes(passed=4)
    cells = _cells(pytester.path / "results.json")

    def ttft(tokens: int, variant: str) -> float:
        return float(statistics.median(s["ttft"] for s in cells[f"test_cold[{tokens}][{variant}]"]["samples"]))

    short = ttft(512, "no_prefill_graph") / ttft(512, "prefill_graph") - 1
    long = ttft(8192, "no_prefill_graph") / ttft(8192, "prefill_graph") - 1
    assert short > 0.04, f"the prefill graph gained {short:+.1%} at 512 tokens"
    assert abs(long) < 0.02, f"the prefill graph changed 8192 tokens' TTFT by {long:+.1%}"
    text = " ".join(result.stdout.str().split())
    assert "prefill graph 0/6" in text and "prefill graph 6/6" in text
