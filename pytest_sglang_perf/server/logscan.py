"""Reading SGLang 0.5.23's log lines: prefixes and ranks, first-rank messages, the last boot, startup progress
events (plain text in, no I/O). The startup facts a boot logged are read in startup.py.

Formats come from the SGLang wheel (see docs/sglang-0.5.23.md §7): every SGLang line starts with
`[YYYY-MM-DD HH:MM:SS(.mmm)( DP0)( TP1)...] ` and carries no level name; uvicorn's lines add `INFO:     `.
Older SGLang (<= 0.5.10) wordings of the graph-capture and KV-cache lines are read too: `Capture cuda graph
begin/end. Time elapsed: X s. ...` (the decode graph) and `KV Cache is allocated. #tokens: N, ...` (no dtype).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_sglang_perf.server.logfeed import ATTEMPT_HEADER

PHASES = (
    "launched", "loading_weights", "weights_loaded", "kv_cache", "capturing_graphs",
    "graphs_captured", "http_up", "warming_up", "ready",
)
"""Startup phases in boot order (`ProgressEvent.phase`)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(
    r"^(?:\(\w+ pid=\d+(?:, ip=[\d.]+)?\) )?"  # Ray's actor tag, where SGLang runs in a Ray actor
    r"(?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]\[[\w.]+:\d+\]\[[A-Z]+\]: "
    r"|\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:\.\d{3})?(?P<ranks>(?: [A-Z][A-Z_]*\d+)*)\] ?"
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)? [A-Z]+ \d+ \[ ?(?P<ranks2>(?:[A-Z][A-Z_]*\d+ )*)[\w.]+:\d+\] "
    r"|(?P<ranks3>Rank \d+): "
    r")?"
)
"""SGLang's line prefix `[YYYY-MM-DD HH:MM:SS(.mmm)( DP0)( TP1)...] ` (without the date before SGLang 0.4: `[23:17:08
TP4] `, seen in published 2024 logs); also a logging format that puts the ranks
before the source file (`2025-10-29 02:27:35 INFO 8900 [ DP15 TP15 EP15 scheduler_metrics_mixin.py:222] `, seen
in a published H20 log), SGLang 0.1's `Rank 0: ` (a tensor-parallel rank, no time), a logging configuration's
`[2026-04-15 17:13:02][http_server.py:1991][INFO]: ` (seen in a published PD log), and Ray's `(SGLangEngine
pid=952, ip=...) ` actor tag before any of them."""
_RANK = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
_LEVEL = re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")
KV_CACHE_LINE = re.compile(
    r"^KV Cache (?:is allocated|VA upper bound)\.(?: dtype: (?P<dtype>[^,\s]+),)? #tokens: (?P<tokens>\d+)"
    r"(?P<sizes>.*)$", re.MULTILINE
)
"""A `KV Cache is allocated` (or `VA upper bound`) line: groups dtype (None on old SGLang), tokens, sizes."""
NUMBER = r"\d+(?:\.\d+)?"
ELAPSED = re.compile(rf"(?:\belapsed=|Time elapsed: )(?P<seconds>{NUMBER}) s")
"""The seconds of a capture line (`elapsed=X s`, old SGLang: `Time elapsed: X s`)."""
KEY_VALUE = re.compile(r"(\w+)=([^,\s{}]+)")
"""A `key=value` pair of a message (a value has no commas, spaces or braces)."""


def _capture_line(step: str) -> re.Pattern[str]:
    """`Capture <what> <kind> graph <step>.` (0.5.23), or the old `Capture cuda graph <step>.` without a <what>."""
    return re.compile(rf"^Capture (?:(?P<what>.+?) )?(?P<kind>\w+ graph) {step}\.(?P<rest>.*)$", re.MULTILINE)


CAPTURE_BEGIN = _capture_line("begin")
CAPTURE_END = _capture_line("end")


def key_values(text: str) -> dict[str, str]:
    """The `key=value` pairs of a message (KEY_VALUE), the last value of a repeated key."""
    return dict(KEY_VALUE.findall(text))


