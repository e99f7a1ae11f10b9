"""The summary's load section (report/load.py): each concurrent or SLO cell in one line; one-stream cells without
an SLO are not listed (the client's lag is tested with it, tests/unit/measurement/test_loop_lag.py)."""

from __future__ import annotations

from dataclasses import replace

from report_records import PARAMS, result, samples

from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.report.load import load_lines

TITLE = "sglang-perf load: N streams sent at once per round; percentiles over every request"
PERCENTILES = {"ttft": {"p50": 0.0852, "p90": 0.088, "p99": 0.0901}}


def concurrent(*, slo: Slo | None = None) -> Result:
    """4 streams x 3 rounds; medians 2635.5 tok/s, 26.35 req/s, goodput 19.8 req/s."""
    medians = {"output_throughput": 2635.5, "request_throughput": 26.35, "goodput": 19.8}
    measured = samples(ttft=0.1, count=8) + samples(ttft=0.3, count=4)  # 8 of 12 requests meet ttft <= 200 ms
    return Result("default", replace(PARAMS, concurrency=4, level=4, slo=slo), "h", measured,
                  {name: Summary.of([value]) for name, value in medians.items()}, None, True,
                  percentiles=PERCENTILES)


def words(lines: list[str]) -> str:
    """The lines as one text, the wrapping undone."""
    return " ".join(" ".join(lines).split())


def test_one_stream_cells_make_no_section() -> None:
    """No concurrency, no SLO, a client that kept up: no lines at all."""
    assert load_lines([("t.py::a", result()), ("t.py::b", result("tp2"))], simulated=True) == []


def test_a_concurrent_cell_says_streams_rounds_throughputs_and_percentiles() -> None:
    """Its streams and rounds, its median throughputs and each percentile series in milliseconds."""
    lines = load_lines([("t.py::a", result()), ("t.py::sweep@c4", concurrent())], simulated=False)
    assert lines[0] == TITLE
    assert words(lines[1:]) == ("t.py::sweep@c4 [default]: 4 streams x 3 rounds: 2635.5 tok/s, 26.35 req/s; "
                                "ttft p50/p90/p99 85.2/88.0/90.1 ms")


def test_an_slo_cell_adds_its_goodput_and_the_share_that_met_it() -> None:
    """Goodput's median and the share of requests that met every objective (8 of 12)."""
    lines = load_lines([("t.py::slo@c4", concurrent(slo=Slo(ttft=0.2)))], simulated=True)
    assert lines[0] == f"{TITLE} (SIMULATED)"
    assert words(lines[1:]).endswith("; goodput 19.80 req/s (67% met ttft <= 200 ms)")


def test_a_one_stream_slo_cell_is_listed_by_its_requests() -> None:
    """One stream with an SLO: `one stream x N requests` and its output throughput."""
    cell = replace(result(), params=replace(PARAMS, slo=Slo(ttft=0.2)))
    lines = load_lines([("t.py::a", cell)], simulated=False)
    assert words(lines[1:]) == "t.py::a [default]: one stream x 4 requests: 65.0 tok/s"  # 65 tokens in 1.0 s each
