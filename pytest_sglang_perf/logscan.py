"""Reading SGLang 0.5.23's log lines: startup progress events and startup facts (plain text in, no I/O).

Formats come from the SGLang wheel (see sglang-reference.md §7): every SGLang line starts with
`[YYYY-MM-DD HH:MM:SS(.mmm)( DP0)( TP1)...] ` and carries no level name; uvicorn's lines add `INFO:     `.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PHASES = (
    "launched", "loading_weights", "weights_loaded", "kv_cache", "capturing_graphs",
    "graphs_captured", "http_up", "warming_up", "ready",
)
"""Startup phases in boot order (`ProgressEvent.phase`)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?(?P<ranks>(?: [A-Z][A-Z_]*\d+)*)\] ?"
)
_RANK = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
_LEVEL = re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a server's boot, as the launcher reports it."""

    phase: str
    """One of PHASES."""
    message: str
    """Human text, e.g. "weights loaded (12.34 s, type=Qwen3ForCausalLM)"."""
    elapsed: float
    """Seconds since launch."""


def strip_prefix(line: str) -> str:
    """The message of a log line: without colour codes, the `[time ranks]` prefix, a uvicorn level name."""
    text = _ANSI.sub("", line).strip()
    return _LEVEL.sub("", _PREFIX.sub("", text, count=1), count=1)


def line_ranks(line: str) -> dict[str, int]:
    """The rank tags of a line's prefix, e.g. {"DP": 0, "TP": 1}; empty for unprefixed or single-GPU lines."""
    match = _PREFIX.match(_ANSI.sub("", line).strip())
    if match is None:
        return {}
    return {name: int(num) for name, num in _RANK.findall(match.group("ranks"))}


def is_first_rank(line: str) -> bool:
    """True unless the prefix names a non-zero rank (so a TP8 boot reports each step once, not 8 times)."""
    return all(num == 0 for num in line_ranks(line).values())


def _weights_begin(m: re.Match[str]) -> str:
    return f"loading weights (avail mem={m['mem']} GB)"


def _weights_end(m: re.Match[str]) -> str:
    return f"weights loaded ({m['elapsed']} s, type={m['type']})"


def _weights_committed(m: re.Match[str]) -> str:
    return f"weights committed after graph capture ({m['elapsed']} s)"


def _kv_cache(m: re.Match[str]) -> str:
    return f"KV cache allocated (#tokens: {m['tokens']}, dtype: {m['dtype']})"


def _capture_begin(m: re.Match[str]) -> str:
    backend = re.search(r"backend=(\w+)", m["rest"])
    detail = f" (backend={backend[1]})" if backend else ""
    return f"capturing {m['what']} {m['kind']}{detail}"


def _capture_end(m: re.Match[str]) -> str:
    elapsed = re.search(r"elapsed=([\d.]+) s", m["rest"])
    detail = f" ({elapsed[1]} s)" if elapsed else ""
    return f"captured {m['what']} {m['kind']}{detail}"


def _prefill_disabled(m: re.Match[str]) -> str:
    return f"{m['what']} disabled ({m['why'].rstrip('.')})"


def _scheduler_ready(m: re.Match[str]) -> str:
    pairs = _key_values(m.string)
    keys = ("max_total_num_tokens", "max_running_requests", "context_len")
    return "scheduler ready (" + ", ".join(f"{k}={pairs[k]}" for k in keys if k in pairs) + ")"


def _http_up(m: re.Match[str]) -> str:
    return f"HTTP server listening on {m['url']}"


def _fired_up(m: re.Match[str]) -> str:
    return "server fired up and ready to roll"


