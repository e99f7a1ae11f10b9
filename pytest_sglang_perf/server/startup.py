"""What SGLang logged about its own boot (startup timings, weights, KV pools, graph captures, capacity) and about
graph use at run time (the batch lines: batch_lines.py), read from a server log (plain text in, no I/O). Why a boot
failed: failure_cause.py.

The line formats and the wordings of older SGLang are described in logscan.py (and docs/sglang-versions.md), which
also splits a log into its lines, its first-rank messages and its last boot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang_perf.server.logscan import (
    CAPTURE_BEGIN,
    CAPTURE_END,
    ELAPSED,
    KEY_VALUE,
    KV_CACHE_LINE,
    NUMBER,
    graph_name,
    key_values,
    last_boot,
    other_ranks_boots,
)

_TIMINGS = re.compile(r"Engine startup timings \(s\): (?P<body>.*)$", re.MULTILINE)
_GRAPH_TIMINGS = re.compile(r"cuda_graph=\{(?P<graphs>[^}]*)\}")
_CAPACITY = re.compile(r"^max_total_num_tokens?=\d+, .*$", re.MULTILINE)
"""The scheduler's capacity line; SGLang 0.1 wrote `max_total_num_token=N, max_prefill_num_token=N, context_len=N`."""
_OLD_KEYS = {"max_total_num_token": "max_total_num_tokens", "max_prefill_num_token": "max_prefill_tokens"}
_LOAD_END = re.compile(rf"^Load weight end\. elapsed=(?P<seconds>{NUMBER}) s", re.MULTILINE)
_LOAD_END_MEM = re.compile(rf"^Load weight end\..*?\bmem usage=(?P<gb>-?{NUMBER}) GB", re.MULTILINE)
"""The weights' memory of the first `Load weight end` line (`mem usage=-0.01 GB` is a real reading: kept)."""
_CAPTURE_BS = re.compile(r"^Capture \w+ graph bs \[(?P<sizes>[\d,\s]*)\]", re.MULTILINE)
"""Older SGLang's line of the decode graph's batch sizes (`Capture cuda graph bs [1, 2, 4, ...]`, `npu graph` on an
NPU), before its capture-end line (which then names none)."""
_CAPTURE_TOKENS = re.compile(r"^Capture \w+ graph num tokens \[(?P<sizes>[\d,\s]*)\]", re.MULTILINE)
"""SGLang 0.5.13's line of the piecewise (prefill) graph's token sizes (piecewise_cuda_graph_runner.py)."""
_GRAPH_FAILED = re.compile(r"(?:^Capture \w+ graph failed\b|cuda_graph_runner\.py\", line \d+, in capture\b)",
                           re.MULTILINE | re.IGNORECASE)
