"""A benchmark of the gate itself: how often it fails an unchanged server, how often it catches a slowdown, and
how many requests it spends, for each measurement plan, on simulated sessions.

    python benchmarks/bench_gate.py               (about 1-2.5 minutes on 2 cores; --quick: a few seconds)

One simulated session of a cell: record its baseline (on its own boot or boots), boot the server again, measure,
and gate `output_throughput` (higher is better, default 5% tolerance) exactly as the plugin does: the gate's own
`check_metric`, `settled` (the adaptive plan's stopping rule) and `confirmed` (a regression is re-measured once on
the same server, the same boot, and fails only if it holds). No server runs: a request's throughput is drawn
with the simulator's noise model (`simulator/engine/schedule.py` `jitter_factor`):

    throughput = TRUE_THROUGHPUT / (boot_offset * request_jitter * (1 + slowdown))

with one boot offset per server boot (the baseline's boots and the gated run's boot each draw their own) and one
jitter per request, both at the row's noise level. Every row has its own seed, so the numbers do not depend on
--jobs. Requests are counted without the warmup request each measurement sends (the confirmation's too). The last
table (benchmarks/bench_confirm.py) draws the boot offset apart from the request jitter and re-measures a regression
on the same boot or on a fresh one: `[gate] confirm`'s two modes.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

from pytest_sglang_perf.config.request import AUTO_FIRST_ROUND, RequestDefaults
from pytest_sglang_perf.gate.compare import BootValues, GatePolicy, Verdict, check_metric
from pytest_sglang_perf.gate.judge import confirmed, settled
from pytest_sglang_perf.measurement.metrics import metric
from pytest_sglang_perf.simulator.engine.schedule import jitter_factor

HERE = Path(__file__).resolve().parent
METRIC = "output_throughput"
TOLERANCE = metric(METRIC).default_tolerance
POLICY = GatePolicy()
TRUE_THROUGHPUT = 100.0
MAX_REPEATS = RequestDefaults().max_repeats
NOISES = (0.01, 0.02, 0.05)
SLOWDOWNS = (0.0, 0.03, 0.05, 0.075, 0.10)
TARGET_NOISE = 0.02
FALSE_ALARM_TARGET = 0.01
DETECTION_TARGET = 0.95
DETECTION_SLOWDOWNS = (0.05, 0.075)
"""5% is the issue's wording, exactly at the 5% tolerance; 7.5% is what "caught" means in practice (see NOTES)."""
TRIALS = 1200
ADAPTIVE_TRIALS = 300
QUICK_TRIALS = 60
ADAPTIVE_COST = 12
"""An adaptive session costs about this many fixed ones (a `settled` check per added request): rows order."""


@dataclass(frozen=True)
class Plan:
    """How a cell is measured, and how its baseline was recorded."""

    name: str
    repeats: int
    """Requests per measurement (the first round of an adaptive plan)."""
    max_repeats: int | None = None
    """The adaptive plan: one more request at a time until `settled`, up to this many; None: a fixed plan."""
    boots: int = 1
    """Boots the baseline was recorded over (--sglang-boots)."""
    statistical: bool = True
    """False: the old rule, medians compared with the tolerance, no test and no confirmation."""

    @property
    def adaptive(self) -> bool:
        return self.max_repeats is not None


PLANS = (
    Plan("plain", 3, statistical=False),
    Plan("fixed-3", 3),
    Plan("fixed-10", 10),
    Plan("adaptive", AUTO_FIRST_ROUND, MAX_REPEATS),
    Plan("boots-3", 3, boots=3),
    Plan("adaptive+boots-3", AUTO_FIRST_ROUND, MAX_REPEATS, boots=3),
)
PLAN_NOTES = {
    "plain": "the old rule: median of 3 vs the baseline's median of 3, fails beyond 5%; no test, no confirmation",
    "fixed-3": "statistical gate, 3 requests vs a one-boot baseline of 3",
    "fixed-10": "statistical gate, 10 requests vs a one-boot baseline of 10",
    "adaptive": (f"repeats='auto': {AUTO_FIRST_ROUND}, then one at a time until settled, up to {MAX_REPEATS}; its "
                 "one-boot baseline recorded the same way (no baseline: stops once it could detect 5%)"),
    "boots-3": "fixed-3 vs a baseline recorded with --sglang-boots 3 (3 boots x 3 requests)",
    "adaptive+boots-3": ("adaptive vs a baseline recorded with --sglang-boots 3 (boot 1 adaptive, boots 2-3 "
                         "repeat its count, as the plugin does)"),
}


