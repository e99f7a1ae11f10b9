"""Reading SGLang 0.5.23's log lines: startup progress events and startup facts (plain text in, no I/O).

Formats come from the SGLang wheel (see sglang-reference.md §7): every SGLang line starts with
`[YYYY-MM-DD HH:MM:SS(.mmm)( DP0)( TP1)...] ` and carries no level name; uvicorn's lines add `INFO:     `.
Older SGLang (<= 0.5.10) wordings of the graph-capture and KV-cache lines are read too: `Capture cuda graph
begin/end. Time elapsed: X s. ...` (the decode graph) and `KV Cache is allocated. #tokens: N, ...` (no dtype).
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
_KV = re.compile(r"^KV Cache (?:is allocated|VA upper bound)\.(?: dtype: (?P<dtype>[^,\s]+),)? #tokens: (?P<tokens>\d+)"
                 r"(?P<sizes>.*)$", re.MULTILINE)
_NUMBER = r"\d+(?:\.\d+)?"
_ELAPSED = re.compile(rf"(?:\belapsed=|Time elapsed: )(?P<seconds>{_NUMBER}) s")


def _capture_line(step: str) -> re.Pattern[str]:
    """`Capture <what> <kind> graph <step>.` (0.5.23), or the old `Capture cuda graph <step>.` without a <what>."""
    return re.compile(rf"^Capture (?:(?P<what>.+?) )?(?P<kind>\w+ graph) {step}\.(?P<rest>.*)$", re.MULTILINE)


_CAPTURE_BEGIN = _capture_line("begin")
_CAPTURE_END = _capture_line("end")


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
    dtype = f", dtype: {m['dtype']}" if m["dtype"] else ""
    return f"KV cache allocated (#tokens: {m['tokens']}{dtype})"


def _graph_name(m: re.Match[str]) -> str:
    """The graph a capture line names; the old `Capture cuda graph ...` lines name none: the decode graph."""
    return m["what"] or "decode"


def _capture_begin(m: re.Match[str]) -> str:
    backend = re.search(r"backend=(\w+)", m["rest"])
    detail = f" (backend={backend[1]})" if backend else ""
    return f"capturing {_graph_name(m)} {m['kind']}{detail}"


def _capture_end(m: re.Match[str]) -> str:
    elapsed = _ELAPSED.search(m["rest"])
    detail = f" ({elapsed['seconds']} s)" if elapsed else ""
    return f"captured {_graph_name(m)} {m['kind']}{detail}"


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
    ("kv_cache", _KV, _kv_cache),
    ("capturing_graphs", _CAPTURE_BEGIN, _capture_begin),
    ("graphs_captured", _CAPTURE_END, _capture_end),
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
_LOAD_END = re.compile(rf"^Load weight end\. elapsed=(?P<seconds>{_NUMBER}) s", re.MULTILINE)
_KV_SIZE = re.compile(rf"\b(?P<name>K|V|KV) size: (?P<gb>{_NUMBER}) GB")
_BATCH_SIZES = re.compile(r"\bbs=\[(?P<sizes>[\d,\s]*)\]")
_MEM_USAGE = re.compile(rf"\bmem usage=(?P<gb>{_NUMBER}) GB")
_PREFILL_SKIPPED = re.compile(r"^Disable (?:target )?prefill CUDA graph because (?P<why>.*)$", re.MULTILINE)
_BOOT_START = re.compile(r"^server_args=")
_WEIGHTS_BEGIN = re.compile(r"^Load weight begin\.")
_BOOT_DONE = re.compile(r"^(?:max_total_num_tokens=\d+, |Engine startup timings |The server is fired up)")
TARGET_GRAPHS = {"prefill": ("target prefill", "prefill"), "decode": ("target decode", "target verify", "decode")}
"""The names (GraphCapture.graph) of the target model's graph of each phase, in order of preference: with
speculative decoding `target verify` is the decode graph; `decode` is the old `Capture cuda graph` line's."""
_PLAN_ECHO = "cuda_graph_config resolved"
"""Starts the `Disable prefill CUDA graph because ...` reason that only repeats the resolved plan."""


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


def _kv_gb(sizes: str) -> float | None:
    """K size + V size, or KV size, of a KV-cache line's tail."""
    found = {m["name"]: float(m["gb"]) for m in _KV_SIZE.finditer(sizes)}
    if "KV" in found:
        return found["KV"]
    if "K" in found and "V" in found:
        return round(found["K"] + found["V"], 2)
    return None


def _kv_facts(text: str) -> dict[str, Any]:
    match = _KV.search(text)
    if match is None:
        return {}
    return {"kv_cache_tokens": int(match["tokens"]), "kv_cache_gb": _kv_gb(match["sizes"]),
            "kv_cache_dtype": match["dtype"]}


def _batch_sizes(text: str) -> tuple[int, ...] | None:
    match = _BATCH_SIZES.search(text)
    if match is None:
        return None
    return tuple(int(size) for size in match["sizes"].split(",") if size.strip())