"""The decode graph's capture failed: SGLang's `Capture cuda graph failed: ...`, or a traceback through the graph
runner's capture."""
_KV_SIZE = re.compile(rf"\b(?P<name>K|V|KV) size: (?P<gb>{NUMBER}) GB")
_BATCH_SIZES = re.compile(r"\b(?:bs|num_tokens)=\[(?P<sizes>[\d,\s]*)\]")
"""A capture line's sizes: `bs=[...]` (a decode graph), `num_tokens=[...]` (the prefill graph, 0.5.23's
cuda_graph_setup.py)."""
_MEM_USAGE = re.compile(rf"\bmem usage=(?P<gb>-?{NUMBER}) GB")
"""Free memory before minus after: slightly negative when the allocator gave some back (`mem usage=-0.01 GB`)."""
_PREFILL_SKIPPED = re.compile(r"^Disable (?:target )?prefill CUDA graph because (?P<why>.*)$", re.MULTILINE)
TARGET_GRAPHS = {"prefill": ("target prefill", "prefill"), "decode": ("target decode", "target verify", "decode")}
"""The names (GraphCapture.graph) of the target model's graph of each phase, in order of preference: with
speculative decoding `target verify` is the decode graph; `decode` is the old `Capture cuda graph` line's."""
_PLAN_ECHO = "cuda_graph_config resolved"
"""Starts the `Disable prefill CUDA graph because ...` reason that only repeats the resolved plan."""


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
class GraphCapture:
    """One graph SGLang captured at boot (a `Capture <graph> CUDA graph end.` line, `CPU graph` on CPU)."""

    graph: str
    """As the line names it: "target decode", "target verify", "target prefill", "draft decode", "draft extend";
    "decode" for the old `Capture cuda graph end.` line (SGLang <= 0.5.10)."""
    seconds: float | None = None
    batch_sizes: tuple[int, ...] | None = None
    """The captured batch sizes (`bs=[...]` of the end line, else of its begin line); None when not logged."""
    mem_usage_gb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: batch sizes as a list."""
        return {"graph": self.graph, "seconds": self.seconds, "mem_usage_gb": self.mem_usage_gb,
                "batch_sizes": None if self.batch_sizes is None else list(self.batch_sizes)}


@dataclass(frozen=True)
class KvPool:
    """One `KV Cache is allocated` line: its tokens and its K + V (or KV) size, GB."""

    tokens: int
    gb: float | None
    dtype: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "gb": self.gb, "dtype": self.dtype}


@dataclass(frozen=True)
class StartupFacts:
    """What SGLang logged about its own boot; a value it did not log is None (an empty tuple for the lists)."""

    load_weight: float | None = None
    """Seconds (`Engine startup timings`, else the first `Load weight end. elapsed=` line: the target model)."""
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
    kv_cache_tokens: int | None = None
    """`#tokens` of the first `KV Cache is allocated` (or `VA upper bound`) line: the target model's pool."""
    kv_cache_gb: float | None = None
    """K size + V size (`KV size` for MLA-style pools), per rank."""
    kv_cache_dtype: str | None = None
    """e.g. "torch.bfloat16"; None for old SGLang, whose line has no dtype."""
    captures: tuple[GraphCapture, ...] = ()
    """Every graph captured, in log order."""
    captured_decode_bs: tuple[int, ...] | None = None
    """Batch sizes of the target decode graph (target verify with speculative decoding)."""
    graph_capture_seconds: float | None = None
    """Sum of `Engine startup timings` cuda_graph={...}, else of the captures' seconds."""
    prefill_graph_skipped: tuple[str, ...] = ()
    """Reasons of `Disable prefill CUDA graph because <reason>` lines (capture-time fallback to eager)."""
    weights_mem_gb: float | None = None
    """The first rank's weight memory (`mem usage=` of the first `Load weight end` line), GB; may be negative."""
    kv_pools: tuple[KvPool, ...] = ()
    """Every `KV Cache is allocated` line of the boot (a hybrid model's pools each on its own line)."""
    graph_failed: bool | None = None
    """True when the log shows the decode graph's capture failing; None otherwise (never read as False)."""

    def target_captures(self, phase: str) -> list[GraphCapture]:
        """The captures of the target model's `prefill` or `decode` graph (draft graphs aside)."""
        return [capture for capture in self.captures if capture.graph in TARGET_GRAPHS[phase]]

    @property
    def capture_fallbacks(self) -> tuple[str, ...]:
        """Why a prefill graph the plan kept fell back to eager at capture time (not the plan's own echo)."""
        return tuple(reason for reason in self.prefill_graph_skipped if not reason.startswith(_PLAN_ECHO))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: mappings as dicts, tuples as lists, captures as dicts."""
        data: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["cuda_graph"] = None if self.cuda_graph is None else dict(self.cuda_graph)
        data["captures"] = [capture.to_dict() for capture in self.captures]
        data["captured_decode_bs"] = None if self.captured_decode_bs is None else list(self.captured_decode_bs)
        data["prefill_graph_skipped"] = list(self.prefill_graph_skipped)
        data["kv_pools"] = [pool.to_dict() for pool in self.kv_pools]
        return data


def _timing_facts(text: str) -> dict[str, Any]:
    match = _last_match(_TIMINGS, text)
    if match is None:
        return {}
    body = match["body"]
    graphs = _GRAPH_TIMINGS.search(body)
    pairs = key_values(_GRAPH_TIMINGS.sub("", body))
    facts: dict[str, Any] = {
        key: _float(pairs.get(key))
        for key in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
    }
    if graphs is not None:
        facts["cuda_graph"] = {k: v for k, v in ((k, _float(v)) for k, v in KEY_VALUE.findall(graphs["graphs"]))
                               if v is not None}
    return facts


_LOGGED_KEYS = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e", "cuda_graph",
                  "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                  "context_len", "available_gpu_mem", "available_cpu_mem")
"""The timing and capacity facts of one line each, None until a line says them (so that every rank's reading has
every field)."""


def _capacity_facts(text: str) -> dict[str, Any]:
    match = _last_match(_CAPACITY, text)
    if match is None:
        return {}
    pairs = {_OLD_KEYS.get(key, key): value for key, value in key_values(match.group(0)).items()}
    ints = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
            "context_len")
    facts: dict[str, Any] = {key: _int(pairs.get(key)) for key in ints}
    for key in ("available_gpu_mem", "available_cpu_mem"):
        facts[key] = _float(pairs.get(key))
    return facts


def _kv_gb(sizes: str) -> float | None:
    """K size + V size, or KV size, of a KV-cache line's tail."""
    found = {m["name"]: float(m["gb"]) for m in _KV_SIZE.finditer(sizes)}
    if "KV" in found:
        return found["KV"]
    if "K" in found and "V" in found:
        return round(found["K"] + found["V"], 2)
    return None


