"""SGLang's radix (prefix) cache, as far as timing and reports need it (docs/sglang-0.5.23.md §3.5).

A request's prompt is matched against the token sequences already served when the scheduler admits it; the match
is the longest shared token prefix, at most the prompt's length minus one (SGLang recomputes at least the last
token, schedule_batch.py::Req._compute_max_prefix_len) and whole pages only (radix_cache.py, `page_aligned`). The
prompt is cached once its prefill ran. `/flush_cache` empties it; `--disable-radix-cache` turns it off.

Not a tree: the cached sequences are kept whole, least recently used first, within the KV pool's token count and
MAX_ENTRIES sequences; outputs are not cached (the simulator has no multi-turn prompts that would reuse them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

MAX_ENTRIES = 256
"""Sequences kept at most (each match compares the prompt with every one)."""

Tokens = tuple[int, ...]


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading tokens `a` and `b` share (binary search on slice equality, which runs in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class RadixCache:
    def __init__(self, *, enabled: bool = True, page_size: int = 1, capacity: int = 1 << 62) -> None:
        self.enabled = enabled
        self.page_size = max(1, page_size)
        self.capacity = capacity
        """Tokens kept at most: the KV pool's size (SGLang evicts least recently used prefixes to make room)."""
        self._entries: OrderedDict[Tokens, None] = OrderedDict()
        self._tokens = 0

    @property
    def cached_tokens(self) -> int:
        return self._tokens

    def match(self, tokens: Tokens) -> int:
        """Prompt tokens the prefill can read from the cache instead of computing."""
        if not self.enabled or len(tokens) < 2:
            return 0
        best, best_entry = 0, None
        for entry in self._entries:
            shared = shared_prefix(tokens, entry)
            if shared > best:
                best, best_entry = shared, entry
        if best_entry is not None:
            self._entries.move_to_end(best_entry)
        limit = min(best, len(tokens) - 1)
        return limit // self.page_size * self.page_size

    def insert(self, tokens: Tokens) -> None:
        """Cache a prefilled prompt (most recently used), evicting the least recently used beyond the limits."""
        if not self.enabled or not tokens:
            return
        if tokens in self._entries:
            self._entries.move_to_end(tokens)
            return
        self._entries[tokens] = None
        self._tokens += len(tokens)
        while self._entries and (self._tokens > self.capacity or len(self._entries) > MAX_ENTRIES):
            evicted, _ = self._entries.popitem(last=False)
            self._tokens -= len(evicted)

    def reset(self) -> None:
        """`/flush_cache`: nothing is cached any more."""
        self._entries.clear()
        self._tokens = 0
