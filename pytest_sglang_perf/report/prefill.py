"""The summary's prefill section: each cell of exact prompt length (`measure(prompt_tokens=N)`) in one line: its
length and cache mode, prefill throughput, TTFT percentiles, the server's chunks per request and whether its
prefill graph ran, and where it stands against its compute ceiling (docs/prefill.md).

    sglang-perf prefill: prompts of exact length, cold and warm, against the compute ceiling (SIMULATED)
    variant default: ceilings from simulated 791 TFLOP/s on NVIDIA H200 (989 TFLOP/s dense bf16 datasheet x 0.80 GEMM
      efficiency); FLOPs from model/config.json
    test_prefill[8192] [default]: 8192 tokens, cold: 33,035 tok/s, TTFT p50 248.0 ms p99 248.0 ms; 1 chunk per
      request, prefill graph 4/4; prefill at 67% of the compute ceiling (MFU 0.67): compute-bound; a prefill graph
      can gain little here
    test_prefill_cached [default]: 2048 tokens, warm: TTFT p50 8.1 ms p99 8.3 ms; 2047 of 2048 tokens from the
      prefix cache (no prefill throughput: not a cold prefill)

With -v each ceiling's FLOPs follow its line. Plain Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_sglang_perf.measurement.metrics import PREFILL
from pytest_sglang_perf.measurement.prefix_cache import COLD
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.prefill_ceiling import PrefillCeiling
from pytest_sglang_perf.wrapping import wrap_lines


def prefill_lines(results: Iterable[tuple[str, Result]], *, simulated: bool, verbose: bool = False) -> list[str]:
    """The section's lines for (test id, result) pairs in run order; empty when no cell asked for an exact
    prompt length."""
    cells = [(test_id, result) for test_id, result in results if result.params.prompt_tokens is not None]
    if not cells:
        return []
    label = " (SIMULATED)" if simulated else ""
    lines = [f"sglang-perf prefill: prompts of exact length, cold and warm, against the compute ceiling{label}"]
    told: set[tuple[str, str]] = set()
    for test_id, result in cells:
        lines += _variant_line(result, told)
        lines += wrap_lines([cell_line(test_id, result), *_flops_line(result, verbose)])
    return lines


def cell_line(test_id: str, result: Result) -> str:
    """`test_prefill[512] [default]: 512 tokens, cold: 27,900 tok/s, TTFT p50 18.4 ms p99 18.5 ms; ...`."""
    params = result.params
    mode = "cold" if params.prefix_cache == COLD else params.prefix_cache
    parts = [f"{test_id} [{result.variant}]: {params.prompt_tokens} tokens, {mode}: "]
    rate = result.summaries.get(PREFILL)
    parts.append(f"{rate.median:,.0f} tok/s, " if rate is not None else "")
    ttft = result.percentiles.get("ttft", {})
    parts.append(f"TTFT p50 {_ms(ttft.get('p50'))} p99 {_ms(ttft.get('p99'))}")
    parts.append(_server_part(result))
    parts.append(_ceiling_part(result))
    return "".join(parts)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _server_part(result: Result) -> str:
    view = None if result.server is None else result.server.prefill
    if view is None or view.chunks_per_request is None:
        return ""
    chunks = view.chunks_per_request
    text = f"{chunks:g} chunk per request" if chunks == 1 else f"{chunks:.3g} chunks per request"
    return f"; {text}, prefill graph {view.graph_true}/{view.batches}"


def _ceiling_part(result: Result) -> str:
    ceiling = result.prefill_roofline
    if isinstance(ceiling, PrefillCeiling):
        return f"; {ceiling.diagnosis()}"
    if isinstance(ceiling, str):
        return f"; {ceiling}"
    cached = result.cached_tokens
    if result.params.prefix_cache != COLD and cached is not None:
        return (f"; {cached:.0f} of {result.params.prompt_tokens} tokens from the prefix cache (no prefill "
                "throughput: not a cold prefill)")
    return ""


def _variant_line(result: Result, told: set[tuple[str, str]]) -> list[str]:
    ceiling = result.prefill_roofline
    if not isinstance(ceiling, PrefillCeiling) or (result.variant, "") in told:
        return []
    told.add((result.variant, ""))
    rate = ceiling.rate
    detail = f" ({rate.detail})" if rate.detail else ""
    return wrap_lines([f"variant {result.variant}: ceilings from {rate.source} {rate.tflops:.0f} TFLOP/s on "
                       f"{rate.gpu}{detail}; FLOPs from {ceiling.flops_source}"])


def _flops_line(result: Result, verbose: bool) -> list[str]:
    ceiling = result.prefill_roofline
    if not verbose or not isinstance(ceiling, PrefillCeiling):
        return []
    flops = ceiling.flops
    return [f"  ({ceiling.label}: linear {flops.linear / 1e12:.3f}, LM head {flops.head / 1e12:.4f}, attention "
            f"{flops.attention / 1e12:.3f} TFLOP on each of tp {flops.tp} GPUs, {flops.chunks} chunk(s))"]