def _kv_facts(pools: tuple[KvPool, ...]) -> dict[str, Any]:
    """The first pool's size as the kv_cache_* fields (the target model's pool; a hybrid model's others follow)."""
    first = pools[0] if pools else None
    return {"kv_cache_tokens": None if first is None else first.tokens,
            "kv_cache_gb": None if first is None else first.gb,
            "kv_cache_dtype": None if first is None else first.dtype}


def _batch_sizes(text: str) -> tuple[int, ...] | None:
    match = _BATCH_SIZES.search(text)
    return None if match is None else _sizes(match)


def _sizes(match: re.Match[str]) -> tuple[int, ...]:
    """The numbers of a match's `sizes` group (`1, 2, 4`)."""
    return tuple(int(size) for size in match["sizes"].split(",") if size.strip())


def _capture(end: re.Match[str], begun: Mapping[str, tuple[int, ...] | None]) -> GraphCapture:
    graph, rest = graph_name(end), end["rest"]
    seconds, usage = ELAPSED.search(rest), _MEM_USAGE.search(rest)
    batch_sizes = _batch_sizes(rest) or begun.get(graph)
    return GraphCapture(graph=graph, seconds=None if seconds is None else float(seconds["seconds"]),
                        batch_sizes=batch_sizes, mem_usage_gb=None if usage is None else float(usage["gb"]))


def _captures(lines: list[str]) -> tuple[tuple[GraphCapture, ...], dict[str, tuple[int, ...] | None]]:
    """One GraphCapture per capture end line; batch sizes fall back to the begin line's (draft graphs)."""
    begun: dict[str, tuple[int, ...] | None] = {}
    captures: list[GraphCapture] = []
    for line in lines:
        if (begin := CAPTURE_BEGIN.match(line)) is not None:
            begun[graph_name(begin)] = _batch_sizes(begin["rest"])
        elif (sizes := _CAPTURE_BS.match(line)) is not None:  # older SGLang: the sizes on a line of their own
            begun["decode"] = _sizes(sizes)
        elif (tokens := _CAPTURE_TOKENS.match(line)) is not None:
            begun["prefill"] = _sizes(tokens)
        elif (end := CAPTURE_END.match(line)) is not None:
            captures.append(_capture(end, begun))
    return tuple(captures), begun


def _decode_bs(captures: tuple[GraphCapture, ...], begun: Mapping[str, tuple[int, ...] | None]
               ) -> tuple[int, ...] | None:
    """The target decode graph's sizes: of its capture-end line, else of its begin line or older SGLang's sizes
    line (a log cut, or a capture that failed, before the end)."""
    for graph in TARGET_GRAPHS["decode"]:
        for capture in captures:
            if capture.graph == graph and capture.batch_sizes:
                return capture.batch_sizes
    return next((begun[graph] for graph in TARGET_GRAPHS["decode"] if begun.get(graph)), None)


