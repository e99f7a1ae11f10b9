"""The engineer's experiment as a test suite: three fixed prompts x the flag matrix in pyproject.toml, and the short
prompt under load (one stream and eight at once, with latency objectives: goodput).

Matrix (Qwen3.6-27B, 3-step MTP / NEXTN speculative decoding, tp 2): default flags, the prefill CUDA graph
forced on (`--cuda-graph-backend-prefill breakable`; older SGLang: `--enforce-piecewise-cuda-graph`), and
single-batch overlap.
"""

from __future__ import annotations

import pytest

from pytest_sglang_perf.prompts import LONG_CONTEXT_SUMMARY, RED_BLACK_TREE, SHORT_FACTUAL
from pytest_sglang_perf.pytest_plugin.handle import SGLangPerf

pytestmark = pytest.mark.perf


def test_red_black_tree(sglang_perf: SGLangPerf) -> None:
    result = sglang_perf.measure(RED_BLACK_TREE, max_tokens=512, temperature=0.6)
    sglang_perf.check(result)


def test_long_context_summary(sglang_perf: SGLangPerf) -> None:
    result = sglang_perf.measure(LONG_CONTEXT_SUMMARY, max_tokens=256, temperature=0.6)
    sglang_perf.check(result)


def test_short_factual(sglang_perf: SGLangPerf) -> None:
    result = sglang_perf.measure(SHORT_FACTUAL, max_tokens=32, temperature=0.6)
    sglang_perf.check(result)


def test_short_factual_under_load(sglang_perf: SGLangPerf) -> None:
    sweep = sglang_perf.measure(SHORT_FACTUAL, max_tokens=32, temperature=0.6, concurrency=[1, 8],
                                slo={"ttft": "1s", "tpot": "50ms"})
    sglang_perf.check(sweep)
