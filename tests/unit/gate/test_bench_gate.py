"""benchmarks/bench_gate.py: its sampling follows the simulator's noise model and the plugin's flow, and a tiny run
prints every row. Seeded: every number below is deterministic, the margins only guard against a changed seed."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.simulator.engine.schedule import jitter_factor

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_gate.py"


def _load() -> ModuleType:
    """The benchmark is no package: load it from its file (registered, which its dataclasses need)."""
    spec = importlib.util.spec_from_file_location("bench_gate", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_gate", module)
    spec.loader.exec_module(sys.modules["bench_gate"])
    return sys.modules["bench_gate"]


bench = _load()


def plan(name: str) -> Any:
    return next(p for p in bench.PLANS if p.name == name)


def test_a_boot_draws_its_offset_and_each_request_its_jitter_as_the_simulator_does() -> None:
    boot = bench.Boot.start(random.Random(7), 0.02, slowdown=0.1)
    expected = random.Random(7)
    offset = jitter_factor(expected, 0.02)
    jitters = [jitter_factor(expected, 0.02) for _ in range(3)]
    assert boot.offset == offset
    assert boot.requests(3) == pytest.approx([bench.TRUE_THROUGHPUT / (offset * j * 1.1) for j in jitters])


def test_without_noise_every_plan_passes_an_unchanged_server_with_its_first_round() -> None:
    for each in bench.PLANS:
        outcome = bench.session(random.Random(1), each, 0.0, 0.0)
        assert outcome.verdict is Verdict.OK, each.name
        assert outcome.requests == each.repeats, each.name
        assert outcome.baseline_requests == each.repeats * each.boots, each.name


def test_a_regression_is_re_measured_on_the_same_boot_and_its_requests_counted() -> None:
    outcome = bench.session(random.Random(2), plan("fixed-3"), 0.01, 0.3)
    assert (outcome.verdict, outcome.requests) == (Verdict.REGRESSED, 6)
    plain = bench.session(random.Random(2), plan("plain"), 0.01, 0.3)
    assert (plain.verdict, plain.requests) == (Verdict.REGRESSED, 3)  # no confirmation


def test_the_adaptive_plan_adds_requests_until_settled_within_its_maximum() -> None:
    rng = random.Random(3)
    counts = [bench.session(rng, plan("adaptive"), 0.05, 0.0).baseline_requests for _ in range(20)]
    assert min(counts) >= 3 and max(counts) <= bench.MAX_REPEATS
    assert max(counts) > 3  # at 5% noise 3 requests cannot detect 5%: the recording goes on


def test_a_baseline_over_boots_repeats_the_first_boots_count() -> None:
    reference = bench.record(random.Random(4), 0.05, plan("adaptive+boots-3"))
    assert len(reference) == 3 and len({len(boot) for boot in reference}) == 1


def test_rows_that_cannot_be_wrong_at_a_small_size() -> None:
    caught = bench.simulate(bench.Task(plan("fixed-3"), 0.01, 0.3, 30, 0))
    assert caught.failed.value == 1.0 and caught.requests == 6.0
    alarms = bench.simulate(bench.Task(plan("plain"), 0.05, 0.0, 300, 0))
    assert 0.1 < alarms.failed.value < 0.45  # ~26% expected: P(0 in 300) is nil


def test_a_row_is_the_same_for_the_same_seed() -> None:
    task = bench.Task(plan("boots-3"), 0.02, 0.05, 20, 5)
    assert bench.simulate(task) == bench.simulate(task)


def test_the_ideal_rate_matches_sampled_boot_offsets() -> None:
    rng, n = random.Random(9), 20_000
    for boots in (1, 3):
        fails = 0
        for _ in range(n):
            base = sum(jitter_factor(rng, 0.02) for _ in range(boots)) / boots
            fails += base < (1 - bench.TOLERANCE) * 1.075 * jitter_factor(rng, 0.02)
        assert fails / n == pytest.approx(bench.ideal_fail_rate(0.02, 0.075, boots), abs=0.015)


def test_a_rate_prints_with_its_standard_error() -> None:
    assert str(bench.Rate(1, 4)) == "25.0±21.7"
    assert str(bench.Rate(0, 10)) == "0.0±0.0"


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_main_prints_a_row_for_every_plan_and_noise_level_and_every_target() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bench.main(["--trials", "3", "--jobs", "1"]) == 0
    lines = out.getvalue().splitlines()
    for each in bench.PLANS:
        for noise in ("1%", "2%", "5%"):
            assert sum(line.split()[:2] == [each.name, noise] for line in lines) == 2  # rates and requests
        assert sum(line.split()[:1] == [each.name] and "target" in line for line in lines) == 3
    assert sum(line.startswith("ideal, ") and "exact" in line for line in lines) == 3 * len(bench.IDEAL_BOOTS)
    assert sum(line.startswith(f"    {a} vs {f}: ") for a, f in bench.PAIRS for line in lines) == len(bench.PAIRS)
    assert lines[-1].startswith("(done in ")