def _graph_seconds(timings: Mapping[str, float] | None, captures: tuple[GraphCapture, ...]) -> float | None:
    if timings is not None:
        return round(sum(timings.values()), 3)
    seconds = [capture.seconds for capture in captures if capture.seconds is not None]
    return round(sum(seconds), 3) if seconds else None


def _graph_facts(lines: list[str], timings: Mapping[str, float] | None) -> dict[str, Any]:
    captures, begun = _captures(lines)
    return {"captures": captures, "captured_decode_bs": _decode_bs(captures, begun),
            "graph_capture_seconds": _graph_seconds(timings, captures)}


def _prefill_skipped(text: str) -> tuple[str, ...]:
    reasons = (m["why"].strip().rstrip(".") for m in _PREFILL_SKIPPED.finditer(text))
    return tuple(dict.fromkeys(reasons))


def _load_weight(text: str) -> float | None:
    """Seconds of the first `Load weight end. elapsed=` line (the target model; a draft model loads after it)."""
    match = _LOAD_END.search(text)
    return None if match is None else float(match["seconds"])


def startup_facts(text: str) -> StartupFacts:
    """SGLang's startup timings, KV cache, graph captures and capacity from a server log: the last boot in it,
    first-rank lines (a TP8 boot counts each fact once). A fact rank 0 did not log is read from the lowest rank that
    did: one node's log of a multi-node server starts at rank 8, and a log cut by hand may lack rank 0's line."""
    facts = _facts(last_boot(text))
    for messages in other_ranks_boots(text):
        if all(value not in (None, ()) for value in facts.values()):
            break
        more = _facts(messages)
        facts = {name: more[name] if value in (None, ()) else value for name, value in facts.items()}
    return StartupFacts(**facts, graph_failed=True if _GRAPH_FAILED.search(text) is not None else None)


def _facts(lines: list[str]) -> dict[str, Any]:
    """The startup facts of one rank's messages (StartupFacts' fields but graph_failed)."""
    messages = "\n".join(lines)
    pools = _kv_pools(messages)
    facts: dict[str, Any] = {**dict.fromkeys(_LOGGED_KEYS), **_timing_facts(messages), **_capacity_facts(messages),
                             **_kv_facts(pools)}
    if facts.get("load_weight") is None:
        facts["load_weight"] = _load_weight(messages)
    facts.update(_graph_facts(lines, facts.get("cuda_graph")))
    return {**facts, "prefill_graph_skipped": _prefill_skipped(messages), "weights_mem_gb": _weights_mem(messages),
            "kv_pools": pools}


def _weights_mem(text: str) -> float | None:
    match = _LOAD_END_MEM.search(text)
    return None if match is None else float(match["gb"])


def _kv_pools(text: str) -> tuple[KvPool, ...]:
    return tuple(KvPool(int(m["tokens"]), _kv_gb(m["sizes"]), m["dtype"]) for m in KV_CACHE_LINE.finditer(text))


@dataclass(frozen=True)
class GraphUse:
    """How many `Prefill batch` / `Decode batch` lines said `cuda graph: True` or `False` (`cpu graph:` on CPU)."""

    prefill_true: int = 0
    prefill_false: int = 0
    decode_true: int = 0
    decode_false: int = 0

    def to_dict(self) -> dict[str, int]:
        """JSON-able."""
        return {"prefill_true": self.prefill_true, "prefill_false": self.prefill_false,
                "decode_true": self.decode_true, "decode_false": self.decode_false}


def graph_use(text: str) -> GraphUse:
    """Runtime proof of graph use: the batch lines of a log text (all of it: pass the part for one window), of rank 0
    (with DP attention, each DP group's lead rank: server/batch_lines.py). A `Prefill batch` line says whether the
    prefill graph ran; a `Decode batch` line, logged once per `--decode-log-interval` steps, whether the decode graph
    ran for the step that closed its window. Older wordings (`Decode batch.`) count too."""
    from pytest_sglang_perf.server.batch_lines import batch_lines, group_leads

    counts = {key: 0 for key in ("prefill_true", "prefill_false", "decode_true", "decode_false")}
    for batch in group_leads(batch_lines(text)):
        if batch.graph is not None:
            counts[f"{batch.kind.lower()}_{str(batch.graph).lower()}"] += 1
    return GraphUse(**counts)
