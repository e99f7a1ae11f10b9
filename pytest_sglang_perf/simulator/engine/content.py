"""Deterministic stand-ins for what a model would say: token texts, output length, prompt length.

There is no tokenizer: a token is a short word, and a prompt's token count is estimated from its bytes.
The same seed and prompt give the same tokens and the same natural length.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

_WORDS = (
    "the of and to in is that for it as with was on be by this are or from at an not have which but "
    "tree node red black root left right child parent color rotate insert delete balance height key value "
    "function return if else while loop case struct class method data list array pointer null true false "
    "we can now then so each when one two first next last new old case rule step fix up down path leaf"
)
VOCABULARY: tuple[str, ...] = (*(f" {word}" for word in _WORDS.split()), ".", ",", ":", "\n", " (", ")")

_UNBOUNDED_LENGTH = (64, 512)
_FIRST_ID = 100
_BYTES_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4
_TOKENS_PER_PROMPT = 3
_TEMPLATE_IDS = (1, 2, 3)
"""The chat template's opening tokens: the same for every prompt, as a real template's are."""


def request_key(sim_seed: int, seed: int | None, counter: int, prompt_digest: str) -> str:
    """Identifies a request's content: its seed if it gave one, else its arrival number."""
    origin = f"seed={seed}" if seed is not None else f"request={counter}"
    return f"{sim_seed}|{origin}|{prompt_digest}"


def prompt_digest(messages: Iterable[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(str(message.get("role", "")).encode())
        digest.update(b"\0")
        digest.update(_message_text(message).encode())
        digest.update(b"\1")
    return digest.hexdigest()[:16]


def estimate_prompt_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """About 4 bytes per token plus chat-template overhead."""
    total = _TOKENS_PER_PROMPT
    for message in messages:
        total += _TOKENS_PER_MESSAGE + len(_message_text(message).encode()) // _BYTES_PER_TOKEN
    return total


def prompt_token_ids(messages: Iterable[Mapping[str, Any]]) -> tuple[int, ...]:
    """Stand-in token ids of a chat prompt, as many as estimate_prompt_tokens counts: the template's opening tokens,
    then per message its role's header tokens and one id per 4 bytes of text, so that prompts sharing a beginning
    share a token prefix (what the prefix cache matches on)."""
    ids: list[int] = list(_TEMPLATE_IDS)
    for message in messages:
        role = str(message.get("role", ""))
        ids.extend(zlib.crc32(f"{role}|{k}".encode()) for k in range(_TOKENS_PER_MESSAGE))
        ids.extend(text_token_ids(_message_text(message)))
    return tuple(ids)


def text_token_ids(text: str) -> tuple[int, ...]:
    """One stand-in id per whole 4 bytes of text (a partial last word is not a token of its own)."""
    data = text.encode()
    return tuple(int.from_bytes(data[i:i + _BYTES_PER_TOKEN], "little")
                 for i in range(0, len(data) - _BYTES_PER_TOKEN + 1, _BYTES_PER_TOKEN))


def token_texts(key: str, count: int) -> list[str]:
    return random.Random(f"{key}|text").choices(VOCABULARY, k=count)


def token_ids(key: str, count: int, vocab_size: int) -> list[int]:
    """Ids aligned with token_texts (the same draws): a fixed id per vocabulary word, within the model's vocabulary."""
    indices = random.Random(f"{key}|text").choices(range(len(VOCABULARY)), k=count)
    return [(_FIRST_ID + index) % max(1, vocab_size) for index in indices]


def natural_length(key: str, max_tokens: int | None, min_tokens: int) -> int:
    """Where the model would stop on its own: within [max/2, max], or [64, 512] without a limit."""
    rng = random.Random(f"{key}|length")
    if max_tokens is None:
        length = rng.randint(*_UNBOUNDED_LENGTH)
    else:
        length = rng.randint(max(1, (max_tokens + 1) // 2), max(1, max_tokens)) if max_tokens > 0 else 0
    return max(length, min(min_tokens, max_tokens if max_tokens is not None else min_tokens))


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""