# Simulated sessions ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    """One simulated server boot: its offset multiplies the time of every request it serves."""

    rng: random.Random
    noise: float
    offset: float
    slowdown: float

    @classmethod
    def start(cls, rng: random.Random, noise: float, slowdown: float = 0.0) -> Boot:
        return cls(rng, noise, jitter_factor(rng, noise), slowdown)

    def requests(self, count: int) -> list[float]:
        """The output throughput of `count` more requests on this boot."""
        scale = self.offset * (1.0 + self.slowdown)
        return [TRUE_THROUGHPUT / (scale * jitter_factor(self.rng, self.noise)) for _ in range(count)]


def measure(boot: Boot, plan: Plan, reference: BootValues | None) -> list[float]:
    """One measurement, as `measurement/measure.py` `measure` takes it (without the warmup)."""
    values = boot.requests(plan.repeats)
    limit = plan.max_repeats or 0
    while len(values) < limit and not settled(METRIC, values, reference, TOLERANCE, POLICY):
        values.extend(boot.requests(1))
    return values


def record(rng: random.Random, noise: float, plan: Plan) -> list[list[float]]:
    """The baseline, as --sglang-update-baselines [--sglang-boots N] records it: the first boot with the plan
    (an adaptive one against no baseline), every further boot with the first boot's request count."""
    first = measure(Boot.start(rng, noise), plan, None)
    return [first, *(Boot.start(rng, noise).requests(len(first)) for _ in range(plan.boots - 1))]


def plain_verdict(reference: BootValues, values: Sequence[float]) -> Verdict:
    """The old rule: the median worse than the baseline's median by more than the tolerance fails."""
    baseline = statistics.median(v for boot in reference for v in boot)
    return Verdict.REGRESSED if statistics.median(values) / baseline - 1.0 < -TOLERANCE else Verdict.OK


@dataclass(frozen=True)
class Outcome:
    """One simulated session of one cell."""

    verdict: Verdict
    """The cell's final verdict (after the confirmation); REGRESSED fails the test."""
    requests: int
    """Requests the gated run spent: its measurement plus the confirmation's re-measure, warmups excluded."""
    baseline_requests: int


def gated(boot: Boot, plan: Plan, reference: BootValues) -> tuple[Verdict, int]:
    """The final verdict of one gated run and the requests it spent (session/facade.py `check`)."""
    values = measure(boot, plan, reference)
    if not plan.statistical:
        return plain_verdict(reference, values), len(values)
    first = check_metric(METRIC, reference, values, TOLERANCE, POLICY)
    if first.verdict is not Verdict.REGRESSED:
        return first.verdict, len(values)
    # the re-measure: a fixed plan of the first measurement's size (session/facade.py `_remeasure`)
    again = boot.requests(len(values))
    second = check_metric(METRIC, reference, again, TOLERANCE, POLICY)
    return confirmed((first,), (second,))[0].verdict, len(values) + len(again)


def session(rng: random.Random, plan: Plan, noise: float, slowdown: float) -> Outcome:
    reference = record(rng, noise, plan)
    verdict, requests = gated(Boot.start(rng, noise, slowdown), plan, reference)
    return Outcome(verdict, requests, sum(len(boot) for boot in reference))


# Rows -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """A count out of trials, printed with its binomial standard error."""

    count: int
    trials: int

    @property
    def value(self) -> float:
        return self.count / self.trials

    @property
    def se(self) -> float:
        return math.sqrt(self.value * (1.0 - self.value) / self.trials)

    def __str__(self) -> str:
        return f"{100 * self.value:.1f}±{100 * self.se:.1f}"


@dataclass(frozen=True)
class Task:
    plan: Plan
    noise: float
    slowdown: float
    trials: int
    seed: int


@dataclass(frozen=True)
class Row:
    """The sessions of one plan at one noise level and one slowdown."""

    task: Task
    failed: Rate
    inconclusive: Rate
    requests: float
    """Mean requests per cell."""
    baseline_requests: float


