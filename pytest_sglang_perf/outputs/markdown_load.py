"""The Markdown report's load section: each concurrent or SLO cell of the results document in a table row, as the
terminal's load section (report/load.py) gives it a line: streams x rounds, aggregate throughputs (medians over
rounds), TTFT/TPOT/ITL percentiles over every request, and goodput with the share of requests that met the SLO
(the cells' `load` and `summaries` records: measurement/concurrency.py's load_record). How busy the client was is
the conditions section's (markdown_conditions.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.outputs.markdown_text import code, number, table, text

_LATENCIES = ("ttft", "tpot", "itl")
_DASH = "-"


def load_section(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """`## Load` with a row per cell measured with several streams at once or with an SLO; empty when there is
    none."""
    loaded = [(cell, cell["load"]) for cell in cells if _loaded(cell.get("load"))]
    if not loaded:
        return []
    header = ("test", "variant", "streams x rounds", "output", "requests", *(f"{name} p50/p90/p99" for name in
                                                                            ("TTFT", "TPOT", "ITL")), "goodput")
    rows = [_row(cell, load) for cell, load in loaded]
    return ["## Load", "", "N streams sent at once per round: throughputs are medians over rounds, percentiles are "
            "over every request (ITL: every gap between chunks); the client's own lag is under Conditions "
            "(docs/concurrency.md).", "", *table(header, rows, "llrrrrrrl")]


def _loaded(load: Any) -> bool:
    """A concurrent cell or one with an SLO (a one-stream cell without one is the results table's alone)."""
    if not isinstance(load, Mapping):
        return False
    streams = load.get("streams")
    return (isinstance(streams, int) and streams > 1) or isinstance(load.get("slo"), Mapping)


def _row(cell: Mapping[str, Any], load: Mapping[str, Any]) -> list[str]:
    summaries = cell.get("summaries") or {}
    percentiles = load.get("latency_percentiles") or {}
    rounds = load.get("rounds") or len(cell.get("samples") or ())
    return [code(cell.get("test_id"), in_table=True), code(cell.get("variant"), in_table=True),
            f"{number(load.get('streams'), 0)} x {number(rounds, 0)}",
            _median(summaries, "output_throughput", "tok/s", 1), _median(summaries, "request_throughput", "req/s", 2),
            *(_quantiles(percentiles.get(name)) for name in _LATENCIES), _goodput(summaries, load)]


def _median(summaries: Mapping[str, Any], name: str, unit: str, digits: int) -> str:
    summary = summaries.get(name)
    value = summary.get("median") if isinstance(summary, Mapping) else None
    return f"{number(value, digits)} {unit}" if isinstance(value, int | float) else _DASH


def _quantiles(q: Any) -> str:
    """`85.2/88.0/90.1 ms` from seconds."""
    if not isinstance(q, Mapping) or not q:
        return _DASH
    return "/".join(number(v * 1000 if isinstance(v, int | float) else None, 1) for v in q.values()) + " ms"


def _goodput(summaries: Mapping[str, Any], load: Mapping[str, Any]) -> str:
    slo = load.get("slo")
    if not isinstance(slo, Mapping):
        return _DASH
    try:
        objectives = Slo.from_dict(slo).describe()
    except TypeError:  # not what this version writes
        objectives = "?"
    met = load.get("slo_attainment")
    share = f"{met:.0%}" if isinstance(met, int | float) else "?"
    return text(f"{_median(summaries, 'goodput', 'req/s', 2)} ({share} met {objectives})")
