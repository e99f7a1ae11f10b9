"""A benchmark of the A/B section's claims: how often it calls two identical variants significantly different (false
positives), and how often it sees a real change (power), with one boot a variant and with boots in turns.

    python benchmarks/bench_ab.py            (about 20-40 s on 2 cores; --quick: a few seconds)

One simulated comparison of two variants, A the reference: each boot of a server draws an offset of its own (the
row's boot noise), each request a jitter (1%), and the host drifts slowly (every boot runs `drift` slower than the
one before it, the order being the order the boots ran in). A request's output throughput is

    throughput = TRUE * effect / (boot_offset * request_jitter * (1 + drift) ** boot_index)

with `effect` 1 for A and 1 + change for B. Boots and jitters are drawn with the simulator's own noise model
(`simulator/engine/schedule.py` `jitter_factor`). Each comparison is decided by the A/B section's own code
(`gate/ab.py` `compare_metric`), on output_throughput (tolerance 5%):

- `one boot, old rule`: one boot a variant (A, then B), significant when the interval excludes 0 (before issue 29):
  the boots' offsets and the drift between them are taken for an effect;
- `one boot`: the same boots, judged as the section does now (beyond the tolerance only);
- `one boot, spread`: the same, where each variant's baseline was recorded over 3 boots at another time
  (`--sglang-update-baselines --sglang-boots 3`): the spread those boots show is in the interval
  (statistics.with_boot_spread), which then decides alone;
- `N boots, A B A B`: N boots a variant in turns, always A first, the test between boots paired by round: the
  drift slows B in every round alike, an offset pairing cannot cancel;
- `N boots, A B B A`: the same with every other round reversed (A B, B A, A B, ...), as the plugin runs them
  (session/ab_rounds.py): the drift's share cancels between rounds.

Nominal false-positive rate: 5% (95% intervals, two-sided). Every row has its own seed.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_sglang_perf.gate.ab import DEFAULT_CONFIDENCE, CellSamples, Judge, compare_metric
from pytest_sglang_perf.gate.statistics import boot_spread, log_difference
from pytest_sglang_perf.simulator.engine.schedule import jitter_factor

METRIC = "output_throughput"
TRUE = 100.0
REQUEST_NOISE = 0.01
REQUESTS = 8
BOOT_NOISES = (0.01, 0.02, 0.05)
DRIFT = 0.005
"""Every boot 0.5% slower than the one before it (a host warming up, a neighbour's load growing)."""
CHANGES = (0.0, 0.05, 0.10)
MODES = ("one boot, old rule", "one boot", "one boot, spread", "5 boots, A B A B", "3 boots, A B B A",
         "5 boots, A B B A")
RECORDED_BOOTS = 3
TRIALS = 2000
QUICK_TRIALS = 200
NOMINAL = 1.0 - DEFAULT_CONFIDENCE


@dataclass(frozen=True)
class Row:
    boot_noise: float
    change: float
    rates: dict[str, float]


def boot_values(rng: random.Random, boot_noise: float, effect: float, index: int) -> tuple[float, ...]:
    """One boot's request throughputs: the boot's offset, each request's jitter, the drift up to this boot."""
    offset = jitter_factor(rng, boot_noise)
    slow = (1.0 + DRIFT) ** index
    return tuple(TRUE * effect / (offset * jitter_factor(rng, REQUEST_NOISE) * slow) for _ in range(REQUESTS))


def booted(variant: str, boots: Sequence[tuple[float, ...]]) -> CellSamples:
    first, *more = boots
    return CellSamples("t", variant, True, {METRIC: first}, None, 1, tuple({METRIC: values} for values in more))


def trial(rng: random.Random, boot_noise: float, change: float, boots: int,
          alternate: bool) -> tuple[CellSamples, CellSamples]:
    """Two variants booted in turns, `boots` times each (A B A B ..., or A B B A ... when `alternate`): their cells."""
    a: list[tuple[float, ...]] = []
    b: list[tuple[float, ...]] = []
    for round_number in range(boots):
        b_first = alternate and round_number % 2 == 1
        a_index, b_index = 2 * round_number + b_first, 2 * round_number + (not b_first)
        a.append(boot_values(rng, boot_noise, 1.0, a_index))
        b.append(boot_values(rng, boot_noise, 1.0 + change, b_index))
    return booted("a", a), booted("b", b)


def with_recorded_spread(rng: random.Random, boot_noise: float, cell: CellSamples) -> CellSamples:
    """The cell with the spread of a baseline recorded over RECORDED_BOOTS boots of its own (no drift: another day)."""
    spread = boot_spread([boot_values(rng, boot_noise, 1.0, 0) for _ in range(RECORDED_BOOTS)])
    assert spread is not None
    return replace(cell, recorded_spread={METRIC: spread})


def significant(mode: str, cells: tuple[CellSamples, CellSamples], judge: Judge) -> bool:
    reference, measured = cells
    if mode == "one boot, old rule":
        result = log_difference([list(reference.values[METRIC])], list(measured.values[METRIC]))
        assert result is not None
        low, high = result.interval(judge.confidence)
        return not low <= 0 <= high
    compared = compare_metric(METRIC, reference, measured, judge)
    return not isinstance(compared, str) and compared.significant


def rate(mode: str, boot_noise: float, change: float, trials: int, seed: int) -> float:
    rng = random.Random(f"{seed}|{mode}|{boot_noise}|{change}")
    boots = int(mode.split()[0]) if mode[0].isdigit() else 1
    judge = Judge(DEFAULT_CONFIDENCE, {})
    alternate = "B B A" in mode
    hits = 0
    for _ in range(trials):
        cells = trial(rng, boot_noise, change, boots, alternate)
        if mode.endswith("spread"):
            cells = (with_recorded_spread(rng, boot_noise, cells[0]), with_recorded_spread(rng, boot_noise, cells[1]))
        hits += significant(mode, cells, judge)
    return hits / trials


def rows(trials: int, seed: int) -> list[Row]:
    return [Row(noise, change, {mode: rate(mode, noise, change, trials, seed) for mode in MODES})
            for noise in BOOT_NOISES for change in CHANGES]


def print_table(found: Sequence[Row], trials: int) -> None:
    print(f"A/B of two variants on {METRIC}: {REQUESTS} requests a boot, request noise {REQUEST_NOISE:.0%}, drift "
          f"{DRIFT:.1%} a boot, {trials} trials a cell; significant at {DEFAULT_CONFIDENCE:.0%} (nominal false "
          f"positives {NOMINAL:.0%})")
    print(f"{'boot noise':>10} {'change':>7}  " + "  ".join(f"{mode:>18}" for mode in MODES))
    for row in found:
        what = "false pos." if row.change == 0 else "power"
        cells = "  ".join(f"{row.rates[mode]:>18.1%}" for mode in MODES)
        print(f"{row.boot_noise:>10.0%} {row.change:>+7.0%}  {cells}   ({what})")
    worst = {mode: max(r.rates[mode] for r in found if r.change == 0) for mode in MODES}
    for mode, value in worst.items():
        verdict = "at or below" if value <= NOMINAL + _slack(trials) else "ABOVE"
        print(f"  {mode}: worst false-positive rate {value:.1%}, {verdict} the nominal {NOMINAL:.0%}")


def _slack(trials: int) -> float:
    """Two binomial standard errors at the nominal rate: what a finite number of trials adds to a rate."""
    return 2.0 * math.sqrt(NOMINAL * (1.0 - NOMINAL) / trials)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TRIALS} trials a cell instead of {TRIALS}")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    trials = QUICK_TRIALS if ns.quick else TRIALS
    print_table(rows(trials, ns.seed), trials)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