_RULES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("loading_weights", re.compile(r"^Load weight begin\. avail mem=(?P<mem>[\d.]+) GB"), _weights_begin),
    ("weights_loaded",
     re.compile(r"^Load weight end\. elapsed=(?P<elapsed>[\d.]+) s, type=(?P<type>[^,\s]+)"), _weights_end),
    ("weights_loaded",
     re.compile(r"^Load weight end\. Committed real weights after CUDA graph capture in (?P<elapsed>[\d.]+) s"),
     _weights_committed),
    ("kv_cache",
     re.compile(r"KV Cache (?:is allocated|VA upper bound)\. dtype: (?P<dtype>\S+), #tokens: (?P<tokens>\d+)"),
     _kv_cache),
    ("capturing_graphs", re.compile(r"^Capture (?P<what>.+?) (?P<kind>\w+ graph) begin\.(?P<rest>.*)"),
     _capture_begin),
    ("graphs_captured", re.compile(r"^Capture (?P<what>.+?) (?P<kind>\w+ graph) end\.(?P<rest>.*)"), _capture_end),
    ("capturing_graphs",
     re.compile(r"^Disable (?P<what>(?:\w+ )?prefill CUDA graph)(?: capture)? (?P<why>(?:because|for) .*)"),
     _prefill_disabled),
    ("graphs_captured", re.compile(r"^max_total_num_tokens=\d+, "), _scheduler_ready),
    ("http_up", re.compile(r"Uvicorn running on (?P<url>\S+)"), _http_up),
    ("ready", re.compile(r"^The server is fired up and ready to roll!"), _fired_up),
)


def progress_event(line: str, elapsed: float) -> ProgressEvent | None:
    """The startup step a log line announces, or None for any other line."""
    message = strip_prefix(line)
    for phase, pattern, describe in _RULES:
        match = pattern.search(message)
        if match is not None:
            return ProgressEvent(phase=phase, message=describe(match), elapsed=elapsed)
    return None


_TIMINGS = re.compile(r"Engine startup timings \(s\): (?P<body>.*)$", re.MULTILINE)
_GRAPH_TIMINGS = re.compile(r"cuda_graph=\{(?P<graphs>[^}]*)\}")
_CAPACITY = re.compile(r"^max_total_num_tokens=\d+, .*$", re.MULTILINE)
_PAIR = re.compile(r"(\w+)=([^,\s{}]+)")


def _key_values(text: str) -> dict[str, str]:
    return dict(_PAIR.findall(text))


def _float(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


@dataclass(frozen=True)
class StartupFacts:
    """What SGLang logged about its own boot; a value it did not log is None."""

    load_weight: float | None = None
    kv_cache_allocation: float | None = None
    scheduler_e2e: float | None = None
    tokenizer_e2e: float | None = None
    cuda_graph: Mapping[str, float] | None = field(default=None, hash=False)
    """Capture seconds per graph phase (prefill, decode, target_verify, draft_prefill, ...)."""
    max_total_num_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    """The effective cap after KV sizing (the log's value, not the `/server_info` argument)."""
    context_len: int | None = None
    available_gpu_mem: float | None = None
    """GB free after boot (`available_cpu_mem` on a CPU server)."""
    available_cpu_mem: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["cuda_graph"] = None if self.cuda_graph is None else dict(self.cuda_graph)
        return data


def _timing_facts(text: str) -> dict[str, Any]:
    match = _last_match(_TIMINGS, text)
    if match is None:
        return {}
    body = match["body"]
    graphs = _GRAPH_TIMINGS.search(body)
    pairs = _key_values(_GRAPH_TIMINGS.sub("", body))
    facts: dict[str, Any] = {
        key: _float(pairs.get(key))
        for key in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
    }
    if graphs is not None:
        facts["cuda_graph"] = {k: v for k, v in ((k, _float(v)) for k, v in _PAIR.findall(graphs["graphs"]))
                               if v is not None}
    return facts


def _capacity_facts(text: str) -> dict[str, Any]:
    match = _last_match(_CAPACITY, text)
    if match is None:
        return {}
    pairs = _key_values(match.group(0))
    ints = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
            "context_len")
    facts: dict[str, Any] = {key: _int(pairs.get(key)) for key in ints}
    for key in ("available_gpu_mem", "available_cpu_mem"):
        facts[key] = _float(pairs.get(key))
    return facts


def strip_lines(text: str) -> str:
    """`strip_prefix` applied to every line of a log text."""
    return "\n".join(strip_prefix(line) for line in text.splitlines())


def startup_facts(text: str) -> StartupFacts:
    """SGLang's startup timings and KV capacity from a server log (the last boot in it, if several)."""
    messages = strip_lines(text)
    return StartupFacts(**_timing_facts(messages), **_capacity_facts(messages))
