"""The summary's load section: each concurrent or SLO cell in one line (docs/concurrency.md).

    sglang-perf load: N streams sent at once per round (SIMULATED)
    test_c.py::test_sweep@c16 [default]: 16 streams x 3 rounds: 2635.5 tok/s, 26.35 req/s; ttft p50/p90/p99
      85.2/88.0/90.1 ms; tpot 5.20/5.31/5.40 ms; itl 5.0/6.1/9.8 ms; goodput 26.35 req/s (100% met ttft <= 200 ms)

Aggregate throughputs are the medians over rounds; the percentiles are over every request (every chunk gap for ITL).
A concurrent cell also says how busy the client was (its event loop's lag, its share of a core), and any cell whose
client fell behind (lag p99 above 1 ms) is listed with a warning and what that did to its timings
(ClientLoad.lag_effect: with the loop's stamps they include the delay; with the kernel's, only chunks read together
share a stamp).
Plain Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_sglang_perf.measurement.client_load import LAG_LIMIT
from pytest_sglang_perf.measurement.concurrency import slo_attainment
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.wrapping import wrap_lines


def load_lines(results: Iterable[tuple[str, Result]], *, simulated: bool, verbose: bool = True) -> list[str]:
    """The section's lines for (test id, result) pairs in run order: each concurrent or SLO cell, and each cell whose
    client fell behind (without `verbose`, those of one stream are only counted); empty when there is none."""
    pairs = list(results)
    cells = [(test_id, result) for test_id, result in pairs if _loaded(result) or (verbose and _behind(result))]
    counted = [] if verbose else [result for _, result in pairs if _behind(result) and not _loaded(result)]
    lines = []
    if cells:
        label = " (SIMULATED)" if simulated else ""
        lines.append(f"sglang-perf load: N streams sent at once per round; percentiles over every request{label}")
        lines += wrap_lines([_cell_line(test_id, result) for test_id, result in cells])
    if counted:
        lines += wrap_lines([f"sglang-perf: the client fell behind in {len(counted)} one-stream cell(s) (event-loop "
                             f"lag p99 above {LAG_LIMIT * 1000:g} ms): {_what_it_did(counted)} (-v names them and "
                             "says how)"])
    return lines


def _what_it_did(behind: list[Result]) -> str:
    """What the lag did to the timings of one-stream cells whose client fell behind: nothing where the kernel's
    stamps kept every chunk's own arrival (ClientLoad.untouched)."""
    kept = sum(1 for result in behind if result.client is not None and result.client.untouched)
    if not kept:
        return "their timings may be off by up to that lag"
    if kept == len(behind):
        return "the kernel's stamps kept every chunk's own time"
    return f"in {kept} the kernel's stamps kept every chunk's own time; the others' may be off by up to that lag"


def _loaded(result: Result) -> bool:
    return result.params.concurrency > 1 or result.params.slo is not None


def _cell_line(test_id: str, result: Result) -> str:
    params = result.params
    median = {name: summary.median for name, summary in result.summaries.items()}
    parts = []
    if params.concurrency > 1:
        parts.append(f"{params.concurrency} streams x {result.measured} rounds: "
                     f"{median['output_throughput']:.1f} tok/s, {median['request_throughput']:.2f} req/s")
    else:
        parts.append(f"one stream x {result.measured} requests: {median['output_throughput']:.1f} tok/s")
    parts += [f"{name} {_quantiles(q)}" for name, q in result.percentiles.items()]
    if params.slo is not None and "goodput" in median:
        met = slo_attainment(result.samples, params.slo)
        parts.append(f"goodput {median['goodput']:.2f} req/s ({met:.0%} met {params.slo.describe()})")
    if result.client is not None and (params.concurrency > 1 or result.client.behind):
        parts.append(result.client.describe())
    if result.client is not None and result.client.behind:
        parts.append(f"THE CLIENT FELL BEHIND (lag p99 above {LAG_LIMIT * 1000:g} ms): {result.client.lag_effect()}")
    return f"{test_id} [{result.variant}]: " + "; ".join(parts)


def _behind(result: Result) -> bool:
    return result.client is not None and result.client.behind


def _quantiles(q: Mapping[str, float]) -> str:
    """`p50/p90/p99 85.2/88.0/90.1 ms`."""
    keys = "/".join(q)
    values = "/".join(f"{v * 1000:.1f}" for v in q.values())
    return f"{keys} {values} ms"
