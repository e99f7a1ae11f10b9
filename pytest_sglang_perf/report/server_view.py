"""The summary's section on the server's own view: what SGLang's decode lines said beside what the client measured.

    sglang-perf server's view: SGLang's own Decode batch lines, beside the client (SIMULATED)
    test_a.py::test_rbt [mtp]: server: gen throughput 143.2 tok/s, accept len 2.95 (12 decode windows, cuda graph
      12/12); client: decode 145.1 tok/s, accept length 2.97
      FINDING: client and server disagree: accept length 2.97 per the client (per request), 2.10 per the server's
      decode windows

Each cell with a finding is listed, and each speculative cell (its accept length is the question the server can
answer best); with -v, every cell the server logged decode windows for. Definitions: measurement/server_view.py.
Plain Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.server_view import ServerView
from pytest_sglang_perf.wrapping import wrap_lines


def server_view_lines(results: Iterable[tuple[str, Result]], *, simulated: bool, verbose: bool = False) -> list[str]:
    """The section's lines for (test id, result) pairs in run order; empty when no cell is shown. A cell whose
    server logged no decode window (a prefill cell's few tokens; its prefill steps are the prefill section's) is
    shown only for what it found."""
    shown = [(test_id, result, result.server) for test_id, result in results
             if result.server is not None and (result.server.findings or result.server.accept_len
                                               or result.server.metrics_accept_len
                                               or (verbose and result.server.windows))]
    if not shown:
        return []
    label = " (SIMULATED)" if simulated else ""
    lines = [f"sglang-perf server's view: SGLang's own Decode batch lines, beside the client{label}"]
    for test_id, result, view in shown:
        lines += wrap_lines([f"{test_id} [{result.variant}]: {_server(view)}; {_client(result)}"])
        lines += wrap_lines([f"  FINDING: {finding}" for finding in view.findings])
    return lines


def _server(view: ServerView) -> str:
    parts = [] if view.gen_throughput is None else [f"gen throughput {view.gen_throughput:.1f} tok/s"]
    if view.accept_len is not None:
        parts.append(f"accept len {view.accept_len:.2f}")
    graphs = view.graph_true + view.graph_false
    graph = f", cuda graph {view.graph_true}/{graphs}" if graphs else ""
    metrics = "" if view.metrics_accept_len is None else f"; /metrics: accept length {view.metrics_accept_len:.2f}"
    return f"server: {', '.join(parts) or 'no rates'} ({view.windows} decode windows{graph}){metrics}"


def _client(result: Result) -> str:
    medians = {name: summary.median for name, summary in result.summaries.items()}
    parts = []
    if "decode_throughput" in medians:
        parts.append(f"decode {medians['decode_throughput']:.1f} tok/s")
    if "accept_length" in medians:
        parts.append(f"accept length {medians['accept_length']:.2f}")
    streams = result.params.concurrency
    scope = "" if streams == 1 else f" (per stream; the server's throughput is all {streams} streams')"
    return f"client: {', '.join(parts) or 'no decode'}{scope}"
