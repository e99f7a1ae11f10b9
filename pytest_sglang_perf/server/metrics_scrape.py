"""A server's Prometheus counters (`GET /metrics`, mounted only with `--enable-metrics`: docs/sglang-0.5.23.md §6),
read before and after a measurement: `sglang:generation_tokens_total` (completion tokens, added at each request's
finish) over `sglang:spec_verify_calls_total` (its `spec_verify_ct`, likewise) is the server's own accept length of
the requests in between. Plain Python, no pytest."""

from __future__ import annotations

import re
from collections.abc import Mapping

GENERATED = "sglang:generation_tokens_total"
VERIFIES = "sglang:spec_verify_calls_total"
SCRAPE_TIMEOUT = 5.0
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(?P<value>[-+\w.]+)")


def counters(text: str, names: tuple[str, ...] = (GENERATED, VERIFIES)) -> dict[str, float]:
    """Each named counter's value summed over its label sets, from Prometheus' text format."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is not None and match["name"] in names:
            try:
                out[match["name"]] = out.get(match["name"], 0.0) + float(match["value"])
            except ValueError:
                continue
    return out


def scrape(base_url: str, api_key: str | None = None, timeout: float = SCRAPE_TIMEOUT) -> dict[str, float] | None:
    """The counters now; None when the server exports none (no `--enable-metrics`: 404) or cannot be read."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{base_url}/metrics", headers=headers),
                                    timeout=timeout) as response:
            return counters(response.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        exc.close()
        return None
    except (OSError, ValueError):
        return None


def accept_length(before: Mapping[str, float] | None, after: Mapping[str, float] | None) -> float | None:
    """Tokens generated per verify step between two scrapes; None without speculative decoding or counters."""
    if before is None or after is None:
        return None
    verifies = after.get(VERIFIES, 0.0) - before.get(VERIFIES, 0.0)
    generated = after.get(GENERATED, 0.0) - before.get(GENERATED, 0.0)
    return generated / verifies if verifies > 0 and generated > 0 else None