OLD_GRAPH_NAMES = {"piecewise": "prefill"}
"""Graph names of older SGLang: 0.5.12's `Capture piecewise CUDA graph begin/end` (model_runner.py) is the prefill
graph."""


def graph_name(m: re.Match[str]) -> str:
    """The graph a capture line names; the old `Capture cuda graph ...` lines name none: the decode graph; the older
    names mean today's (OLD_GRAPH_NAMES)."""
    name = m["what"] or "decode"
    return OLD_GRAPH_NAMES.get(name, name)


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a server's boot, as the launcher reports it."""

    phase: str
    """One of PHASES."""
    message: str
    """Human text, e.g. "weights loaded (12.34 s, type=Qwen3ForCausalLM)"."""
    elapsed: float
    """Seconds since launch."""


_GLUED = re.compile(
    r"(?<=.)(?=\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?(?: [A-Z][A-Z_]*\d+)*\] )"
    r"|(?<=\S)(?=Fatal Python error: )"
    r"|(?<=[^\]\s] )(?=max_total_num_tokens=\d)"
)
"""Where a line written without its newline ends and the next one starts on the same physical line: another
rank's SGLang prefix, Python's fatal-error banner after a progress bar, or the scheduler's capacity line after a
capture line (a carriage return ends the other kind)."""


def logical_lines(text: str) -> list[str]:
    """The lines a log holds as its writers meant them: split at newlines, at carriage returns (a progress bar
    redrawn in place: each drawing a line of its own) and where an unterminated write is followed on the same
    physical line by an SGLang-prefixed line or a `Fatal Python error` (_GLUED). Blank pieces are dropped."""
    out = []
    for physical in text.splitlines():
        if physical.startswith(ATTEMPT_HEADER):  # the launcher's own line: its stamp is not another line
            out.append(physical)
            continue
        for piece in physical.split("\r"):
            out += [part for part in _GLUED.split(_ANSI.sub("", piece)) if part.strip()]
    return out


def strip_prefix(line: str) -> str:
    """The message of a log line: without colour codes, the `[time ranks]` prefix, a uvicorn level name."""
    text = _ANSI.sub("", line).strip()
    return _LEVEL.sub("", _PREFIX.sub("", text, count=1), count=1)


def line_ranks(line: str) -> dict[str, int]:
    """The rank tags of a line's prefix, e.g. {"DP": 0, "TP": 1}; empty for unprefixed or single-GPU lines."""
    match = _PREFIX.match(_ANSI.sub("", line).strip())
    if match is None:
        return {}
    if match.group("ranks3"):
        return {"Rank": int(match.group("ranks3").split()[1])}
    return {name: int(num) for name, num in _RANK.findall(match.group("ranks") or match.group("ranks2") or "")}


def is_first_rank(line: str) -> bool:
    """True unless the prefix names a non-zero rank (so a TP8 boot reports each step once, not 8 times)."""
    return all(num == 0 for num in line_ranks(line).values())


def _weights_begin(m: re.Match[str]) -> str:
    return f"loading weights (avail mem={m['mem']} GB)"


def _weights_end(m: re.Match[str]) -> str:
    seconds = f"{m['elapsed']} s" if m["elapsed"] else ""  # older SGLang: no elapsed=
    kind = f"type={m['type']}" if m["type"] else ""  # a quantized checkpoint's line may name none
    said = ", ".join(part for part in (seconds, kind) if part)
    return f"weights loaded ({said})" if said else "weights loaded"


def _weights_committed(m: re.Match[str]) -> str:
    return f"weights committed after graph capture ({m['elapsed']} s)"


def _kv_cache(m: re.Match[str]) -> str:
    dtype = f", dtype: {m['dtype']}" if m["dtype"] else ""
    return f"KV cache allocated (#tokens: {m['tokens']}{dtype})"


def _capture_begin(m: re.Match[str]) -> str:
    backend = re.search(r"backend=(\w+)", m["rest"])
    detail = f" (backend={backend[1]})" if backend else ""
    return f"capturing {graph_name(m)} {m['kind']}{detail}"


