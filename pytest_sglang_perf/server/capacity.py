"""How many requests a running server decodes at once: what `concurrency="max"` resolves to.

SGLang 0.5.23 reports the real cap after KV-cache sizing per DP rank in `/server_info`
`internal_states[i].effective_max_running_requests_per_dp` (one entry per DP rank;
`srt/managers/scheduler_components/internal_state.py`); its top-level `max_running_requests` is the resolved
argument, null unless set (docs/sglang-0.5.23.md §5.2). The startup log's `max_running_requests=N` line
(`managers/scheduler.py`, TP rank 0, the effective value of one DP rank) is the fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.server.startup import StartupFacts


def max_running_requests(info: Mapping[str, Any], startup: StartupFacts | None) -> tuple[int, str] | None:
    """The server's request cap over all DP ranks and where it was read; None when neither source says."""
    states = info.get("internal_states")
    caps = _caps(states) if isinstance(states, Sequence) and not isinstance(states, str) else []
    if caps:
        ranks = f" over {len(caps)} DP ranks" if len(caps) > 1 else ""
        return sum(caps), f"/server_info effective_max_running_requests_per_dp{ranks}"
    if startup is not None and startup.max_running_requests:
        return startup.max_running_requests, "the startup log's max_running_requests"
    return None


def max_streams(variant: str, info: Mapping[str, Any], startup: StartupFacts | None, limit: int) -> int:
    """`concurrency="max"` on a variant: its server's request cap. Raises ValueError when the server does not say,
    or when the cap is more than `limit` streams (the most the client opens at once)."""
    found = max_running_requests(info, startup)
    if found is None:
        raise ValueError(f'[{variant}] concurrency="max": the server reported no request cap (no /server_info '
                         "effective_max_running_requests_per_dp, no max_running_requests line in its log); pass a "
                         "number instead")
    cap, source = found
    if cap > limit:
        raise ValueError(f'[{variant}] concurrency="max" is {cap} streams here ({source}), more than the {limit} '
                         "the client opens at once: cap the server with --max-running-requests in the variant's "
                         "args, or pass a number")
    return cap


def _caps(states: Sequence[Any]) -> list[int]:
    found = [state.get("effective_max_running_requests_per_dp") for state in states if isinstance(state, Mapping)]
    return [cap for cap in found if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0]
