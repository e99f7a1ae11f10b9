"""No silent metric loss: a sample that cannot define a metric is kept, counted and shown."""

from __future__ import annotations

from pytest_sglang_perf.gate.compare import Cell, Verdict, check_all
from pytest_sglang_perf.gate.terminal import failure_message, summary_lines
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.values import Coverage, metric_coverage, metric_values, missing_coverage


def normal(e2e: float = 1.0) -> Sample:
    return Sample(ttft=0.05, e2e=e2e, decode_time=e2e - 0.05, completion_tokens=100, prompt_tokens=64, chunks=100)


def burst() -> Sample:
    """Every content chunk arrived in one read: no decode time."""
    return Sample(ttft=0.9, e2e=0.9, decode_time=0.0, completion_tokens=100, prompt_tokens=64, chunks=100)


SAMPLES = [normal(1.0), normal(1.01), burst(), normal(0.99), normal(1.02)]


def test_a_burst_sample_keeps_its_other_metrics_and_the_cell_keeps_tpot() -> None:
    values = metric_values(SAMPLES, None, None)
    assert len(values["output_throughput"]) == len(values["ttft"]) == 5
    assert len(values["tpot"]) == len(values["decode_throughput"]) == 4


def test_coverage_counts_the_samples_that_could_not_define_a_metric_and_why() -> None:
    coverage = metric_coverage(SAMPLES)
    assert set(coverage) == {"decode_throughput", "tpot"}
    assert coverage["tpot"] == Coverage(4, 5, ("1 arrived in one read",))
    assert coverage["tpot"].describe("tpot") == "tpot: 4/5 samples (1 arrived in one read)"
    assert metric_coverage([normal(), normal()]) == {}


def test_one_token_is_another_reason() -> None:
    one = Sample(ttft=0.05, e2e=0.05, decode_time=0.0, completion_tokens=1, prompt_tokens=64, chunks=1)
    assert missing_coverage([one, burst()], "tpot").describe("tpot") == (
        "tpot: 0/2 samples (1 had one token, 1 arrived in one read)")


def test_a_metric_the_baseline_has_and_the_run_lacks_stays_in_the_table() -> None:
    baseline = {name: [list(found)] for name, found in metric_values(SAMPLES, None, None).items()}
    measured = metric_values([burst(), burst()], None, None)
    assert "tpot" not in measured
    checks = {c.metric: c for c in check_all(measured, baseline, {})}
    assert set(checks) == {"output_throughput", "decode_throughput", "ttft", "tpot"}
    assert checks["tpot"].measured is None and checks["tpot"].verdict is Verdict.INCONCLUSIVE
    assert checks["tpot"].baseline is not None and checks["tpot"].note == "tpot: not measured in this run"


def test_reports_show_the_missing_value_and_the_coverage() -> None:
    baseline = {name: [list(found)] for name, found in metric_values(SAMPLES, None, None).items()}
    [tpot] = [c for c in check_all({}, baseline, {}) if c.metric == "tpot"]
    cell = Cell("t.py::test_x", "default", (tpot,), simulated=True)
    message = failure_message(cell, "pytest --sglang-update-baselines")
    assert "samples that define each metric: tpot: not measured in this run" in message
    [row] = [line for line in message.splitlines() if line.strip().startswith("tpot")]
    assert row.split()[1:4] == ["9.65", "ms", "-"]  # the baseline median, then no measured value
    assert any("tpot: not measured in this run" in line for line in summary_lines([cell]))
