"""Cold or warm prefix cache: what a measurement's TTFT means, and the check that the server agreed.

SGLang keeps every served prompt in its radix (prefix) cache, so the second identical request prefills one new
token and reads the rest from the cache (`#new-token: 1, #cached-token: 63`). By default (`cold`) the client
empties the cache with `/flush_cache` before every request (the warmup included), so each request prefills its
whole prompt: the exact same prompt, hence the same token count. A unique nonce in the prompt instead would change
the prompt and still leave the chat template's opening tokens cached. `warm` sends no flush: the warmup fills the
cache and the measured requests are cache hits, on purpose.

Plain data and pure functions; the flush itself is the client's (client.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pytest_sglang_perf.measurement.samples import Sample

COLD: Final = "cold"
WARM: Final = "warm"
UNKNOWN: Final = "unknown"
"""A baseline recorded before the mode was kept (its requests, after a warmup, were prefix-cache hits)."""
PREFIX_CACHE_MODES: tuple[str, ...] = (COLD, WARM)
PrefixCache = Literal["cold", "warm"]


def prefix_cache_mode(value: object) -> PrefixCache:
    """`"cold"` or `"warm"`; raises ValueError naming the value otherwise."""
    if value == COLD:
        return COLD
    if value == WARM:
        return WARM
    raise ValueError(f'expected "cold" (default: every request prefills its whole prompt) or "warm" (the '
                     f"measured requests hit the prefix cache the warmup filled), got {value!r}")


def cache_hit_text(sample: Sample) -> str:
    """`63 of 64 prompt tokens came from the prefix cache`."""
    return f"{sample.cached_tokens} of {sample.prompt_tokens} prompt tokens came from the prefix cache"


def cold_cache_problem(samples: Sequence[Sample], first_number: int = 1) -> str | None:
    """Why a cold measurement is not cold: the first sample whose request still hit the prefix cache, or None.

    `first_number` numbers the samples (measured request N) when they continue an earlier round.
    """
    for number, sample in enumerate(samples, start=first_number):
        if sample.cached_tokens:
            return (f"measured request {number}: {cache_hit_text(sample)} although prefix_cache is \"cold\" (the "
                    "client flushed the cache right before it): its TTFT is not a full prefill. Another client "
                    "sending the same prompt, or a cache tier /flush_cache does not empty (HiCache storage), "
                    'would explain it; set prefix_cache = "warm" to measure the cached case on purpose')
    return None


def warm_cache_note(samples: Sequence[Sample]) -> str | None:
    """Why a warm measurement may not be warm: every request reported no prefix-cache hit; None otherwise."""
    if not samples or any(sample.cached_tokens for sample in samples):
        return None
    return (f'prefix_cache is "warm", yet none of the {len(samples)} measured requests hit the prefix cache '
            "(cached_tokens 0): the server does not cache prefixes (--disable-radix-cache?) or does not report "
            "hits, so this TTFT is a full prefill")
