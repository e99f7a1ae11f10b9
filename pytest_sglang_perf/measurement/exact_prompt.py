"""A prompt of exactly N tokens for the server's own tokenizer (`measure(prompt_tokens=N)`).

N is what SGLang counts for the request: its `usage.prompt_tokens`, the chat template's tokens included. SGLang
tokenizes over HTTP: `POST /v1/tokenize` (also `/tokenize`) with `messages` renders them as a chat completion
does and answers `{"tokens": [...], "count": N, "max_model_len": ...}`, in every release 0.5.12-0.5.23
(docs/prefill.md §1). The prompt is the weather log of prompts.py cut at a word: the longest cut whose count is at
most N (found by bisection: a longer cut never counts fewer tokens), then a few one-token units (" the", " .", ...)
up to exactly N. Each count is the server's answer, so the same N means the same prompt length on every model; the
measurement then checks each request's `usage.prompt_tokens` against N (measure.py).

The requests here are not timed: plain urllib, one connection per call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.measurement.client import RequestFailed
from pytest_sglang_perf.prompts import LONG_PROMPT_HEAD, long_prompt

TOKENIZE_PATH = "/v1/tokenize"
TOKENIZE_TIMEOUT = 120.0
_PADDING_UNITS = (" the", " .", ".", " a", "\n", " 1")
"""Candidates for the last few tokens: a unit that one tokenizer reads as one token (and repeats as one each)."""
_MAX_WORDS_PER_TOKEN = 1
"""A word is at least one token: the bisection's upper bound is N words."""

Counter = Callable[[str], int]
"""The server's token count of a prompt sent as one user message."""


class ExactPromptError(RequestFailed):
    """No prompt of exactly N tokens could be built, or the server could not count one."""


@dataclass(frozen=True)
class ExactPrompt:
    """A prompt whose chat request the server counts as exactly `tokens` prompt tokens."""

    text: str
    tokens: int
    words: int
    """Words of the weather log it holds."""
    padding: str
    counted_by: str
    """Where the count came from: `POST http://.../v1/tokenize`."""


def tokenize_counter(base_url: str, model: str, api_key: str | None,
                     timeout: float = TOKENIZE_TIMEOUT) -> Counter:
    """Counts a prompt with the server at `base_url`: `/v1/tokenize` of the user message, rendered as a chat
    completion renders it."""
    url = f"{base_url.rstrip('/')}{TOKENIZE_PATH}"

    def count(prompt: str) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}]}
        answer = _post_json(url, body, api_key, timeout)
        value = answer.get("count")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExactPromptError(f"POST {url} answered without a whole-number 'count' ({_clip(answer)}): this "
                                   "server cannot count tokens for measure(prompt_tokens=...)")
        return value

    return count


def build_exact_prompt(tokens: int, count: Counter, *, head: str = LONG_PROMPT_HEAD,
                       counted_by: str = TOKENIZE_PATH) -> ExactPrompt:
    """The prompt of exactly `tokens` tokens by `count`; ExactPromptError when `head` alone is longer or no padding
    lands on the count."""
    if tokens < 1:
        raise ValueError(f"prompt_tokens must be at least 1, got {tokens}")
    floor = count(long_prompt(0, head))
    if floor > tokens:
        raise ExactPromptError(f"prompt_tokens={tokens} is shorter than the prompt's opening alone ({floor} tokens "
                               f"with the chat template, counted by {counted_by}): ask for at least {floor}")
    words = _longest_cut(tokens, count, head, floor)
    padding = _padding(tokens, count, head, words)
    return ExactPrompt(long_prompt(words, head, padding), tokens, words, padding, counted_by)


def _longest_cut(tokens: int, count: Counter, head: str, floor: int) -> int:
    """The most words of the log whose prompt counts at most `tokens` (bisection; `floor` counts none)."""
    low, high = 0, max(1, (tokens - floor) * _MAX_WORDS_PER_TOKEN)
    while low < high:
        middle = (low + high + 1) // 2
        if count(long_prompt(middle, head)) <= tokens:
            low = middle
        else:
            high = middle - 1
    return low


def _padding(tokens: int, count: Counter, head: str, words: int) -> str:
    """Repeats of one unit after the cut that bring the count to exactly `tokens`."""
    missing = tokens - count(long_prompt(words, head))
    if missing == 0:
        return ""
    tried: list[str] = []
    for unit in _PADDING_UNITS:
        for repeats in range(1, 2 * missing + 3):
            found = count(long_prompt(words, head, unit * repeats))
            if found == tokens:
                return unit * repeats
            if found > tokens:
                break
        tried.append(repr(unit))
    raise ExactPromptError(f"no prompt of exactly {tokens} tokens: {words} words of the log count {tokens - missing} "
                           f"and no repeat of {', '.join(tried)} after them counts {tokens}; try a length one token "
                           "longer or shorter")


def _post_json(url: str, body: dict[str, Any], api_key: str | None, timeout: float) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read(2000).decode(errors="replace")
        exc.close()
        hint = " (SGLang has it from 0.5.12 on; is this an SGLang server?)" if exc.code == 404 else ""
        raise ExactPromptError(f"POST {url} answered HTTP {exc.code}: {text.strip()[:300]}{hint}",
                               status=exc.code, body=text) from None
    except (OSError, ValueError) as exc:
        raise ExactPromptError(f"POST {url} failed: {exc} (did the server die? check its log)") from None
    if not isinstance(answer, dict):
        raise ExactPromptError(f"POST {url} did not answer a JSON object: {_clip(answer)}")
    return answer


def _clip(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 200 else text[:200] + "..."