def simulate(task: Task) -> Row:
    rng = random.Random(f"{task.seed}|{task.plan.name}|{task.noise}|{task.slowdown}")
    outcomes = [session(rng, task.plan, task.noise, task.slowdown) for _ in range(task.trials)]
    return Row(
        task,
        Rate(sum(o.verdict is Verdict.REGRESSED for o in outcomes), task.trials),
        Rate(sum(o.verdict is Verdict.INCONCLUSIVE for o in outcomes), task.trials),
        statistics.fmean(o.requests for o in outcomes),
        statistics.fmean(o.baseline_requests for o in outcomes),
    )


def tasks(trials: int, adaptive_trials: int, seed: int) -> list[Task]:
    return [Task(plan, noise, slowdown, adaptive_trials if plan.adaptive else trials, seed)
            for plan in PLANS for noise in NOISES for slowdown in SLOWDOWNS]


Rows = dict[tuple[str, float, float], Row]
"""Rows keyed by (plan name, noise, slowdown)."""


def run_all(todo: Sequence[Task], jobs: int) -> Rows:
    """Every row; the costliest are started first, so that the processes finish together."""
    order = sorted(todo, key=lambda t: -t.trials * (ADAPTIVE_COST if t.plan.adaptive else 1))
    if jobs <= 1:
        rows = [simulate(task) for task in order]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            rows = list(pool.map(simulate, order))
    return {(r.task.plan.name, r.task.noise, r.task.slowdown): r for r in rows}


# Report ---------------------------------------------------------------------------------------------------------

IDEAL_BOOTS = (1.0, 3.0, math.inf)
"""Baseline boots of the ideal reference rows; infinity: the baseline's own boot noise averaged away."""


def ideal_fail_rate(noise: float, slowdown: float, boots: float) -> float:
    """The fail rate of an ideal gate: it knows every boot's exact time per token (infinitely many requests) and
    fails when the run's is slower than the mean of the baseline's `boots` boots by more than the tolerance.

    With offsets 1 + noise * Z (`jitter_factor`, whose floor is > 18 sd away here): it fails when
    (1 - tol) (1 + s) (1 + noise Z) - (1 + noise Z_mean) > 0, a normal variable: boot-to-boot noise alone."""
    factor = (1.0 - TOLERANCE) * (1.0 + slowdown)
    spread = noise * math.sqrt(factor * factor + 1.0 / boots)
    return 0.5 * math.erfc(-(factor - 1.0) / spread / math.sqrt(2.0))


def _ideal_name(boots: float) -> str:
    count = "∞" if math.isinf(boots) else f"{boots:g}"
    return f"ideal, {count} boot{'s' if boots > 1 else ''}"


def _pct(x: float) -> str:
    return f"{100 * x:g}%"


def _line(name: str, noise: float, trials: str, cells: Sequence[str]) -> None:
    print(f"{name:<17} {_pct(noise):>5} {trials:>6}" + "".join(f" {cell:>12}" for cell in cells))


def print_rates(rows: Rows) -> None:
    detect = "".join(f" {'detect ' + _pct(s):>12}" for s in SLOWDOWNS[1:])
    print(f"{'plan':<17} {'noise':>5} {'trials':>6} {'false alarm':>12} {'inconclusive':>12}{detect}")
    for plan in PLANS:
        for noise in NOISES:
            row = [rows[(plan.name, noise, s)] for s in SLOWDOWNS]
            _line(plan.name, noise, str(row[0].task.trials),
                  [str(row[0].failed), str(row[0].inconclusive), *(str(r.failed) for r in row[1:])])
    for boots in IDEAL_BOOTS:
        for noise in NOISES:
            rates = [f"{100 * ideal_fail_rate(noise, s, boots):.1f}" for s in SLOWDOWNS]
            _line(_ideal_name(boots), noise, "exact", [rates[0], "-", *rates[1:]])


def print_requests(rows: Rows) -> None:
    by_slowdown = "".join(f" {_pct(s) + ' slower':>12}" for s in SLOWDOWNS[1:])
    print(f"{'plan':<17} {'noise':>5} {'base':>6} {'unchanged':>12}{by_slowdown}")
    for plan in PLANS:
        for noise in NOISES:
            row = [rows[(plan.name, noise, s)] for s in SLOWDOWNS]
            _line(plan.name, noise, f"{row[0].baseline_requests:.1f}", [f"{r.requests:.1f}" for r in row])


