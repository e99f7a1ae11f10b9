"""The engineer's first question, on prefill: how fast is a prompt read, cold, at a short, a medium and a long
length, and how far is that from what the GPUs can compute (docs/prefill.md)? Each length is a prompt of exactly that
many tokens by the server's own count, a few output tokens, so that a cell's time is its prefill; the cached case
(`prefix_cache="warm"`) is a cell of its own.
"""

from __future__ import annotations

import pytest

from pytest_sglang_perf.pytest_plugin.handle import SGLangPerf

pytestmark = pytest.mark.perf


@pytest.mark.parametrize("tokens", [512, 2048, 8192])
def test_prefill(sglang_perf: SGLangPerf, tokens: int) -> None:
    sglang_perf.check(sglang_perf.measure(prompt_tokens=tokens, max_tokens=8, temperature=0.6))


def test_prefill_cached(sglang_perf: SGLangPerf) -> None:
    sglang_perf.check(sglang_perf.measure(prompt_tokens=2048, max_tokens=8, temperature=0.6, prefix_cache="warm"))
