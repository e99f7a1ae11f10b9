"""The gate's confirmation modes side by side (`[gate] confirm`, session/confirmation.py): how often an unchanged
server fails, how often a real slowdown is caught, and how many boots it costs, when a regression is re-measured on
the same server or on a fresh boot, with the boot-to-boot offset apart from the request jitter.

    python benchmarks/bench_confirm.py            (about 10 s on 2 cores; --quick: 1 s)

One simulated session of a cell, as benchmarks/bench_gate.py models it (the gate's own `check_metric` and
`confirmed` on `output_throughput`, 5% tolerance, 3 requests a measurement): record the baseline (one boot, or three
as --sglang-boots 3 records it), boot again, measure; a regression is re-measured with the same request count, on
the same boot (`same-server`) or on a new one (`reboot`), and fails only if the re-measure regresses too (on a new
boot against a one-boot baseline, only if the two boots establish it: gate/across_boots.py). A
request's throughput is TRUE / (boot offset x request jitter x (1 + slowdown)), the offset drawn once per boot at
the row's boot noise, the jitter per request at REQUEST_NOISE (`jitter_factor`, the simulator's noise model).
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_sglang_perf.gate.across_boots import held_across_boots
from pytest_sglang_perf.gate.compare import GatePolicy, Verdict, check_metric
from pytest_sglang_perf.gate.judge import confirmed
from pytest_sglang_perf.measurement.metrics import metric
from pytest_sglang_perf.simulator.engine.schedule import jitter_factor

METRIC = "output_throughput"
TOLERANCE = metric(METRIC).default_tolerance
POLICY = GatePolicy()
TRUE_THROUGHPUT = 100.0
REQUESTS = 3
REQUEST_NOISE = 0.02
BOOT_NOISES = (0.02, 0.10)
SLOWDOWNS = (0.0, 0.02, 0.10)
BASELINE_BOOTS = (1, 3)
MODES = ("same-server", "reboot")
TRIALS = 4000
QUICK_TRIALS = 400


@dataclass(frozen=True)
class Boot:
    rng: random.Random
    offset: float
    slowdown: float

    @classmethod
    def start(cls, rng: random.Random, boot_noise: float, slowdown: float = 0.0) -> Boot:
        return cls(rng, jitter_factor(rng, boot_noise), slowdown)

    def requests(self, count: int) -> list[float]:
        scale = self.offset * (1.0 + self.slowdown)
        return [TRUE_THROUGHPUT / (scale * jitter_factor(self.rng, REQUEST_NOISE)) for _ in range(count)]


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    boots: int
    """Boots the gated run took: 1, or 2 when its confirmation booted again."""


def session(rng: random.Random, boot_noise: float, slowdown: float, baseline_boots: int, mode: str) -> Outcome:
    reference = [Boot.start(rng, boot_noise).requests(REQUESTS) for _ in range(baseline_boots)]
    boot = Boot.start(rng, boot_noise, slowdown)
    first_values = boot.requests(REQUESTS)
    first = check_metric(METRIC, reference, first_values, TOLERANCE, POLICY)
    if first.verdict is not Verdict.REGRESSED:
        return Outcome(first.verdict, 1)
    fresh = mode == "reboot"
    again_on = Boot.start(rng, boot_noise, slowdown) if fresh else boot
    again = again_on.requests(REQUESTS)
    second = check_metric(METRIC, reference, again, TOLERANCE, POLICY)
    if fresh and second.verdict is Verdict.REGRESSED and held_across_boots(METRIC, reference, first_values, again,
                                                                           POLICY.alpha) is False:
        second = replace(second, verdict=Verdict.INCONCLUSIVE)  # not established across the two boots (judge.py)
    return Outcome(confirmed((first,), (second,))[0].verdict, 2 if fresh else 1)


@dataclass(frozen=True)
class Row:
    baseline_boots: int
    boot_noise: float
    mode: str
    failed: dict[float, float]
    """Share of sessions that failed (REGRESSED), per slowdown."""
    boots: float
    """Mean boots per gated cell on the unchanged server."""


def row(trials: int, seed: int, baseline_boots: int, boot_noise: float, mode: str) -> Row:
    failed, boots = {}, 0.0
    for slowdown in SLOWDOWNS:
        rng = random.Random(f"{seed}|{baseline_boots}|{boot_noise}|{slowdown}")  # the same sessions for each mode
        outcomes = [session(rng, boot_noise, slowdown, baseline_boots, mode) for _ in range(trials)]
        failed[slowdown] = sum(o.verdict is Verdict.REGRESSED for o in outcomes) / trials
        if slowdown == 0.0:
            boots = sum(o.boots for o in outcomes) / trials
    return Row(baseline_boots, boot_noise, mode, failed, boots)


def print_table(rows: Sequence[Row], trials: int) -> None:
    se = 50 / math.sqrt(trials)
    print(f"Confirmation modes: {METRIC}, tolerance {TOLERANCE:.0%}, {REQUESTS} requests a measurement, request "
          f"noise {REQUEST_NOISE:.0%}, {trials} sessions a cell (± at most {se:.1f} points)")
    head = "".join(f"{'fails at ' + format(s, '.0%'):>14}" for s in SLOWDOWNS[1:])
    print(f"{'baseline':>9} {'boot noise':>10} {'confirm':>12} {'false alarm':>12}{head} {'boots/cell':>11}")
    for r in rows:
        cells = "".join(f"{r.failed[s]:>14.1%}" for s in SLOWDOWNS[1:])
        print(f"{r.baseline_boots:>6} bt {r.boot_noise:>10.0%} {r.mode:>12} {r.failed[0.0]:>12.1%}{cells} "
              f"{r.boots:>11.3f}")
    print("\nfalse alarm: an unchanged server fails the test. fails at 2%: inside the 5% tolerance (lower is "
          "better). fails at 10%: the power for a real 10% slowdown. boots/cell: the gated run's boots on the "
          "unchanged server (reboot costs one boot per regression it confirms).")


def all_rows(trials: int, seed: int) -> list[Row]:
    """Every row: one baseline boot or three, each boot noise, each confirmation mode."""
    return [row(trials, seed, boots, noise, mode) for boots in BASELINE_BOOTS for noise in BOOT_NOISES
            for mode in MODES]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TRIALS} sessions a cell instead of {TRIALS}")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    trials = QUICK_TRIALS if ns.quick else TRIALS
    print_table(all_rows(trials, ns.seed), trials)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