def _versus(value: float, shown: str, target: float, at_most: bool) -> str:
    miss = value - target if at_most else target - value
    verdict = "met" if miss <= 0 else f"MISSED by {100 * miss:.1f} points"
    return f"{shown:>9}% (target {'<=' if at_most else '>='} {_pct(target)}): {verdict}"


def _target_lines(rows: Rows, slowdown: float, target: float, at_most: bool) -> None:
    for plan in PLANS:
        rate = rows[(plan.name, TARGET_NOISE, slowdown)].failed
        print(f"    {plan.name:<17} {_versus(rate.value, str(rate), target, at_most)}")
    for boots in IDEAL_BOOTS:
        value = ideal_fail_rate(TARGET_NOISE, slowdown, boots)
        print(f"    {_ideal_name(boots):<17} {_versus(value, f'{100 * value:.1f}', target, at_most)} (reference)")


def print_targets(rows: Rows) -> None:
    print(f"\nTargets of issue 10, at {_pct(TARGET_NOISE)} noise (rate ± its standard error):")
    print(f"  false alarms <= {_pct(FALSE_ALARM_TARGET)} (an unchanged server fails the test):")
    _target_lines(rows, 0.0, FALSE_ALARM_TARGET, True)
    for slowdown in DETECTION_SLOWDOWNS:
        print(f"  a {_pct(slowdown)} slowdown caught >= {_pct(DETECTION_TARGET)} (the test fails):")
        _target_lines(rows, slowdown, DETECTION_TARGET, False)
    slowdown = DETECTION_SLOWDOWNS[-1]
    print(f"  the adaptive plan spends fewer requests than a fixed plan of the same power (power: detection of "
          f"{_pct(slowdown)}, the same within 2 standard errors; requests: unchanged / {_pct(slowdown)} slower):")
    for adaptive, fixed in PAIRS:
        print(f"    {adaptive} vs {fixed}: {_power_line(rows, adaptive, fixed)}")


PAIRS = (("adaptive", "fixed-3"), ("adaptive", "fixed-10"), ("adaptive+boots-3", "boots-3"))
"""The adaptive plans against the fixed plans with the same kind of baseline."""


def _power_line(rows: Rows, adaptive: str, fixed: str) -> str:
    noise, slowdown = TARGET_NOISE, DETECTION_SLOWDOWNS[-1]
    a, f = rows[(adaptive, noise, slowdown)], rows[(fixed, noise, slowdown)]
    a0, f0 = rows[(adaptive, noise, 0.0)], rows[(fixed, noise, 0.0)]
    facts = (f"{a0.requests:.1f}/{a.requests:.1f} vs {f0.requests:.1f}/{f.requests:.1f} requests, detects "
             f"{a.failed}% vs {f.failed}%")
    verdict = _power_verdict(a.failed, f.failed, a0.requests < f0.requests and a.requests < f.requests)
    alarms = a0.failed.value - f0.failed.value
    if alarms > 2 * math.hypot(a0.failed.se, f0.failed.se):
        verdict += f", but with {100 * alarms:.1f} points more false alarms ({a0.failed}% vs {f0.failed}%)"
    return f"{facts}: {verdict}"


def _power_verdict(adaptive: Rate, fixed: Rate, fewer: bool) -> str:
    margin = 2 * math.hypot(adaptive.se, fixed.se)
    if adaptive.value < fixed.value - margin:
        return "less power for fewer requests (not comparable)" if fewer else "MISSED: less power, more requests"
    if fewer:
        return "met" if adaptive.value <= fixed.value + margin else "met (more power, fewer requests)"
    if adaptive.value > fixed.value + margin:
        return "more power for more requests (not comparable: no fixed plan of this power here)"
    return "MISSED: the same power for more requests"