def _capture(end: re.Match[str], begun: Mapping[str, tuple[int, ...] | None]) -> GraphCapture:
    graph, rest = _graph_name(end), end["rest"]
    seconds, usage = _ELAPSED.search(rest), _MEM_USAGE.search(rest)
    batch_sizes = _batch_sizes(rest) or begun.get(graph)
    return GraphCapture(graph=graph, seconds=None if seconds is None else float(seconds["seconds"]),
                        batch_sizes=batch_sizes, mem_usage_gb=None if usage is None else float(usage["gb"]))


def _captures(lines: list[str]) -> tuple[GraphCapture, ...]:
    """One GraphCapture per capture end line; batch sizes fall back to the begin line's (draft graphs)."""
    begun: dict[str, tuple[int, ...] | None] = {}
    captures: list[GraphCapture] = []
    for line in lines:
        if (begin := _CAPTURE_BEGIN.match(line)) is not None:
            begun[_graph_name(begin)] = _batch_sizes(begin["rest"])
        elif (end := _CAPTURE_END.match(line)) is not None:
            captures.append(_capture(end, begun))
    return tuple(captures)


def _decode_bs(captures: tuple[GraphCapture, ...]) -> tuple[int, ...] | None:
    for graph in TARGET_GRAPHS["decode"]:
        for capture in captures:
            if capture.graph == graph:
                return capture.batch_sizes
    return None


def _graph_seconds(timings: Mapping[str, float] | None, captures: tuple[GraphCapture, ...]) -> float | None:
    if timings is not None:
        return round(sum(timings.values()), 3)
    seconds = [capture.seconds for capture in captures if capture.seconds is not None]
    return round(sum(seconds), 3) if seconds else None


def _graph_facts(lines: list[str], timings: Mapping[str, float] | None) -> dict[str, Any]:
    captures = _captures(lines)
    return {"captures": captures, "captured_decode_bs": _decode_bs(captures),
            "graph_capture_seconds": _graph_seconds(timings, captures)}


def _prefill_skipped(text: str) -> tuple[str, ...]:
    reasons = (m["why"].strip().rstrip(".") for m in _PREFILL_SKIPPED.finditer(text))
    return tuple(dict.fromkeys(reasons))


def _load_weight(text: str) -> float | None:
    """Seconds of the first `Load weight end. elapsed=` line (the target model; a draft model loads after it)."""
    match = _LOAD_END.search(text)
    return None if match is None else float(match["seconds"])


def first_rank_messages(text: str) -> list[str]:
    """The messages (prefix stripped) of a log's first-rank lines: a TP8 server says each thing once, not 8 times."""
    return [strip_prefix(line) for line in text.splitlines() if is_first_rank(line)]


def _last_boot(text: str) -> list[str]:
    """The first-rank messages of the last boot in a log. A boot starts at a `server_args=` line, or at a
    `Load weight begin` once the current boot has finished loading (its capacity, timings or ready line): a
    draft model's `Load weight begin`, which comes before those, stays in its boot. (The resolution messages
    SGLang prints before `server_args=` belong to the boot before it: read them with first_rank_messages.)"""
    boot: list[str] = []
    finished = False
    for message in first_rank_messages(text):
        if _BOOT_START.match(message) or (finished and _WEIGHTS_BEGIN.match(message)):
            boot, finished = [], False
        boot.append(message)
        finished = finished or _BOOT_DONE.match(message) is not None
    return boot


def startup_facts(text: str) -> StartupFacts:
    """SGLang's startup timings, KV cache, graph captures and capacity from a server log: the last boot in it,
    first-rank lines only (a TP8 boot counts each fact once)."""
    lines = _last_boot(text)
    messages = "\n".join(lines)
    facts: dict[str, Any] = {**_timing_facts(messages), **_capacity_facts(messages), **_kv_facts(messages)}
    if facts.get("load_weight") is None:
        facts["load_weight"] = _load_weight(messages)
    facts.update(_graph_facts(lines, facts.get("cuda_graph")))
    return StartupFacts(**facts, prefill_graph_skipped=_prefill_skipped(messages))


_BATCH_GRAPH = re.compile(r"^(?P<kind>Prefill|Decode) batch(?: \[[^\]]*\])?, .*?\b\w+ graph: (?P<used>True|False)\b")


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
    """Runtime proof of graph use: the batch lines of a log text (all of it: pass the part for one window), first
    rank only. A `Prefill batch` line says whether the prefill graph ran; a `Decode batch` line, logged once per
    `--decode-log-interval` steps, whether the decode graph ran for the step that closed its window."""
    counts = {key: 0 for key in ("prefill_true", "prefill_false", "decode_true", "decode_false")}
    for message in first_rank_messages(text):
        match = _BATCH_GRAPH.match(message)
        if match is not None:
            counts[f"{match['kind'].lower()}_{match['used'].lower()}"] += 1
    return GraphUse(**counts)
