"""Real SGLang GPU server logs (tests/data/sglang_gpu_logs/: excerpts of published logs, each with the facts a
careful engineer reads from it) read through the plugin's own public functions, fact by fact.

    python tests/unit/server/log_corpus.py            the share of facts read right, per folder
    python tests/unit/server/log_corpus.py -v         and every miss

A fact counts where the log shows it (its expected value is not null); `server_ready` and the line counts count
always; a value read where the log shows none is a miss too (a false reading).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_sglang_perf.server.batch_lines import batch_lines, first_rank
from pytest_sglang_perf.server.failure_cause import boot_failure_cause, failure_kind
from pytest_sglang_perf.server.logscan import line_ranks, logical_lines, progress_event, strip_prefix
from pytest_sglang_perf.server.startup import startup_facts

CORPUS = Path(__file__).resolve().parents[2] / "data" / "sglang_gpu_logs"
ALWAYS = ("server_ready", "prefill_lines", "decode_lines")


def logs(folder: str) -> list[Path]:
    return sorted((CORPUS / folder).glob("*.log"))


def _rank_label(line: str) -> str | None:
    ranks = line_ranks(line)
    return " ".join(f"{name} {number}" if name == "Rank" else f"{name}{number}"  # SGLang 0.1's `Rank 0: `
                    for name, number in ranks.items()) or None


_WRAPPER = re.compile(r"^(?:> ?|`)?(?:\([A-Za-z]\w* pid=\d+(?:, ip=[\d.]+)?\) |\S+ stdout [FP] "
                      r"|[A-Z]+ \d{4}-\d{2}-\d{2}T\S+ |\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+Z |[\w.-]+\s+\| "
                      r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \| [A-Z]+ \| [\w.]+ \| )?")
"""What a cluster puts before each line of the server's output (Ray's actor tag, Kubernetes' and a cloud logger's
stamps, `docker logs --timestamps`' stamp, docker compose's `service  | `, a host application's logger
`2025-07-02 16:41:31 | INFO | stdout | `) and a Markdown quote marker or a stray inline-code backtick the
poster added: not the server's log, which the plugin reads from its own file."""


def unwrapped(text: str) -> str:
    """The log as the server wrote it: a cluster's wrapper (Ray's actor tag, Kubernetes' or a cloud logger's stamp)
    taken off each line. The plugin reads its own server's log file, which has none."""
    return "\n".join(_WRAPPER.sub("", line) for line in text.split("\n"))


def read(text: str) -> dict[str, Any]:
    """What the plugin reads from a log, in the corpus's terms."""
    text = unwrapped(text)
    lines = logical_lines(text)
    facts = startup_facts(text)
    events = [event.phase for line in lines if (event := progress_event(line, 0.0)) is not None]
    batches = batch_lines(text)
    decodes = [batch for batch in batches if batch.kind == "Decode"]
    first_decodes = [batch for batch in first_rank(batches) if batch.kind == "Decode"]
    decode = next((c for c in facts.captures if c.graph in ("decode", "target decode")), None)
    prefill = next((c for c in facts.captures if c.graph in ("prefill", "piecewise")), None)
    cause = boot_failure_cause(lines)
    first = first_decodes[0] if first_decodes else None
    return {
        "ranks": list(dict.fromkeys(label for line in lines if (label := _rank_label(line)) is not None)),
        "weights_loaded": True if "weights_loaded" in events else None,
        "weights_gb": facts.weights_mem_gb,
        "weights_seconds": facts.load_weight,
        "kv_cache": [{"tokens": pool.tokens, "gb": pool.gb} for pool in facts.kv_pools] or None,
        **{key: getattr(facts, key) for key in ("max_total_num_tokens", "max_running_requests", "context_len",
                                                 "chunked_prefill_size", "max_prefill_tokens", "available_gpu_mem")},
        "decode_graph": {"captured": True if decode is not None else False if facts.graph_failed else None,
                         "batch_sizes": list(facts.captured_decode_bs) if facts.captured_decode_bs else None,
                         "seconds": None if decode is None else decode.seconds},
        "prefill_graph": None if prefill is None else {"captured": True},
        "server_ready": "ready" in events,
        "prefill_lines": sum(batch.kind == "Prefill" for batch in batches),
        "decode_lines": len(decodes),
        "first_decode": None if first is None else {"running_req": first.running_req,
                                                    "gen_throughput": first.gen_throughput,
                                                    "accept_len": first.accept_len, "cuda_graph": first.graph},
        "failure": None if cause is None else {"kind": failure_kind(cause), "cause_line": cause},
    }


def _pairs(expected: Any, got: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """(fact, expected, read) for every leaf the corpus states; a dict's `line`/`rank`/... text notes are not facts
    the plugin reads (KEPT names those that are)."""
    if isinstance(expected, Mapping):
        got_map = got if isinstance(got, Mapping) else {}
        for key, value in expected.items():
            if key in KEPT.get(path.split(".")[-1].split("[")[0], set(expected)):
                yield from _pairs(value, got_map.get(key), f"{path}.{key}")
        return
    if isinstance(expected, list) and expected and isinstance(expected[0], Mapping):
        got_list = got if isinstance(got, list) else []
        for i, value in enumerate(expected):
            yield from _pairs(value, got_list[i] if i < len(got_list) else None, f"{path}[{i}]")
        return
    yield path, expected, got


KEPT: Mapping[str, set[str]] = {
    "decode_graph": {"captured", "batch_sizes", "seconds"},
    "prefill_graph": {"captured"},
    "first_decode": {"running_req", "gen_throughput", "accept_len", "cuda_graph"},
    "failure": {"kind", "cause_line"},
    "kv_cache": {"tokens", "gb"},
}
"""The parts of a nested fact the plugin reads (the rest, such as the quoted `line`, documents the fact)."""


def compare(expected: Mapping[str, Any], got: Mapping[str, Any]) -> tuple[int, list[tuple[str, Any, Any]]]:
    """(facts counted, misses)."""
    counted, misses = 0, []
    for name, value in expected.items():
        for path, want, read_value in _pairs(value, got.get(name), name):
            if want is None and read_value is None:
                continue
            if want in ([], 0, False) and read_value in (None, [], 0, False) and name not in ALWAYS:
                continue
            counted += 1
            if not _same(want, read_value):
                misses.append((path, want, read_value))
    return counted, misses


def message(line: str) -> str:
    """A line as the plugin reports a cause: without a cluster's wrapper and without SGLang's prefix."""
    return strip_prefix(_WRAPPER.sub("", line.strip()))


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return message(want) == message(got)
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, int | float) and isinstance(want, int | float) and abs(want - got) < 0.006
    return bool(want == got)


def expected(log: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))["facts"]
    return data


def main() -> None:
    verbose = "-v" in sys.argv
    folders = [arg for arg in sys.argv[1:] if arg != "-v"] or sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
    for folder in folders:
        total = right = 0
        for log in logs(folder):
            counted, misses = compare(expected(log), read(log.read_text(encoding="utf-8")))
            total, right = total + counted, right + counted - len(misses)
            for path, want, got in misses if verbose else ():
                print(f"  {folder}/{log.stem}: {path}: expected {want!r}, read {got!r}")
        print(f"{folder}: {right}/{total} facts read right ({right / max(total, 1):.1%}), {len(logs(folder))} logs")


if __name__ == "__main__":
    main()