NOTES = """\
Notes:
- A row's rates are over its sessions; ± is the binomial standard error sqrt(p(1-p)/n) (0.0 at 0% or 100%).
- false alarm: the cell fails (REGRESSED, confirmed by the re-measure) on an unchanged server; inconclusive:
  worse beyond 5% without evidence, or not confirmed (passes unless --sglang-fail-inconclusive).
- detect X%: the cell fails when the server is X% slower (each request's time x (1 + X)). 3% is inside the
  5% tolerance: there a fail is what the tolerance is meant to prevent, so lower is better in that column.
- ideal rows (reference, computed exactly): the 5% rule applied to every boot's exact throughput (infinitely
  many requests). What is left is the boot-to-boot noise, which no number of requests on one boot removes: the
  false alarms a baseline of that many boots cannot avoid at this tolerance. A plan that detects more than its
  ideal row does so by failing on sampling noise too (compare its false alarms). The gated run is one boot as
  well: even a baseline of infinitely many boots ("ideal, ∞ boots") leaves the run's own offset.
- A 5% slowdown with the 5% tolerance sits exactly on the threshold: the measured change is the true one plus
  zero-mean noise, so it lands beyond 5% about half the time, whatever the plan; ~50% is the ceiling there, and
  a gate that caught it >= 95% would also fail most changes of 4%. "Caught" for a practical threshold of 5%
  means a slowdown clearly past it: 7.5%, 10%.
- The re-measure that confirms a regression runs on the same boot, so it cannot undo a boot offset: with a
  one-boot baseline the offsets of two boots (the baseline's and the run's) are a real difference to the
  request-level test; a baseline over several boots (--sglang-boots) measures that spread and allows for it.
- Only output_throughput is simulated; a real cell checks several metrics, fails if any one regresses, and
  the adaptive plan stops only when every request metric is settled (more false alarms and requests there).
- Requests per cell exclude the warmup request each measurement sends (1 by default, 2 with a confirmation)."""


def print_report(rows: Rows, trials: int, adaptive_trials: int) -> None:
    print(f"Gate benchmark: {METRIC} (higher is better), tolerance {_pct(TOLERANCE)}, confidence "
          f"{POLICY.confidence:g}; noise = both the per-request jitter and the per-boot offset (sd, relative).")
    print(f"Each row: one plan at one noise level; rates in % of simulated sessions ({trials} per row, "
          f"{adaptive_trials} for the adaptive plans; ± at most {50 / math.sqrt(trials):.1f} / "
          f"{50 / math.sqrt(adaptive_trials):.1f} points). A session: record the baseline, boot again, measure, "
          "gate, re-measure a regression on the same boot.")
    for plan in PLANS:
        print(f"  {plan.name:<17} {PLAN_NOTES[plan.name]}")
    print(f"  {'ideal, N boots':<17} reference: no sampling noise at all, only the boot offsets (see the notes)")
    print()
    print_rates(rows)
    print("\nMean requests per cell (the gated run, confirmation included, warmup excluded; base: the baseline's "
          "requests, recorded once, all boots):")
    print_requests(rows)
    print_targets(rows)
    print()
    print(NOTES)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=None,
                        help=f"sessions per row of the fixed plans (default {TRIALS}; the adaptive plans' rows, "
                             f"which cost ~5x more: {ADAPTIVE_TRIALS}/{TRIALS} of it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every row's random.Random (default 0)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_TRIALS} sessions per row")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="processes to spread the rows over (default: the CPU count); does not change results")
    args = parser.parse_args(argv)
    if args.trials is not None and args.trials < 1:
        parser.error(f"--trials must be >= 1, got {args.trials}")
    return args


def confirm_rows(trials: int, seed: int) -> None:
    """bench_confirm.py's rows: one boot or three for the baseline, 2% and 10% boot noise, each confirmation mode."""
    if str(HERE) not in sys.path:  # run as a script, this folder is on the path already; loaded from a file, not
        sys.path.insert(0, str(HERE))
    import bench_confirm

    bench_confirm.print_table(bench_confirm.all_rows(trials, seed), trials)


def main(argv: Sequence[str] | None = None) -> int:
    started = perf_counter()
    args = parse(argv)
    trials = args.trials or (QUICK_TRIALS if args.quick else TRIALS)
    adaptive_trials = max(1, trials * ADAPTIVE_TRIALS // TRIALS)
    rows = run_all(tasks(trials, adaptive_trials, args.seed), args.jobs)
    print_report(rows, trials, adaptive_trials)
    print("\nPer-boot offsets apart from the request jitter, each confirmation mode ([gate] confirm; the same "
          "table as benchmarks/bench_confirm.py):")
    confirm_rows(max(trials * 2, 400), args.seed)
    print(f"\n(done in {perf_counter() - started:.1f} s, {args.jobs} process(es))")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
