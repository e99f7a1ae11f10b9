"""The Markdown report's prefill section: each cell of exact prompt length in the results document (its
`params.prompt_tokens`) in a table: length, cache mode, prefill throughput, TTFT p50/p99, chunks per request and the
compute ceiling's diagnosis (the cells' `prefill_roofline` records, roofline/prefill_ceiling.py; docs/prefill.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.outputs.markdown_text import code, number, table, text


def prefill_section(cells: Sequence[Mapping[str, Any]], *, simulated: bool) -> list[str]:
    """`## Prefill` with a row per cell of exact prompt length; empty when there is none."""
    found = [cell for cell in cells if isinstance(cell.get("params"), Mapping)
             and cell["params"].get("prompt_tokens") is not None]
    if not found:
        return []
    label = " (SIMULATED GPU)" if simulated else ""
    header = ("test", "variant", "tokens", "cache", "prefill", "TTFT p50", "TTFT p99", "chunks", "ceiling",
              "diagnosis")
    return [f"## Prefill{label}", "",
            "Prompts of exact length by the server's own count: tokens computed per second of TTFT, cold, against "
            "the compute ceiling (FLOPs over the GPU's bf16 GEMM rate).", "",
            *table(header, [_row(cell) for cell in found], "llrlrrrrrl")]


def _row(cell: Mapping[str, Any]) -> list[str]:
    params, summaries = cell["params"], cell.get("summaries") or {}
    ttft = ((cell.get("load") or {}).get("latency_percentiles") or {}).get("ttft") or {}
    prefill = (summaries.get("prefill_throughput") or {}).get("median")
    view = ((cell.get("server_view") or {}).get("prefill") or {}).get("chunks_per_request")
    ceiling = cell.get("prefill_roofline") or {}
    return [code(cell.get("test_id"), in_table=True), code(cell.get("variant"), in_table=True),
            str(params["prompt_tokens"]), text(str(params.get("prefix_cache", "?"))),
            "-" if prefill is None else f"{number(prefill, 0)} tok/s", _ms(ttft.get("p50")), _ms(ttft.get("p99")),
            "-" if view is None else number(view, 2),
            "-" if ceiling.get("ceiling_tok_s") is None else f"{number(ceiling['ceiling_tok_s'], 0)} tok/s",
            text(str(ceiling.get("diagnosis") or ceiling.get("unavailable") or ""))]


def _ms(seconds: object) -> str:
    return f"{seconds * 1e3:.1f} ms" if isinstance(seconds, int | float) else "-"
