"""A checked cell as JUnit properties (outputs/junit.py): the cell's verdict and each metric's numbers under
`sglang_perf.*`, a sweep level's under `sglang_perf@c16.*`, the roofline's ceiling or why there is none, and no
property for a value that is not there."""

from __future__ import annotations

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.outputs.junit import cell_properties

NEW = MetricCheck("ttft", "s", None, 0.12, None, 0.15, Verdict.NEW)
SLOWER = MetricCheck("output_throughput", "tok/s", 50.0, 45.0, -0.1, 0.05, Verdict.REGRESSED)


def test_the_cell_and_each_metric_become_properties_leaving_out_what_has_no_value() -> None:
    cell = Cell("t.py::test_x", "tp2", (SLOWER, NEW), True)
    assert cell_properties(cell, cached_tokens=0.0) == [
        ("sglang_perf.variant", "tp2"), ("sglang_perf.verdict", "regressed"), ("sglang_perf.simulated", True),
        ("sglang_perf.cached_tokens", 0.0),
        ("sglang_perf.output_throughput.measured", 45.0), ("sglang_perf.output_throughput.baseline", 50.0),
        ("sglang_perf.output_throughput.change", -0.1), ("sglang_perf.output_throughput.allowed", 0.05),
        ("sglang_perf.output_throughput.unit", "tok/s"), ("sglang_perf.output_throughput.verdict", "regressed"),
        ("sglang_perf.ttft.measured", 0.12), ("sglang_perf.ttft.allowed", 0.15), ("sglang_perf.ttft.unit", "s"),
        ("sglang_perf.ttft.verdict", "new"),
    ]


def test_a_stale_cell_says_what_changed() -> None:
    properties = dict(cell_properties(Cell("t.py::test_x", "tp2", (SLOWER,), True, stale=("max_tokens 512 -> 256",))))
    assert (properties["sglang_perf.verdict"], properties["sglang_perf.stale"]) == ("stale", "max_tokens 512 -> 256")


def test_a_sweep_levels_properties_carry_its_level_and_a_missing_ceiling_says_why() -> None:
    cell = Cell("t.py::test_x", "default", (NEW,), False)
    properties = dict(cell_properties(cell, roofline="no GPU probe on a CPU run", level="@c16"))
    assert properties["sglang_perf@c16.roofline.unavailable"] == "no GPU probe on a CPU run"
    assert properties["sglang_perf@c16.verdict"] == "new"
    assert not any(name.startswith("sglang_perf.") for name in properties)
