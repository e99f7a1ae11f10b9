"""The scheduler's `Prefill batch` and `Decode batch` lines: what the server itself says it did, step by step.

SGLang logs a `Decode batch` line every `--decode-log-interval` decode steps (40 by default) and a `Prefill batch`
line per prefill, on every rank. Wordings read (each seen in published GPU logs and in the wheels' source,
scheduler_metrics_mixin.py): `Decode batch, #running-req: N, ...` (0.5.x), the older `Decode batch. #running-req:
...`, with `[n]` pieces after `batch` on some builds; fields as `key: value`, among them `gen throughput (token/s)`,
`accept len` (speculative decoding), and `cuda graph` (`npu graph` on Ascend, `cpu graph` on CPU).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_sglang_perf.measurement.server_view import DecodeWindow, PrefillView
from pytest_sglang_perf.server.logscan import line_ranks, logical_lines

_BATCH = re.compile(r"\b(?P<kind>Prefill|Decode) batch(?: \[[^\]]*\])?[.,] (?P<fields>.*)$")
_FIELD = re.compile(r"(?P<key>[#\w][\w\s()/.-]*?): (?P<value>-?[\w.]+)")
_GRAPH_KEY = re.compile(r"^(?:cuda|npu|cpu|musa) graph$")


@dataclass(frozen=True)
class BatchLine:
    """One `Prefill batch` / `Decode batch` line."""

    kind: str
    """"Prefill" or "Decode"."""
    ranks: Mapping[str, int] = field(default_factory=dict)
    """The line's rank tags ({"DP": 1, "TP": 1}); empty on a one-GPU server."""
    running_req: int | None = None
    gen_throughput: float | None = None
    """`gen throughput (token/s)`: the server's tokens per second over the window, all running requests."""
    accept_len: float | None = None
    """`accept len`: mean tokens per verify step over the window (speculative decoding only)."""
    graph: bool | None = None
    """Whether the step ran as a captured graph (`cuda graph: True`); None when the line does not say."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """Every `key: value` of the line, as written."""


def batch_line(line: str) -> BatchLine | None:
    """The batch line a log line is, or None."""
    match = _BATCH.search(line)
    if match is None:
        return None
    found = {m["key"].strip(): m["value"] for m in _FIELD.finditer(match["fields"])}
    graph = next((value for key, value in found.items() if _GRAPH_KEY.match(key)), None)
    running = _number(found.get("#running-req"), int)
    return BatchLine(match["kind"], line_ranks(line), None if running is None else int(running),
                     _number(found.get("gen throughput (token/s)"), float), _number(found.get("accept len"), float),
                     None if graph is None else graph == "True", found)


def batch_lines(text: str) -> list[BatchLine]:
    """Every batch line of a log text, every rank, in order."""
    return [found for line in logical_lines(text) if (found := batch_line(line)) is not None]


def decode_windows(text: str) -> list[DecodeWindow]:
    """The `Decode batch` lines of a log text as the server's decode windows (each DP group's lead rank)."""
    return [DecodeWindow(batch.running_req, batch.gen_throughput, batch.accept_len, batch.graph)
            for batch in group_leads(batch_lines(text)) if batch.kind == "Decode"]


def prefill_view(text: str, requests: int) -> PrefillView | None:
    """The `Prefill batch` lines of a log text (each DP group's lead rank) for a measurement of `requests` requests;
    None when there are none."""
    lines = [batch for batch in group_leads(batch_lines(text)) if batch.kind == "Prefill"]
    if not lines:
        return None
    new_tokens = sum(int(_number(batch.fields.get("#new-token"), int) or 0) for batch in lines)
    return PrefillView(len(lines), new_tokens, sum(batch.graph is True for batch in lines), requests)


def first_rank(batches: list[BatchLine]) -> list[BatchLine]:
    """The batch lines of the first rank: rank 0 (and a one-GPU server's, which have no ranks), else the lowest
    rank that logged one (a node of a multi-node server)."""
    labels = [tuple(batch.ranks.values()) for batch in batches]
    if not labels or any(all(number == 0 for number in label) for label in labels):
        return [batch for batch in batches if all(number == 0 for number in batch.ranks.values())]
    lowest = min(labels)
    return [batch for batch, label in zip(batches, labels, strict=True) if label in ((), lowest)]


def group_leads(batches: list[BatchLine]) -> list[BatchLine]:
    """The batch lines of each data-parallel group's lead rank: with DP attention every DP rank schedules its own
    batches (`[DP1 TP4]`), so each group's lowest rank speaks for it (the ranks beside DP are global: DP1's lead
    may be TP4); rank 0 for group 0 and without DP."""
    groups: dict[int, list[tuple[int, ...]]] = {}
    for batch in batches:
        groups.setdefault(batch.ranks.get("DP", 0), []).append(_others(batch))
    leads = {dp: min(labels) for dp, labels in groups.items()}
    return [batch for batch in batches if _leads(batch, leads)]


def _leads(batch: BatchLine, leads: Mapping[int, tuple[int, ...]]) -> bool:
    group = batch.ranks.get("DP", 0)
    if group == 0:
        return all(number == 0 for number in _others(batch))
    return _others(batch) == leads[group]


def _others(batch: BatchLine) -> tuple[int, ...]:
    return tuple(number for name, number in batch.ranks.items() if name != "DP")


def _number(text: str | None, kind: type[int] | type[float]) -> int | float | None:
    try:
        return None if text is None else kind(text)
    except ValueError:
        return None
