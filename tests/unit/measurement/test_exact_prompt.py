"""Prompts of exact length (measurement/exact_prompt.py): the bisection over the weather log and the padding land on
exactly N by the counter given, whatever the tokenizer's granularity; what cannot be built says why; a request whose
usage disagrees fails the measurement."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pytest_sglang_perf.measurement.exact_prompt import ExactPromptError, build_exact_prompt
from pytest_sglang_perf.measurement.measure import length_problem
from pytest_sglang_perf.prompts import LONG_PROMPT_HEAD, log_entry, long_prompt
from pytest_sglang_perf.simulator.engine.content import prompt_token_ids

TEMPLATE = 7
"""A chat template's tokens around the message."""


def word_counter(prompt: str) -> int:
    """A BPE-like count: a word is one token, each digit one more, punctuation one each, plus the template."""
    words = prompt.split()
    return TEMPLATE + len(words) + sum(c.isdigit() for c in prompt) + len(re.findall(r"[.,:]", prompt))


def byte_counter(prompt: str) -> int:
    """The simulator's count: one token per 4 bytes, plus its template."""
    return len(prompt_token_ids([{"role": "user", "content": prompt}]))


@pytest.mark.parametrize("counter", [word_counter, byte_counter], ids=["words", "bytes"])
@pytest.mark.parametrize("tokens", [200, 513, 2048, 8191])
def test_the_prompt_counts_exactly_n(counter: Callable[[str], int], tokens: int) -> None:
    calls: list[int] = []

    def count(prompt: str) -> int:
        calls.append(1)
        return counter(prompt)

    built = build_exact_prompt(tokens, count)
    assert counter(built.text) == built.tokens == tokens
    assert built.text.startswith(LONG_PROMPT_HEAD + log_entry(1))
    assert len(calls) < 40  # a bisection, not a walk


def test_the_log_is_deterministic_and_varied() -> None:
    assert long_prompt(50) == long_prompt(50)
    assert long_prompt(50).startswith(long_prompt(49))
    entries = {log_entry(n).split(":", 1)[1] for n in range(1, 200)}
    assert len(entries) == 199


def test_what_cannot_be_built_says_why() -> None:
    with pytest.raises(ExactPromptError, match=r"prompt_tokens=10 is shorter than the prompt's opening alone \(\d+ "
                                               r"tokens.*ask for at least \d+"):
        build_exact_prompt(10, word_counter)
    with pytest.raises(ExactPromptError, match="no prompt of exactly 301 tokens"):
        build_exact_prompt(301, lambda prompt: 2 * (len(prompt.split()) // 2) + 10)  # only even counts
    with pytest.raises(ValueError, match="at least 1"):
        build_exact_prompt(0, word_counter)


def test_a_usage_count_that_disagrees_is_a_failure() -> None:
    assert length_problem([512, 512], 512) is None
    assert length_problem([512, 515], None) is None
    problem = length_problem([512, 515, 515], 512)
    assert problem is not None
    assert "prompt_tokens=512" in problem and "usage.prompt_tokens 515" in problem
