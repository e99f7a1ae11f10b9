"""`POST /flush_cache` before each request of a cold measurement (prefix_cache.py): untimed, SGLang's answer checked.

SGLang flushes only a fully idle scheduler; the request before may still be finishing its last step when its stream
ends, so the flush asks SGLang to wait for idle (`?timeout=`) instead of refusing at once (docs/sglang-0.5.23.md §2.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from pytest_sglang_perf.measurement.client import ERROR_BODY_LIMIT, RequestFailed, clip_line, connect_failure

FLUSH_PATH = "/flush_cache"
FLUSH_IDLE_WAIT = 30.0
"""Seconds `/flush_cache?timeout=` lets SGLang wait for its scheduler to go idle."""
_ANSWER_MARGIN = 30.0
_HINTS: Mapping[int, str] = {
    400: "SGLang flushes only when no request is running or waiting: is another client using this server? "
         'prefix_cache = "cold" needs the server to itself between requests; prefix_cache = "warm" sends no flush',
    401: "with --admin-api-key SGLang wants that key for /flush_cache",
    403: "with --admin-api-key SGLang wants that key for /flush_cache",
    404: 'this server has no /flush_cache (not SGLang?): set prefix_cache = "warm" to measure without flushing',
}


class CacheFlushFailed(RequestFailed):
    """`/flush_cache` before a request (prefix_cache "cold") did not empty the server's prefix cache."""


def flush_failure(url: str, why: str, status: int | None = None, body: str = "") -> CacheFlushFailed:
    """The failure naming the server, what went wrong (SGLang's message) and, where one helps, the fix."""
    hint = _HINTS.get(status or 0)
    server = url.split(FLUSH_PATH)[0]
    return CacheFlushFailed(f'cannot empty the prefix cache (prefix_cache "cold") of the server at {server}: '
                            f"POST {url} {why}" + (f" ({hint})" if hint else ""), status=status, body=body)


@dataclass(frozen=True)
class CacheFlush:
    """Empty the server's prefix cache before every request (prefix_cache "cold")."""

    key: str | None = None
    """The bearer key for /flush_cache when it differs from the API key (SGLang's `--admin-api-key`)."""

    def url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}{FLUSH_PATH}?timeout={FLUSH_IDLE_WAIT:g}"

    async def run(self, session: aiohttp.ClientSession, base_url: str) -> None:
        """POST /flush_cache on `session` (the measurement's, with its API key unless `key` replaces it); raises
        CacheFlushFailed with SGLang's message unless it answers 200, RequestFailed when nothing answers."""
        url = self.url(base_url)
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else None
        timeout = aiohttp.ClientTimeout(total=FLUSH_IDLE_WAIT + _ANSWER_MARGIN)
        try:
            async with session.post(url, headers=headers, timeout=timeout) as response:
                text = (await response.content.read(ERROR_BODY_LIMIT)).decode(errors="replace")
                status = response.status
        except TimeoutError:
            raise flush_failure(url, f"got no answer within {timeout.total:g} s (is the server hung?)") from None
        except aiohttp.ClientConnectorError as exc:
            raise connect_failure(url, exc) from None
        except aiohttp.ClientError as exc:
            why = f"failed: {type(exc).__name__}: {exc} (did the server die? check its log)"
            raise flush_failure(url, why) from None
        if status != 200:
            raise flush_failure(url, f"answered HTTP {status}: {clip_line(text) or '(empty body)'}", status, text)
