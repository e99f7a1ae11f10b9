"""Deterministic simulated content: token texts, natural output length, prompt token estimate."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.simulator.engine.content import (
    VOCABULARY,
    estimate_prompt_tokens,
    natural_length,
    prompt_digest,
    request_key,
    token_texts,
)

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write a red-black tree."}]


def test_seed_makes_content_deterministic() -> None:
    digest = prompt_digest(MESSAGES)
    a = request_key(0, 42, counter=1, prompt_digest=digest)
    b = request_key(0, 42, counter=99, prompt_digest=digest)
    assert a == b and token_texts(a, 50) == token_texts(b, 50)
    unseeded = [request_key(0, None, counter=n, prompt_digest=digest) for n in (1, 2)]
    assert token_texts(unseeded[0], 50) != token_texts(unseeded[1], 50)
    assert all(text in VOCABULARY for text in token_texts(a, 200))


def test_prompt_changes_the_key() -> None:
    other = [{"role": "user", "content": "Write a B-tree."}]
    assert prompt_digest(MESSAGES) != prompt_digest(other)


@pytest.mark.parametrize("max_tokens", [1, 2, 7, 100, 512])
def test_natural_length_within_half_and_max(max_tokens: int) -> None:
    lengths = {natural_length(f"k{i}", max_tokens, 0) for i in range(200)}
    assert min(lengths) >= max(1, (max_tokens + 1) // 2) and max(lengths) <= max_tokens


def test_natural_length_respects_min_tokens_and_no_limit() -> None:
    assert natural_length("k", 100, 90) >= 90
    assert 64 <= natural_length("k", None, 0) <= 512
    assert natural_length("k", 100, 0) == natural_length("k", 100, 0)


def test_prompt_tokens_grow_with_text() -> None:
    short = estimate_prompt_tokens([{"role": "user", "content": "hi"}])
    long = estimate_prompt_tokens([{"role": "user", "content": "hello world " * 100}])
    assert short < long and long == pytest.approx(1200 / 4, abs=10)
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello world " * 100}]}]
    assert estimate_prompt_tokens(parts) == long