def _capture_end(m: re.Match[str]) -> str:
    elapsed = ELAPSED.search(m["rest"])
    detail = f" ({elapsed['seconds']} s)" if elapsed else ""
    return f"captured {graph_name(m)} {m['kind']}{detail}"


def _prefill_disabled(m: re.Match[str]) -> str:
    return f"{m['what']} disabled ({m['why'].rstrip('.')})"


def _scheduler_ready(m: re.Match[str]) -> str:
    pairs = key_values(m.string)
    keys = ("max_total_num_tokens", "max_total_num_token", "max_running_requests", "context_len")
    return "scheduler ready (" + ", ".join(f"{k}={pairs[k]}" for k in keys if k in pairs) + ")"


def _http_up(m: re.Match[str]) -> str:
    return f"HTTP server listening on {m['url']}"


def _fired_up(m: re.Match[str]) -> str:
    return "server fired up and ready to roll"


_RULES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("loading_weights", re.compile(r"^Load weight begin\. avail mem=(?P<mem>[\d.]+) GB"), _weights_begin),
    ("weights_loaded",
     re.compile(r"^[Ll]oad weight end\.(?! Committed)(?: elapsed=(?P<elapsed>[\d.]+) s,)?"
                r"(?:.*?\btype=(?P<type>[^,\s]+))?"), _weights_end),
    ("weights_loaded",
     re.compile(r"^Load weight end\. Committed real weights after CUDA graph capture in (?P<elapsed>[\d.]+) s"),
     _weights_committed),
    ("kv_cache", KV_CACHE_LINE, _kv_cache),
    ("capturing_graphs", CAPTURE_BEGIN, _capture_begin),
    ("graphs_captured", CAPTURE_END, _capture_end),
    ("capturing_graphs",
     re.compile(r"^Disable (?P<what>(?:\w+ )?prefill CUDA graph)(?: capture)? (?P<why>(?:because|for) .*)"),
     _prefill_disabled),
    ("graphs_captured", re.compile(r"^max_total_num_tokens?=\d+, "), _scheduler_ready),
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


_BOOT_START = re.compile(r"^server_args=")
_WEIGHTS_BEGIN = re.compile(r"^Load weight begin\.")
_BOOT_DONE = re.compile(r"^(?:max_total_num_tokens?=\d+, |Engine startup timings |The server is fired up)")


def first_rank_messages(text: str) -> list[str]:
    """The messages (prefix stripped) of a log's first-rank lines: a TP8 server says each thing once, not 8 times."""
    return [strip_prefix(line) for line in logical_lines(text) if is_first_rank(line)]


def other_ranks_boots(text: str) -> list[list[str]]:
    """The last boot's messages of each rank that is not rank 0, lowest rank first (with the lines no rank tag
    names): where rank 0 did not log a fact, the first of these that did stands in for it."""
    lines = logical_lines(text)
    labels = sorted({label for line in lines if (label := tuple(line_ranks(line).items()))
                     and not all(number == 0 for _, number in label)}, key=lambda label: [n for _, n in label])
    return [_boot_of([strip_prefix(line) for line in lines if tuple(line_ranks(line).items()) in ((), label)])
            for label in labels]


def last_boot(text: str) -> list[str]:
    """The first-rank messages of the last boot in a log. A boot starts at a `server_args=` line, or at a
    `Load weight begin` once the current boot has finished loading (its capacity, timings or ready line): a
    draft model's `Load weight begin`, which comes before those, stays in its boot. (The resolution messages
    SGLang prints before `server_args=` belong to the boot before it: read them with first_rank_messages.)"""
    return _boot_of(first_rank_messages(text))


def _boot_of(messages: list[str]) -> list[str]:
    boot: list[str] = []
    finished = False
    for message in messages:
        if _BOOT_START.match(message) or (finished and _WEIGHTS_BEGIN.match(message)):
            boot, finished = [], False
        boot.append(message)
        finished = finished or _BOOT_DONE.match(message) is not None
    return boot
